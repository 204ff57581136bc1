"""Protocol registry: every collaboration method by name."""

from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import ConfigError, UnknownNameError, setting_hint
from ...settings_check import setting_names
from .base import EpisodeContext, ProgramGen, Protocol
from .cascade import Cascade
from .collaborative import SelectedCheckpoint
from .debate import Debate
from .feedback import Feedback
from .llm_blender import LLMBlender
from .majority_vote import MajorityVote
from .mixture_of_agents import MixtureOfAgents
from .routing import PromptRouting
from .slm_mux import SLMMux
from .swarm_graph import SwarmGraph
from .swarms import HeterogeneousSwarms
from .trained_router import TrainedRouter

BUILTIN_PROTOCOLS: tuple[type[Protocol], ...] = (Debate, LLMBlender, SLMMux, MajorityVote, MixtureOfAgents,
                                                 HeterogeneousSwarms, Feedback, PromptRouting, TrainedRouter, Cascade)
#: protocol name -> class; extended by ``coalition_gym.register_protocol``
PROTOCOLS: dict[str, type[Protocol]] = {cls.name: cls for cls in BUILTIN_PROTOCOLS}
#: the protocols a comparison of systems (``cgym sweep``, ``robustness``, ``gain``) runs when none are named
COMPARED_PROTOCOLS = ("debate", "llm_blender", "slm_mux", "majority_vote")


def make_protocol(name: "str | Protocol", **settings: Any) -> Protocol:
    """A protocol by name with its settings; unknown names or settings get a clear error."""
    if isinstance(name, Protocol):  # its __post_init__ checks the settings (settings_check.check_settings)
        if settings:
            return dataclasses.replace(name, **settings)
        return name
    if name not in PROTOCOLS:  # a coalition-training recipe's name too: the training layer says what it is
        raise UnknownNameError("protocol", name, PROTOCOLS)
    cls = PROTOCOLS[name]
    fields = set(setting_names(cls))
    unknown = sorted(set(settings) - fields)
    if unknown:
        raise ConfigError(f"protocol {name!r} has no setting {unknown[0]!r}{setting_hint(unknown[0], fields)}")
    return cls(**settings)


def settings_per_protocol(protocols: "list[str]", settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One list of settings for several protocols (``cgym gain/robustness --set``) split per protocol: each
    gets the keys it has. A key no protocol has, or a value one of them refuses, is refused before any work."""
    fields = {p: set(setting_names(PROTOCOLS[p])) if p in PROTOCOLS else set() for p in protocols}
    unknown = [k for k in settings if not any(k in f for f in fields.values())]
    if unknown:
        every = sorted(set().union(*fields.values()))
        raise ConfigError(f"setting {unknown[0]!r}: none of {', '.join(protocols)} has it; their settings are: "
                          f"{', '.join(every)} (see `cgym protocols`)")
    per_protocol = {p: {k: v for k, v in settings.items() if k in fields[p]} for p in protocols}
    for name, chosen in per_protocol.items():
        make_protocol(name, **chosen)
    return per_protocol


__all__ = ["PROTOCOLS", "COMPARED_PROTOCOLS", "settings_per_protocol", "BUILTIN_PROTOCOLS", "make_protocol", "Protocol",
           "EpisodeContext", "ProgramGen",
           "Debate", "LLMBlender", "MajorityVote", "SLMMux", "MixtureOfAgents", "HeterogeneousSwarms",
           "Feedback", "PromptRouting", "TrainedRouter", "Cascade", "SwarmGraph", "SelectedCheckpoint"]
