"""LLM-Blender: every member writes a candidate; a fixed ranker orders them; a fixed fuser merges
the top-K (default 3) into the final answer.

The ranker and the fuser are helper backends named in the settings (``ranker``, ``fuser``), never
coalition members. Ranking modes:
- ``"pairwise"`` (default, MoCo's form): the ranker judges every unordered pair once, the earlier
  coalition member's candidate shown as A (``both_orders=True`` also judges the swapped order,
  PairRanker-style). A win scores 1, an unparseable verdict 0.5 to each side. Candidates are sorted
  by score, ties by coalition order.
- ``"listwise"``: one ranker call orders all candidates (the paper's C-RL runs); see
  ``prompts.parse_ranking`` for how partial or broken rankings are read.
With ``fuser=None`` the top-ranked candidate's answer is the system answer (ranking only).
A coalition of one skips ranking (nothing to compare); its candidate still goes through the fuser.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import ClassVar

from ...errors import ConfigError
from ...prompts import fuse_prompt, listwise_prompt, pairwise_prompt, parse_pairwise, parse_ranking
from ...settings_check import setting
from ...types import Outcome, SamplingParams, Turn
from .base import EpisodeContext, ProgramGen, Protocol, answer_independently

RANKINGS = ("pairwise", "listwise")


@dataclass
class LLMBlender(Protocol):
    name: ClassVar[str] = "llm_blender"
    description: ClassVar[str] = ("LLM-Blender: a fixed ranker orders members' candidates; a fixed fuser merges "
                                  "the top-K")
    helper_fields: ClassVar[tuple[str, ...]] = ("ranker", "fuser")

    ranker: str = "judge"
    fuser: str | None = "fuser"
    ranking: str = setting("pairwise", choices=RANKINGS, doc="how the ranker compares candidates")
    both_orders: bool = False
    top_k: int = setting(3, ge=1, doc="best-ranked candidates the fuser merges")
    judge_temperature: float = setting(0.0, ge=0, doc="the ranker's sampling temperature")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.ranker:
            raise ConfigError("llm_blender: a ranker helper is required")

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        samples, transcript = yield from answer_independently(ctx, self.params)
        texts = [s.text for s in samples]
        answers = [t.answer for t in transcript]
        judge = SamplingParams(temperature=self.judge_temperature, max_new_tokens=self.max_new_tokens)

        scores = [0.0] * len(members)
        unparsed = 0
        if len(members) > 1 and self.ranking == "pairwise":
            pairs = list(combinations(range(len(members)), 2))
            if self.both_orders:
                pairs += [(j, i) for i, j in pairs]
            rank_asks = [ctx.ask(self.ranker, pairwise_prompt(ctx.item, texts[i], texts[j]), judge,
                                 round_=1, role="rank_pair", seed_role=f"pair:{members[i]}|{members[j]}",
                                 answers=(answers[i], answers[j]))
                         for i, j in pairs]
            verdicts = yield rank_asks
            for (i, j), ask, verdict in zip(pairs, rank_asks, verdicts):
                winner = parse_pairwise(verdict.text)
                transcript.append(Turn(self.ranker, "rank_pair", 1, verdict.text, winner))
                if winner is None:
                    unparsed += 1
                    scores[i] += 0.5
                    scores[j] += 0.5
                else:
                    scores[i if winner == "A" else j] += 1.0
            order = sorted(range(len(members)), key=lambda k: (-scores[k], k))
        elif len(members) > 1:
            rank_ask = ctx.ask(self.ranker, listwise_prompt(ctx.item, texts), judge, round_=1,
                               role="rank_list", seed_role="list:" + "|".join(members),
                               answers=tuple(answers))
            (reply,) = yield [rank_ask]
            order, parsed = parse_ranking(reply.text, len(members))
            unparsed += not parsed
            transcript.append(Turn(self.ranker, "rank_list", 1, reply.text, None))
        else:
            order = [0]

        top = order[: self.top_k]
        details = {"ranking": [members[k] for k in order], "scores": dict(zip(members, scores)),
                   "top_k": [members[k] for k in top], "unparsed_verdicts": unparsed}
        if not self.fuser:
            best = top[0]
            return Outcome(answer=answers[best], text=texts[best], transcript=tuple(transcript), details=details)
        fuse_ask = ctx.ask(self.fuser, fuse_prompt(ctx.item, [texts[k] for k in top]), self.params,
                           round_=2, role="fuse", seed_role="fuse:" + "|".join(members[k] for k in top),
                           answers=tuple(answers[k] for k in top))
        (fused,) = yield [fuse_ask]
        final = ctx.task.extract(fused.text, ctx.item)
        transcript.append(Turn(self.fuser, "fuse", 2, fused.text, final))
        return Outcome(answer=final, text=fused.text, transcript=tuple(transcript), details=details)
