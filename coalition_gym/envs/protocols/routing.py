"""Prompt routing: a fixed router reads the question and short descriptions of the members and names
one; that member answers, and its answer is the system answer.

The router is a helper backend (``router``, default the pool's ``"judge"``), never a coalition
member. Members are shown numbered, with their name and ``descriptions[name]`` (default: "a
general-purpose assistant"). The reply is read by ``prompts.parse_route``. When it names nobody,
``fallback`` decides: ``"dev"`` (default) the member with the best dev score, or a seeded random
member when no dev score is known; ``"random"`` a seeded random member; ``"first"`` the first
member in coalition order. Random draws depend on the episode seed, the item and the *set* of
members, never on their order.

A coalition of one needs no routing: its member answers and the router is not called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Sequence

from ...errors import ConfigError
from ...prompts import parse_route, route_prompt
from ...settings_check import setting
from ...types import Outcome, SamplingParams, Turn
from .base import EpisodeContext, ProgramGen, Protocol
from .utils import best_dev_member, seeded_choice

FALLBACKS = ("dev", "random", "first")
DEFAULT_DESCRIPTION = "a general-purpose assistant"


def fallback_member(rule: str, ctx: EpisodeContext, members: Sequence[str]) -> str:
    """The member a router's unusable choice falls back to (see the module doc)."""
    if rule == "dev":
        best = best_dev_member(members, ctx.dev_scores)
        if best is not None:
            return best
    if rule == "first":
        return members[0]
    return seeded_choice(members, "route-fallback", ctx.seed, ctx.item.id)


def answer_wave(ctx: EpisodeContext, chosen: str, params: SamplingParams):
    """The routed member's answer Ask (round 1, after the routing decision at round 0)."""
    return ctx.ask(chosen, ctx.question(chosen), params, round_=1)


@dataclass
class PromptRouting(Protocol):
    name: ClassVar[str] = "prompt_routing"
    description: ClassVar[str] = ("Prompt routing: a fixed router reads the question and member descriptions "
                                  "and names the member who answers")
    helper_fields: ClassVar[tuple[str, ...]] = ("router",)

    router: str = "judge"
    descriptions: Mapping[str, str] | None = None
    fallback: str = setting("dev", choices=FALLBACKS, doc="who answers when the router's choice is unusable")
    router_temperature: float = setting(0.0, ge=0, doc="the router's sampling temperature")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.router:
            raise ConfigError("prompt_routing: a router helper is required")

    def needs_dev_scores(self) -> bool:
        """The ``"dev"`` fallback routes an unusable choice to the best member on dev."""
        return self.fallback == "dev"

    def describe(self, member: str) -> str:
        return (self.descriptions or {}).get(member, DEFAULT_DESCRIPTION)

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        transcript: list[Turn] = []
        if len(members) == 1:
            chosen, how = members[0], "alone"
        else:
            descriptions = [self.describe(m) for m in members]
            params = SamplingParams(temperature=self.router_temperature, max_new_tokens=self.max_new_tokens)
            # Seeded by what the router reads: the candidates.
            ask = ctx.ask(self.router, route_prompt(ctx.item, members, descriptions), params, round_=0,
                          role="route", seed_role="route:" + "|".join(members), candidates=tuple(members),
                          descriptions=tuple(descriptions))
            (reply,) = yield [ask]
            picked = parse_route(reply.text, members)
            chosen, how = (members[picked], "router") if picked is not None else (
                fallback_member(self.fallback, ctx, members), "fallback")
            transcript.append(Turn(self.router, "route", 0, reply.text, None))
        answer_ask = answer_wave(ctx, chosen, self.params)
        (sample,) = yield [answer_ask]
        final = ctx.task.extract(sample.text, ctx.item)
        transcript.append(Turn(chosen, "answer", 1, sample.text, final))
        return Outcome(answer=final, text=sample.text, transcript=tuple(transcript),
                       details={"chosen": chosen, "routed_by": how})
