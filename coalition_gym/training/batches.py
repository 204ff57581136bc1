"""One optimiser step's batch of rollouts: ``items_per_step`` items drawn, ``group_size`` executions
each, rewarded by the recipe; with dynamic sampling (DAPO; any policy-gradient recipe may turn it on)
all-equal groups are dropped and refilled with new items, keeping at most ``items_per_step``
informative groups."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..agents.base import stable_hash
from ..types import Item
from .advantages import informative_groups
from .config import PolicyGradientConfig, TrainConfig
from .rollouts import Rollout

#: group numbers (and rollout indices, times G) of the k-th refill start at k * REFILL_OFFSET
REFILL_OFFSET = 10_000


def gather_batch(config: TrainConfig, step: int, draw_items: Callable[[int], list[Item]],
                 rollouts: Callable[..., list[Rollout]], rewards: Callable[[Sequence[Rollout]], list[float]]
                 ) -> tuple[list[Rollout], list[float], dict[str, Any]]:
    """(rollouts, rewards, metrics) for ``step``: ``rollouts(items, seed, first_group=...)`` runs
    executions, ``rewards`` scores them, ``draw_items(n)`` draws train items."""
    cfg = config
    batch = rollouts(draw_items(cfg.items_per_step), stable_hash("step", cfg.seed, step))
    scores = rewards(batch)
    groups = [r.group for r in batch]
    first_share = len(informative_groups(scores, groups)) / max(len(set(groups)), 1)
    refills = 0
    if isinstance(cfg, PolicyGradientConfig) and cfg.dynamic_sampling:
        kept_groups: list[int] = []
        pairs: list[tuple[Rollout, float]] = []

        def keep(more: list[Rollout], more_scores: list[float]) -> None:
            ok = informative_groups(more_scores, [r.group for r in more])
            for g in sorted(ok, key=lambda g: min(r.index for r in more if r.group == g)):
                if len(kept_groups) < cfg.items_per_step:
                    kept_groups.append(g)
            pairs.extend((r, w) for r, w in zip(more, more_scores) if r.group in kept_groups)

        keep(batch, scores)
        while len(kept_groups) < cfg.items_per_step and refills < cfg.max_refills:
            refills += 1
            more = rollouts(draw_items(cfg.items_per_step), stable_hash("refill", cfg.seed, step, refills),
                            first_group=refills * REFILL_OFFSET)
            for r in more:  # indices stay unique across refills (calls point at their rollout)
                r.index += refills * REFILL_OFFSET * cfg.group_size
                for c in r.calls:
                    c.rollout = r.index
            keep(more, rewards(more))
        batch, scores = [r for r, _ in pairs], [w for _, w in pairs]
    return batch, scores, {"first_informative_groups": first_share, "refills": refills}


__all__ = ["gather_batch", "REFILL_OFFSET"]
