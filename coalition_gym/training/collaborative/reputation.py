"""Sparta's reputations: a score and a deviation per member (start 100 and 0.5), moved Elo-style by
each judged duel, and the opponent rule that pairs members of similar reputation.

The update for member i after a duel with j, where ``d`` is the judges' reputation-weighted score
difference (i minus j, on the 1-10 scale):

    expected gap  g = |Phi((R_i - R_j) / s) - Phi((R_j - R_i) / s)|,  s = sqrt(sigma_i^2 + sigma_j^2)
    R_i += K * d * tanh(sigma_i) * max(g, epsilon) / scaling_factor     (never below 10)

K decays from ``initial_k`` by ``decay_rate`` every ``decay_steps`` duels, down to ``min_k``; a
member's deviation is the spread of its last ``window`` changes (at least ``min_deviation``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from statistics import pstdev
from typing import Sequence

START_SCORE, START_DEVIATION, FLOOR = 100.0, 0.5, 10.0


@dataclass
class Reputations:
    members: Sequence[str]
    initial_k: float = 10.0
    min_k: float = 5.0
    decay_rate: float = 0.9
    decay_steps: int = 10
    scaling_factor: float = 20.0
    window: int = 10
    min_deviation: float = 0.1
    epsilon: float = 0.01
    score: dict[str, float] = field(default_factory=dict)
    deviation: dict[str, float] = field(default_factory=dict)
    changes: dict[str, list[float]] = field(default_factory=dict)
    duels: int = 0

    def __post_init__(self) -> None:
        for m in self.members:
            self.score.setdefault(m, START_SCORE)
            self.deviation.setdefault(m, START_DEVIATION)
            self.changes.setdefault(m, [])

    @property
    def k(self) -> float:
        return max(self.min_k, self.initial_k * self.decay_rate ** (self.duels / self.decay_steps))

    def weighted_difference(self, judge_scores: dict[str, tuple[float, float]]) -> float | None:
        """Score of the first response minus the second's, averaged over judges with their reputations
        as weights; None without judges."""
        total = sum(self.score[j] for j in judge_scores)
        if total <= 0:
            return None
        return sum(self.score[j] * (a - b) for j, (a, b) in judge_scores.items()) / total

    def update(self, first: str, second: str, difference: float) -> None:
        self.duels += 1
        k = self.k
        old = dict(self.score)
        for me, other, d in ((first, second, difference), (second, first, -difference)):
            spread = math.hypot(self.deviation[me], self.deviation[other]) or 1e-6
            gap = abs(math.erf((old[me] - old[other]) / (math.sqrt(2.0) * spread)))  # |Phi(x) - Phi(-x)|
            delta = k * d * math.tanh(self.deviation[me]) * max(gap, self.epsilon) / self.scaling_factor
            new = max(FLOOR, old[me] + delta)
            self.score[me] = new
            recent = (self.changes[me] + [new - old[me]])[-self.window:]
            self.changes[me] = recent
            if len(recent) >= 2:
                self.deviation[me] = max(pstdev(recent), self.min_deviation)

    def opponent(self, member: str, rng: random.Random, random_prob: float, closest: int) -> str:
        """Random with probability ``random_prob``, else one of the ``closest`` members in reputation."""
        others = [m for m in self.members if m != member]
        if rng.random() < random_prob:
            return rng.choice(others)
        near = sorted(others, key=lambda m: (abs(self.score[m] - self.score[member]), m))[:closest]
        return rng.choice(near)

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {m: {"score": self.score[m], "deviation": self.deviation[m]} for m in self.members}
