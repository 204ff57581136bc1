"""Where each seat's learning signal goes, per training step (written to ``metrics.jsonl`` as
``<seat>/<name>``, so TensorBoard shows one curve per seat):

- ``informative_groups``: share of groups in which the seat's credit is not all equal (the others give the
  seat no gradient).
- ``pivotality``: share of executions in which the seat's leave-one-out credit, v(all) - v(all without the
  seat), is not 0: how often the seat's presence changed the team's outcome. Needs the leave-one-out
  sub-teams, so it is None under ``credit="system"`` (which runs no counterfactual).
- ``credit_mean``, ``credit_var``: the seat's credit over the step's executions (variance over all of them).
- ``adv_nonzero``: share of the seat's executions with a non-zero advantage; ``grad_token_share``: share of
  the seat's tokens that carry one.
- ``policy_score``: the seat's own answer scored alone, inside the team's executions (the name a seat's own
  score has in every log: the gym env's info, the single-seat rows' ``policy_score_mean``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..advantages import informative_groups
from ..credit import seat_credit
from ..rollouts import Rollout

SEAT_KEYS = ("informative_groups", "pivotality", "credit_mean", "credit_var", "adv_nonzero", "grad_token_share",
             "policy_score", "calls", "tokens")


def loo_credit(rollout: Rollout, seat: str, seats: Sequence[str]) -> float | None:
    """The seat's leave-one-out credit in this execution, when its values hold the sub-team without it."""
    full = frozenset(seats)
    if full - {seat} not in rollout.values:
        return None
    return seat_credit(rollout.values, seats, "loo")[seat]


def pivotal_share(loo: Sequence[float | None]) -> float | None:
    """Share of executions whose leave-one-out credit is not 0; None when any is unknown."""
    known = [v for v in loo if v is not None]
    if len(known) != len(loo) or not known:
        return None
    return float(np.mean([abs(v) > 1e-12 for v in known]))


def seat_signal(rollouts: Sequence[Rollout], seat: str, seats: Sequence[str],
                advantages: "Sequence[float] | np.ndarray") -> dict[str, Any]:
    """One seat's diagnostics on one step's batch (see the module doc)."""
    if not rollouts:
        return {}
    credit = [r.credit[seat] for r in rollouts]
    groups = [r.group for r in rollouts]
    loo = [loo_credit(r, seat, seats) for r in rollouts]
    tokens = [sum(len(c.completion_ids) for c in r.calls_of(seat)) for r in rollouts]
    adv = np.abs(np.asarray(advantages, dtype=float))
    return {
        "informative_groups": len(informative_groups(credit, groups)) / max(len(set(groups)), 1),
        "pivotality": pivotal_share(loo),
        "credit_mean": float(np.mean(credit)),
        "credit_var": float(np.var(credit)),
        "adv_nonzero": float(np.mean(adv > 0)),
        "grad_token_share": sum(t for t, a in zip(tokens, adv) if a > 0) / max(sum(tokens), 1),
        "policy_score": float(np.mean([r.own_scores.get(seat, 0.0) for r in rollouts])),
        "calls": sum(len(r.calls_of(seat)) for r in rollouts),
        "tokens": int(sum(tokens)),
    }


def team_signal(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """The team's side of a step (the trainer adds the reward's mean and spread): whether its groups' system scores
    differ, and how many executions failed."""
    scores = [float(r.reward) for r in rollouts]
    return {"informative_groups": (len(informative_groups(scores, [r.group for r in rollouts]))
                                   / max(len({r.group for r in rollouts}), 1)),
            "failed_rollouts": sum(r.error is not None for r in rollouts)}


def summarise_seats(rows: Sequence[dict[str, Any]], seats: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per seat: means of its diagnostics over the first and the last fifth of the training steps, and all."""
    steps = [r for r in rows if "reward_mean" in r]
    out: dict[str, dict[str, Any]] = {}
    if not steps:
        return {s: {} for s in seats}
    fifth = max(1, len(steps) // 5)
    for seat in seats:
        out[seat] = {"steps": len(steps)}
        for name, part in (("first", steps[:fifth]), ("last", steps[-fifth:]), ("all", steps)):
            out[seat][name] = {}
            for key in SEAT_KEYS:
                values = [r[f"{seat}/{key}"] for r in part if r.get(f"{seat}/{key}") is not None]
                out[seat][name][key] = float(np.mean(values)) if values else None
    return out


__all__ = ["SEAT_KEYS", "loo_credit", "pivotal_share", "seat_signal", "team_signal", "summarise_seats"]
