"""Group-relative advantages, the uniform-credit broadcast, DAPO's dynamic sampling and overlong penalty.

Why C-RL needs no extra rollouts: the leave-one-out marginal of the policy on an item is
``v(N) - v(N minus policy)``. Every execution in a group shares the same item, so the second term is a
constant that the group mean subtracts away: ``(r - mean_g)`` is the same whether or not it is
subtracted. The coalition without the policy is therefore never run.
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from ..errors import ConfigError


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable], eps: float = 1e-4,
                     scale: bool = True, tol: float = 1e-12) -> np.ndarray:
    """``(r - group mean) / (group std + eps)`` per rollout; std with Bessel's correction and eps 1e-4
    (as TRL); ``scale=False`` keeps only the centring (Dr. GRPO-style). A group whose rewards are all
    equal (within ``tol``) gets exactly 0, not the rounding residue of its mean."""
    r = np.asarray(rewards, dtype=float)
    if len(r) != len(groups):
        raise ConfigError(f"{len(r)} rewards but {len(groups)} group labels")
    out = np.zeros_like(r)
    members: dict = {}
    for k, g in enumerate(groups):
        members.setdefault(g, []).append(k)
    for idx in map(np.asarray, members.values()):
        if r[idx].max() - r[idx].min() <= tol:
            continue
        centred = r[idx] - r[idx].mean()
        if scale:
            std = r[idx].std(ddof=1) if len(idx) > 1 else 0.0
            centred = centred / (std + eps)
        out[idx] = centred
    return out


def broadcast(values_per_rollout: "Sequence[float] | np.ndarray", rollout_of_call: Sequence[int]) -> np.ndarray:
    """Uniform credit: every policy call gets the value of the rollout it belongs to."""
    values = np.asarray(values_per_rollout, dtype=float)
    return values[np.asarray(rollout_of_call, dtype=int)] if len(rollout_of_call) else np.zeros(0)


def informative_groups(rewards: Sequence[float], groups: Sequence[Hashable], tol: float = 1e-12) -> set:
    """DAPO dynamic sampling: the groups whose rewards are not all equal (the others give zero gradient)."""
    by_group: dict = {}
    for r, g in zip(rewards, groups):
        by_group.setdefault(g, []).append(float(r))
    return {g for g, rs in by_group.items() if max(rs) - min(rs) > tol}


def overlong_penalty(length: int, max_length: int, cache: int) -> float:
    """DAPO's soft overlong punishment: 0 up to ``max_length - cache`` tokens, then a linear ramp to -1
    at ``max_length``, and -1 beyond."""
    if cache < 0 or max_length <= 0 or cache > max_length:
        raise ConfigError(f"overlong penalty needs 0 <= cache ({cache}) <= max_length ({max_length})")
    start = max_length - cache
    if length <= start:
        return 0.0
    if length <= max_length:
        return (start - length) / cache if cache else -1.0
    return -1.0
