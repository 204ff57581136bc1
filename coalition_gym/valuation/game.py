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
from ..envs.dev_scores import DevScores
from ..envs.executors import ExecutionCounts, Executor, LocalExecutor
from ..envs.protocols import EpisodeContext, make_protocol
from ..envs.runner import RunStats, episode_record, episode_seed, run_programs, score_outcomes
from ..envs.system import System, with_pool_defaults
from ..errors import ConfigError
from ..failures import FailureSummary
from .episode_records import EpisodeRecords

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
        todo, pending, players = [], set(), frozenset(self.players)
        for c in coalitions:
            key = frozenset(c)
            if not key <= players:
                unknown = key - players
                raise ConfigError(f"coalition names {sorted(unknown)}, not players of this game {list(self.players)}")
            if key and key not in self._values and key not in pending:
                todo.append(key)
                pending.add(key)
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

    def known(self) -> list[frozenset]:
        """The coalitions evaluated so far (their values are free), in evaluation order."""
        return list(self._values)

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
    """A System valued as a game: its coalition's members are the players, its items the items, and v(S)
    is the mean system score of coalition S (run with the same per-item episode seeds for every S).

    Options: ``seed`` (the episode seeds), ``share_generations`` (False runs every coalition afresh, the
    baseline that measures what the shared generation cache saves), ``progress``, ``max_programs`` (the
    most episodes run at once), ``max_member_episodes`` (the most episodes times their coalition's size run
    at once: a wave holds a request per member, and a debate's request quotes every peer, so 20,000 episodes
    of 63 members held 11 GB of prompts), ``executor`` (local or Ray) and ``record_text`` (False keeps answers
    only in the records). The generation cache is the system's (an in-memory one when it has none)."""

    def __init__(self, system: System, *, seed: int = 0, share_generations: bool = True, progress: bool = False,
                 max_programs: int = 20000, max_member_episodes: int = 100000, executor: Executor | None = None,
                 record_text: bool = True):
        super().__init__()
        self.record_text = record_text  # reply texts in records (results.jsonl); False keeps answers only
        pool, task = system.pool, system.task
        # the dev scores measured for the players share the game's cache, so one is made here when absent
        cache = system.cache if system.cache is not None else GenerationCache(None)
        self.system = system.replace(protocol=with_pool_defaults(system.protocol, pool), cache=cache)
        self.protocol, self.pool, self.task, self.seed = self.system.protocol, pool, task, seed
        self.items = list(system.items)
        if not self.items:
            raise ConfigError(f"task {task.name!r} gave zero items: a coalition game needs at least one")
        self.players = tuple(pool.select(list(system.members)))
        if not self.players:
            raise ConfigError(f"pool {pool.name!r} has no members to value")
        self.n_items = len(self.items)
        self.cache: GenerationCache = cache
        self.share_generations = share_generations
        self.stats = RunStats()
        self.records = EpisodeRecords()  # on disk as coalitions finish: memory stays linear in coalitions
        self.max_programs, self.max_member_episodes = max_programs, max_member_episodes
        self.progress = progress
        self.progress_label = self.protocol.name  # the bar's text; a report may say what runs
        self._bar: Any = None
        self._generations_shown = 0
        self.executor = executor if executor is not None else LocalExecutor()
        self._backends = pool.backends()
        self._counts = ExecutionCounts(stats=self.stats)
        self._solo: CoalitionGame | None = None

    @property
    def dev(self) -> DevScores:
        """The players' dev scores on this task, measured on first use when the protocol needs them (next
        to the generation cache's file when it has one); the same for every coalition."""
        return self.system.dev

    @property
    def protocol_name(self) -> str:
        """What results call the valued method: the protocol's name (a game that trains its coalitions
        first names its training recipe)."""
        return self.protocol.name

    def protocol_settings(self) -> dict[str, Any]:
        """The valued method's settings as results record them (see :attr:`protocol_name`)."""
        return self.protocol.settings()

    @property
    def generations(self) -> int:
        """Generations the backends actually produced (cache misses); every Ask when not sharing."""
        return self._counts.generations if self.share_generations else self.stats.asks

    @property
    def cache_hits(self) -> int:
        return self._counts.cache_hits

    def _run(self, contexts: list[EpisodeContext]) -> list:
        if not self.share_generations:  # the baseline that measures what sharing saves: every Ask generates
            asked = [self.stats.asks]

            def done(i: int, outcome: Any) -> None:
                self._advance(1, self.stats.asks - asked[0])
                asked[0] = self.stats.asks

            return run_programs([self.protocol.start(ctx) for ctx in contexts], self._backends, self.stats,
                                on_done=done if self._bar is not None else None)
        outcomes, counts = self.executor.run(self.protocol, contexts, self._backends, self.cache,
                                             self._advance if self._bar is not None else None)
        self._counts.add(counts)  # its stats are self.stats
        return outcomes

    def _open_bar(self) -> Any:
        """The progress bar, counted in episodes (a coalition on one item): the finest unit whose total is
        known before the work (generations depend on cache hits and early exits); it shows generations made."""
        if self.progress and self._bar is None:
            self._bar = tqdm(total=0, desc=self.progress_label, unit=" episodes", leave=False)
            self._bar.set_postfix_str("0 generations", refresh=False)
            self._generations_shown = 0
        return self._bar

    def _advance(self, episodes: int, generations: int) -> None:
        self._generations_shown += generations
        self._bar.set_postfix_str(f"{self._generations_shown} generations", refresh=episodes == 0 and generations > 0)
        self._bar.update(episodes)

    def plan(self, coalitions: int) -> None:
        """Fix the progress bar's total at ``coalitions`` new ones to run, times the items (so it shows a
        true share and an ETA); work beyond the plan raises the total, as without one."""
        if self._open_bar() is not None:
            self._bar.total = self._bar.n + max(int(coalitions), 0) * self.n_items
            self._bar.refresh()

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
        if self._open_bar() is not None:
            if self._bar.n + len(coalitions) * self.n_items > self._bar.total:  # beyond the plan (or none)
                self._bar.total = self._bar.n + len(coalitions) * self.n_items
                self._bar.refresh()
            if len(runnable) < len(coalitions):
                self._bar.update((len(coalitions) - len(runnable)) * self.n_items)  # worth 0 without running
        for chunk in self._chunks(runnable):
            contexts = [self.system.context(it, episode_seed(self.seed, it), self.ordered(c))
                        for c in chunk for it in self.items]
            outcomes = self._run(contexts)
            scored = score_outcomes(self.task, contexts, outcomes)
            for k, c in enumerate(chunk):
                rows = scored[k * self.n_items:(k + 1) * self.n_items]
                out[c] = np.array([r.score for r in rows])
                self.records[c] = [episode_record(r, it, self.record_text) for r, it in zip(rows, self.items)]
        return out

    def _chunks(self, coalitions: list[frozenset]) -> Iterable[list[frozenset]]:
        """The coalitions in order, in runs of at most ``max_programs`` episodes and ``max_member_episodes``
        episodes times members (one coalition at least)."""
        chunk: list[frozenset] = []
        episodes = member_episodes = 0
        for c in coalitions:
            if chunk and (episodes + self.n_items > self.max_programs
                          or member_episodes + self.n_items * len(c) > self.max_member_episodes):
                yield chunk
                chunk, episodes, member_episodes = [], 0, 0
            chunk.append(c)
            episodes += self.n_items
            member_episodes += self.n_items * len(c)
        if chunk:
            yield chunk

    @property
    def failures(self) -> int:
        return self.records.failures.failed

    def failure_summary(self) -> FailureSummary:
        """Failed episodes of this game and of its solo game (a failed episode scores 0 in the values)."""
        summary = FailureSummary()
        for game in dict.fromkeys([self, self.solo_game()]):
            summary.merge(game.records.failures)
        return summary

    def solo_game(self) -> "CoalitionGame":
        return self if self.protocol.min_members <= 1 else self.plain_solo_game()

    def plain_solo_game(self) -> "CoalitionGame":
        """Each player answering alone, plainly (majority vote of one), sharing this game's cache."""
        if self._solo is None:
            single = make_protocol("majority_vote", temperature=self.protocol.temperature,
                                   max_new_tokens=self.protocol.max_new_tokens, tie_break="first")  # alone: no ties
            self._solo = CoalitionGame(self.system.with_protocol(single).replace(members=self.players), seed=self.seed,
                                       share_generations=self.share_generations, executor=self.executor,
                                       record_text=self.record_text)
        return self._solo

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
