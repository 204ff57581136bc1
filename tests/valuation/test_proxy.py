"""The regression-adjusted (proxy) sampler: exact on games its proxies represent (vote-like and selection),
unbiased on a random game, intervals that cover, and clear refusals."""

import math
import zlib

import numpy as np
import pytest
from test_sampling import synthetic

from coalition_gym.errors import ConfigError
from coalition_gym.valuation import FunctionGame, exact_shapley
from coalition_gym.valuation import sampling
from coalition_gym.valuation.proxy import (MAX_PLAYERS, ProxySampler, SelectionProxy, TypeFit, TypeProxy,
                                          pair_priorities)
from coalition_gym.valuation.sampling import Budget, sampled_shapley


def typed_game(n: int, items: int = 40, seed: int = 0) -> FunctionGame:
    """v_t(S) = g(a, b) + sum beta_i with g in the span of the proxy's smooth features: a = members of S that
    are right alone on item t, b = the others (a vote-like game the proxy represents exactly)."""
    rng = np.random.default_rng(seed)
    high = rng.random((items, n)) < 0.6
    beta = rng.uniform(-0.05, 0.05, size=n)
    players = [f"p{k}" for k in range(n)]

    def value(coalition):
        idx = [players.index(p) for p in coalition]
        if not idx:
            return np.zeros(items)
        a = high[:, idx].sum(axis=1)
        b = len(idx) - a
        g = 0.5 * a / len(idx) + 0.3 * (a > b) + 0.1 * (a == b) + 0.05 * len(idx) / n
        return g + beta[idx].sum()

    return FunctionGame(players, value, n_items=items)


def selection_game(n: int, items: int = 40, seed: int = 0) -> FunctionGame:
    """v_t(S) = the solo score of the member of S first in item t's own priority order (an SLM-MUX- or
    cascade-like game: the system answers with one member's answer)."""
    rng = np.random.default_rng(seed)
    solo = (rng.random((items, n)) < 0.55).astype(float)
    return ranked_selection(solo, rng.random((items, n)), [f"p{k}" for k in range(n)])


def ranked_selection(solo: np.ndarray, rank: np.ndarray, players: list[str]) -> FunctionGame:
    """v_t(S) = ``solo[t, i]`` of the member i of S with the lowest ``rank[t, i]`` (items x n both)."""
    items = solo.shape[0]

    def value(coalition):
        idx = [players.index(p) for p in coalition]
        if not idx:
            return np.zeros(items)
        first = np.argmin(rank[:, idx], axis=1)
        return solo[:, idx][np.arange(items), first]

    return FunctionGame(players, value, n_items=items)


def tied_selection_game(n: int, items: int = 40, seed: int = 0) -> FunctionGame:
    """A selection game with random tie-breaks: S's answer comes from a member of its top confidence tier
    (two tiers per item), drawn per coalition, as SLM-MUX with ``tie_break="random"``."""
    rng = np.random.default_rng(seed)
    solo = (rng.random((items, n)) < 0.55).astype(float)
    tier = rng.integers(2, size=(items, n))
    players = [f"p{k}" for k in range(n)]

    def value(coalition):
        idx = sorted(players.index(p) for p in coalition)
        out = np.zeros(items)
        for t in range(items if idx else 0):
            leaders = [i for i in idx if tier[t, i] == max(tier[t, idx])]
            draw = np.random.default_rng(zlib.crc32(repr((seed, t, tuple(idx))).encode()))
            out[t] = solo[t, leaders[int(draw.integers(len(leaders)))]]
        return out

    return FunctionGame(players, value, n_items=items)


def noisy_typed_game(n: int, items: int = 40, scale: float = 0.15) -> FunctionGame:
    """The typed game plus noise drawn per coalition and item (fixed by the coalition, as a random tie-break's draw
    is): the proxy tracks it up to per-coalition idiosyncrasies no model can predict."""
    base = typed_game(n, items)

    def value(coalition):
        if not coalition:
            return np.zeros(items)
        draw = np.random.default_rng(zlib.crc32(",".join(sorted(coalition)).encode()))
        return base._fn(coalition) + draw.normal(scale=scale, size=items)

    return FunctionGame(list(base.players), value, n_items=items)


