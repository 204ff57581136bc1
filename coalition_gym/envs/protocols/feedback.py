"""Multi-agent feedback: answer, peer feedback, one refinement, then a final answer.

Round 0: every member answers on its own. Round 1: each answer is reviewed by up to ``reviewers``
peers (default 3). Peers are drawn at random, but by a per-pair priority (a hash of episode seed,
item, reviewed member and reviewer), so adding a member to the coalition changes the other pairs'
draws as little as possible. Round 2: every member refines its answer once, seeing its own answer
and the feedback it got.

System answer (the documented rule):
- ``summariser`` set (a fixed helper, e.g. ``"fuser"``): it writes the final answer from the refined
  answers;
- ``summariser=None`` (default): the coalition member with the best dev score summarises (MoCo's
  rule; drivers measure dev scores on the task's dev split, see ``envs.dev_scores``); when none is
  known (a task without a dev split), the plurality of the refined answers wins (ties follow
  ``tie_break``, see ``voting``).

A coalition of one has no peers to give feedback: it answers once, and that is the system answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...agents.base import stable_hash
from ...prompts import feedback_prompt, references_prompt, refine_prompt
from ...settings_check import setting
from ...types import Outcome, Turn
from .base import EpisodeContext, ProgramGen, Protocol, answer_turns
from .utils import best_dev_member
from .voting import plurality, tie_break_setting


@dataclass
class Feedback(Protocol):
    name: ClassVar[str] = "feedback"
    description: ClassVar[str] = ("Multi-agent feedback: peers review each answer, members refine once; "
                                  "a summariser or a vote gives the answer")
    helper_fields: ClassVar[tuple[str, ...]] = ("summariser",)

    reviewers: int = setting(3, ge=1, doc="peers who review each answer")
    summariser: str | None = None
    tie_break: str = tie_break_setting()

    def needs_dev_scores(self) -> bool:
        """Without a fixed summariser the best member on dev summarises (and the vote that stands in when
        no dev score is known breaks ties by them under ``tie_break="dev"``)."""
        return self.summariser is None

    def reviewers_of(self, ctx: EpisodeContext, member: str) -> list[str]:
        """The peers who review ``member``'s answer: the ``reviewers`` lowest pair priorities."""
        peers = [p for p in ctx.members if p != member]
        peers.sort(key=lambda p: stable_hash("reviewer", ctx.seed, ctx.item.id, member, p))
        return peers[: self.reviewers]

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        asks = [ctx.ask(m, ctx.question(m), self.params, round_=0) for m in members]
        samples = yield asks
        transcript = answer_turns(ctx, asks, samples)
        texts = {m: s.text for m, s in zip(members, samples)}
        first = {t.member: t.answer for t in transcript}
        if len(members) == 1:
            (only,) = members
            return Outcome(answer=first[only], text=texts[only], transcript=tuple(transcript),
                           details={"initial": first, "refined": {}, "final_rule": "alone"})

        review = {m: self.reviewers_of(ctx, m) for m in members}
        pairs = [(m, r) for m in members for r in review[m]]
        asks = [ctx.ask(r, feedback_prompt(ctx.item, texts[m]), self.params, round_=1, role="feedback",
                        seed_role=f"feedback:{m}", reviewed=m, answers=(first[m],))
                for m, r in pairs]
        samples = yield asks
        transcript += answer_turns(ctx, asks, samples)
        feedback: dict[str, list[str]] = {m: [] for m in members}
        for (m, _), s in zip(pairs, samples):
            feedback[m].append(s.text)

        asks = [ctx.ask(m, refine_prompt(ctx.question(m), texts[m], feedback[m], ctx.style(m)), self.params,
                        round_=2, role="debate", own_previous=first[m],
                        peer_answers=tuple(ctx.task.extract(f, ctx.item) for f in feedback[m]))
                for m in members]
        samples = yield asks
        turns = answer_turns(ctx, asks, samples)
        transcript += turns
        refined = {t.member: t.answer for t in turns}
        refined_texts = {m: s.text for m, s in zip(members, samples)}
        details = {"reviewers": review, "initial": first, "refined": refined}

        summariser = self.summariser or best_dev_member(members, ctx.dev_scores)
        if summariser is None:
            final, votes = plurality([(m, refined[m]) for m in members], self.tie_break, ctx.dev_scores,
                                     seed=ctx.seed_for("tie-break", 2))
            text = next((refined_texts[m] for m in members if refined[m] == final), "")
            return Outcome(answer=final, text=text, transcript=tuple(transcript),
                           details={**details, "final_rule": "majority", "votes": votes})
        ask = ctx.ask(summariser, references_prompt(ctx.item, [refined_texts[m] for m in members],
                                                    ctx.style(summariser)),
                      self.params, round_=3, role="fuse", seed_role="summarise:" + "|".join(members),
                      answers=tuple(refined[m] for m in members))
        (reply,) = yield [ask]
        final = ctx.task.extract(reply.text, ctx.item)
        transcript.append(Turn(summariser, "fuse", 3, reply.text, final))
        return Outcome(answer=final, text=reply.text, transcript=tuple(transcript),
                       details={**details, "final_rule": f"summariser:{summariser}"})
