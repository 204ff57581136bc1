"""The cost work on the sampling estimators (issue 51) changed how the estimates are computed, never what they are:
summaries of estimates pinned from the code before it, and the vectorised helpers against straightforward
reference implementations kept here."""

import math
import zlib

import numpy as np
import pytest

from coalition_gym.valuation import FunctionGame, proxy
from coalition_gym.valuation.sampling import (
    Budget,
    Design,
    DesignRows,
    KernelSampler,
    Replicate,
    Unit,
    _combination,
    _resample_units,
    replicate_rows,
    resampled_counts,
    sampled_shapley,
    unit_numbers,
)


def vote_game(n: int, items: int = 30, seed: int = 0) -> FunctionGame:
    """A vote-like game the proxy tracks but not exactly: a per-item curve of the share of members right alone,
    a synergy of pairs, noise by coalition (members taken in index order: no dependence on string hashing)."""
    rng = np.random.default_rng(seed)
    high = rng.random((items, n)) < 0.55
    beta = rng.uniform(-0.04, 0.04, size=n)
    synergy = rng.uniform(-0.05, 0.05, size=(n, n))
    players = [f"p{k:02d}" for k in range(n)]

    def value(coalition):
        idx = sorted(players.index(p) for p in coalition)
        if not idx:
            return np.zeros(items)
        share = high[:, idx].mean(axis=1)
        pairs = synergy[np.ix_(idx, idx)].sum() / max(len(idx), 1)
        noise = np.random.default_rng(zlib.crc32(bytes(idx))).normal(0.0, 0.02, size=items)
        return np.clip(share ** 1.5 + 0.1 * (share > 0.5) + beta[idx].sum() + pairs + noise, 0.0, 1.0)
    return FunctionGame(players, value, n_items=items)


def tied_selection_game(n: int, items: int = 30, seed: int = 0) -> FunctionGame:
    """A selection game whose coalitions answer with a member of their top confidence tier, drawn per coalition
    (SLM-MUX with random tie-breaks)."""
    rng = np.random.default_rng(seed)
    solo = (rng.random((items, n)) < 0.55).astype(float)
    tier = rng.integers(0, 2, size=(items, n))
    players = [f"p{k:02d}" for k in range(n)]

    def value(coalition):
        idx = np.array(sorted(players.index(p) for p in coalition))
        if not idx.size:
            return np.zeros(items)
        draw = np.random.default_rng(zlib.crc32(idx.astype(np.uint8).tobytes())).random((items, idx.size))
        score = np.where(tier[:, idx] == tier[:, idx].min(axis=1, keepdims=True), draw, -1.0)
        return solo[:, idx][np.arange(items), np.argmax(score, axis=1)]
    return FunctionGame(players, value, n_items=items)


#: (game, n, budget in multiples of n, seed, sampler) -> [sum of the estimate, its sum weighted by (k + 1) / n,
#: sum of ci_low, weighted sum of ci_high, sum of sampling_halfwidth, its weighted sum, shrink, coalitions], recorded
#: with the code before the cost work (commit c7c0901), n_boot=500
PINNED = {
    ("vote", 16, 5, 0, "proxy"): [0.39452098317963447, 0.22494084431140648, -0.2733077231518647, 0.5796715148970709,
                                  0.09383498482758951, 0.0467699228468428, 0.0, 80],
    ("vote", 16, 25, 1, "proxy"): [0.39452098317963447, 0.22549182642471344, -0.2842147166962752, 0.5874522324450968,
                                   0.0299397806397644, 0.01607510864438274, 0.0, 400],
    ("tied", 16, 10, 0, "proxy"): [0.5, 0.2457934652260843, -0.3428306938998157, 0.6944655937365631,
                                   0.5511666063572089, 0.2915801478636834, 0.0, 160],
    ("tied", 20, 25, 2, "proxy"): [0.5333333333333332, 0.2872821329441828, -0.2814531889548295, 0.7148763372082735,
                                   0.36128284101131025, 0.1842002614700438, 0.0, 500],
    ("vote", 14, 10, 3, "hybrid"): [0.39973603023225845, 0.22599463664010466, -0.33217561063510487,
                                    0.6108486738458552, 0.23240685750320444, 0.1257461890826693, None, 140],
}


