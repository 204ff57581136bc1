"""Pairwise interactions: who complements whom in a pool.

For a pair {i, j} and a coalition S without either, the pair's *synergy in S* is
``d_ij(S) = v(S + ij) - v(S + i) - v(S + j) + v(S)``: positive when the two together add more than
each adds alone (complementary), negative when each makes the other partly redundant. Two indices
average it over S subset of N minus {i, j} (s = |S|):

- the **Shapley interaction index** (Grabisch & Roubens 1999), weight ``s! (n - s - 2)! / (n - 1)!``;
  for a pair it equals shapiq's ``SII`` and ``k-SII`` of order 2 (k-SII coincides with SII at its top
  order), *not* the Shapley-Taylor index ``STII`` (which weights ``2/n / C(n - 1, s)``);
- the **Banzhaf interaction index**, uniform weight ``1 / 2^(n-2)`` (shapiq's ``BII`` of order 2).

Both are linear in v, so each has a per-item value and a bootstrap CI over items (the same resampled
items for every pair). Up to the exact limit (``exact_limit=``, default
:data:`~coalition_gym.valuation.exact.EXACT_LIMIT`) players they are exact,
from all 2^n coalitions (the ones exact Shapley needs: no extra cost); above it they are estimated from
sampled coalitions (the stratified design of :mod:`.sampling`, stopped by the same rules and budgets as
``--estimator mc``), each index's strata ``(size, i in S, j in S)`` estimated by the mean of the sampled
coalitions in them; their interval is the item bootstrap with the sampling error (the grouped jackknife of
:mod:`.sampling`, t at its Satterthwaite degrees of freedom) added in quadrature. Sampled interactions are
regression-adjusted like ``--sampler proxy`` (:mod:`.proxy`): the cross-fitted per-item proxy's interactions are
exact in closed form, only the residual's are sampled, and the jackknife refits the proxy on every replicate.
Measured (exact coalition tables of benchmarks/estimators.py, sampled estimator forced at n = 8 and 10, 10
seeds, 3n-25n): mean absolute error of the Shapley interactions 0.73-0.85x the plain estimate's on majority vote
(n = 10) and debate, 0.83-0.94x on SLM-MUX, coverage no lower (``SampledSettings(proxy=False)`` gives the plain
one). As for Shapley values, the final estimate is the prediction estimate (the evaluated coalitions exactly,
the proxy elsewhere: :func:`pair_map`) plus a James-Stein share of the difference estimate's correction, one
share per index (:func:`.proxy.shrunk_to_prediction`; ``details["shrink"]``). Against the difference estimate
alone (commit 5059190, same tables and seeds, 10 seeds at 3n, 5n, 10n, 25n on majority vote over
sim:random-10, debate over sim:random-10 and SLM-MUX with random tie-breaks over sim:random-9): mean absolute
error of the Shapley pairs 0.64-0.99x (0.91-0.99 at 3n), of the Banzhaf pairs 0.46-0.94x; the population interval
covered 0.94-1.00 of the pairs (0.94-1.00 before).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..settings_check import check_settings, setting
from .exact import EXACT_LIMIT, ValuationResult, exact_shapley, result_of
from .game import Game
from .proxy import CrossFitted, ReplicateCounts, cross_fitted, shrunk_to_prediction
from .sampling import (
    ROUNDOFF,
    Budget,
    Design,
    MaxRounds,
    Progress,
    StopRule,
    StratifiedSampler,
    Tolerance,
    Unit,
    ValueTable,
    _bits,
    _bootstrap_groups,
    _Coalitions,
    _combination,
    _resample_units,
    default_budget,
    grouped_jackknife,
    interval_over_items,
    item_mean_table,
    t_spread,
)
from .stats import bootstrap_mean

INDICES = ("shapley", "banzhaf")
#: whether sampled interactions are regression-adjusted by default (see the module doc for the measurement)
PROXY_INTERACTIONS = True


@dataclass
class PairMatrix:
    """One interaction index for every pair: players x players matrices (symmetric, diagonal NaN)."""

    index: str  # "shapley" or "banzhaf"
    players: tuple[str, ...]
    per_item: np.ndarray  # pairs x items, pairs in itertools.combinations order
    value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    stderr: np.ndarray

    def __getitem__(self, pair: tuple[str, str]) -> float:
        i, j = (self.players.index(p) for p in pair)
        return float(self.value[i, j])

    def pairs(self) -> list[dict[str, Any]]:
        """Every pair with its value, CI and stderr, most complementary first."""
        n = len(self.players)
        rows = [{"a": self.players[i], "b": self.players[j], "value": float(self.value[i, j]),
                 "ci": [float(self.ci_low[i, j]), float(self.ci_high[i, j])], "stderr": float(self.stderr[i, j])}
                for i in range(n) for j in range(i + 1, n)]
        return sorted(rows, key=lambda r: -r["value"])


@dataclass
class Interactions:
    """Both indices for every pair, how they were obtained, and the Shapley values from the same coalitions."""

    shapley: PairMatrix
    banzhaf: PairMatrix
    values: ValuationResult  # Shapley values of the players (exact, or stratified from the same design)
    exact: bool
    details: dict[str, Any] = field(default_factory=dict)  # cost, stop reason (sampled)

    def __getitem__(self, pair: tuple[str, str]) -> float:
        """The pair's Shapley interaction (a float, as ``ValuationResult[player]`` is the player's value)."""
        return self.shapley[pair]


def _pair_list(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def size_weights(index: str, n: int) -> np.ndarray:
    """Weight of each |S| = s (0..n-2) summed over the C(n-2, s) coalitions of that size."""
    if index == "shapley":
        return np.full(n - 1, 1.0 / (n - 1))
    return np.array([math.comb(n - 2, s) / 2 ** (n - 2) for s in range(n - 1)])


def _to_matrix(values: np.ndarray, n: int) -> np.ndarray:
    out = np.full((n, n), np.nan)
    for k, (i, j) in enumerate(_pair_list(n)):
        out[i, j] = out[j, i] = values[k]
    return out


def pair_matrix(index: str, players: tuple[str, ...], per_item: np.ndarray, bounds: tuple[np.ndarray, ...]
                ) -> PairMatrix:
    """A :class:`PairMatrix` from per-item pair values and (low, high, stderr) over pairs."""
    n = len(players)
    low, high, se = bounds
    return PairMatrix(index, players, per_item, _to_matrix(per_item.mean(axis=1), n), _to_matrix(low, n),
                      _to_matrix(high, n), _to_matrix(se, n))


# -- exact ---------------------------------------------------------------------------------------------------


def exact_pair_values(table: np.ndarray, n: int, index: str) -> np.ndarray:
    """Per-item interaction of every pair from ``table`` (2^n x items, row = bitmask, row 0 = v(empty))."""
    masks = np.arange(1 << n)
    sizes = np.array([bin(int(m)).count("1") for m in masks])
    weight_of_size = size_weights(index, n) / np.array([math.comb(n - 2, s) for s in range(n - 1)])
    out = np.zeros((n * (n - 1) // 2, table.shape[1]))
    for k, (i, j) in enumerate(_pair_list(n)):
        bi, bj = 1 << i, 1 << j
        s = masks[(masks & (bi | bj)) == 0]
        delta = table[s | bi | bj] - table[s | bi] - table[s | bj] + table[s]
        out[k] = (weight_of_size[sizes[s]][:, None] * delta).sum(axis=0)
    return out


def pair_map(bits: np.ndarray, index: str) -> np.ndarray:
    """Each coalition's coefficient in each pair's interaction (pairs x coalitions; ``bits``: coalitions x n
    membership): T enters the synergy ``v(S + ij) - v(S + i) - v(S + j) + v(S)`` of the S it extends with + when
    it holds both of i, j, - when one, + when neither, at the per-coalition weight of |S| = |T| minus those held."""
    n = bits.shape[1]
    per_coalition = size_weights(index, n) / np.array([math.comb(n - 2, s) for s in range(n - 1)])
    first, second = np.array(_pair_list(n)).T
    held = (bits[:, first] + bits[:, second]).astype(int)  # coalitions x pairs
    rest = bits.sum(axis=1).astype(int)[:, None] - held
    return (np.array([1.0, -1.0, 1.0])[held] * per_coalition[np.clip(rest, 0, n - 2)]).T


def _table(game: Game) -> np.ndarray:
    n = len(game.players)
    coalitions = [frozenset(p for k, p in enumerate(game.players) if m >> k & 1) for m in range(1 << n)]
    game.evaluate(coalitions)
    return np.stack([game.per_item(c) for c in coalitions])


def exact_interactions(game: Game, n_boot: int = 2000, seed: int = 0) -> Interactions:
    """Both indices for every pair from all 2^n coalitions (n <= EXACT_LIMIT), with bootstrap CIs."""
    n = len(game.players)
    table = _table(game)
    matrices = {}
    for index in INDICES:
        per_item = exact_pair_values(table, n, index)
        _, se, lo, hi = bootstrap_mean(per_item, n_boot=n_boot, seed=seed)
        matrices[index] = pair_matrix(index, game.players, per_item, (lo, hi, se))
    values = exact_shapley(game, n_boot=n_boot, seed=seed)
    return Interactions(matrices["shapley"], matrices["banzhaf"], values, True,
                        {"coalitions": game.coalitions_evaluated, "generations": game.generations})


# -- sampled ---------------------------------------------------------------------------------------------------


def stratified_pair_values(design: Design, value: Callable[[int], np.ndarray], index: str,
                           units: list | None = None) -> np.ndarray:
    """Per-item pair interactions from a stratified design: each (size, i in T, j in T) stratum's mean
    v(T) over the design's coalitions in it (enumerated sizes: all of them)."""
    return stratified_pairs(design, value, (index,), units)[0]


