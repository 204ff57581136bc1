"""Estimators of each player's value in a Game, all with per-item contributions and bootstrap CIs.

- ``loo``: v(N) - v(N minus i); n + 1 coalitions.
- ``shapley``: exact, all 2^n coalitions, weight |S|!(n-|S|-1)!/n! on v(S + i) - v(S).
- ``banzhaf``: exact, all 2^n coalitions, uniform weight 1/2^(n-1).
- ``mc``: Shapley from sampled coalitions (:mod:`coalition_gym.valuation.sampling`: the regression-adjusted
  ``proxy`` sampler of :mod:`coalition_gym.valuation.proxy` by default), stopped at a tolerance, a budget
  in coalitions or generations, or a round limit, exact when the budget covers every coalition; its
  interval includes the sampling error.
  The classic permutation estimator is one of its samplers (``sampler="permutation"``).
- ``solo``: v({i}), the model alone.
- ``interactions``: the pairwise Shapley (Grabisch-Roubens) and Banzhaf interaction indices of every
  pair (:mod:`coalition_gym.valuation.interactions`); its column is each model's mean Shapley
  interaction with the others, the matrices are in ``extras["interactions"]``.

Every value is linear in the per-item values, so each estimator also gives per-item
contributions; standard errors and 95% CIs come from a bootstrap over items (the same resampled
items for all players). For ``mc`` the permutation-sampling error is reported separately in
``extras["permutation_stderr"]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from .exact import (
    EXACT_LIMIT,
    ValuationResult,
    check_exact_limit,
    exact_banzhaf,
    exact_shapley,
    result_of,
    shapley_weight,
)
from .game import Game
from .interactions import SampledSettings, interaction_estimator
from .sampling import DEFAULT_BUDGET_PER_PLAYER, Budget, MaxRounds, StopRule, Tolerance, default_budget, sampled_shapley


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


def stop_sentence(details: Mapping[str, Any]) -> str:
    """What a sampling estimate's run reached, in one line (its stop rule, coalitions, largest sampling
    stderr)."""
    reason, used = details.get("stop_reason", ""), details.get("coalitions_used")
    if details.get("exact"):
        return f"exact ({reason})"
    worst = max(details.get("sampling_stderr") or [float("nan")])
    why = {"budget": f"its budget of {details.get('budget')} coalitions"
                     + (f" (the default, {DEFAULT_BUDGET_PER_PLAYER}n; --mc-budget to change)"
                        if details.get("budget_default") else ""),
           "tolerance": "its tolerance", "max_rounds": "its round limit"}.get(reason, reason)
    return f"stopped at {why} after {used} coalitions; largest sampling stderr {worst:.4f}"


def sampled_shapley_values(game: Game, tolerance: float = SampledSettings.tolerance, budget: int | None = None,
                           budget_generations: int | None = None, sampler: str = "auto",
                           max_rounds: int = SampledSettings.max_rounds,
                           n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    """Shapley values from sampled coalitions (``coalition_gym.valuation.sampling``): the default
    sampler, stopped at ``tolerance`` (the largest sampling stderr), a budget in coalitions and/or in
    generations, or ``max_rounds``; exact as soon as the budget covers every coalition. The interval
    and stderr include the sampling error (the grouped jackknife of the sampled units)."""
    budget, by_default = default_budget(len(game.players), budget, budget_generations)
    rules: list[StopRule] = [MaxRounds(max_rounds)]
    if tolerance and tolerance > 0:
        rules.append(Tolerance(tolerance))
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
                            "rounds": est.rounds, "sampling_stderr": est.sampling_stderr.tolist(),
                            "sampling_halfwidth": est.sampling_halfwidth.tolist(),
                            "budget": budget, "budget_default": by_default, "shrink": est.shrink,
                            "solo_share_weight": est.solo_share_weight,
                            **({"interval_note": est.interval_note} if est.interval_note else {})})


@dataclass(frozen=True)
class Estimator:
    """One estimator's record: how it is called and how reports show it. Calling the record calls
    ``estimate(game, n_boot=..., seed=..., **options)``."""

    name: str  # what --estimator takes
    estimate: Callable[..., ValuationResult]
    field: str  # its field in summary.json and its column label
    rank: float  # which estimate ranks a leaderboard: the lowest rank among those computed
    in_all: bool = True  # part of `--estimator all` (solo is always computed, so it is not)
    description: str = ""  # one line, for listings (`cgym estimators`)
    max_players: int | None = None  # the most players it takes, whatever the exact limit
    # what it does above the exact limit (``exact_limit=``, which it then takes): "refused" (exact Shapley,
    # Banzhaf: they enumerate all 2^n coalitions), "sampled" (interactions); None: the limit is not its concern
    above_exact_limit: str | None = None

    def __call__(self, game: Game, **options: Any) -> ValuationResult:
        return self.estimate(game, **options)


#: estimator name -> record, in display order; extended by :func:`register_estimator`
ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str, estimate: Callable[..., ValuationResult], *, field: str | None = None,
                       rank: float = 100.0, in_all: bool = True, description: str = "",
                       max_players: int | None = None, above_exact_limit: str | None = None) -> Estimator:
    """Make ``estimate(game, n_boot=2000, seed=0) -> ValuationResult`` usable by ``name``: ``cgym eval
    --estimator name`` (and ``all`` unless ``in_all=False``), :func:`~coalition_gym.evaluate`, the
    leaderboard tables (column and summary field ``field``, default the name). ``rank`` orders which
    computed estimate ranks the leaderboard, lowest first (built-ins: shapley 0, mc 1, banzhaf 2, loo 3);
    ``description`` is the line listings show (default: the first line of ``estimate``'s docstring)."""
    if not isinstance(name, str) or not name or name in ("all", "auto") or not callable(estimate):
        raise ConfigError(f"register_estimator needs a new name (not all or auto) and a callable, got {name!r}")
    if name in ESTIMATORS:
        raise ConfigError(f"estimator {name!r} is already registered")
    field = field or name
    taken = next((e.name for e in ESTIMATORS.values() if e.field == field), None)
    if taken is not None:
        raise ConfigError(f"estimator {name!r}: field {field!r} is taken by estimator {taken!r}")
    if above_exact_limit not in (None, "refused", "sampled"):
        raise ConfigError(f"estimator {name!r}: above_exact_limit is None, 'refused' or 'sampled', "
                          f"got {above_exact_limit!r}")
    description = description or (estimate.__doc__ or "").strip().split("\n")[0]
    ESTIMATORS[name] = record = Estimator(name, estimate, field, float(rank), in_all, description, max_players,
                                          above_exact_limit)
    return record


register_estimator("loo", leave_one_out, rank=3, description="leave-one-out: v(N) - v(N minus i); n + 1 coalitions")
register_estimator("shapley", exact_shapley, rank=0, description="exact Shapley values, all 2^n coalitions "
                   f"(up to --exact-limit members, default {EXACT_LIMIT})", above_exact_limit="refused")
register_estimator("banzhaf", exact_banzhaf, rank=2, description="exact Banzhaf values, all 2^n coalitions "
                   f"(up to --exact-limit members, default {EXACT_LIMIT})", above_exact_limit="refused")
register_estimator("mc", sampled_shapley_values, field="mc_shapley", rank=1,
                   description="Shapley values from sampled coalitions (--sampler), stopped at a tolerance or budget")
register_estimator("solo", solo, rank=math.inf, in_all=False, description="v({i}): each model alone")
register_estimator("interactions", interaction_estimator, field="interaction", rank=50,
                   description="pairwise Shapley and Banzhaf interactions of every pair (column: mean Shapley "
                               "interaction with the others); exact up to --exact-limit members, else sampled like mc",
                   above_exact_limit="sampled")


def exact_limit_options(name: str, exact_limit: int) -> dict[str, int]:
    """The ``exact_limit=`` option for estimator ``name`` when it takes one (and the limit is not the default)."""
    takes = name in ESTIMATORS and ESTIMATORS[name].above_exact_limit is not None
    return {"exact_limit": exact_limit} if takes and exact_limit != EXACT_LIMIT else {}


def _player_limit(name: str, exact_limit: int) -> int | None:
    record = ESTIMATORS.get(name)
    if record is None:
        return None
    limits = [record.max_players, exact_limit if record.above_exact_limit == "refused" else None]
    return min((limit for limit in limits if limit is not None), default=None)


def fit_to_pool(names: Sequence[str], n: int, every: bool, exact_limit: int = EXACT_LIMIT) -> tuple[list[str], str]:
    """The estimators of ``names`` that take ``n`` players, and a one-line note of what was left out. Asked for
    by name (``every`` False), one that cannot take ``n`` players is refused before any work; as part of
    ``all`` (``every``), it is left out (the sampling estimator stands in for exact Shapley). Exact ones take
    up to ``exact_limit`` players."""
    too_many = [name for name in names if (_player_limit(name, exact_limit) or n) < n]
    if not too_many:
        return list(names), ""
    if not every:
        name = too_many[0]
        if ESTIMATORS[name].above_exact_limit == "refused":
            check_exact_limit(n, exact_limit)  # the refusal names --exact-limit (passes when max_players binds)
        raise ConfigError(f"--estimator {name} takes at most {_player_limit(name, exact_limit)} players; n={n} is "
                          f"refused before any work. Use mc (sampled Shapley, a default budget of "
                          f"{DEFAULT_BUDGET_PER_PLAYER}n coalitions), loo, interactions or auto")
    kept = [name for name in names if name not in too_many]
    if "mc" not in kept:
        kept.append("mc")
    return kept, (f"n={n} members > the exact limit {exact_limit}: all = {', '.join(kept)} ({', '.join(too_many)} "
                  f"would evaluate all 2^{n} coalitions and are left out; --exact-limit {n} keeps them)")


def valued_estimators() -> list[str]:
    """The estimators ``--estimator all`` computes, in display order."""
    return [name for name, e in ESTIMATORS.items() if e.in_all]


def primary_estimator(computed: Iterable[str]) -> str:
    """Which of the ``computed`` estimators ranks the leaderboard: the lowest rank (ties: display order)."""
    order = list(ESTIMATORS)
    return min(computed, key=lambda name: (ESTIMATORS[name].rank, order.index(name)))


# the exact estimators and the result type live in .exact (sampling imports them); re-exported here
__all__ = ["EXACT_LIMIT", "ESTIMATORS", "Estimator", "ValuationResult", "exact_banzhaf", "exact_limit_options",
           "exact_shapley", "fit_to_pool", "leave_one_out", "primary_estimator", "register_estimator",
           "sampled_shapley_values", "shapley_weight", "solo", "valued_estimators"]