def steep_typed_game(n: int, items: int = 40) -> FunctionGame:
    """The typed game plus a bonus for one player that grows with the coalition's size, which the proxy's constant
    player effects cannot follow: it misses systematically."""
    base = typed_game(n, items)
    return FunctionGame(list(base.players),
                        lambda c: base._fn(c) + (0.4 * (len(c) / n) ** 3 if "p0" in c else 0.0), n_items=items)


def random_proxy(seed: int, n: int = 6, items: int = 5, kind: str = "type") -> tuple[object, np.ndarray]:
    """A proxy with random parameters (a type table and player effects, or per-item priorities) and random
    per-item solo values of the players (0/1 with one item of fractional values)."""
    rng = np.random.default_rng(seed)
    solo = (rng.random((items, n)) < 0.5).astype(float)
    solo[0] = rng.random(n)
    if kind == "selection":
        return SelectionProxy(n, rng.random((items, n))), solo
    table = rng.random((n + 1, n + 1))
    table[0, 0] = 0.0
    return TypeProxy(n, table, rng.normal(size=n)), solo


@pytest.mark.parametrize("kind", ["type", "selection"])
def test_the_proxys_shapley_value_is_exact(kind):
    n, items = 6, 5
    proxy, high = random_proxy(1, n, items, kind)
    players = [str(k) for k in range(n)]

    def value(coalition):
        bits = np.array([p in coalition for p in players], dtype=float)
        return proxy.values(bits, high) if bits.any() else np.zeros(items)

    truth = exact_shapley(FunctionGame(players, value, n_items=items), n_boot=10).per_item
    np.testing.assert_allclose(proxy.shapley(high), truth, atol=1e-12)


def test_a_game_the_proxy_represents_is_estimated_exactly():
    game = typed_game(8)
    truth = exact_shapley(typed_game(8), n_boot=10).per_item
    result = sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=24), seed=3, n_boot=50)
    assert not result.exact and result.coalitions == 24
    np.testing.assert_allclose(result.per_item, truth, atol=1e-6)


def test_unbiased_on_a_random_game():
    n = 8
    truth = exact_shapley(synthetic(n), n_boot=10).values
    estimates = np.stack([sampled_shapley(synthetic(n), sampler="proxy", stop=Budget(coalitions=5 * n), seed=s,
                                          n_boot=50).per_item.mean(axis=1) for s in range(30)])
    mean, se = estimates.mean(axis=0), estimates.std(axis=0, ddof=1) / math.sqrt(len(estimates))
    assert np.all(np.abs(mean - truth) <= 4 * se + 2e-3), (mean - truth, se)


@pytest.mark.parametrize("n,multiple", [(8, 5), (10, 2)])
def test_intervals_cover_on_a_small_synthetic_game(n, multiple):
    truth = exact_shapley(synthetic(n), n_boot=10).values
    covered = [np.mean((r.ci_low <= truth) & (truth <= r.ci_high))
               for r in (sampled_shapley(synthetic(n), sampler="proxy", stop=Budget(coalitions=multiple * n),
                                         seed=s, n_boot=200) for s in range(12))]
    assert np.mean(covered) >= 0.9


def test_a_budget_with_no_measurable_sampling_error_gives_no_interval_and_says_why():
    result = sampled_shapley(typed_game(8), sampler="proxy", stop=Budget(coalitions=9), seed=0, n_boot=50)
    assert np.isnan(result.ci_low).all() and np.isnan(result.stderr).all()
    assert "no interval" in result.interval_note and "2n = 16" in result.interval_note
    assert not sampled_shapley(typed_game(8), sampler="proxy", stop=Budget(coalitions=16), seed=0,
                               n_boot=50).interval_note