def stratified_pairs(design: Design, value: Callable[[int], np.ndarray], indices: tuple[str, ...],
                     units: list | None = None) -> list[np.ndarray]:
    """:func:`stratified_pair_values` of several indices (pairs x items each) from one pass over the strata."""
    n = design.n
    full = value((1 << n) - 1)
    by_size: dict[int, list[int]] = {0: [0], n: [(1 << n) - 1]}
    for s in design.complete:
        by_size[s] = [_combination(r, n, s) for r in range(math.comb(n, s))]
    for u in design.units if units is None else units:
        for m in u.masks:
            s = m.bit_count()
            if s not in design.complete:
                by_size.setdefault(s, []).append(m)
    # synergy(s) = mean v(T + ij) - mean v(T + i) - mean v(T + j) + mean v(T) over the size-s strata without i, j,
    # and an index sums w(s) synergy(s) over s: so a size t's stratum means enter with w(t - 2) (T holds i and j),
    # -w(t - 1) (one of them) and w(t) (neither), and each size is done with once seen
    first, second = np.triu_indices(n, 1)
    weights = [np.concatenate([size_weights(index, n), [0.0, 0.0]]) for index in indices]  # w(n - 1), w(n) = 0
    out = [np.zeros((len(first), full.shape[0])) for _ in indices]
    for t, ms in by_size.items():
        if not ms:
            continue
        vals = np.stack([value(m) for m in ms])  # coalitions x items
        x = _bits(ms, n)
        xij = x[:, first] * x[:, second]  # coalitions x pairs
        # sums of v(T) over T with i and j, then by inclusion-exclusion with i only, j only, neither
        both, both_count = xij.T @ vals, xij.sum(axis=0)
        with_, with_count = x.T @ vals, x.sum(axis=0)
        overall = vals.mean(axis=0)

        def mean(total: np.ndarray, count: np.ndarray) -> np.ndarray:
            return np.where(count[:, None] > 0.5, total / np.maximum(count, 1)[:, None], overall)
        i_only = mean(with_[first] - both, with_count[first] - both_count)
        j_only = mean(with_[second] - both, with_count[second] - both_count)
        parts = ((t - 2, mean(both, both_count)), (t - 1, -(i_only + j_only)),
                 (t, mean(vals.sum(axis=0) - with_[first] - with_[second] + both,
                          len(ms) - with_count[first] - with_count[second] + both_count)))
        for matrix, w in zip(out, weights):
            for s, stratum in parts:
                if s >= 0 and w[s]:
                    matrix += w[s] * stratum
    return out


