"""Multiagent Debate (Du et al., 2023).

Round 0: every member answers on its own. Each later round: every member sees the other members'
solutions from the previous round and answers again; all members update at once. The system answer
is the plurality of the last round's answers (ties: see ``voting``).

``history="previous"`` (default, the MoCo "refine" form) shows a member its own previous solution
and the peers' previous solutions; ``history="full"`` keeps the member's whole conversation.
A coalition of one has no peers to debate with: it answers once (its solo run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...prompts import debate_followups
from ...settings_check import setting
from ...types import Message, Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_turns
from .voting import plurality, tie_break_setting


@dataclass
class Debate(Protocol):
    name: ClassVar[str] = "debate"
    description: ClassVar[str] = "Multiagent debate: members revise after reading peers' answers; majority vote"

    rounds: int = setting(3, ge=1, doc="debate rounds, the independent first answers included")
    history: str = setting("previous", choices=("previous", "full"), doc="what a member sees of earlier rounds")
    tie_break: str = tie_break_setting()

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        conversations = {m: ctx.question(m) for m in members}
        asks = [ctx.ask(m, conversations[m], self.params, round_=0, role="debate") for m in members]
        samples = yield asks
        transcript = answer_turns(ctx, asks, samples)
        texts = {m: s.text for m, s in zip(members, samples)}
        answers = {t.member: t.answer for t in transcript}
        rounds = self.rounds if len(members) > 1 else 1
        for r in range(1, rounds):
            asks = []
            followups = debate_followups([texts[m] for m in members], [ctx.style(m) for m in members])
            for k, m in enumerate(members):
                if self.history == "full":
                    conversations[m] = conversations[m] + [Message("assistant", texts[m])]
                    messages = conversations[m] + [followups[k]]
                    conversations[m] = messages
                else:
                    messages = ctx.question(m) + [Message("assistant", texts[m]), followups[k]]
                peer_answers = tuple(answers[p] for p in members[:k]) + tuple(answers[p] for p in members[k + 1:])
                asks.append(ctx.ask(m, messages, self.params, round_=r, role="debate",
                                    own_previous=answers[m], peer_answers=peer_answers))
            samples = yield asks
            turns = answer_turns(ctx, asks, samples)
            transcript += turns
            texts = {m: s.text for m, s in zip(members, samples)}
            answers = {t.member: t.answer for t in turns}
        final, votes = plurality([(m, answers[m]) for m in members], self.tie_break, ctx.dev_scores,
                                 seed=ctx.seed_for("tie-break", rounds))
        text = next((texts[m] for m in members if answers[m] == final), "")
        return Outcome(answer=final, text=text, transcript=tuple(transcript),
                       details={"votes": votes, "rounds": rounds})
