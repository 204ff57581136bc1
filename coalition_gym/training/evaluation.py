"""Evaluation and checkpoint selection of a policy run: one execution per item with the run's
evaluation seed, summarised with a bootstrap CI, and the rule that says whether a dev score is the
new best (an adversary, ``reward="negate"``, keeps its lowest)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..agents.base import stable_hash
from ..envs.system import System
from ..types import Item
from ..valuation.stats import bootstrap_mean
from .rollouts import RecordingPolicy, Rollout, RolloutPlan, collect

MODES = ("collab", "solo", "without")


@dataclass
class EvalResult:
    mode: str  # "collab", "solo" or "without"
    per_item: list[float]
    mean: float
    ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "mean": self.mean, "ci": list(self.ci), "n": len(self.per_item)}


def eval_seed(run_seed: int) -> int:
    """The episode seed of every evaluation of a run (``cgym eval --seed`` with it replays them). It
    depends on the run's seed only, so every method of one seed meets the same collaborator draws on
    every item (paired comparisons), and different seeds draw independently."""
    return stable_hash("eval", run_seed) % 2**31


def run_evaluation(system: System, items: Sequence[Item], policy: RecordingPolicy, mode: str, seed: int,
                   members: Sequence[str] | None = None) -> tuple[EvalResult, list[Rollout]]:
    """One execution per item with the runner's episode seeds (``cgym eval --seed`` replays it), scored
    by the system's outcome (``solo``: the policy's own)."""
    rollouts = collect(system, items, policy, RolloutPlan(1, seed, draws="episode"), members=members)
    scores = [r.solo_score if mode == "solo" else r.reward for r in rollouts]
    _, _, lo, hi = bootstrap_mean(np.asarray([scores]), n_boot=1000, seed=seed)
    return EvalResult(mode, scores, float(np.mean(scores)), (float(lo[0]), float(hi[0]))), rollouts


class RunItems:
    """The items a run trains and is evaluated on, and its evaluation seed: what the single-seat and the team
    trainer share. Needs ``self.task``, ``self.config`` (``seed``, ``eval_items``, ``test_items``) and ``self.rng``
    (the run's own RNG, saved with its state)."""

    task: Any
    config: Any
    rng: random.Random

    @property
    def eval_seed(self) -> int:
        """The episode seed of every evaluation of this run (``cgym eval --seed`` with it replays them)."""
        return eval_seed(self.config.seed)

    def dev_items(self) -> list[Item]:
        return list(self.task.items("dev"))[: self.config.eval_items]

    def test_items(self) -> list[Item]:
        return list(self.task.items("test"))[: self.config.test_items]

    def draw_items(self, n: int, rng: random.Random | None = None) -> list[Item]:
        """``n`` train items drawn with replacement by ``rng`` (default: the run's own)."""
        rng = rng or self.rng
        pool = list(self.task.items("train"))
        return [pool[rng.randrange(len(pool))] for _ in range(n)]


def improves(score: float, best: float, sign: float) -> bool:
    """Whether a dev ``score`` beats the ``best`` so far (``sign`` -1: lower is better)."""
    return sign * score > sign * best


__all__ = ["EvalResult", "MODES", "RunItems", "eval_seed", "run_evaluation", "improves"]
