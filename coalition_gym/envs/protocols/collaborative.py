"""The evaluation program of a trained coalition that answers with one member: Sparta's selected
checkpoint. Coalition training itself (Sparta, multi-agent finetuning) is not a protocol: its recipes
live in :mod:`coalition_gym.training` (``training.recipes``, settings in
``training/collaborative/settings.py``), and ``TrainedCoalitionGame`` runs a plain protocol such as this
one, or ``debate`` for multi-agent finetuning, on the trained members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

from ...errors import ConfigError
from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_independently


@dataclass
class SelectedCheckpoint(Protocol):
    """The coalition is one selected member (a checkpoint chosen on dev), which answers alone."""

    name: ClassVar[str] = "selected_checkpoint"
    description: ClassVar[str] = "The one selected checkpoint answers alone"

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        if len(ctx.members) != 1:
            raise ConfigError(f"{self.name}: one selected checkpoint answers, got members {list(ctx.members)}")
        _, transcript = yield from answer_independently(ctx, self.params)
        return Outcome(answer=transcript[0].answer, text=transcript[0].text, transcript=tuple(transcript))


#: ``hint(name) -> why name is no protocol, or None``: asked by ``make_protocol`` and environment lookups
#: for a name no protocol has. A layer above adds one (training: its coalition recipes, which have no
#: episodes); this layer never holds those names.
NameHint = Callable[[str], "str | None"]
_NAME_HINTS: list[NameHint] = []


def add_name_hint(hint: NameHint) -> None:
    if hint not in _NAME_HINTS:
        _NAME_HINTS.append(hint)


def refuse_not_episodic(name: str) -> None:
    """Raise ConfigError with what ``name`` is, when a name hint knows it (a coalition-training recipe)."""
    for hint in _NAME_HINTS:
        why = hint(name)
        if why:
            raise ConfigError(why)
