"""The evaluation program of a trained coalition that answers with one member: Sparta's selected
checkpoint. Coalition training itself (Sparta, multi-agent finetuning) is not a protocol: its recipes
live in :mod:`coalition_gym.training` (``training.recipes``, settings in
``training/collaborative/settings.py``), and ``TrainedCoalitionGame`` runs a plain protocol such as this
one, or ``debate`` for multi-agent finetuning, on the trained members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

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

