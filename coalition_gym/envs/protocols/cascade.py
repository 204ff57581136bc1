"""Cascade: members in cost order; each draws ``samples`` answers in turn until one is confident.

Order: ascending ``costs[member]`` (a member without a configured cost costs ``default_cost``); equal
costs keep coalition order, so with no costs configured the order is the coalition's. A member's
confidence is the count of its most frequent extracted answer over ``samples`` (unparseable samples
count against it; inside a member a tie goes to the answer seen first). The first member whose
confidence reaches ``threshold`` answers for the system; if none does, the last member's majority
answer is the system answer (the top of a cascade always answers).

``details["cost_spent"]`` is the configured cost of the calls made (cost x samples per member
asked); the generic ``details["cost"]`` counts Asks and tokens as for every protocol.

A coalition of one is that member's self-consistency vote over ``samples`` answers.

Seeds: a member's samples use its round-0 seeds whatever its place in the cascade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping

from ...errors import ConfigError
from ...settings_check import setting
from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_turns
from .utils import ask_with_seed_round
from .voting import majority_of


@dataclass
class Cascade(Protocol):
    name: ClassVar[str] = "cascade"
    description: ClassVar[str] = ("Cascade: members in cost order draw k samples each until one is "
                                  "self-consistent enough")

    costs: Mapping[str, float] | None = None
    default_cost: float = setting(1.0, ge=0, doc="the cost of a member without one in costs")
    samples: int = setting(3, ge=1, doc="answers drawn per member asked")
    threshold: float = setting(1.0, gt=0, le=1, doc="self-consistency that stops the cascade")

    def __post_init__(self) -> None:
        super().__post_init__()
        bad = {m: c for m, c in (self.costs or {}).items() if not c >= 0}  # per entry: beyond a declaration
        if bad:
            raise ConfigError(f"cascade: costs must be >= 0, got {bad}")

    def cost(self, member: str) -> float:
        return float((self.costs or {}).get(member, self.default_cost))

    def order(self, members: tuple[str, ...]) -> list[str]:
        return sorted(members, key=self.cost)  # stable: equal costs keep coalition order

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        order = self.order(ctx.members)
        transcript = []
        confidence: dict[str, float] = {}
        member_answers: dict[str, str | None] = {}
        spent = 0.0
        answer, text, stopped_at = None, "", order[-1]
        for rank, m in enumerate(order):
            asks = [ask_with_seed_round(ctx, m, ctx.question(m), self.params, shown_round=rank, index=j)
                    for j in range(self.samples)]
            replies = yield asks
            turns = answer_turns(ctx, asks, replies)
            transcript += turns
            spent += self.cost(m) * self.samples
            answer, count, _ = majority_of([t.answer for t in turns])
            text = next((t.text for t in turns if t.answer == answer), turns[0].text)
            confidence[m] = count / self.samples
            member_answers[m] = answer
            if confidence[m] >= self.threshold:
                stopped_at = m
                break
        details = {"order": order, "stopped_at": stopped_at, "escalations": order.index(stopped_at),
                   "confidence": confidence, "member_answers": member_answers, "cost_spent": spent}
        return Outcome(answer=answer, text=text, transcript=tuple(transcript), details=details)