def test_bad_inputs_are_refused_clearly():
    with pytest.raises(ConfigError, match="needs at least 9"):
        sampled_shapley(typed_game(8), sampler="proxy", stop=Budget(coalitions=5))
    big = FunctionGame([f"p{k}" for k in range(MAX_PLAYERS + 1)], lambda c: np.zeros(3), n_items=3)
    with pytest.raises(ConfigError, match=f"up to {MAX_PLAYERS} players"):
        sampled_shapley(big, sampler="proxy", stop=Budget(coalitions=200))


@pytest.mark.parametrize("kind", ["type", "selection"])
@pytest.mark.parametrize("index", ["shapley", "banzhaf"])
def test_the_proxys_pair_interactions_are_exact(index, kind):
    from coalition_gym.valuation.interactions import exact_pair_values, size_weights

    n, items = 6, 5
    proxy, high = random_proxy(2, n, items, kind)
    values = np.stack([proxy.values(((m >> np.arange(n)) & 1).astype(float), high) if m else np.zeros(items)
                       for m in range(1 << n)])
    weight = size_weights(index, n) / np.array([math.comb(n - 2, s) for s in range(n - 1)])
    np.testing.assert_allclose(proxy.pair_values(high, weight), exact_pair_values(values, n, index), atol=1e-12)


def test_sampled_interactions_are_exact_on_a_game_the_proxy_represents():
    from coalition_gym.valuation.interactions import SampledSettings, exact_interactions, sampled_interactions

    truth = exact_interactions(typed_game(8), n_boot=10)
    adjusted = sampled_interactions(typed_game(8), SampledSettings(tolerance=0.0, budget=40), n_boot=50, seed=1)
    plain = sampled_interactions(typed_game(8), SampledSettings(tolerance=0.0, budget=40, proxy=False), n_boot=50,
                                 seed=1)
    assert not adjusted.exact
    np.testing.assert_allclose(adjusted.shapley.per_item, truth.shapley.per_item, atol=1e-6)
    np.testing.assert_allclose(adjusted.banzhaf.per_item, truth.banzhaf.per_item, atol=1e-6)
    assert np.abs(plain.shapley.per_item - truth.shapley.per_item).max() > 1e-3


def test_the_pairs_give_back_every_selection_of_a_fixed_priority():
    """Read off the pairs alone, the priority reproduces the selection game on every coalition."""
    n, items = 7, 30
    game = selection_game(n, items, seed=4)

    def value(mask):
        return game.per_item(p for k, p in enumerate(game.players) if mask >> k & 1)

    solo = np.stack([value(1 << k) for k in range(n)], axis=1)
    proxy = SelectionProxy(n, pair_priorities(n, value, solo))
    for mask in range(1, 1 << n):
        np.testing.assert_array_equal(proxy.values(((mask >> np.arange(n)) & 1).astype(float), solo), value(mask))


def test_the_pairs_give_back_every_selection_of_a_fixed_priority_with_graded_scores():
    """Partial credit (solo values 0, 0.5 and 1: two of the high type can differ): the order within a type, read off
    the pairs whose values differ, breaks the type's ties, and every coalition is reproduced."""
    n, items = 8, 40
    rng = np.random.default_rng(7)
    solo = rng.choice([0.0, 0.5, 1.0], size=(items, n), p=[0.4, 0.25, 0.35])
    rank = np.argsort(rng.random((items, n)), axis=1).astype(float)
    game = ranked_selection(solo, rank, [f"p{k}" for k in range(n)])

    def value(mask):
        return game.per_item(p for k, p in enumerate(game.players) if mask >> k & 1)

    proxy = SelectionProxy(n, pair_priorities(n, value, solo))
    masks = np.arange(1, 1 << n)
    bits = ((masks[:, None] >> np.arange(n)) & 1).astype(float)
    np.testing.assert_array_equal(proxy.values(bits, solo), np.stack([value(int(m)) for m in masks]))


