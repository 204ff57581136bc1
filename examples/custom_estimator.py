"""A new estimator: each model's mean pair synergy, v({i, j}) - v({j}) averaged over the partners j (what
i adds to one other model), from the n singletons and the n(n-1)/2 pairs: cheaper than Shapley's 2^n
coalitions, more than leave-one-out's single context.

An estimator is a function ``estimate(game, n_boot=2000, seed=0) -> ValuationResult``. It asks the
game for the coalitions it needs (``game.evaluate`` runs them in one batch, ``game.per_item(S)`` gives
v(S) per item), and ``result_of`` adds the bootstrap over items every estimator reports.
``register_estimator`` gives it a name for ``cgym eval --estimator``, ``evaluate`` and the leaderboard
tables (its column and summary field); ``rank`` says whether it may rank the leaderboard ahead of the
built-ins (it does not here: a large rank).

    python examples/custom_estimator.py
    cgym --import examples/custom_estimator.py eval --estimator pair_synergy,loo --protocol majority_vote --items 40
"""

from __future__ import annotations

import itertools

import numpy as np

from coalition_gym import (
    CoalitionGame,
    EvalOptions,
    System,
    SystemSpec,
    evaluate,
    make_task,
    register_estimator,
)
from coalition_gym.reports.leaderboard import format_leaderboard
from coalition_gym.valuation.exact import ValuationResult, result_of
from coalition_gym.valuation.game import Game


def pair_synergy(game: Game, n_boot: int = 2000, seed: int = 0) -> ValuationResult:
    """Mean pair synergy: v({i, j}) - v({j}) averaged over the other models j."""
    players = game.players
    pairs = [frozenset(p) for p in itertools.combinations(players, 2)]
    game.evaluate([frozenset({p}) for p in players] + pairs)  # one batch for the runner
    per_item = np.stack([np.mean([game.per_item(frozenset({i, j})) - game.per_item(frozenset({j}))
                                  for j in players if j != i], axis=0) for i in players])
    return result_of("pair_synergy", game, per_item, n_boot, seed)


register_estimator("pair_synergy", pair_synergy, rank=50)


if __name__ == "__main__":
    task = make_task("rg/basic_arithmetic", size=40)
    game = CoalitionGame(System.build(SystemSpec("majority_vote", task, "sim:demo", split="test")))
    report = evaluate(game, ["pair_synergy", "loo"], EvalOptions(n_boot=200))
    print(format_leaderboard(report))
    print("ranked by:", report.primary)
