"""Mixture-of-Agents (Wang et al., 2024).

Layer 0: every member (a *proposer*) answers on its own. Each later proposer layer: every member
sees all responses of the previous layer as numbered references and writes a new response. An
aggregator then synthesises the final answer from the last layer's responses; the system answer is
the task's extraction of the aggregator's reply.

``layers`` counts proposer layers (default 1, the upstream evaluation setting). The aggregator is a
fixed helper (``aggregator="fuser"``, the pool's fuser) and never a coalition member. With
``aggregator=None`` the coalition member with the best dev score aggregates (MoCo's variant; without
dev scores, the first member in coalition order).

A coalition of one: its single proposer answers (for every layer) and the aggregator rewrites that
one response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...prompts import references_prompt
from ...settings_check import setting
from ...types import Outcome, Turn
from .base import EpisodeContext, ProgramGen, Protocol, answer_independently, answer_turns
from .utils import best_dev_member


@dataclass
class MixtureOfAgents(Protocol):
    name: ClassVar[str] = "mixture_of_agents"
    description: ClassVar[str] = ("Mixture-of-Agents: proposer layers read the previous layer's responses; "
                                  "a fixed aggregator writes the answer")
    helper_fields: ClassVar[tuple[str, ...]] = ("aggregator",)

    layers: int = setting(1, ge=1, doc="proposer layers before the aggregator")
    aggregator: str | None = "fuser"

    def needs_dev_scores(self) -> bool:
        """Without a fixed aggregator the best member on dev aggregates."""
        return self.aggregator is None

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        samples, transcript = yield from answer_independently(ctx, self.params)
        texts = [s.text for s in samples]
        answers = [t.answer for t in transcript]
        for layer in range(1, self.layers):
            asks = [ctx.ask(m, references_prompt(ctx.item, texts, ctx.style(m)), self.params, round_=layer,
                            role="debate", own_previous=answers[k],
                            peer_answers=tuple(a for j, a in enumerate(answers) if j != k))
                    for k, m in enumerate(members)]
            samples = yield asks
            turns = answer_turns(ctx, asks, samples)
            transcript += turns
            texts = [s.text for s in samples]
            answers = [t.answer for t in turns]

        aggregator = self.aggregator or best_dev_member(members, ctx.dev_scores) or members[0]
        # Seeded by what the aggregator reads (the proposers' names), like the fuser of LLM-Blender.
        agg = ctx.ask(aggregator, references_prompt(ctx.item, texts, ctx.style(aggregator)), self.params,
                      round_=self.layers, role="fuse", seed_role="aggregate:" + "|".join(members),
                      answers=tuple(answers))
        (reply,) = yield [agg]
        final = ctx.task.extract(reply.text, ctx.item)
        transcript.append(Turn(aggregator, "fuse", self.layers, reply.text, final))
        details = {"layers": self.layers, "aggregator": aggregator,
                   "proposals": dict(zip(members, answers))}
        return Outcome(answer=final, text=reply.text, transcript=tuple(transcript), details=details)
