"""Particle swarm optimisation as Heterogeneous Swarms (and Model Swarms before it) run it.

Each iteration evaluates every particle (the objective scores the whole population in one call, so
a caller can batch the work), updates personal bests, the global best and the global *worst*, then
moves every particle:

    v <- w_v v + w_c (personal best - x) + w_s (global best - x) + w_r (x - global worst)
    x <- x + step * v        (clipped to ``bounds``)

The four weights are ``inertia``, ``cognitive``, ``social`` and ``repel`` times fresh uniform(0, 1)
draws (``weight_randomness``), normalised to sum to 1. ``step`` decays by ``step_decay`` per
iteration down to ``min_step``. A particle whose score has not improved for ``restart_patience``
evaluations goes back to its personal best with zero velocity (then may not restart again for 3
iterations). The search stops after ``iterations`` evaluations, or early when the global best has not
improved over the last ``patience`` iterations. Starting velocity: towards a random other particle.
Defaults are the method's published ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import ConfigError
from ..settings_check import check_settings, setting


@dataclass
class PSOConfig:
    population: int = setting(5, ge=1, doc="particles")
    iterations: int = setting(5, ge=1, doc="iterations at most")
    inertia: float = setting(0.2, ge=0, doc="weight of a particle's own velocity")
    cognitive: float = setting(0.3, ge=0, doc="pull toward the particle's best")
    social: float = setting(0.4, ge=0, doc="pull toward the swarm's best")
    repel: float = setting(0.05, ge=0, doc="push away from the swarm's worst")
    step: float = setting(0.5, ge=0, doc="step size")
    step_decay: float = setting(0.95, gt=0, le=1, doc="step size factor per iteration")
    min_step: float = setting(0.1, ge=0, doc="smallest step size")
    patience: int = setting(5, ge=1, doc="iterations without a better global best before stopping")
    restart_patience: int = setting(3, ge=1, doc="iterations without a better personal best before a restart")
    weight_randomness: bool = True
    bounds: tuple[float, float] | None = (0.0, 1.0)
    seed: int = setting(0, ge=0, doc="the swarm's seed")

    def __post_init__(self) -> None:
        check_settings(self, "pso")
        if self.inertia + self.cognitive + self.social + self.repel <= 0:
            raise ConfigError("pso: inertia, cognitive, social and repel cannot all be 0")
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            raise ConfigError(f"pso: bounds={self.bounds} must be (low, high) with low < high")


@dataclass
class PSOResult:
    best: np.ndarray
    best_score: float
    history: list[float]  # global best after each iteration
    iterations: int
    evaluations: int
    stopped: str  # "iterations" or "patience"
    scores: list[list[float]] = field(default_factory=list)  # every particle's score, per iteration


def particle_swarm(objective: Callable[[np.ndarray], Sequence[float]], dim: int, config: PSOConfig | None = None,
                   init: np.ndarray | None = None) -> PSOResult:
    """Maximise ``objective`` (population x dim array -> one score per particle)."""
    cfg = config or PSOConfig()
    rng = np.random.default_rng(cfg.seed)
    lo, hi = cfg.bounds if cfg.bounds is not None else (0.0, 1.0)
    x = rng.uniform(lo, hi, (cfg.population, dim)) if init is None else np.array(init, dtype=float)
    if x.shape != (cfg.population, dim):
        raise ConfigError(f"pso: init has shape {x.shape}, expected {(cfg.population, dim)}")
    v = np.zeros_like(x)
    if cfg.population > 1:
        for i in range(cfg.population):
            j = int(rng.choice([k for k in range(cfg.population) if k != i]))
            v[i] = x[j] - x[i]
    personal, personal_score = x.copy(), np.full(cfg.population, -np.inf)
    best, best_score = x[0].copy(), -np.inf
    worst, worst_score = x[0].copy(), np.inf
    own_history: list[list[float]] = [[] for _ in range(cfg.population)]
    cooldown = [0] * cfg.population
    history: list[float] = []
    all_scores: list[list[float]] = []
    step, stopped, evaluations = cfg.step, "iterations", 0
    for iteration in range(cfg.iterations):
        scores = np.asarray(objective(x.copy()), dtype=float)
        if scores.shape != (cfg.population,):
            raise ConfigError(f"pso: the objective returned {scores.shape} scores for {cfg.population} particles")
        evaluations += cfg.population
        all_scores.append(scores.tolist())
        for i in range(cfg.population):
            own_history[i].append(float(scores[i]))
            if scores[i] > personal_score[i]:
                personal[i], personal_score[i] = x[i].copy(), scores[i]
        if scores.max() > best_score:
            best, best_score = x[int(scores.argmax())].copy(), float(scores.max())
        if scores.min() < worst_score:
            worst, worst_score = x[int(scores.argmin())].copy(), float(scores.min())
        history.append(best_score)
        if len(history) > cfg.patience and history[-1] <= history[-1 - cfg.patience]:
            stopped = "patience"
            break
        if iteration == cfg.iterations - 1:
            break  # the last evaluation decides; no move is needed after it
        for i in range(cfg.population):
            mine = own_history[i]
            if len(mine) > cfg.restart_patience and mine[-1] <= mine[-1 - cfg.restart_patience] and not cooldown[i]:
                x[i], v[i], cooldown[i] = personal[i].copy(), 0.0, 3
            else:
                cooldown[i] = max(0, cooldown[i] - 1)
            r = rng.uniform(size=4) if cfg.weight_randomness else np.ones(4)
            weights = r * np.array([cfg.inertia, cfg.cognitive, cfg.social, cfg.repel])
            total = weights.sum()
            w_v, w_c, w_s, w_r = weights / total if total > 0 else (0.25, 0.25, 0.25, 0.25)
            v[i] = w_v * v[i] + w_c * (personal[i] - x[i]) + w_s * (best - x[i]) + w_r * (x[i] - worst)
            x[i] = x[i] + step * v[i]
            if cfg.bounds is not None:
                x[i] = np.clip(x[i], lo, hi)
        step = max(step * cfg.step_decay, cfg.min_step)
    return PSOResult(best=best, best_score=best_score, history=history, iterations=len(history),
                     evaluations=evaluations, stopped=stopped, scores=all_scores)
