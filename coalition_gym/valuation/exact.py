"""Exact values from all 2^n coalitions (Shapley, Banzhaf) and the result type every estimator returns.

Apart from :mod:`.estimators` so that the sampling estimators (:mod:`.sampling`), which fall back to the
exact value when their budget covers every coalition, import it without an import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ConfigError
from .game import Game
from .stats import bootstrap_mean

EXACT_LIMIT = 12  # the default most players the exact estimators enumerate; a setting (exact_limit, --exact-limit)


def enumeration_cost(n: int) -> str:
    """What enumerating every coalition of ``n`` players costs, in words (said before the work)."""
    return f"2^{n} - 1 = {2 ** n - 1} coalitions"


def check_exact_limit(n: int, exact_limit: int = EXACT_LIMIT) -> None:
    """Refuse exact enumeration of ``n`` players above ``exact_limit``, naming the setting that raises it."""
    if n > exact_limit:
        raise ConfigError(f"exact estimators evaluate all 2^n coalitions; n={n} > {exact_limit} (the exact limit) is "
                          f"refused ({enumeration_cost(n)}). Raise it with --exact-limit {n} (exact_limit={n}) "
                          "if they are affordable, or use the sampling estimator 'mc' (Monte Carlo Shapley) or 'loo'.")


@dataclass
class ValuationResult:
    estimator: str
    players: tuple[str, ...]
    values: np.ndarray
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    per_item: np.ndarray  # players x items
    coalitions_evaluated: int
    extras: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, player: str) -> float:
        """The player's value (a float, whatever the estimator); ``as_dict()[player]`` adds its stderr and CI."""
        return float(self.values[self.players.index(player)])

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """Player -> ``{"value", "stderr", "ci"}``: the whole estimate (``result[player]`` is its value)."""
        return {p: {"value": float(v), "stderr": float(s), "ci": [float(lo), float(hi)]}
                for p, v, s, lo, hi in zip(self.players, self.values, self.stderr, self.ci_low, self.ci_high)}


def result_of(name: str, game: Game, per_item: np.ndarray, n_boot: int, seed: int, **extras: Any) -> ValuationResult:
    per_item = np.asarray(per_item, dtype=float)
    mean, se, lo, hi = bootstrap_mean(per_item, n_boot=n_boot, seed=seed)
    return ValuationResult(name, game.players, per_item.mean(axis=1), se, lo, hi, per_item,
                           game.coalitions_evaluated, extras)


def _all_masks(game: Game, exact_limit: int = EXACT_LIMIT) -> np.ndarray:
    """Per-item values of all 2^n coalitions, indexed by bitmask (bit k = players[k])."""
    n = len(game.players)
    check_exact_limit(n, exact_limit)
    coalitions = [frozenset(p for k, p in enumerate(game.players) if m >> k & 1) for m in range(1 << n)]
    game.evaluate(coalitions)
    return np.stack([game.per_item(c) for c in coalitions])


def _weighted_marginals(game: Game, weight: Callable[[int, int], float], exact_limit: int) -> np.ndarray:
    n = len(game.players)
    values = _all_masks(game, exact_limit)
    masks = np.arange(1 << n)
    sizes = np.array([bin(m).count("1") for m in masks])
    by_size = np.array([weight(s, n) for s in range(n)])
    per_item = np.zeros((n, game.n_items))
    for k in range(n):
        bit = 1 << k
        without = masks[(masks & bit) == 0]
        per_item[k] = by_size[sizes[without]] @ (values[without | bit] - values[without])
    return per_item


def shapley_weight(size: int, n: int) -> float:
    return math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)


def shapley_map(bits: np.ndarray) -> np.ndarray:
    """Each coalition's coefficient in each player's Shapley value (players x coalitions; ``bits``: coalitions x n
    membership): ``phi_i = sum_S map[i, S] v(S)`` over every coalition, v(empty) = 0, where S enters with the
    weight of its size minus one when it holds i (``v(S)`` in ``v(S) - v(S - i)``) and minus the weight of its
    size when it does not (``v(S)`` in ``v(S + i) - v(S)``)."""
    n = bits.shape[1]
    weight = np.array([shapley_weight(s, n) for s in range(n)] + [0.0])
    size = bits.sum(axis=1).astype(int)
    return np.where(bits.T > 0, weight[np.maximum(size - 1, 0)][None, :], -weight[size][None, :])


def exact_shapley(game: Game, n_boot: int = 2000, seed: int = 0, exact_limit: int = EXACT_LIMIT) -> ValuationResult:
    """Exact Shapley values from all 2^n coalitions; refused above ``exact_limit`` players."""
    return result_of("shapley", game, _weighted_marginals(game, shapley_weight, exact_limit), n_boot, seed)


def exact_banzhaf(game: Game, n_boot: int = 2000, seed: int = 0, exact_limit: int = EXACT_LIMIT) -> ValuationResult:
    """Exact Banzhaf values from all 2^n coalitions; refused above ``exact_limit`` players."""
    per_item = _weighted_marginals(game, lambda s, n: 1.0 / 2 ** (n - 1), exact_limit)
    return result_of("banzhaf", game, per_item, n_boot, seed)


__all__ = ["EXACT_LIMIT", "check_exact_limit", "enumeration_cost", "ValuationResult", "result_of", "shapley_map",
           "shapley_weight", "exact_shapley",
           "exact_banzhaf"]
