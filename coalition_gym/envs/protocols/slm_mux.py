"""SLM-MUX: pick the member that is most self-consistent.

Every member draws ``samples`` answers (default 3, temperature 0.3 as upstream). A member's
confidence is the count of its most frequent extracted answer over its number of non-empty answers
(0 if none parsed); inside a member, a tie goes to the answer that appeared first among its samples.
The system answer is the majority answer of the most confident member. Ties between members follow
``tie_break``: ``"dev"`` (highest dev accuracy, then coalition order), ``"first"`` (coalition
order) or ``"random"`` (seeded). A coalition of one is that member's self-consistency vote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...settings_check import setting
from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_turns
from .voting import break_tie, majority_of, tie_break_setting


@dataclass
class SLMMux(Protocol):
    name: ClassVar[str] = "slm_mux"
    description: ClassVar[str] = "SLM-MUX: k samples per member; the most self-consistent member's answer wins"

    temperature: float = setting(0.3, ge=0, doc="sampling temperature of the members' answers")
    samples: int = setting(3, ge=1, doc="answers drawn per member")
    tie_break: str = tie_break_setting()

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        asks = [ctx.ask(m, ctx.question(m), self.params, round_=0, index=j)
                for m in ctx.members for j in range(self.samples)]
        replies = yield asks
        transcript = answer_turns(ctx, asks, replies)
        per_member: dict[str, dict] = {}
        for m in ctx.members:
            turns = [t for t in transcript if t.member == m]
            answer, count, valid = majority_of([t.answer for t in turns])
            text = next((t.text for t in turns if t.answer == answer), "")
            per_member[m] = {"answer": answer, "confidence": count / valid if valid else 0.0, "text": text}
        top = max(v["confidence"] for v in per_member.values())
        leaders = [m for m in ctx.members if per_member[m]["confidence"] == top]
        # break_tie works on answers; here the candidates are members, each supported by itself.
        chosen = break_tie(leaders, {m: [m] for m in leaders}, self.tie_break, ctx.dev_scores,
                           seed=ctx.seed_for("tie-break", 0))
        details = {"chosen": chosen,
                   "confidence": {m: v["confidence"] for m, v in per_member.items()},
                   "member_answers": {m: v["answer"] for m, v in per_member.items()}}
        return Outcome(answer=per_member[chosen]["answer"], text=per_member[chosen]["text"],
                       transcript=tuple(transcript), details=details)