def test_a_selection_game_is_estimated_exactly_once_every_pair_is_known():
    """The proxy sampler enumerates the pairs as soon as the share of sizes 2 and n - 2 covers them (10n for
    n = 8, where the plain kernel design still samples them), and then a selection game is exact."""
    n = 8
    truth = exact_shapley(selection_game(n), n_boot=10).per_item
    known = sampled_shapley(selection_game(n), sampler="proxy", stop=Budget(coalitions=10 * n), seed=2, n_boot=50)
    assert not known.exact and known.coalitions == 10 * n
    np.testing.assert_allclose(known.per_item, truth, atol=1e-6)
    plain = sampled_shapley(selection_game(n), sampler="hybrid", stop=Budget(coalitions=10 * n), seed=2, n_boot=50)
    assert np.abs(plain.per_item - truth).mean() > 1e-3
    # below that budget the pairs are sampled, not all known: the vote-like proxy alone, and an error remains
    sampled = sampled_shapley(selection_game(n), sampler="proxy", stop=Budget(coalitions=5 * n), seed=2, n_boot=50)
    assert np.abs(sampled.per_item - truth).mean() > 1e-3


@pytest.mark.parametrize("seed", [0, 4])
def test_a_thin_design_widens_the_interval_even_when_one_size_has_two_units(seed):
    """At 2n with n = 9 two units of size n - 1 made the design calibratable while the other sizes had one unit
    each; the bootstrap saw too little, and these runs covered 0.67 and 0.56 of the players before."""
    truth = exact_shapley(tied_selection_game(9, seed=1), n_boot=10).values
    result = sampled_shapley(tied_selection_game(9, seed=1), sampler="proxy", stop=Budget(coalitions=18), seed=seed,
                             n_boot=200)
    assert np.mean((result.ci_low <= truth) & (truth <= result.ci_high)) >= 0.9


def _random_fit_data(rng: np.random.Generator, n: int, items: int, draws: int) -> tuple:
    """(masks, values, solo, folds) of a vote-like fit on random coalitions (the singletons among them)."""
    masks = sorted({int(m) for m in rng.integers(1, 2 ** n - 1, size=draws)} | {1 << k for k in range(n)})
    values = rng.random((len(masks), items))
    solo = (rng.random((items, n)) < 0.5).astype(float)
    return masks, values, solo, np.arange(items) % 5


def test_a_refit_with_multiplicities_is_the_fit_on_the_repeated_coalitions():
    """A bootstrap replicate refits the vote-like proxy from sufficient statistics weighted by how often it drew
    each coalition: the same tables and effects as a fit on the coalitions listed that many times."""
    n, items = 7, 23
    rng = np.random.default_rng(5)
    masks, values, solo, folds = _random_fit_data(rng, n, items, 40)
    counts = rng.integers(0, 3, size=len(masks))
    weighted = TypeFit(n, masks, values, solo, folds).proxies(counts.astype(float))
    rows = np.repeat(np.arange(len(masks)), counts)
    repeated = TypeFit(n, [masks[r] for r in rows], values[rows], solo, folds).proxies()
    for a, b in zip(weighted, repeated):
        np.testing.assert_allclose(a.table, b.table, atol=1e-7)
        np.testing.assert_allclose(a.beta, b.beta, atol=1e-7)


def test_the_sampling_interval_covers_the_value_on_these_items():
    """``sampling_halfwidth`` is the interval for the value on the game's own items (what exact Shapley on them
    gives). Its jackknife refits the proxy on every replicate: holding the fitted proxy fixed, as before, these
    runs covered 0.57 of the players (the proxy's fit to the sampled coalitions went unseen)."""
    n = 10
    truth = exact_shapley(synthetic(n), n_boot=10).values
    covered = []
    for seed in range(12):
        result = sampled_shapley(synthetic(n), sampler="proxy", stop=Budget(coalitions=5 * n), seed=seed, n_boot=200)
        covered.append(np.mean(np.abs(result.per_item.mean(axis=1) - truth) <= result.sampling_halfwidth))
    assert np.mean(covered) >= 0.9


