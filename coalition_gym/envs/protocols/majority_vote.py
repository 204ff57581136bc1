"""Majority vote: every member answers once; the most frequent extracted answer wins.

Ties follow ``tie_break`` (see ``voting``). A coalition of one is that member's solo answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_independently
from .voting import plurality, tie_break_setting


@dataclass
class MajorityVote(Protocol):
    name: ClassVar[str] = "majority_vote"
    description: ClassVar[str] = "Majority vote: each member answers once; the most frequent answer wins"

    tie_break: str = tie_break_setting()

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        _, transcript = yield from answer_independently(ctx, self.params)
        final, votes = plurality([(t.member, t.answer) for t in transcript], self.tie_break,
                                 ctx.dev_scores, seed=ctx.seed_for("tie-break", 0))
        text = next((t.text for t in transcript if t.answer == final), "")
        return Outcome(answer=final, text=text, transcript=tuple(transcript), details={"votes": votes})
