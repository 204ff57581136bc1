"""Where protocol executions run: in this process, or spread over a Ray cluster.

Both executors take the same inputs (a protocol, episode contexts and the raw backends) and return
one outcome per context, in order. Outcomes depend only on the contexts' seeds, so the Ray executor
gives the same numbers as the local one.

The Ray executor splits the contexts into shards, one Ray task each. A worker wraps the backends in
its own generation cache on the shared SQLite file (when a path is given), so generations finished
before a worker dies are kept, and Ray re-runs the dead worker's shard, which then finds them in the
cache. Shards that finished are held by the driver and never recomputed.
"""

from __future__ import annotations

import math
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..agents.base import Generator
from ..agents.cache import CachedGenerator, GenerationCache
from ..errors import BackendError, ConfigError
from ..types import Outcome
from .protocols.base import EpisodeContext, Protocol
from .runner import ProgramFailed, RunStats, run_programs

RAY_HINT = "install the extra: pip install 'coalition-gym[ray]'"

# Called as work finishes with (episodes, generations) finished since the last call: a progress bar's feed.
OnProgress = Callable[[int, int], None]


@dataclass
class ExecutionCounts:
    """What a batch of executions cost (merged across shards)."""

    generations: int = 0
    cache_hits: int = 0
    stats: RunStats = field(default_factory=RunStats)

    def add(self, other: "ExecutionCounts") -> None:
        self.generations += other.generations
        self.cache_hits += other.cache_hits
        for name in ("waves", "backend_calls", "asks", "backend_seconds", "wall_seconds"):
            setattr(self.stats, name, getattr(self.stats, name) + getattr(other.stats, name))


def wrap_with_cache(backends: Mapping[str, Generator], cache: GenerationCache) -> dict[str, CachedGenerator]:
    """One CachedGenerator per distinct backend object, so names sharing a backend share its batches."""
    wrapped: dict[int, CachedGenerator] = {}
    return {name: wrapped.setdefault(id(g), CachedGenerator(g, cache)) for name, g in backends.items()}


def run_cached(protocol: Protocol, contexts: Sequence[EpisodeContext], backends: Mapping[str, Generator],
               cache: GenerationCache, on_progress: OnProgress | None = None
               ) -> tuple[list[Outcome | ProgramFailed], ExecutionCounts]:
    """Run executions behind ``cache``; the counts are this call's own generations and hits. ``on_progress``
    hears of every finished episode (with the generations made since it last heard), and of the generations
    of each backend call (0 episodes): a wave of 20,000 debates over 64 members runs minutes before any ends."""
    cached = wrap_with_cache(backends, cache)
    unique: list[CachedGenerator] = list({id(g): g for g in cached.values()}.values())
    counts = ExecutionCounts()
    reported = [0]  # generations already reported

    def report(episodes: int) -> None:
        made = sum(g.misses for g in unique)
        on_progress(episodes, made - reported[0])  # type: ignore[misc]
        reported[0] = made

    outcomes = run_programs([protocol.start(ctx) for ctx in contexts], cached, counts.stats,
                            on_done=(lambda i, outcome: report(1)) if on_progress is not None else None,
                            on_call=(lambda: report(0)) if on_progress is not None else None)
    counts.generations = sum(g.misses for g in unique)
    counts.cache_hits = sum(g.hits for g in unique)
    return outcomes, counts


def run_shard(protocol: Protocol, contexts: Sequence[EpisodeContext], backends: Mapping[str, Generator],
              cache_path: str | None) -> tuple[list[Outcome | ProgramFailed], ExecutionCounts]:
    """A Ray task: the same, behind a cache this worker opens on the shared file (memory without one)."""
    cache = GenerationCache(cache_path)
    try:
        return run_cached(protocol, contexts, backends, cache)
    finally:
        cache.close()


class Executor(ABC):
    name = "executor"

    @abstractmethod
    def run(self, protocol: Protocol, contexts: Sequence[EpisodeContext], backends: Mapping[str, Generator],
            cache: GenerationCache, on_progress: OnProgress | None = None
            ) -> tuple[list[Outcome | ProgramFailed], ExecutionCounts]:
        """One outcome per context, in order, and what it cost; ``on_progress`` hears of finished episodes
        (one by one here, shard by shard on Ray)."""

    def close(self) -> None:
        """Release whatever the executor holds."""


