"""From 13 players the proxy sampler enumerates every pair once the pairs take at most half of the budget left
(``proxy.PAIRS_ROOM``): the selection proxy reads its priorities off them. Below 13 players, or with the rule off,
only the kernel's share of sizes 2 and n - 2 decides, as before."""

import math

import numpy as np

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
