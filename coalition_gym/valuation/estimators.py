"""Estimators of each player's value in a Game, all with per-item contributions and bootstrap CIs.

- ``loo``: v(N) - v(N minus i); n + 1 coalitions.
- ``shapley``: exact, all 2^n coalitions, weight |S|!(n-|S|-1)!/n! on v(S + i) - v(S).
- ``banzhaf``: exact, all 2^n coalitions, uniform weight 1/2^(n-1).
- ``mc``: Shapley from sampled coalitions (:mod:`coalition_gym.valuation.sampling`: the calibrated
  hybrid sampler by default), stopped at a tolerance, a budget in coalitions or generations, or a
  round limit, exact when the budget covers every coalition; its interval includes the sampling error.
  The classic permutation estimator is one of its samplers (``sampler="permutation"``).
- ``solo``: v({i}), the model alone.

Every value is linear in the per-item values, so each estimator also gives per-item
contributions; standard errors and 95% CIs come from a bootstrap over items (the same resampled
items for all players). For ``mc`` the permutation-sampling error is reported separately in
``extras["permutation_stderr"]``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .exact import EXACT_LIMIT, ValuationResult, exact_banzhaf, exact_shapley, result_of, shapley_weight
from .game import Game
from .sampling import Budget, MaxRounds, StopRule, Tolerance, sampled_shapley


def leave_one_out(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    everyone = frozenset(game.players)
    game.evaluate([everyone] + [everyone - {p} for p in game.players])
    full = game.per_item(everyone)
    per_item = np.stack([full - game.per_item(everyone - {p}) for p in game.players])
    return result_of("loo", game, per_item, n_boot, seed)


def solo(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    base = game.solo_game()
    base.evaluate([{p} for p in game.players])
    per_item = np.stack([base.per_item({p}) for p in game.players])
    result = result_of("solo", game, per_item, n_boot, seed)
    result.coalitions_evaluated = base.coalitions_evaluated if base is not game else result.coalitions_evaluated
    return result


def sampled_shapley_values(game: Game, tolerance: float = 0.005, budget: int | None = None,
                           budget_generations: int | None = None, sampler: str = "auto", max_rounds: int = 500,
                           n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    """Shapley values from sampled coalitions (``coalition_gym.valuation.sampling``): the default
    sampler, stopped at ``tolerance`` (the largest sampling stderr), a budget in coalitions and/or in
    generations, or ``max_rounds``; exact as soon as the budget covers every coalition. The interval
    and stderr include the sampling error (two-level bootstrap)."""
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


# the exact estimators and the result type live in .exact (sampling imports them); re-exported here
__all__ = ["EXACT_LIMIT", "ESTIMATORS", "ValuationResult", "exact_banzhaf", "exact_shapley", "leave_one_out",
           "sampled_shapley_values", "shapley_weight", "solo"]
