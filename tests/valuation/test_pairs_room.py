"""From 13 players the proxy sampler enumerates every pair once the pairs take at most half of the budget left
(``proxy.PAIRS_ROOM``): the selection proxy reads its priorities off them. Below 13 players, or with the rule off,
only the kernel's share of sizes 2 and n - 2 decides, as before. Past half of what is left (with room for twice a
pilot of n coalitions), a pilot of the other sizes decides: the pairs are enumerated for a selection-like game
(``proxy.ProxySampler.pairs_pilot``, ``proxy.selection_like``)."""

import math

import numpy as np
import pytest
from test_shared_priority import shared_order_game

from coalition_gym.valuation import FunctionGame, proxy
from coalition_gym.valuation.sampling import Budget, sampled_shapley


def pairs_evaluated(n: int, budget: int) -> int:
    """How many coalitions of two players the default sampler evaluates at ``budget`` on a small vote game."""
    asked: set[tuple[str, ...]] = set()

    def vote(coalition) -> np.ndarray:
        asked.add(tuple(sorted(coalition)))
        score = np.array([(sum(int(p[1:]) * (i + 1) for p in coalition) % 7) > 2 for i in range(6)], dtype=float)
        return score if coalition else np.zeros(6)

    sampled_shapley(FunctionGame([f"p{k:02d}" for k in range(n)], vote, n_items=6), sampler="proxy",
                    stop=Budget(coalitions=budget), seed=0, n_boot=20)
    return sum(len(c) == 2 for c in asked)


def test_from_thirteen_players_the_pairs_are_enumerated_once_they_fit_half_the_budget_left(monkeypatch):
    # 14 players, 25n = 350: the kernel's share of sizes 2 and 12 is about 82 coalitions, the pairs are 91
    assert pairs_evaluated(14, 350) == math.comb(14, 2)
    monkeypatch.setattr(proxy.ProxySampler, "pairs_room", None)
    assert pairs_evaluated(14, 350) < math.comb(14, 2)


def test_below_thirteen_players_the_rule_does_not_apply():
    # 12 players, 180 coalitions: the pairs (66) fit half of what is left, not the kernel's share (about 45)
    assert pairs_evaluated(12, 180) < math.comb(12, 2)
    assert pairs_evaluated(12, 12 * 25) == math.comb(12, 2)  # the kernel's share covers them at 25n, as before


def counted(game, asked: set) -> FunctionGame:
    """``game`` with every coalition it is asked for recorded in ``asked``."""
    def value(coalition) -> np.ndarray:
        asked.add(tuple(sorted(coalition)))
        return game.per_item(coalition)

    return FunctionGame(game.players, value, n_items=game.n_items)


def pilot_run(game, budget: int, seed: int = 0) -> tuple[int, float]:
    """The pairs the default sampler evaluates on ``game`` at ``budget``, and its estimate's item means."""
    asked: set[tuple[str, ...]] = set()
    result = sampled_shapley(counted(game, asked), sampler="proxy", stop=Budget(coalitions=budget), seed=seed,
                             n_boot=20)
    return sum(len(c) == 2 for c in asked), result.per_item.mean(axis=1)


def test_past_half_the_room_a_pilot_enumerates_the_pairs_of_a_selection_game(monkeypatch):
    # 20 players at 15n = 300: the 190 pairs take more than half of the ~260 left, and leave twice the pilot (2 x 20)
    n, budget = 20, 300
    game, truth = shared_order_game(n, seed=5, swaps=3)
    pairs, estimate = pilot_run(game, budget)
    assert pairs == math.comb(n, 2)
    assert np.abs(estimate - truth).max() < 1e-9  # the pairs' per-item priorities make the selection proxy exact
    monkeypatch.setattr(proxy.ProxySampler, "pairs_pilot", None)
    pairs_without, estimate_without = pilot_run(game, budget)
    assert pairs_without < math.comb(n, 2)
    assert np.abs(estimate_without - truth).mean() > 1e-4


def plurality_game(n: int, items: int = 40, seed: int = 0) -> FunctionGame:
    """Majority vote: each member answers one of three labels per item (0 is right, half the time); a coalition
    answers its most common label (ties to the lowest) and scores 1 when that is 0."""
    answers = np.random.default_rng(seed).choice(3, size=(items, n), p=[0.5, 0.3, 0.2])
    players = [f"p{k:02d}" for k in range(n)]

    def value(coalition) -> np.ndarray:
        idx = [players.index(p) for p in coalition]
        if not idx:
            return np.zeros(items)
        counts = np.stack([(answers[:, idx] == label).sum(axis=1) for label in range(3)], axis=1)
        return (np.argmax(counts, axis=1) == 0).astype(float)

    return FunctionGame(players, value, n_items=items)


def test_the_pilot_leaves_a_vote_to_the_kernel_design():
    asked: set[tuple[str, ...]] = set()
    sampled_shapley(counted(plurality_game(20), asked), sampler="proxy", stop=Budget(coalitions=300), seed=0,
                    n_boot=20)
    assert sum(len(c) == 2 for c in asked) < math.comb(20, 2)


def test_the_pilots_test_tells_a_selection_game_from_a_vote():
    n = 20
    selection, _ = shared_order_game(n, seed=2, swaps=3)
    votes = plurality_game(n, seed=3)
    found = []
    original = proxy.selection_like

    def spy(*args):
        found.append(original(*args))
        return found[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proxy, "selection_like", spy)
        for game in (selection, votes):
            sampled_shapley(game, sampler="proxy", stop=Budget(coalitions=300), seed=1, n_boot=20)
    assert found == [True, False]


def test_a_selection_family_with_a_share_of_the_blend_makes_the_game_selection_like(monkeypatch):
    # a router over 64 members whose items share less of one order: the selection family takes 0.34 of the blend,
    # the vote-like one 0.6; a vote: 0.04
    class Fitted:
        def __init__(self, weights):
            self.weights = np.array(weights)

    for weights, expected in (([0.6, 0.34], True), ([0.3, 0.7], True), ([0.95, 0.04], False), ([1.0, 0.0], False)):
        monkeypatch.setattr(proxy, "cross_fitted", lambda *args, w=weights, **kwargs: Fitted(w))
        assert proxy.selection_like(4, None, None) is expected