@dataclass(frozen=True)
class SampledSettings:
    """The stop rules of ``--estimator mc``: tolerance (largest sampling stderr of a pair's Shapley
    interaction), a budget in distinct coalitions and/or generations, and a round limit."""

    tolerance: float = setting(0.005, ge=0, doc="stop once every pair's sampling stderr is below this (0: never)")
    budget: int | None = setting(None, ge=1, doc="distinct coalitions at most")
    budget_generations: int | None = setting(None, ge=1, doc="generations at most")
    max_rounds: int = setting(500, ge=1, doc="sampling rounds at most")
    proxy: bool = PROXY_INTERACTIONS  # regression adjustment (.proxy) of the sampled interactions

    def __post_init__(self) -> None:
        check_settings(self, "sampled interactions")

    def stop(self) -> StopRule:
        rule: StopRule = MaxRounds(self.max_rounds)
        if self.tolerance and self.tolerance > 0:
            rule = rule | Tolerance(self.tolerance)
        if self.budget is not None or self.budget_generations is not None:
            rule = rule | Budget(coalitions=self.budget, generations=self.budget_generations)
        return rule


def sampled_interactions(game: Game, settings: SampledSettings = SampledSettings(), n_boot: int = 400,
                         seed: int = 0) -> Interactions:
    """Both indices for every pair from sampled coalitions (any n), stopped like ``--estimator mc``."""
    players, n = game.players, len(game.players)
    rng = np.random.default_rng(seed)
    impl = StratifiedSampler(n, rng)
    coalitions = _Coalitions(game)
    game.evaluate([coalitions.names((1 << n) - 1)])
    design = Design(n)
    rounds, reason = _sample_pair_rounds(impl, design, coalitions, settings, rng)
    if len(design.masks()) >= 2 ** n - 1 and n <= EXACT_LIMIT:
        result = exact_interactions(game, n_boot=n_boot, seed=seed)
        result.details.update(stop_reason="exact: every coalition was sampled")
        return result
    used, gens = coalitions.spent()
    value, groups = coalitions.value, _bootstrap_groups(design)
    per_item, variance, df, shrink = _pair_estimates(design, value, groups, settings.proxy, seed)
    pairs = n * (n - 1) // 2
    spread = t_spread(variance, df)
    matrices = {}
    for k, index in enumerate(INDICES):
        part = slice(k * pairs, (k + 1) * pairs)
        bounds = interval_over_items(per_item[part], spread[part], np.sqrt(variance[part]), n_boot, seed)
        matrices[index] = pair_matrix(index, players, per_item[part], bounds)
    # the players' Shapley values from the same coalitions (the leaderboard's mc column when no mc was asked
    # for), with the same interval and the stop details mc reports
    shapley, s_variance, s_df = impl.settle(design, value, groups, np.random.default_rng(seed + 2))
    s_spread = t_spread(s_variance, s_df)
    vlo, vhi, vse = interval_over_items(shapley, s_spread, np.sqrt(s_variance), n_boot, seed)
    values = ValuationResult("shapley", players, shapley.mean(axis=1), vse, vlo, vhi, shapley,
                             game.coalitions_evaluated,
                             {"sampled": True, "stop_reason": reason, "coalitions_used": used,
                              "budget": settings.budget, "sampling_stderr": np.sqrt(s_variance).tolist(),
                              "sampling_halfwidth": (s_spread + ROUNDOFF).tolist()})
    return Interactions(matrices["shapley"], matrices["banzhaf"], values, False,
                        {"coalitions": used, "generations": gens, "rounds": rounds, "stop_reason": reason,
                         "sampling_stderr": float(np.sqrt(variance[:pairs].max())),
                         # kappa per index: the share of the difference estimate's correction kept (proxy only)
                         "shrink": None if shrink is None else dict(zip(INDICES, shrink.tolist()))})


