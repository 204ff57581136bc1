"""A training run's verdict, as ``cgym gain`` gives one: the paired difference of the trained system's test
score to Base's (the untrained policy, or a team untrained) on the same test items, its 95% paired item
bootstrap CI (:func:`~coalition_gym.valuation.stats.bootstrap_mean` over the per-item differences), and
what it says: ``better`` (the CI is on the side the method optimises), ``worse`` (on the other side) or
``no difference`` (it spans 0). ``direction`` is what "best" means for the method: ``higher`` system scores,
or ``lower`` for an adversary (``--reward negate``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..valuation.stats import bootstrap_mean

DIRECTIONS = ("higher", "lower")


def direction_of(selection_sign: float) -> str:
    """``higher`` when the method keeps its highest dev score, ``lower`` when it keeps its lowest."""
    return "lower" if selection_sign < 0 else "higher"


def verdict_of(ci: Sequence[float], direction: str = "higher") -> str:
    """``better`` / ``worse`` / ``no difference`` for a difference's CI, read in ``direction``."""
    low, high = (float(ci[0]), float(ci[1])) if direction == "higher" else (-float(ci[1]), -float(ci[0]))
    return "better" if low > 0 else "worse" if high < 0 else "no difference"


def paired_verdict(base: Sequence[float], mine: Sequence[float], direction: str = "higher", seed: int = 0
                   ) -> dict[str, Any] | None:
    """The verdict of ``mine`` against ``base`` (per-item scores on the same items, in order); None when
    they are not paired (different lengths, or no item)."""
    if len(base) != len(mine) or not len(mine):
        return None
    diff = np.asarray(mine, dtype=float) - np.asarray(base, dtype=float)
    boot = bootstrap_mean(diff[None, :], seed=seed)
    ci = [float(boot.ci_low[0]), float(boot.ci_high[0])]
    return {"score": float(np.mean(mine)), "base": float(np.mean(base)), "difference": float(boot.mean[0]),
            "ci": ci, "n": len(mine), "direction": direction, "verdict": verdict_of(ci, direction)}


def verdict_line(name: str, verdict: dict[str, Any], base_name: str = "Base") -> str:
    """One line: the two test scores, the paired difference with its CI, and what it says."""
    word = verdict["verdict"]
    said = {"better": f"better than {base_name}", "worse": f"worse than {base_name}",
            "no difference": f"no difference from {base_name} (the CI spans 0)"}[word]
    low, high = verdict["ci"]
    line = (f"verdict {name}: system score on test {verdict['score']:.3f} vs {base_name} {verdict['base']:.3f}, "
            f"paired difference {verdict['difference']:+.3f} [95% CI {low:+.3f}, {high:+.3f}] over {verdict['n']} "
            f"items: {said}")
    if verdict["direction"] != "higher":
        line += f" (best = {verdict['direction']} system score: an adversary)"
    return line


__all__ = ["DIRECTIONS", "direction_of", "verdict_of", "paired_verdict", "verdict_line"]
