"""From 13 players the proxy estimate is shrunk towards the solo shares (each item's v(N) split in proportion to
what the players score alone) as far as its own sampling error says it should be."""

import numpy as np
import pytest

from coalition_gym.valuation import FunctionGame, proxy
from coalition_gym.valuation.proxy import shrunk_to_solo_shares, solo_shares
from coalition_gym.valuation.sampling import Budget, sampled_shapley


def table_value(values: dict[int, list[float]]):
    return lambda mask: np.asarray(values[mask], dtype=float)


def test_the_solo_shares_split_each_items_full_value_by_the_solo_values():
    # 3 players, 2 items: item 0 solo values 1, 0, 1 and v(N) = 1; item 1 nobody right alone, v(N) = 0.6
    value = table_value({0b001: [1, 0], 0b010: [0, 0], 0b100: [1, 0], 0b111: [1, 0.6]})
    shares = solo_shares(3, value)
    np.testing.assert_allclose(shares, [[0.5, 0.2], [0.0, 0.2], [0.5, 0.2]])
    np.testing.assert_allclose(shares.sum(axis=0), [1, 0.6])  # efficient per item


def test_the_shrinkage_follows_the_estimates_own_sampling_error():
    estimate = np.array([[0.5, 0.3], [0.1, 0.1], [0.2, 0.0]])  # players x items: item means 0.4, 0.1, 0.1
    prior = np.array([[0.3, 0.3], [0.2, 0.2], [0.1, 0.1]])  # item means 0.3, 0.2, 0.1: distance^2 = 0.02
    same, variance, weight = shrunk_to_solo_shares(estimate, np.zeros(3), prior)
    assert weight == 0.0 and not variance.any()  # no sampling error: the estimate stands
    np.testing.assert_allclose(same, estimate)
    noisy, _, weight = shrunk_to_solo_shares(estimate, np.full(3, 0.01), prior)  # sum var 0.03 > 0.02
    assert weight == 1.0
    np.testing.assert_allclose(noisy, prior)
    var = np.full(3, 0.002)  # lambda = 1 - 0.006 / 0.02 = 0.7
    shrunk, variance, weight = shrunk_to_solo_shares(estimate, var, prior)
    assert weight == pytest.approx(0.3)
    np.testing.assert_allclose(shrunk, prior + 0.7 * (estimate - prior))
    np.testing.assert_allclose(variance, 0.49 * var + 0.09 * (np.array([0.1, -0.1, 0.0]) ** 2 + var))
    assert shrunk_to_solo_shares(estimate, np.full(3, np.nan), prior)[2] == 0.0  # no interval: nothing to weigh


def test_from_thirteen_players_the_default_estimate_is_shrunk_and_says_how_far(monkeypatch):
    game = FunctionGame([f"p{k:02d}" for k in range(14)], noisy_vote, n_items=20)
    thin = sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=2 * 14), seed=0, n_boot=50)
    assert thin.solo_share_weight is not None and 0 < thin.solo_share_weight <= 1
    monkeypatch.setattr(proxy.ProxySampler, "solo_share_from", None)
    plain = sampled_shapley(FunctionGame(game.players, noisy_vote, n_items=20), sampler="proxy",
                            stop=Budget(coalitions=2 * 14), seed=0, n_boot=50)
    assert plain.solo_share_weight is None
    by_mask = lambda mask: np.asarray(noisy_vote([p for k, p in enumerate(game.players) if mask >> k & 1]))  # noqa
    shares, keep = solo_shares(14, by_mask), 1 - thin.solo_share_weight
    np.testing.assert_allclose(thin.per_item, shares + keep * (plain.per_item - shares), atol=1e-12)
    distance = (plain.per_item - shares).mean(axis=1) ** 2
    var = plain.sampling_stderr ** 2
    np.testing.assert_allclose(thin.sampling_stderr ** 2, keep ** 2 * var + (1 - keep) ** 2 * (distance + var))
    below = sampled_shapley(FunctionGame(game.players[:12], noisy_vote, n_items=20), sampler="proxy",
                            stop=Budget(coalitions=24), seed=0, n_boot=50)
    assert below.solo_share_weight is None  # below 13 players: as before


def noisy_vote(coalition) -> np.ndarray:
    """A majority over 20 items of members right with their own probability, noise per coalition."""
    rng = np.random.default_rng(0)
    right = rng.random((20, 14)) < np.linspace(0.3, 0.8, 14)
    idx = sorted(int(p[1:]) for p in coalition)
    if not idx:
        return np.zeros(20)
    noise = np.random.default_rng(sum(1 << k for k in idx)).normal(0, 0.05, size=20)
    return np.clip((right[:, idx].mean(axis=1) > 0.5) + noise, 0, 1)