def _sample_pair_rounds(impl: StratifiedSampler, design: Design, coalitions: _Coalitions, settings: SampledSettings,
                        rng: np.random.Generator) -> tuple[int, str]:
    """Sample rounds of coalitions into ``design`` until a stop rule, the budget or the sampler says so, or every
    coalition was sampled; the rounds run and why they stopped."""
    n, stop, step, se = design.n, settings.stop(), 2 * design.n, math.inf
    rounds = 0
    while True:
        used, _ = coalitions.spent()
        room = max(4 * step, 2 * used) if settings.budget is None else settings.budget - used
        proposal = impl.propose(design, room, step)
        if not proposal:
            return rounds, "budget" if settings.budget is not None else "no new coalitions"
        masks: set[int] = set()
        for p in proposal:
            masks |= {_combination(r, n, p) for r in range(math.comb(n, p))} if isinstance(p, int) else set(p.masks)
        coalitions.game.evaluate([coalitions.names(m) for m in masks])
        impl.observe(masks, coalitions.value)
        for p in proposal:
            if isinstance(p, int):
                design.complete.add(p)
            else:
                design.units.append(p)
        rounds += 1
        if len(design.masks()) >= 2 ** n - 1 and n <= EXACT_LIMIT:
            return rounds, "every coalition was sampled"
        if settings.tolerance and settings.tolerance > 0:  # a small bootstrap per round: only a tolerance needs it
            se = _sampling_stderr(design, coalitions.value, rng)
        used, gens = coalitions.spent()
        progress = Progress(used, gens, rounds, se)
        if stop.done(progress):
            return rounds, next(r for r, rule in _named_rules(settings) if rule.done(progress))