@pytest.mark.parametrize("case", list(PINNED))
def test_the_estimates_are_those_pinned_before_the_cost_work(case, monkeypatch):
    monkeypatch.setattr(proxy.ProxySampler, "solo_share_from", None)  # pinned before the solo shares
    monkeypatch.setattr(proxy.ProxySampler, "pairs_room", None)  # and before the pairs' half-budget rule
    monkeypatch.setattr(proxy.ProxySampler, "shared_priority_from", None)  # and the shared priority
    monkeypatch.setattr(proxy.ProxySampler, "bias_floor", False)  # and the floor on the bias term
    monkeypatch.setattr(proxy.ProxySampler, "pairs_pilot", None)  # and the pairs' pilot
    kind, n, multiple, seed, sampler = case
    game = (vote_game if kind == "vote" else tied_selection_game)(n)
    result = sampled_shapley(game, sampler=sampler, stop=Budget(coalitions=multiple * n), seed=seed, n_boot=500)
    weight = np.arange(1, n + 1) / n
    estimate = result.per_item.mean(axis=1)
    *numbers, shrink, coalitions = PINNED[case]
    # the jackknife's refits now sum some terms in another order: equal to 1e-12, not bit for bit
    np.testing.assert_allclose([estimate.sum(), weight @ estimate, result.ci_low.sum(), weight @ result.ci_high,
                                result.sampling_halfwidth.sum(), weight @ result.sampling_halfwidth], numbers,
                               rtol=1e-12, atol=1e-13)
    assert (result.shrink, result.coalitions) == (shrink, coalitions)


def _unrank(rank: int, n: int, k: int) -> int:
    """The rank-th k-subset of range(n) in colexicographic order, by the definition (a linear search per member)."""
    mask, remaining = 0, rank
    for size in range(k, 0, -1):
        top = size - 1
        while math.comb(top + 1, size) <= remaining:
            top += 1
        remaining -= math.comb(top, size)
        mask |= 1 << top
    return mask


def test_unranking_a_subset_by_bisection_gives_the_colexicographic_subset():
    for n in range(1, 10):
        for k in range(n + 1):
            assert [_combination(r, n, k) for r in range(math.comb(n, k))] == \
                [_unrank(r, n, k) for r in range(math.comb(n, k))]
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(10, 65))
        k = int(rng.integers(0, n + 1))
        rank = int(rng.integers(math.comb(n, k))) if math.comb(n, k) < 2 ** 63 else math.comb(n, k) // 3
        assert _combination(rank, n, k) == _unrank(rank, n, k)


def _design(n: int = 10, seed: int = 0) -> Design:
    """A design with enumerated sizes and sampled units, some sizes with one unit only (pooled)."""
    rng = np.random.default_rng(seed)
    full, units, seen = (1 << n) - 1, [], set()
    for size, count in ((2, 5), (3, 4), (4, 1), (6, 1), (7, 3)):
        while sum(u.stratum == size for u in units) < count:
            mask = sum(1 << int(k) for k in rng.choice(n, size, replace=False))
            if mask not in seen and full ^ mask not in seen:
                seen |= {mask, full ^ mask}
                units.append(Unit(size, [mask, full ^ mask]))
    return Design(n, {1, n - 1}, units, seen)


@pytest.mark.parametrize("rescaled", [False, True])
def test_the_bootstraps_unit_counts_are_those_of_resampling_the_units_one_replicate_at_a_time(rescaled):
    design = _design()
    expected_rng, rng = np.random.default_rng(7), np.random.default_rng(7)
    number = unit_numbers(design.units)
    expected = np.zeros((30, len(design.units)))
    for r in range(30):
        for unit in _resample_units(design, expected_rng, rescaled=rescaled):
            expected[r, number[id(unit)]] += 1
    assert np.array_equal(resampled_counts(design, rng, 30, rescaled=rescaled), expected)
    assert expected_rng.random() == rng.random()  # the same draws from the stream, no more


def test_a_jackknifes_row_multiplicities_are_each_replicates_own():
    design = _design()
    sampler = KernelSampler(design.n, np.random.default_rng(0))
    units = design.units
    replicates = [Replicate([u for u in units if u is not dropped], [dropped]) for dropped in units[:4]]
    replicates.append(list(units[:3]) * 2)  # a bootstrap-like replicate: units repeated, others left out
    rows = DesignRows(design)
    expected = np.stack([rows.multiplicity(r) for r in replicates], axis=1)
    assert np.array_equal(replicate_rows(sampler, design, replicates), expected)
    assert replicate_rows(sampler, design, [[Unit(2, [3, 12])]]) is None  # a unit that is not the design's