class LocalExecutor(Executor):
    """Runs everything in this process, behind the caller's cache (memory and disk)."""

    name = "local"

    def run(self, protocol, contexts, backends, cache, on_progress=None):
        return run_cached(protocol, contexts, backends, cache, on_progress)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast, with a clear message, when a Ray head does not answer (ray.init would hang)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r} is not host:port (e.g. 127.0.0.1:6379), 'auto' or 'local'")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise BackendError(f"the Ray cluster at {address} does not answer ({exc}); start it with "
                           f"`ray start --head --port {port}` or check the address") from exc


class RayExecutor(Executor):
    """Distributes executions over Ray. ``address=None`` starts a local Ray with ``num_cpus`` CPUs;
    ``"auto"`` joins the cluster this machine belongs to; ``host:port`` joins that head node."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None, shards_per_worker: int = 2,
                 max_retries: int = 3):
        try:
            import ray
        except ImportError as exc:
            raise ConfigError(f"the Ray executor needs Ray, which is not installed; {RAY_HINT}") from exc
        self._ray = ray
        if address not in (None, "auto", "local"):
            _check_reachable(address)
        self._started_here = not ray.is_initialized()
        if self._started_here:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "ignore_reinit_error": True}
            if address not in (None, "local"):
                kwargs["address"] = address
            elif num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self.shards_per_worker, self.max_retries = shards_per_worker, max_retries
        self._remote = ray.remote(max_retries=max_retries, retry_exceptions=False)(run_shard)

    @property
    def workers(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def run(self, protocol, contexts, backends, cache, on_progress=None):
        if not contexts:
            return [], ExecutionCounts()
        # Workers share the disk cache; without one, each shard only shares generations within itself.
        cache_path = str(cache.path) if cache.path is not None and cache.status == "ok" else None
        n_shards = min(len(contexts), self.workers * self.shards_per_worker)
        size = math.ceil(len(contexts) / n_shards)
        shared_protocol, shared_backends = self._ray.put(protocol), self._ray.put(dict(backends))
        refs = [self._remote.remote(shared_protocol, list(contexts[i:i + size]), shared_backends, cache_path)
                for i in range(0, len(contexts), size)]
        done: dict[Any, tuple[list[Outcome | ProgramFailed], ExecutionCounts]] = {}
        waiting = list(refs)
        while waiting:  # shards in the order they finish, so progress moves before the slowest one
            ready, waiting = self._ray.wait(waiting, num_returns=1)
            for ref in ready:
                done[ref] = self._ray.get(ref)
                if on_progress is not None:
                    on_progress(len(done[ref][0]), done[ref][1].generations)
        outcomes: list[Outcome | ProgramFailed] = []
        counts = ExecutionCounts()
        for ref in refs:
            outcomes += done[ref][0]
            counts.add(done[ref][1])
        return outcomes, counts

    def map(self, fn: Any, shards: Sequence[dict[str, Any]], shared: dict[str, Any]) -> list[Any]:
        """``fn(**shared, **shard)`` for every shard as Ray tasks (``shared`` is put in the object store
        once); results in shard order. Used for training rollouts."""
        remote = self._ray.remote(max_retries=self.max_retries, retry_exceptions=False)(fn)
        refs_shared = {k: self._ray.put(v) for k, v in shared.items()}
        return self._ray.get([remote.remote(**refs_shared, **shard) for shard in shards])

    def close(self) -> None:
        if self._started_here and self._ray.is_initialized():
            self._ray.shutdown()


#: the executors :func:`make_executor` makes, the default first (``--executor``'s choices)
EXECUTORS = ("local", "ray")


def make_executor(name: str = EXECUTORS[0], address: str | None = None, num_cpus: int | None = None) -> Executor:
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address=address, num_cpus=num_cpus)
    raise ConfigError(f"unknown executor {name!r}; use 'local' or 'ray'")


__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "OnProgress", "RayExecutor", "ExecutionCounts", "make_executor",
           "run_shard", "run_cached", "wrap_with_cache", "RAY_HINT"]
