"""Optimise a Heterogeneous Swarms graph on dev items by particle swarm optimisation.

A particle is the flattened n x n adjacency matrix of the swarm's members (diagonal ignored). Every
iteration decodes each particle's DAG, runs it on the dev items (all particles' episodes go through
the runner together, behind one in-memory generation cache, so start nodes' answers are generated
once for all particles), and scores it by the mean task score. The best particle is returned as a
:class:`SwarmGraph` whose ``meta`` records its dev score, the search history and settings; save it
with ``graph.save(path)`` and reuse it with ``make_protocol("heterogeneous_swarms", graph=path)``.

Defaults follow the method: population 5, 5 iterations, inertia 0.2, cognitive 0.3, social 0.4,
repel 0.05, step 0.5 decayed by 0.95 (min 0.1), patience 5, dev fraction 0.25 (the first quarter of
the dev split), and five-member swarms (:func:`swarm_system`: without ``members``, the pool's first five).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..agents.cache import CachedGenerator, GenerationCache
from ..agents.pools import Pool, load_pool
from ..envs.protocols.swarm_graph import SwarmGraph
from ..envs.protocols.swarms import HeterogeneousSwarms
from ..envs.runner import RunStats, episode_seed, run_programs, score_outcome
from ..envs.system import System, SystemSpec
from ..errors import ConfigError
from ..learners.pso import PSOConfig, PSOResult, particle_swarm
from ..tasks import Task
from ..tasks import make as make_task

SWARM_SIZE = 5


@dataclass
class SwarmSearch:
    graph: SwarmGraph
    dev_score: float
    pso: PSOResult
    dev_items: int
    generations: int  # backend generations the search cost (cache misses)
    asks: int  # Asks the search's episodes made (cache hits included)


def swarm_system(pool: "str | Pool", task: "str | Task", members: Sequence[str] | None = None,
                 protocol: HeterogeneousSwarms | None = None) -> System:
    """The system whose swarm graph :func:`optimise_swarm` searches: ``members`` of ``pool`` (default: its
    first five) under ``protocol`` (default: Heterogeneous Swarms with its published settings)."""
    the_pool = load_pool(pool)
    chosen = the_pool.select(list(members)) if members is not None else the_pool.member_names[:SWARM_SIZE]
    if not chosen:
        raise ConfigError(f"optimise_swarm: pool {the_pool.name!r} has no members")
    return System.build(SystemSpec(protocol or HeterogeneousSwarms(), make_task(task), the_pool, chosen, split=None))


def optimise_swarm(system: System, config: PSOConfig | None = None, *, dev_fraction: float = 0.25,
                   split: str = "dev", seed: int = 0, out: str | Path | None = None) -> SwarmSearch:
    """Search the adjacency matrix of ``system``'s coalition (see :func:`swarm_system`) on the first
    ``dev_fraction`` of the task's ``split``."""
    if not 0 < dev_fraction <= 1:
        raise ConfigError(f"optimise_swarm: dev_fraction={dev_fraction} must be in (0, 1]")
    if not isinstance(system.protocol, HeterogeneousSwarms):
        raise ConfigError(f"optimise_swarm searches a heterogeneous_swarms graph, not {system.protocol.name!r}")
    the_pool, the_task, chosen = system.pool, system.task, list(system.members)
    if not chosen:
        raise ConfigError(f"optimise_swarm: pool {the_pool.name!r} has no members")
    split_items = list(the_task.items(split))
    items = split_items[: max(1, math.ceil(dev_fraction * len(split_items)))]
    if not split_items:
        raise ConfigError(f"optimise_swarm: task {the_task.name!r} has no items in split {split!r}")
    base = system.protocol
    cfg = config or PSOConfig()
    cache = system.cache if system.cache is not None else GenerationCache(None)
    # dev scores (nothing unless the swarm reads them) share the search's cache
    system = system.replace(cache=cache)
    wrapped: dict[int, CachedGenerator] = {}
    backends = {name: wrapped.setdefault(id(g), CachedGenerator(g, cache))
                for name, g in the_pool.backends().items()}
    stats = RunStats()
    n = len(chosen)

    def graph_of(vector: np.ndarray) -> SwarmGraph:
        return SwarmGraph.from_matrix(chosen, vector.reshape(n, n))

    def objective(particles: np.ndarray) -> list[float]:
        protocols = [dataclasses.replace(base, graph=graph_of(p)) for p in particles]
        contexts = [system.context(it, episode_seed(seed, it)) for it in items]
        programs = [proto.start(ctx) for proto in protocols for ctx in contexts]
        outcomes = run_programs(programs, backends, stats)
        scores = []
        for k in range(len(protocols)):
            chunk = outcomes[k * len(contexts):(k + 1) * len(contexts)]
            scores.append(float(np.mean([score_outcome(the_task, ctx.item, chosen, ctx.seed, o).score
                                         for ctx, o in zip(contexts, chunk)])))
        return scores

    result = particle_swarm(objective, n * n, cfg)
    best = graph_of(result.best)
    successor, _ = dataclasses.replace(base, graph=best).structure(tuple(chosen))
    meta: dict[str, Any] = {
        "dev_score": result.best_score, "dev_items": len(items), "split": split, "task": the_task.name,
        "pool": the_pool.name, "history": result.history, "iterations": result.iterations,
        "stopped": result.stopped, "pso": dataclasses.asdict(cfg), "seed": seed,
        "decoded_edges": [[chosen[k], chosen[s]] for k, s in enumerate(successor) if s is not None],
        "end": chosen[successor.index(None)],
    }
    graph = SwarmGraph(best.members, best.adjacency, meta)
    if out is not None:
        graph.save(out)
    generations = sum(g.misses for g in wrapped.values())
    return SwarmSearch(graph=graph, dev_score=result.best_score, pso=result, dev_items=len(items),
                       generations=generations, asks=stats.asks)