@pytest.mark.parametrize("seed", [0, 4])
def test_the_hybrid_widens_a_thin_design_too(seed):
    """The thin-design widening lives in the hybrid (the proxy sampler inherits it): without it the hybrid's
    interval at 2n on this game covered 0.56-0.67 of the players, and its interval on the items none."""
    truth = exact_shapley(tied_selection_game(9, seed=1), n_boot=10).values
    result = sampled_shapley(tied_selection_game(9, seed=1), sampler="hybrid", stop=Budget(coalitions=18), seed=seed,
                             n_boot=200)
    assert result.model_error is not None
    assert np.mean((result.ci_low <= truth) & (truth <= result.ci_high)) >= 0.9
    assert np.mean(np.abs(result.per_item.mean(axis=1) - truth) <= result.sampling_halfwidth) >= 0.9


def test_coalitions_the_proxy_misses_but_no_sample_shows_still_widen_the_interval():
    """A selection game but for four coalitions of size 5, where one item's answer flips: most runs at 25n
    sample none of them, the proxy fits every sampled coalition exactly and the jackknife sees no error at all.
    The rule-of-three bound (``unseen_residual``) keeps the interval on the items honest there."""
    n, items = 10, 40
    base = selection_game(n, items=items)
    players = list(base.players)
    rng = np.random.default_rng(7)
    missed = {frozenset(rng.choice(players, size=5, replace=False).tolist()) for _ in range(4)}

    def value(coalition):
        v = base._fn(coalition).copy()
        if frozenset(coalition) in missed:
            v[0] = 1.0 - v[0]
        return v

    truth = exact_shapley(FunctionGame(players, value, n_items=items), n_boot=10).values
    blind, covered = 0, []
    for seed in range(10):
        result = sampled_shapley(FunctionGame(players, value, n_items=items), sampler="proxy",
                                 stop=Budget(coalitions=25 * n), seed=seed, n_boot=50)
        error = np.abs(result.per_item.mean(axis=1) - truth)
        if result.sampling_stderr.max() < 1e-12:  # no sampled coalition showed a residual
            blind += 1
            assert error.max() > 1e-6  # yet the estimate is off: the missed coalitions weigh in
        covered.append(np.mean(error <= result.sampling_halfwidth))
    assert blind >= 3 and np.mean(covered) >= 0.9


class _RecordingProxy(ProxySampler):
    """The proxy sampler, recording its shrinkage kappa and its difference estimate at settle()."""

    seen: list[tuple[float, np.ndarray]] = []

    def settle(self, design, value, groups, rng):
        out = super().settle(design, value, groups, rng)
        self.seen.append((self.shrink, self.estimate(design, value).mean(axis=1)))
        return out


def _shrinkage_runs(monkeypatch, make, n, multiple, seeds=10):
    """kappa, the final estimate's and the difference estimate's mean absolute errors over seeded runs."""
    monkeypatch.setitem(sampling.SAMPLER_CLASSES, "proxy", _RecordingProxy)
    monkeypatch.setattr(_RecordingProxy, "seen", [])
    truth = exact_shapley(make(), n_boot=10).values
    final = [np.abs(sampled_shapley(make(), sampler="proxy", stop=Budget(coalitions=multiple * n), seed=s,
                                    n_boot=20).per_item.mean(axis=1) - truth).mean() for s in range(seeds)]
    kappa = np.array([k for k, _ in _RecordingProxy.seen])
    difference = [np.abs(d - truth).mean() for _, d in _RecordingProxy.seen]
    return kappa, float(np.mean(final)), float(np.mean(difference))


def test_where_the_residual_is_noise_the_prediction_estimate_drops_the_extrapolated_noise(monkeypatch):
    """settle() shrinks the difference estimate's correction to the prediction estimate by kappa: on a game the
    proxy tracks up to per-coalition noise the correction is mostly noise, kappa is small, and the final estimate
    beats the difference estimate (measured: 0.0019 against 0.0029 mean absolute error over these 10 runs)."""
    kappa, final, difference = _shrinkage_runs(monkeypatch, lambda: noisy_typed_game(8), 8, 10)
    assert kappa.mean() < 0.3, kappa
    assert final < 0.8 * difference, (final, difference)


