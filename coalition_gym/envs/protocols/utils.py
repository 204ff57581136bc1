"""Small pieces several protocols share: picking a member by dev score or by a seeded draw, and Asks
whose seed is fixed by the member alone (for methods where a member's position depends on the
coalition, such as a cascade rank or a swarm layer)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping, Sequence

from ...agents.base import stable_hash
from ...types import Ask, Message, SamplingParams
from .base import EpisodeContext


def best_dev_member(members: Sequence[str], dev_scores: Mapping[str, float]) -> str | None:
    """The member with the highest dev score (ties: coalition order), or None when none is known."""
    known = [m for m in members if m in dev_scores]
    if not known:
        return None
    top = max(dev_scores[m] for m in known)
    return next(m for m in known if dev_scores[m] == top)


def seeded_choice(options: Sequence[str], *key: object) -> str:
    """A draw among ``options`` that depends only on ``key`` and the set of options (not their order)."""
    return random.Random(stable_hash("choice", *key)).choice(sorted(options))


def ask_with_seed_round(ctx: EpisodeContext, member: str, messages: list[Message], params: SamplingParams, *,
                        shown_round: int, seed_round: int = 0, **ask: Any) -> Ask:
    """An Ask shown at ``shown_round`` (in the transcript and to drivers) but seeded as if asked at
    ``seed_round``, so the seed never depends on where the coalition put the member. ``ask``: the rest of
    :meth:`EpisodeContext.ask`'s options (``index``, ``role``, ``seed_role``, info)."""
    return dataclasses.replace(ctx.ask(member, messages, params, round_=seed_round, **ask), round=shown_round)
