"""Short of every pair, from 13 players the proxy sampler's selection family takes one priority for all items, read
greedily off the sampled coalitions (``proxy.shared_priorities``); and the shrunk estimate's bias term is floored
at the players' mean (``proxy.shrunk_to_prediction``)."""

import numpy as np
from test_proxy import ranked_selection

from coalition_gym.valuation import FunctionGame, proxy
from coalition_gym.valuation.sampling import Budget, sampled_shapley


def shared_order_game(n: int, items: int = 40, seed: int = 0, swaps: int = 0) -> tuple[FunctionGame, np.ndarray]:
    """A selection game whose items share one priority (``swaps`` random neighbours swapped per item, so the
    items differ a little, as a trained router's do), and its exact Shapley values (players), by the priority
    game's closed form per item: the member at place r adds s_r / (r + 1) - sum_{q > r} s_q / (q (q + 1))."""
    rng = np.random.default_rng(seed)
    solo = (rng.random((items, n)) < 0.55).astype(float)
    base = rng.permutation(n)
    orders = np.tile(base, (items, 1))
    for t in range(items):
        for k in rng.integers(0, n - 1, swaps):
            orders[t, [k, k + 1]] = orders[t, [k + 1, k]]
    rank = np.argsort(orders, axis=1)  # items x n: each player's place
    truth = np.zeros((n, items))
    for t in range(items):
        s = solo[t, orders[t]]
        later = np.array([sum(s[q] / (q * (q + 1)) for q in range(r + 1, n)) for r in range(n)])
        truth[orders[t], t] = s / (np.arange(n) + 1) - later
    return ranked_selection(solo, rank, [f"p{k:02d}" for k in range(n)]), truth.mean(axis=1)


def test_the_greedy_reading_gives_back_a_priority_shared_by_every_item():
    n, items = 14, 60
    game, _ = shared_order_game(n, items, seed=3)
    rng = np.random.default_rng(0)
    masks = sorted({int(m) for m in rng.integers(1, 1 << n, 400) if bin(int(m)).count("1") >= 2})
    bits = ((np.array(masks)[:, None] >> np.arange(n)) & 1).astype(bool)
    names = game.players
    values = np.stack([game.per_item(names[k] for k in range(n) if m >> k & 1) for m in masks])
    solo = np.stack([game.per_item([p]) for p in names], axis=1)
    folds = np.arange(items) % 5
    ranks = proxy.shared_priorities(bits, values, solo, folds)
    assert ranks.shape == (5, n)
    # the order the game uses: the first player of the grand coalition on an item whose solo values differ
    selection = proxy.SelectionProxy(n, np.tile(ranks[0], (items, 1)))
    predicted = selection.values(bits.astype(float), solo)
    np.testing.assert_array_equal(predicted, values)


def estimate_error(n: int, multiple: int, seeds: int, shared: int | None, monkeypatch) -> float:
    monkeypatch.setattr(proxy.ProxySampler, "shared_priority_from", shared)
    errors = []
    for seed in range(seeds):
        game, truth = shared_order_game(n, seed=seed, swaps=2)
        result = sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=multiple * n), seed=seed, n_boot=20)
        errors.append(np.abs(result.per_item.mean(axis=1) - truth).mean())
    return float(np.mean(errors))


def test_from_thirteen_players_a_shared_priority_serves_the_selection_proxy_short_of_the_pairs(monkeypatch):
    # 16 players at 5n: 80 coalitions, far short of the 120 pairs (measured: 0.0038 with it, 0.0066 without)
    with_it = estimate_error(16, 5, 4, proxy.SOLO_SHARE_FROM, monkeypatch)
    without = estimate_error(16, 5, 4, None, monkeypatch)
    assert with_it < 0.75 * without, (with_it, without)


def test_below_thirteen_players_the_vote_like_proxy_is_used_alone(monkeypatch):
    fitted = []
    original = proxy.cross_fitted

    def spy(*args, **kwargs):
        fitted.append(original(*args, **kwargs))
        return fitted[-1]

    monkeypatch.setattr(proxy, "cross_fitted", spy)
    for n in (12, 14):
        game, _ = shared_order_game(n, seed=1)
        sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=5 * n), seed=0, n_boot=20)
    assert [len(f.families) for f in fitted] == [1, 2]


def test_a_rows_bias_term_is_at_least_the_mean_of_its_slice():
    """Where kappa < 1 a row whose D - P fell at zero still gets the slice's mean squared correction as bias."""
    rows, items = 4, 3
    correction = np.array([0.0, 0.002, -0.002, 0.002])

    groups = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]  # units: numbers, which a replicate leaves out some of

    def parts(units):  # D - P moves with the units a replicate holds: a jackknife spread, so kappa < 1
        shift = 1e-4 * sum(u for g in groups for u in g) if units is None else 1e-4 * sum(units)
        prediction = np.zeros((rows, items))
        return prediction + (correction + shift - 0.0028)[:, None], prediction

    _, variance, _, kappa = proxy.shrunk_to_prediction(parts, groups, np.random.default_rng(0), [slice(0, rows)])
    assert 0.0 <= kappa[0] < 1.0
    # every row has the same jackknife spread, so the rows' variances differ by their bias terms alone: row 0's
    # is the slice's mean squared correction, not its own zero
    mean_square = float((correction ** 2).mean())
    np.testing.assert_allclose(variance[1] - variance[0], (1 - kappa[0]) ** 2 * (correction[1] ** 2 - mean_square),
                               rtol=1e-6)


def test_reading_the_priority_off_a_subset_is_reading_it_off_those_coalitions_alone():
    n, items = 16, 30
    game, _ = shared_order_game(n, items, seed=4, swaps=3)
    rng = np.random.default_rng(1)
    masks = sorted({int(m) for m in rng.integers(1, 1 << n, 300) if bin(int(m)).count("1") >= 2})
    bits = ((np.array(masks)[:, None] >> np.arange(n)) & 1).astype(bool)
    values = np.stack([game.per_item(game.players[k] for k in range(n) if m >> k & 1) for m in masks])
    solo = np.stack([game.per_item([p]) for p in game.players], axis=1)
    folds = np.arange(items) % 5
    rows = np.flatnonzero(rng.random(len(masks)) < 0.7)
    sums = proxy.PrioritySums(bits, values, solo, folds)
    np.testing.assert_array_equal(sums.ranks(rows), proxy.shared_priorities(bits[rows], values[rows], solo, folds))
    np.testing.assert_array_equal(sums.ranks(), proxy.shared_priorities(bits, values, solo, folds))


def test_the_shared_prioritys_own_sampling_error_widens_the_interval_and_leaves_the_estimate(monkeypatch):
    widened = []
    for seed in range(3):
        runs = []
        for blocks in (0, proxy.PRIORITY_BLOCKS):
            game, _ = shared_order_game(16, seed=seed, swaps=4)  # a fresh game: no coalition known before
            monkeypatch.setattr(proxy.ProxySampler, "priority_blocks", blocks)
            runs.append(sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=80), seed=seed, n_boot=20))
        without, with_it = runs
        np.testing.assert_array_equal(with_it.per_item, without.per_item)
        assert (with_it.sampling_halfwidth >= without.sampling_halfwidth - 1e-15).all()
        widened.append(float((with_it.sampling_halfwidth - without.sampling_halfwidth).max()))
    assert min(widened) > 0, widened