def test_where_the_proxy_misses_systematically_the_correction_is_kept(monkeypatch):
    """The steep game's proxy misses the same way on the coalitions not sampled: the correction stands out of its
    jackknife noise and most of it is kept (measured: kappa 0.57-0.91 in 9 of these 10 runs at 5n)."""
    kappa, _, _ = _shrinkage_runs(monkeypatch, lambda: steep_typed_game(8), 8, 5)
    assert kappa.mean() > 0.5, kappa


def test_the_interval_holds_with_the_shrunk_estimate():
    """The shrunk estimate's interval adds the bias left, ``(1 - kappa)^2 ((D - P)^2 + var)``: without it these runs
    (the synthetic game at 10n, where kappa is small but the proxy's miss is not noise) covered the value on the
    items for 0.84 of the players, with it 1.00."""
    n = 8
    truth = exact_shapley(synthetic(n), n_boot=10).values
    covered = [np.mean(np.abs(r.per_item.mean(axis=1) - truth) <= r.sampling_halfwidth)
               for r in (sampled_shapley(synthetic(n), sampler="proxy", stop=Budget(coalitions=10 * n), seed=s,
                                         n_boot=20) for s in range(20))]
    assert np.mean(covered) >= 0.95, covered


def test_the_share_kept_is_reported_with_the_estimate():
    """kappa reaches the result (``SampledShapley.shrink``) and ``summary.json["mc"]["shrink"]`` (the estimate's
    extras); samplers without a prediction estimate report None."""
    from coalition_gym.valuation.estimators import sampled_shapley_values

    proxy = sampled_shapley_values(noisy_typed_game(8), tolerance=0, budget=80, n_boot=20)
    hybrid = sampled_shapley_values(noisy_typed_game(8), tolerance=0, budget=80, sampler="hybrid", n_boot=20)
    assert 0.0 <= proxy.extras["shrink"] <= 1.0 and hybrid.extras["shrink"] is None
    result = sampled_shapley(noisy_typed_game(8), sampler="proxy", stop=Budget(coalitions=80), seed=0, n_boot=20)
    assert result.shrink == proxy.extras["shrink"]


def test_a_replicates_item_means_are_those_of_the_refitted_proxies():
    """The jackknife reads a replicate's item means (ReplicateMeans: the fit's Schur complement updated on the cells
    the replicate changes): the same numbers as refitting every fold's proxy and averaging over the items."""
    n, items = 9, 31
    rng = np.random.default_rng(7)
    masks, values, solo, folds = _random_fit_data(rng, n, items, 120)
    fit = TypeFit(n, masks, values, solo, folds)
    for trial in range(4):
        counts = np.ones(len(masks))
        counts[rng.choice(len(masks), size=trial * 3, replace=False)] = rng.integers(0, 3, size=trial * 3)
        proxies = fit.proxies(counts)
        h = fit.on_fit(proxies).mean(axis=1)
        phi = np.mean([proxies[f].shapley(solo[folds == f]).sum(axis=1) for f in range(5)], axis=0) * 5 / items
        fast_h, fast_phi = fit.means(counts)
        np.testing.assert_allclose(fast_h, h, atol=1e-9)
        np.testing.assert_allclose(fast_phi, phi, atol=1e-9)


@pytest.mark.parametrize("make, multiple", [(typed_game, 5), (tied_selection_game, 10), (selection_game, 4)])
def test_the_item_mean_jackknife_gives_the_per_item_refits_result(monkeypatch, make, multiple):
    """The fast path (replicates as item means) against the per-item refit of every replicate it replaced, on
    seeded games: the same estimate and intervals to 1e-9."""
    n = 9
    results = []
    for fast in (True, False):
        monkeypatch.setattr(ProxySampler, "replicate_means", fast)
        results.append(sampled_shapley(make(n, seed=2), sampler="proxy", stop=Budget(coalitions=multiple * n), seed=4,
                                       n_boot=200))
    for name in ("per_item", "ci_low", "ci_high", "sampling_halfwidth"):
        np.testing.assert_allclose(getattr(results[0], name), getattr(results[1], name), atol=1e-9)


