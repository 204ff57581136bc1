"""The coalition game a leaderboard values, from a spec (the library side of ``cgym eval``).

One place decides between the two kinds of game: a plain :class:`~coalition_gym.valuation.game.CoalitionGame`
over the system the spec names, or, when the spec's protocol names a coalition-training recipe (sparta,
multiagent_finetuning), a :class:`~coalition_gym.training.collaborative.TrainedCoalitionGame` that trains every
coalition first and runs the recipe's evaluation protocol on the trained members.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.cache import GenerationCache
from ..envs.system import System, SystemSpec
from ..settings_check import check_settings, setting
from ..training.collaborative import TrainedCoalitionGame, make_coalition_settings
from ..training.recipes import recipe_names
from ..valuation.game import CoalitionGame


@dataclass(frozen=True)
class GameOptions:
    """How the game runs: episode ``seed`` (the estimators' and bootstraps' too), ``progress`` bars,
    ``record_text`` (reply texts in the records), and ``train_dir``, where a coalition-training recipe keeps
    its trained checkpoints (a killed run resumes from it; None: a temporary folder)."""

    seed: int = setting(0, ge=0, doc="episode seed (the estimators' and bootstraps' too)")
    progress: bool = False
    record_text: bool = True
    train_dir: Path | None = None

    def __post_init__(self) -> None:
        check_settings(self, "game options")


def trains_coalitions(protocol: Any) -> bool:
    """Whether ``protocol`` names a coalition-training recipe rather than a protocol."""
    return isinstance(protocol, str) and protocol in recipe_names("coalition")


def coalition_game(spec: SystemSpec, options: GameOptions = GameOptions(), *, cache: GenerationCache | None = None,
                   executor: Any = None) -> CoalitionGame:
    """The game over the coalitions of ``spec``'s members (see the module doc); ``cache`` is shared by every
    coalition's generations, ``executor`` runs them (None: this process)."""
    common = {"seed": options.seed, "progress": options.progress, "record_text": options.record_text,
              "executor": executor}
    if trains_coalitions(spec.protocol):
        trained = make_coalition_settings(str(spec.protocol), **dict(spec.protocol_settings))
        system = System.build(dataclasses.replace(spec, protocol=trained.evaluation, protocol_settings={}),
                              cache=cache)
        return TrainedCoalitionGame(trained, system, train_dir=options.train_dir, **common)
    return CoalitionGame(System.build(spec, cache=cache), **common)