def _pair_estimates(design: Design, value: Callable[[int], np.ndarray], groups: list, proxy: bool,
                    seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Both indices' per-item pair values stacked (the Shapley pairs, then the Banzhaf ones), their sampling
    variance and degrees of freedom (grouped jackknife), and the proxy's shrink per index (None without it)."""
    jackknife_rng, fitted = np.random.default_rng(seed + 1), None
    if proxy:
        fitted = cross_fitted(design.n, design, value)
    if fitted is None:
        mean = item_mean_table(design, value)

        def estimate(units: list[Unit] | None) -> np.ndarray:  # both indices' pairs stacked (a replicate: means)
            return np.vstack(stratified_pairs(design, value if units is None else mean, INDICES, units))

        per_item = estimate(None)
        variance, df = grouped_jackknife(estimate, groups, len(per_item), jackknife_rng, per_item.mean(axis=1))
        return per_item, variance, df, None
    pairs, parts = design.n * (design.n - 1) // 2, _pair_parts(design, fitted)

    def replicate_means(replicates: list) -> np.ndarray:  # as shrunk_to_prediction stacks them: P, then D - P
        means = [parts(units, True) for units in replicates]
        return np.stack([np.concatenate([p[:, 0], d[:, 0] - p[:, 0]]) for d, p in means])
    return shrunk_to_prediction(parts, groups, jackknife_rng,
                                [slice(k * pairs, (k + 1) * pairs) for k in range(len(INDICES))], replicate_means)


def _pair_parts(design: Design, fitted: CrossFitted) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """Both indices' per-item pair values (the Shapley pairs, then the Banzhaf ones), twice, from the design's
    sampled units (None) or a replicate of them: the difference estimate (the proxy's interactions exactly plus the
    residual's, sampled) and the prediction estimate (the proxy's plus the known coalitions' residuals exactly), for
    :func:`.proxy.shrunk_to_prediction`. The vote-like proxy is refitted on a replicate's coalitions (so the
    interval sees the proxy's own sampling error). ``means``: their item means (one column), all a jackknife
    replicate needs (both parts are linear in the residuals)."""
    n = design.n
    per_coalition = np.array([math.comb(n - 2, s) for s in range(n - 1)], dtype=float)
    counts, fit = ReplicateCounts(fitted.fit, design), fitted.fit
    maps = np.vstack([pair_map(fit.bits, index) for index in INDICES])

    def parts(units: list[Unit] | None, means: bool = False) -> tuple[np.ndarray, np.ndarray]:
        multiplicity = None if units is None else counts(units)
        proxy = fitted if multiplicity is None else fitted.refit(multiplicity)
        residuals = fit.values - proxy.on_fit()
        exact = np.vstack([proxy.pair_values(size_weights(index, n) / per_coalition) for index in INDICES])
        if means:
            residuals, exact = residuals.mean(axis=1, keepdims=True), exact.mean(axis=1, keepdims=True)
        residual = ValueTable(counts.index, fit.bits, residuals)
        known = 1.0 if multiplicity is None else (multiplicity > 0)[:, None]
        return (exact + np.vstack(stratified_pairs(design, residual, INDICES, units)),
                exact + maps @ (known * residual.values))
    return parts


def _named_rules(settings: SampledSettings) -> list[tuple[str, StopRule]]:
    rules: list[tuple[str, StopRule]] = [("max_rounds", MaxRounds(settings.max_rounds))]
    if settings.tolerance and settings.tolerance > 0:
        rules.append(("tolerance", Tolerance(settings.tolerance)))
    rules.append(("budget", Budget(coalitions=settings.budget, generations=settings.budget_generations)))
    return rules


def _sampling_stderr(design: Design, value: Callable[[int], np.ndarray], rng: np.random.Generator,
                     reps: int = 40) -> float:
    """Largest bootstrap stderr (over sampled units only) of a pair's item-mean Shapley interaction."""
    if len(design.units) < 2:
        return math.inf
    mean = item_mean_table(design, value)
    draws = np.stack([stratified_pair_values(design, mean, "shapley", _resample_units(design, rng))[:, 0]
                      for _ in range(reps)])
    return float(draws.std(axis=0, ddof=1).max())


# -- the estimator ------------------------------------------------------------------------------------------------


def interactions(game: Game, settings: SampledSettings | None = None, n_boot: int = 2000, seed: int = 0,
                 exact_limit: int = EXACT_LIMIT) -> Interactions:
    """Exact when n <= ``exact_limit`` and no budget is given that is smaller than 2^n - 1; else sampled."""
    n = len(game.players)
    if n < 2:
        from ..errors import ConfigError

        raise ConfigError(f"pairwise interactions need at least 2 players, got {n}")
    small = settings is None or settings.budget is None or settings.budget >= 2 ** n - 1
    if n <= exact_limit and small and (settings is None or settings.budget_generations is None):
        return exact_interactions(game, n_boot=n_boot, seed=seed)
    return sampled_interactions(game, settings or SampledSettings(), n_boot=n_boot, seed=seed)


def interaction_estimator(game: Game, n_boot: int = 2000, seed: int = 0, tolerance: float = SampledSettings.tolerance,
                          budget: int | None = None, budget_generations: int | None = None,
                          sampler: str = "auto", exact_limit: int = EXACT_LIMIT) -> ValuationResult:
    """Pairwise Shapley and Banzhaf interactions (column: each model's mean Shapley interaction); exact up to
    ``exact_limit`` players."""
    del sampler  # the interactions' sampled design is the stratified one, whatever --sampler says
    if len(game.players) > exact_limit:  # sampled: the default budget above the default limit, as mc
        budget, _ = default_budget(len(game.players), budget, budget_generations)
    settings = SampledSettings(tolerance, budget, budget_generations)
    found = interactions(game, settings, n_boot=n_boot, seed=seed, exact_limit=exact_limit)
    n = len(game.players)
    per_pair = found.shapley.per_item
    per_item = np.zeros((n, game.n_items))
    for k, (i, j) in enumerate(_pair_list(n)):
        per_item[i] += per_pair[k] / (n - 1)
        per_item[j] += per_pair[k] / (n - 1)
    return result_of("interactions", game, per_item, n_boot, seed, interactions=found)


__all__ = ["INDICES", "Interactions", "PairMatrix", "SampledSettings", "exact_interactions", "exact_pair_values",
           "interaction_estimator", "interactions", "pair_map", "sampled_interactions", "size_weights",
           "stratified_pair_values"]
