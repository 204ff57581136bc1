"""Cooperative games over coalitions of a model pool.

``v(S)`` is the mean system score of coalition S, kept per item. By convention ``v(empty) = 0``
(no model, no answer). A coalition of one is that model's solo run under the protocol. For a
protocol that needs at least k members, coalitions smaller than k cannot run it and are also worth
0 (documented, not an error), and solo strength is measured by a plain single answer instead.

``CoalitionGame`` runs every requested coalition over all items in one batched runner call (in
chunks), behind a generation cache shared by all coalitions: a member asked the same prompt with the
same seed in two coalitions is generated once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..agents.cache import GenerationCache
from ..agents.pools import Pool
from ..envs.dev_scores import DevScores, dev_scores_for
from ..envs.executors import ExecutionCounts, Executor, LocalExecutor
from ..envs.protocols import EpisodeContext, Protocol, make_protocol
from ..envs.runner import RunStats, episode_record, episode_seed, run_programs, score_outcomes
from ..envs.system import with_pool_defaults
from ..errors import ConfigError
from ..failures import FailureSummary
from ..tasks.base import Task
from ..types import Item

Coalition = frozenset


class Game(ABC):
    """Players, items, and per-item values of coalitions (evaluated on demand, memoised)."""

    players: tuple[str, ...]
    n_items: int

    def __init__(self) -> None:
        self._values: dict[frozenset, np.ndarray] = {}

    @abstractmethod
    def _compute(self, coalitions: list[frozenset]) -> dict[frozenset, np.ndarray]:
        """Per-item values of non-empty coalitions not evaluated before."""

    def evaluate(self, coalitions: Iterable[Iterable[str]]) -> None:
        todo = []
        for c in coalitions:
            key = frozenset(c)
            unknown = key - set(self.players)
            if unknown:
                raise ConfigError(f"coalition names {sorted(unknown)}, not players of this game {list(self.players)}")
            if key and key not in self._values and key not in todo:
                todo.append(key)
        if todo:
            self._values.update(self._compute(todo))

    def per_item(self, coalition: Iterable[str]) -> np.ndarray:
        key = frozenset(coalition)
        if not key:
            return np.zeros(self.n_items)
        self.evaluate([key])
        return self._values[key]

    def value(self, coalition: Iterable[str]) -> float:
        return float(self.per_item(coalition).mean())

    @property
    def coalitions_evaluated(self) -> int:
        return len(self._values)

    @property
    def generations(self) -> int:
        """What evaluating cost the backends; a game without backends counts one per coalition."""
        return self.coalitions_evaluated

    def solo_game(self) -> "Game":
        """The game whose singletons give solo strength (itself, unless the protocol needs more)."""
        return self

    def training_summary(self) -> dict[str, Any] | None:
        """What training inside the game cost and did (games of collaborative-training methods); None here."""
        return None


class FunctionGame(Game):
    """A game given by a function of the coalition (one item, or an array per item)."""

    def __init__(self, players: Sequence[str], value: Callable[[frozenset], Any], n_items: int = 1):
        super().__init__()
        self.players = tuple(players)
        self.n_items = n_items
        self._fn = value

    def _compute(self, coalitions: list[frozenset]) -> dict[frozenset, np.ndarray]:
        return {c: np.broadcast_to(np.asarray(self._fn(c), dtype=float), (self.n_items,)).copy()
                for c in coalitions}


class CoalitionGame(Game):
    """protocol + pool + task + items: v(S) is the mean system score of coalition S."""

    def __init__(self, protocol: Protocol, pool: Pool, task: Task, items: Sequence[Item],
                 members: Sequence[str] | None = None, seed: int = 0, cache: GenerationCache | None = None,
                 share_generations: bool = True, progress: bool = False, max_programs: int = 20000,
                 executor: Executor | None = None, record_text: bool = True):
        super().__init__()
        self.record_text = record_text  # reply texts in records (results.jsonl); False keeps answers only
        self.protocol, self.pool, self.task, self.seed = with_pool_defaults(protocol, pool), pool, task, seed
        self.items = list(items)
        if not self.items:
            raise ConfigError(f"task {task.name!r} gave zero items: a coalition game needs at least one")
        self.players = tuple(pool.select(list(members)) if members is not None else pool.member_names)
        if not self.players:
            raise ConfigError(f"pool {pool.name!r} has no members to value")
        missing = [h for h in protocol.helper_names() if h not in pool.backends()]
        if missing:
            raise ConfigError(f"protocol {protocol.name!r} needs helper {missing[0]!r}, not in pool {pool.name!r}")
        self.n_items = len(self.items)
        self.cache = cache if cache is not None else GenerationCache(None)
        self.share_generations = share_generations
        self.stats = RunStats()
        self.records: dict[frozenset, list[dict]] = {}
        self.max_programs = max_programs
        self.progress = progress
        self._bar: Any = None
        self.executor = executor if executor is not None else LocalExecutor()
        self._backends = pool.backends()
        self._counts = ExecutionCounts(stats=self.stats)
        self._solo: CoalitionGame | None = None
        self._dev: DevScores | None = None

    @property
    def dev(self) -> DevScores:
        """The players' dev scores on this task, measured on first use when the protocol needs them (next
        to the generation cache's file when it has one); the same for every coalition."""
        if self._dev is None:
            self._dev = dev_scores_for(self.protocol, self.task, self.pool, self.players, cache=self.cache)
        return self._dev

    @property
    def generations(self) -> int:
        """Generations the backends actually produced (cache misses); every Ask when not sharing."""
        return self._counts.generations if self.share_generations else self.stats.asks

    @property
    def cache_hits(self) -> int:
        return self._counts.cache_hits

    def _run(self, contexts: list[EpisodeContext]) -> list:
        if not self.share_generations:  # the baseline that measures what sharing saves
            return run_programs([self.protocol.start(ctx) for ctx in contexts], self._backends, self.stats)
        outcomes, counts = self.executor.run(self.protocol, contexts, self._backends, self.cache)
        self._counts.add(counts)  # its stats are self.stats
        return outcomes

    def ordered(self, coalition: frozenset) -> tuple[str, ...]:
        return tuple(p for p in self.players if p in coalition)

    def _compute(self, coalitions: list[frozenset]) -> dict[frozenset, np.ndarray]:
        out: dict[frozenset, np.ndarray] = {}
        runnable = []
        for c in coalitions:
            if len(c) < self.protocol.min_members:  # cannot run the protocol: worth 0, like empty
                out[c] = np.zeros(self.n_items)
                self.records[c] = []
            else:
                runnable.append(c)
        if self.progress and self._bar is None:
            self._bar = tqdm(total=0, desc=f"{self.protocol.name} coalitions", unit="coalition", leave=False)
        if self._bar is not None:
            self._bar.total += len(runnable)
            self._bar.refresh()
        per_chunk = max(1, self.max_programs // self.n_items)
        for start in range(0, len(runnable), per_chunk):
            chunk = runnable[start:start + per_chunk]
            contexts = [EpisodeContext(item=it, task=self.task, members=self.ordered(c),
                                       seed=episode_seed(self.seed, it), styles=self.pool.styles,
                                       dev_scores=self.dev.scores)
                        for c in chunk for it in self.items]
            outcomes = self._run(contexts)
            scored = score_outcomes(self.task, contexts, outcomes)
            for k, c in enumerate(chunk):
                rows = scored[k * self.n_items:(k + 1) * self.n_items]
                out[c] = np.array([r.score for r in rows])
                self.records[c] = [episode_record(r, it, self.record_text) for r, it in zip(rows, self.items)]
            if self._bar is not None:
                self._bar.update(len(chunk))
        return out

    @property
    def failures(self) -> int:
        return sum(r["error"] is not None for rows in self.records.values() for r in rows)

    def failure_summary(self) -> FailureSummary:
        """Failed episodes of this game and of its solo game (a failed episode scores 0 in the values)."""
        summary = FailureSummary()
        for game in dict.fromkeys([self, self.solo_game()]):
            for rows in game.records.values():
                summary.add_records(rows)
        return summary

    def solo_game(self) -> "CoalitionGame":
        if self.protocol.min_members <= 1:
            return self
        if self._solo is None:  # a plain single answer, sharing this game's cache
            single = make_protocol("majority_vote", temperature=self.protocol.temperature,
                                   max_new_tokens=self.protocol.max_new_tokens, tie_break="first")  # alone: no ties
            self._solo = CoalitionGame(single, self.pool, self.task, self.items, self.players, self.seed,
                                       self.cache, self.share_generations, executor=self.executor,
                                       record_text=self.record_text)
        return self._solo

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
