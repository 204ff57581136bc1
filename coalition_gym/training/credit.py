"""Credit for several trainable seats: what each seat is rewarded with for one execution of the team.

The team objective is the full team's expected system score, J = E[v(all seats)], where v(S) is the system
score of one execution played by the frozen collaborators (always present) and the seats in S, every member
drawing with the seeds of that execution (common random numbers: see :mod:`.rollouts`). Seat i's policy
gradient estimate multiplies the gradient of the log-probability of i's own tokens by i's credit (after the
group baseline, :mod:`coalition_gym.training.advantages`). The modes (``--set credit=...``):

``system``
    every seat gets v(all): the objective itself, as MAGRPO's joint reward. Unbiased for J, but every seat's
    signal carries the noise of everyone else's draws, so its variance grows with the number of seats and it
    says nothing about *whose* reply mattered (broadcast credit). Needs no counterfactual.

``loo`` (leave-one-out, the difference reward)
    seat i gets v(all) - v(all without i). The subtracted term is computed with the same seeds and the same
    replies of the other seats, but *without* seat i: it cannot depend on i's reply in this execution (i is
    not in that program at all). Conditioned on the others' draws it is a constant as far as i's action is
    concerned, i.e. an action-independent baseline, and a baseline of that kind leaves the expected score-
    function gradient unchanged. So i's gradient is still unbiased for J, while the part of v(all) that i
    could not influence (the team right or wrong regardless of i) is taken out: the variance drops most where
    i is rarely pivotal, and a seat that is never pivotal gets exactly 0. (The others' replies do depend on the
    others' parameters, so this is unbiased for i's own gradient of J, which is what seat i trains on.)

``shapley`` (exact, over the K trainable seats, K <= :data:`SHAPLEY_SEAT_LIMIT`)
    seat i gets its Shapley value in this execution's game over the seats: the average, over all orders in
    which the seats could join the frozen collaborators, of i's marginal contribution v(P + i) - v(P). Only
    the P = all-but-i term is the leave-one-out credit; the other terms value i's help to sub-teams P that
    never play. Those terms do depend on i's reply, so they are not a baseline: the expected Shapley credit's
    gradient is that of a different objective (the average over sub-team sizes of i's marginal value), hence
    **biased** for J. It is fairer (efficiency: the credits sum to v(all) - v(no seat); symmetric seats get the
    same) and often smoother than leave-one-out (a seat redundant in the full team but useful in smaller ones
    still gets signal), which can make training more stable; it needs 2^K sub-team values per execution.

Cost of the counterfactuals (sub-teams S other than all seats; ``system`` needs none, ``loo`` K of them,
``shapley`` 2^K - 1): a sub-team's program runs with the same episode seed and the seats of S re-seeded as in
the real execution. In a one-shot protocol (majority vote, SLM-MUX, ...: each member answers the question on
its own) every member's Ask of the sub-team program is an Ask of the real execution, so the counterfactuals are
replayed from the real execution's samples and cost no generation. Where a member reads its peers' replies
(debate's later rounds, feedback's reviews and revisions, mixture of agents' later layers) or a fixed helper
reads the set of candidates present (LLM-Blender's fuser, a router's list; LLM-Blender's pairwise judgements of
two candidates that both play are the real ones, replayed), the sub-team's Asks differ from the real ones and
need new generations, more the more rounds follow the first; they are counted
(:class:`~coalition_gym.training.rollouts.CounterfactualCost`) and reported, never hidden.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

from ..errors import ConfigError, did_you_mean
from ..valuation.exact import shapley_weight

CREDIT_MODES = ("system", "loo", "shapley")
#: the most trainable seats exact Shapley credit is computed for (2^K sub-teams per execution)
SHAPLEY_SEAT_LIMIT = 6


def _check(seats: Sequence[str], mode: str) -> tuple[str, ...]:
    if mode not in CREDIT_MODES:
        raise ConfigError(f"credit={mode!r} is not a credit mode; use one of {', '.join(CREDIT_MODES)}."
                          + did_you_mean(str(mode), CREDIT_MODES))
    seats = tuple(seats)
    if not seats:
        raise ConfigError("credit needs at least one trainable seat; got none")
    if len(set(seats)) != len(seats):
        raise ConfigError(f"the trainable seats {list(seats)} name a seat twice")
    if mode == "shapley" and len(seats) > SHAPLEY_SEAT_LIMIT:
        raise ConfigError(f"credit='shapley' needs 2^K sub-team values per execution; K={len(seats)} seats is "
                          f"above the limit of {SHAPLEY_SEAT_LIMIT} (SHAPLEY_SEAT_LIMIT). Use credit='loo' "
                          "(K + 1 values) or credit='system'")
    return seats


def needed_coalitions(seats: Sequence[str], mode: str) -> list[frozenset[str]]:
    """The sub-teams of the trainable ``seats`` whose value ``mode`` needs (the frozen collaborators are in every
    one): ``system``, the full team; ``loo``, the full team and each team without one seat; ``shapley``, all 2^K
    sub-teams. The full team comes first; no sub-team twice."""
    seats = _check(seats, mode)
    full = frozenset(seats)
    if mode == "system":
        return [full]
    if mode == "loo":
        return list(dict.fromkeys([full] + [full - {s} for s in seats]))
    subsets = [frozenset(c) for size in range(len(seats), -1, -1) for c in combinations(seats, size)]
    return subsets


def seat_credit(values: Mapping[frozenset[str], float], seats: Sequence[str], mode: str) -> dict[str, float]:
    """Each seat's credit in one execution from the sub-team ``values`` (:func:`needed_coalitions`): ``system``,
    v(all seats) for everyone; ``loo``, v(all) - v(all without i); ``shapley``, i's exact Shapley value in the
    game over the seats (the weights of :func:`coalition_gym.valuation.exact.shapley_weight`)."""
    seats = _check(seats, mode)
    missing = [sorted(c) for c in needed_coalitions(seats, mode) if c not in values]
    if missing:
        raise ConfigError(f"credit={mode!r} needs the value of sub-teams {missing}; the values given cover "
                          f"{[sorted(c) for c in values]}")
    full = frozenset(seats)
    v_all = float(values[full])
    if mode == "system":
        return {s: v_all for s in seats}
    if mode == "loo":
        return {s: v_all - float(values[full - {s}]) for s in seats}
    n = len(seats)
    credit = {}
    for s in seats:
        others = [o for o in seats if o != s]
        total = 0.0
        for size in range(n):
            w = shapley_weight(size, n)
            for c in combinations(others, size):
                without = frozenset(c)
                total += w * (float(values[without | {s}]) - float(values[without]))
        credit[s] = total
    return credit


__all__ = ["CREDIT_MODES", "SHAPLEY_SEAT_LIMIT", "needed_coalitions", "seat_credit"]
