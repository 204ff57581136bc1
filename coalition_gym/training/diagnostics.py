"""Where a step's learning signal goes: per-step numbers that say whether a method *can* learn.

- ``informative_groups``: share of groups whose rewards are not all equal (the rest give no gradient).
- ``pivotality``: over pairs of executions of one item whose policy answers differ, the share whose
  rewards differ too: how often the policy's reply changes the outcome. With shared collaborator draws
  the policy is the only thing that differs inside a group, so this is the policy's own effect; with
  fresh draws it also counts the collaborators' noise.
- ``reward_policy_score_corr``: within-group correlation of the reward and the policy's own score
  (``policy_score``, its answer scored alone, as everywhere a seat's own score is logged):
  1 when the method pays for solo correctness, near 0 when the system does not care who is right.
- ``adv_abs_mean``: mean |advantage| per execution; ``grad_token_share``: share of the policy's tokens
  that carry a non-zero advantage (the rest only dilute the token-mean).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

import numpy as np

from .advantages import informative_groups
from .rollouts import Rollout


def _by_group(rollouts: Sequence[Rollout]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for k, r in enumerate(rollouts):
        groups.setdefault(r.group, []).append(k)
    return groups


def pivotality(rollouts: Sequence[Rollout], rewards: Sequence[float], seat: str | None = None) -> float | None:
    """P(rewards differ | the policy's answers differ), over pairs inside groups; None without such pairs.
    ``seat``: whose answers (a team's seat; None: the one policy's)."""
    answers = [r.own_answer if seat is None else r.answers.get(seat) for r in rollouts]
    differ = changed = 0
    for idx in _by_group(rollouts).values():
        for a, b in combinations(idx, 2):
            if answers[a] != answers[b]:
                differ += 1
                changed += abs(rewards[a] - rewards[b]) > 1e-12
    return changed / differ if differ else None


def within_group_corr(x: Sequence[float], y: Sequence[float], groups: Sequence[int]) -> float | None:
    """Pearson correlation of x and y after subtracting each group's means; None when undefined."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    cx, cy = xs.copy(), ys.copy()
    labels = np.asarray(groups)
    for g in set(groups):
        m = labels == g
        cx[m] -= xs[m].mean()
        cy[m] -= ys[m].mean()
    denom = float(np.sqrt((cx ** 2).sum() * (cy ** 2).sum()))
    return float((cx * cy).sum() / denom) if denom > 0 else None


def signal_metrics(rollouts: Sequence[Rollout], rewards: Sequence[float], advantages: Sequence[float] | None,
                   ) -> dict[str, Any]:
    """The diagnostics of one step's batch (see the module doc)."""
    groups = [r.group for r in rollouts]
    n_groups = max(len(set(groups)), 1)
    tokens = [sum(len(c.completion_ids) for c in r.calls) for r in rollouts]
    out: dict[str, Any] = {
        "informative_groups": len(informative_groups(rewards, groups)) / n_groups,
        "pivotality": pivotality(rollouts, rewards),
        "reward_policy_score_corr": within_group_corr(rewards, [r.own_score for r in rollouts], groups),
        "policy_tokens": int(sum(tokens)),
        "failed_rollouts": sum(r.error is not None for r in rollouts),
    }
    if advantages is not None and len(rollouts):
        adv = np.abs(np.asarray(advantages, dtype=float))
        out["adv_abs_mean"] = float(adv.mean())
        grad = sum(t for t, a in zip(tokens, adv) if a > 0)
        out["grad_tokens"] = int(grad)
        out["grad_token_share"] = grad / max(sum(tokens), 1)
    return out


SIGNAL_KEYS = ("informative_groups", "pivotality", "reward_policy_score_corr", "adv_abs_mean", "grad_token_share",
               "grad_tokens", "reward_mean", "system_score_mean", "policy_score_mean")


def summarise_signal(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of the signal metrics over the first and the last fifth of the training steps."""
    steps = [r for r in rows if "reward_mean" in r]
    if not steps:
        return {}
    fifth = max(1, len(steps) // 5)
    out: dict[str, Any] = {"steps": len(steps)}
    for name, part in (("first", steps[:fifth]), ("last", steps[-fifth:]), ("all", steps)):
        out[name] = {}
        for key in SIGNAL_KEYS:
            values = [r[key] for r in part if r.get(key) is not None]
            out[name][key] = float(np.mean(values)) if values else None
    return out


__all__ = ["pivotality", "within_group_corr", "signal_metrics", "summarise_signal", "SIGNAL_KEYS"]
