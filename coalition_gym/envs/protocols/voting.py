"""Plurality voting over extracted answers, with explicit tie-breaking rules.

Tie rules (``tie_break``):
- ``"dev"``: among tied answers, the one backed by the member with the highest dev score (drivers
  measure them on the task's dev split, see ``envs.dev_scores``); falls back to ``"first"`` when no
  dev scores are known or they tie too.
- ``"first"``: the tied answer given earliest in coalition order.
- ``"random"``: a seeded draw among the tied answers (sorted, so the draw depends only on the seed
  and the tied set, not on the coalition's order).
Unparseable answers (None) do not vote; if nobody voted the result is None.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Mapping, Sequence

from ...errors import ConfigError
from ...settings_check import setting

TIE_BREAKS = ("dev", "first", "random")


def tie_break_setting(default: str = "dev") -> Any:
    """The ``tie_break`` field of a voting protocol (see the module doc for the rules)."""
    return setting(default, choices=TIE_BREAKS, doc="how a tied vote is decided")


def check_tie_break(rule: str) -> None:
    if rule not in TIE_BREAKS:
        raise ConfigError(f"unknown tie_break {rule!r}; use one of {', '.join(TIE_BREAKS)}")


def break_tie(tied: Sequence[str], supporters: Mapping[str, Sequence[str]], rule: str,
              dev_scores: Mapping[str, float], seed: int) -> str:
    """Pick one of ``tied`` (listed in first-appearance order); ``supporters[a]`` names who gave a."""
    if len(tied) == 1:
        return tied[0]
    if rule == "random":
        return random.Random(seed).choice(sorted(tied))
    if rule == "dev" and dev_scores:
        best = {a: max(dev_scores.get(m, float("-inf")) for m in supporters[a]) for a in tied}
        top = max(best.values())
        leaders = [a for a in tied if best[a] == top]
        if len(leaders) == 1:
            return leaders[0]
        tied = leaders
    return tied[0]


def plurality(votes: Sequence[tuple[str, str | None]], rule: str = "dev",
              dev_scores: Mapping[str, float] | None = None, seed: int = 0) -> tuple[str | None, dict[str, int]]:
    """The winning answer of ``(member, answer)`` votes and the vote counts."""
    check_tie_break(rule)
    supporters: dict[str, list[str]] = {}
    for member, answer in votes:
        if answer is not None:
            supporters.setdefault(answer, []).append(member)
    if not supporters:
        return None, {}
    counts = {a: len(ms) for a, ms in supporters.items()}
    top = max(counts.values())
    tied = [a for a in supporters if counts[a] == top]  # dict order = first appearance
    return break_tie(tied, supporters, rule, dev_scores or {}, seed), counts


def majority_of(answers: Sequence[str | None]) -> tuple[str | None, int, int]:
    """A single voter's own majority: (answer, its count, number of non-empty answers).
    Ties go to the answer that appeared first."""
    valid = [a for a in answers if a is not None]
    if not valid:
        return None, 0, 0
    counts = Counter(valid)
    top = max(counts.values())
    winner = next(a for a in valid if counts[a] == top)
    return winner, top, len(valid)
