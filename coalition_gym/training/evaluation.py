"""Evaluation and checkpoint selection of a policy run: one execution per item with the run's
evaluation seed, summarised with a bootstrap CI, and the rule that says whether a dev score is the
new best (an adversary, ``reward="negate"``, keeps its lowest)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..agents.base import stable_hash
from ..types import Item
from ..valuation.stats import bootstrap_mean

MODES = ("collab", "solo", "without", "team")


@dataclass
class EvalResult:
    mode: str  # "collab", "solo" or "without"
    per_item: list[float]
    mean: float
    ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "mean": self.mean, "ci": list(self.ci), "n": len(self.per_item)}

    def row(self, prefix: str = "dev") -> dict[str, Any]:
        """Its numbers for metrics.jsonl: ``dev_score`` and ``dev_ci``."""
        return {f"{prefix}_score": self.mean, f"{prefix}_ci": list(self.ci)}


def eval_seed(run_seed: int) -> int:
    """The episode seed of every evaluation of a run (``cgym eval --seed`` with it replays them). It
    depends on the run's seed only, so every method of one seed meets the same collaborator draws on
    every item (paired comparisons), and different seeds draw independently."""
    return stable_hash("eval", run_seed) % 2**31


def summarise(mode: str, scores: Sequence[float], seed: int) -> EvalResult:
    """Per-item ``scores`` of one evaluation pass: their mean and bootstrap 95% CI over items (``seed``)."""
    scores = [float(s) for s in scores]
    if not scores:
        return EvalResult(mode, [], 0.0, (0.0, 0.0))
    _, _, lo, hi = bootstrap_mean(np.asarray([scores]), n_boot=1000, seed=seed)
    return EvalResult(mode, scores, float(np.mean(scores)), (float(lo[0]), float(hi[0])))


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


__all__ = ["EvalResult", "MODES", "RunItems", "eval_seed", "summarise", "improves"]