def _direct_kernel(sampler, design, value, units):
    """The kernel estimate as one weighted least squares over the listed coalitions (the code DesignRows replaced)."""
    n = sampler.n
    rows, weights = [], []
    for s in design.complete:
        rows += sampling._all_of_size(n, s)
        weights += [sampler.mass[s] / math.comb(n, s)] * math.comb(n, s)
    sampled = [m for u in units for m in u.masks]
    sizes = np.array([m.bit_count() for m in sampled])
    counts = np.bincount(sizes, minlength=n + 1)
    z = sampling._bits(rows + sampled, n)
    y = np.stack([value(m) for m in rows + sampled])
    w = np.concatenate([weights, sampler._mass_of_size[sizes] / np.maximum(counts[sizes], 1)])
    a_inv = np.linalg.pinv(z.T @ (w[:, None] * z))
    base = a_inv @ (z.T @ (w[:, None] * y))
    correction = (base.sum(axis=0) - value((1 << n) - 1)) / a_inv.sum()
    return base - np.outer(a_inv.sum(axis=1), correction)


def _direct_stratified(n, design, value, units):
    """The stratified estimate from per-size means over the listed coalitions (the code DesignRows replaced)."""
    masks = [m for k in design.complete for m in sampling._all_of_size(n, k)]
    masks += [m for u in units for m in u.masks if m.bit_count() not in design.complete]
    full = value((1 << n) - 1)
    inside, outside = np.zeros((n, n + 1, len(full))), np.zeros((n, n + 1, len(full)))
    for s in range(1, n):
        rows = [m for m in masks if m.bit_count() == s]
        if not rows:
            continue
        overall = np.mean([value(m) for m in rows], axis=0)
        for i in range(n):
            with_i = [value(m) for m in rows if m >> i & 1]
            without = [value(m) for m in rows if not m >> i & 1]
            inside[i, s] = np.mean(with_i, axis=0) if with_i else overall
            outside[i, s] = np.mean(without, axis=0) if without else overall
    inside[:, n] = full
    return (inside[:, 1:].sum(axis=1) - outside[:, :n].sum(axis=1)) / n


def test_the_estimates_from_the_designs_rows_are_the_direct_formulas_on_any_replicate():
    """Kernel and stratified estimates read the design's rows with a multiplicity per row (per-size grams kept): on
    the full design, a jackknife replicate, a bootstrap replicate (units drawn twice) and units not of the design,
    the same numbers as the direct formulas over the listed coalitions."""
    n = 8
    game = typed_game(n, items=6, seed=3)
    value = lambda mask: game.per_item(frozenset(game.players[k] for k in range(n) if mask >> k & 1))  # noqa: E731
    rng = np.random.default_rng(0)
    sampler = sampling.HybridSampler(n, rng)
    design = sampling.Design(n)
    while (proposal := sampler.propose(design, 60 - len(design.masks()), 2 * n)):
        design.add(proposal)
    units = design.units
    other = sampling.Unit(3, [0b111, 0b11111000])
    replicates = [units, sampling.Replicate(units[1:], units[:1]), [units[k] for k in rng.integers(len(units),
                                                                                                   size=len(units))],
                  units[:2] + [other]]
    for replicate in replicates:
        np.testing.assert_allclose(sampling.KernelSampler.estimate(sampler, design, value, replicate),
                                   _direct_kernel(sampler, design, value, replicate), atol=1e-9)
        np.testing.assert_allclose(sampler.stratified.estimate(design, value, replicate),
                                   _direct_stratified(n, design, value, replicate), atol=1e-9)
