"""A new Monte Carlo sampler: plain permutation sampling, one random order per unit (the built-in
``permutation`` sampler pairs each order with its reverse). Comparing the two at the same budget shows what
antithetic pairing buys: on a game whose only interaction is between two players, an order and its reverse
split that interaction evenly, so the built-in is exact there while single orders are not.

A sampler proposes coalitions in rounds and estimates Shapley values from them. ``propose(design, room,
step)`` returns the next round's units (each a group of coalitions, as bitmasks over the players, that
enter the estimate together) within ``room`` new coalitions; ``estimate(design, value, units)`` gives a
players x items estimate, where ``value(mask)`` is v(S) per item and ``units`` (when given) replaces the
sampled units for the bootstrap that measures the sampling error. The loop around it (budgets,
tolerance, the exact switch when every coalition is in, the two-level bootstrap) is shared.
``register_sampler`` gives it a name for ``sampled_shapley(sampler=...)`` and ``cgym eval --sampler``.

    python examples/custom_sampler.py
    cgym --import examples/custom_sampler.py eval --pool sim:random-8 --protocol majority_vote --estimator mc \
        --sampler single_permutation --mc-budget 60 --items 40
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coalition_gym import Sampler, register_sampler
from coalition_gym.valuation.exact import exact_shapley
from coalition_gym.valuation.game import FunctionGame
from coalition_gym.valuation.sampling import Budget, Design, Unit, sampled_shapley


@register_sampler
class SinglePermutationSampler(Sampler):
    name = "single_permutation"
    description = "one random order per unit, no antithetic pair (an example: examples/custom_sampler.py)"

    def __init__(self, n: int, rng: np.random.Generator):
        super().__init__(n, rng)
        self.min_coalitions = n  # one order's prefixes

    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        known, out = design.masks(), []
        for _ in range(max(1, step // self.n)):
            order = self.rng.permutation(self.n)
            masks = [sum(1 << int(j) for j in order[:k]) for k in range(1, self.n + 1)]
            new = set(masks) - known
            if len(new) > room:
                break
            known |= new
            room -= len(new)
            out.append(Unit(0, masks, [order]))
        return out

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        units = design.units if units is None else units
        total = np.zeros((self.n, value((1 << self.n) - 1).shape[0]))
        for unit in units:
            previous, mask = 0.0, 0
            for j in unit.orders[0]:
                mask |= 1 << int(j)
                total[int(j)] += value(mask) - previous
                previous = value(mask)
        return total / len(units)


if __name__ == "__main__":
    weights = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]

    def v(coalition: frozenset) -> np.ndarray:  # a synthetic game on 30 items: additive with a pair synergy
        bonus = 0.3 if {"p0", "p5"} <= coalition else 0.0
        return np.full(30, sum(weights[int(p[1:])] for p in coalition) + bonus)

    players = [f"p{k}" for k in range(6)]
    exact = exact_shapley(FunctionGame(players, v, n_items=30), n_boot=50).values
    for sampler in ("single_permutation", "permutation"):
        game = FunctionGame(players, v, n_items=30)  # a fresh game: nothing known yet, so nothing is free
        est = sampled_shapley(game, sampler=sampler, stop=Budget(coalitions=40), seed=0, n_boot=50)
        error = float(np.abs(est.per_item.mean(axis=1) - exact).max())
        print(f"{sampler:<20} coalitions {est.coalitions:>3}  max error vs exact Shapley {error:.3f}")
