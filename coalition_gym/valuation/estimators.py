"""Estimators of each player's value in a Game, all with per-item contributions and bootstrap CIs.

- ``loo``: v(N) - v(N minus i); n + 1 coalitions.
- ``shapley``: exact, all 2^n coalitions, weight |S|!(n-|S|-1)!/n! on v(S + i) - v(S).
- ``banzhaf``: exact, all 2^n coalitions, uniform weight 1/2^(n-1).
- ``mc``: Shapley from sampled coalitions (:mod:`coalition_gym.valuation.sampling`: the calibrated
  hybrid sampler by default), stopped at a tolerance, a budget in coalitions or generations, or a
  round limit, exact when the budget covers every coalition; its interval includes the sampling error.
  :func:`monte_carlo_shapley` is the classic antithetic permutation estimator, kept for comparison.
- ``solo``: v({i}), the model alone.

Every value is linear in the per-item values, so each estimator also gives per-item
contributions; standard errors and 95% CIs come from a bootstrap over items (the same resampled
items for all players). For ``mc`` the permutation-sampling error is reported separately in
``extras["permutation_stderr"]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ConfigError
from .game import Game
from .stats import bootstrap_mean

EXACT_LIMIT = 12


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
        return float(self.values[self.players.index(player)])

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {p: {"value": float(v), "stderr": float(s), "ci": [float(lo), float(hi)]}
                for p, v, s, lo, hi in zip(self.players, self.values, self.stderr, self.ci_low, self.ci_high)}


def _result(name: str, game: Game, per_item: np.ndarray, n_boot: int, seed: int, **extras: Any) -> ValuationResult:
    per_item = np.asarray(per_item, dtype=float)
    mean, se, lo, hi = bootstrap_mean(per_item, n_boot=n_boot, seed=seed)
    return ValuationResult(name, game.players, per_item.mean(axis=1), se, lo, hi, per_item,
                           game.coalitions_evaluated, extras)


def _all_masks(game: Game) -> np.ndarray:
    """Per-item values of all 2^n coalitions, indexed by bitmask (bit k = players[k])."""
    n = len(game.players)
    if n > EXACT_LIMIT:
        raise ConfigError(f"exact estimators evaluate all 2^n coalitions; n={n} > {EXACT_LIMIT} is refused. "
                          "Use the sampling estimator 'mc' (Monte Carlo Shapley) or 'loo'.")
    coalitions = [frozenset(p for k, p in enumerate(game.players) if m >> k & 1) for m in range(1 << n)]
    game.evaluate(coalitions)
    return np.stack([game.per_item(c) for c in coalitions])


def _weighted_marginals(game: Game, weight: Callable[[int, int], float]) -> np.ndarray:
    n = len(game.players)
    values = _all_masks(game)
    masks = np.arange(1 << n)
    sizes = np.array([bin(m).count("1") for m in masks])
    per_item = np.zeros((n, game.n_items))
    for k in range(n):
        bit = 1 << k
        without = masks[(masks & bit) == 0]
        w = np.array([weight(int(s), n) for s in sizes[without]])
        per_item[k] = (w[:, None] * (values[without | bit] - values[without])).sum(axis=0)
    return per_item


def shapley_weight(size: int, n: int) -> float:
    return math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)


def exact_shapley(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    return _result("shapley", game, _weighted_marginals(game, shapley_weight), n_boot, seed)


def exact_banzhaf(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    return _result("banzhaf", game, _weighted_marginals(game, lambda s, n: 1.0 / 2 ** (n - 1)), n_boot, seed)


def leave_one_out(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    everyone = frozenset(game.players)
    game.evaluate([everyone] + [everyone - {p} for p in game.players])
    full = game.per_item(everyone)
    per_item = np.stack([full - game.per_item(everyone - {p}) for p in game.players])
    return _result("loo", game, per_item, n_boot, seed)


def solo(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    base = game.solo_game()
    base.evaluate([{p} for p in game.players])
    per_item = np.stack([base.per_item({p}) for p in game.players])
    result = _result("solo", game, per_item, n_boot, seed)
    result.coalitions_evaluated = base.coalitions_evaluated if base is not game else result.coalitions_evaluated
    return result


def monte_carlo_shapley(game: Game, tolerance: float = 0.005, budget: int | None = None,
                        max_permutations: int = 2000, min_pairs: int = 4, batch_pairs: int = 8,
                        n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    """Antithetic permutation sampling (see module doc). ``budget`` caps the number of distinct
    coalitions evaluated by this game; a batch of pairs is trimmed so as not to exceed it."""
    if tolerance <= 0 and budget is None and max_permutations <= 0:
        raise ConfigError("monte_carlo_shapley needs a stopping rule: tolerance > 0, a budget or max_permutations")
    players = game.players
    n = len(players)
    rng = np.random.default_rng(seed)
    pair_sums: list[np.ndarray] = []  # per pair: players x items, the pair's mean marginal
    stop_reason = "max_permutations"

    def prefixes(order: np.ndarray) -> list[frozenset]:
        return [frozenset(players[j] for j in order[:k]) for k in range(n + 1)]

    while 2 * len(pair_sums) < max_permutations:
        batch = []
        for _ in range(batch_pairs):
            order = rng.permutation(n)
            batch.append((order, order[::-1].copy()))
        if budget is not None:  # keep only the pairs that fit in the remaining budget
            known, kept, extra = set(game._values), [], set[frozenset]()
            for pair in batch:
                new = {c for o in pair for c in prefixes(o) if c and c not in known} - extra
                if game.coalitions_evaluated + len(extra) + len(new) > budget:
                    break
                kept.append(pair)
                extra |= new
            batch = kept
            if not batch:
                stop_reason = "budget"
                break
        game.evaluate(c for pair in batch for o in pair for c in prefixes(o))
        for pair in batch:
            marginal = np.zeros((n, game.n_items))
            for order in pair:
                chain = prefixes(order)
                for k, j in enumerate(order):
                    marginal[j] += game.per_item(chain[k + 1]) - game.per_item(chain[k])
            pair_sums.append(marginal / 2.0)
        if len(pair_sums) >= min_pairs and tolerance > 0:
            means = np.stack([p.mean(axis=1) for p in pair_sums])
            if (means.std(axis=0, ddof=1) / math.sqrt(len(pair_sums))).max() <= tolerance:
                stop_reason = "tolerance"
                break
    if not pair_sums:
        raise ConfigError(f"monte_carlo_shapley: budget={budget} is too small for one permutation pair "
                          f"({2 * n} coalitions at most)")
    stacked = np.stack(pair_sums)
    means = stacked.mean(axis=2)
    perm_se = means.std(axis=0, ddof=1) / math.sqrt(len(pair_sums)) if len(pair_sums) > 1 else np.full(n, np.nan)
    return _result("mc_shapley", game, stacked.mean(axis=0), n_boot, seed, permutations=2 * len(pair_sums),
                   permutation_stderr=perm_se.tolist(), stop_reason=stop_reason)


def sampled_shapley_values(game: Game, tolerance: float = 0.005, budget: int | None = None,
                           budget_generations: int | None = None, sampler: str = "auto", max_rounds: int = 500,
                           n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    """Shapley values from sampled coalitions (``coalition_gym.valuation.sampling``): the default
    sampler, stopped at ``tolerance`` (the largest sampling stderr), a budget in coalitions and/or in
    generations, or ``max_rounds``; exact as soon as the budget covers every coalition. The interval
    and stderr include the sampling error (two-level bootstrap)."""
    from .sampling import Budget, MaxRounds, StopRule, Tolerance, sampled_shapley

    rules: list[StopRule] = [MaxRounds(max_rounds)]
    if tolerance and tolerance > 0:
        rules.append(Tolerance(tolerance))
    if budget is not None or budget_generations is not None:
        rules.append(Budget(coalitions=budget, generations=budget_generations))
    stop = rules[0]
    for rule in rules[1:]:
        stop = stop | rule
    est = sampled_shapley(game, sampler=sampler, stop=stop, seed=seed, n_boot=n_boot)
    values = est.per_item.mean(axis=1)
    return ValuationResult("mc_shapley", game.players, values, est.stderr, est.ci_low, est.ci_high, est.per_item,
                           game.coalitions_evaluated,
                           {"sampler": est.sampler, "exact": est.exact, "stop_reason": est.stop_reason,
                            "coalitions_used": est.coalitions, "generations_used": est.generations,
                            "rounds": est.rounds, "sampling_stderr": est.sampling_stderr.tolist()})


ESTIMATORS: dict[str, Callable[..., ValuationResult]] = {
    "loo": leave_one_out, "shapley": exact_shapley, "banzhaf": exact_banzhaf, "mc": sampled_shapley_values,
    "solo": solo,
}
