"""One policy seat answered from outside, one reply at a time: the one driver every wire goes through.

The OpenEnv server's sessions (``cgym serve``), the verifiers environment's episodes and TRL's ``rollout_func``
rows (in process, :class:`~coalition_gym.training.trl_rollouts.ProtocolRollout`; over the wire,
``ServedRollout``, whose rows are a server's sessions) all play an episode the same way: start it on an item and
an episode seed, run the frozen members until the seat is asked, take the seat's reply, go on, and at the end
read one :class:`SeatRecord`. A :class:`SeatDriver` does exactly that and nothing else; the wires adapt it.

Where the members' Asks go: ``batched=False`` drives each call's episodes at once (:meth:`SeatDriver.start_many`
and :meth:`SeatDriver.answer_many` batch a whole TRL step's rows, one call per backend per wave);
``batched=True`` hands them to a :class:`~coalition_gym.envs.batcher.WaveBatcher`, so episodes of many threads or
coroutines (a server's sessions, concurrent verifiers rollouts) share waves.

Nothing handed out carries a gold answer or scorer data: prompts are the Asks' messages, items are
:meth:`~coalition_gym.types.Item.for_policy` views.

Leave-one-out credit (``records(..., credit=True)``) of member ``m`` is the system score minus that of the
coalition without ``m`` on the same item and seed. Both counterfactuals replay the real episode's replies where
they match (:class:`~coalition_gym.training.rollouts.Replayed`, the trainer's own replay): without the policy,
the frozen members play alone (computed once per item and seed); without a frozen member, the policy's recorded
replies are replayed, and when the smaller coalition would ask the policy something it was not asked (a debate's
peers changed), that member's credit is not reported, nor is any member's whose removal leaves fewer members
than the protocol needs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

from ..agents.base import Generator
from ..agents.cache import CachedGenerator, GenerationCache, ask_key
from ..agents.model_process import ModelProcess, in_model_process
from ..envs.batcher import WAIT_S, WaveBatcher
from ..envs.dispatch import RunStats
from ..envs.runner import ProgramFailed, run_programs, score_outcomes
from ..envs.seated import SeatedEpisode, drive, final_infos
from ..envs.system import System, SystemSpec, seated_system
from ..errors import ActionError, BackendError, ConfigError, EpisodeStateError, UnknownNameError
from ..tasks.base import SPLITS, check_style
from ..types import Ask, Item, Sample
from .rollouts import CounterfactualCost, Replayed


@dataclass
class SeatRun:
    """One running episode: its item, episode seed and the seated protocol execution."""

    item: Item
    seed: int
    episode: SeatedEpisode

    @property
    def done(self) -> bool:
        return self.episode.done


@dataclass(frozen=True)
class SeatRecord:
    """How one episode ended, the same on every wire: the system's and the seat's answers and scores, the seat's
    replies in order, the transcript, the protocol's details, the cost, the error of a failed episode, and the
    members' leave-one-out credit when it was asked for."""

    item_id: str
    episode_seed: int
    system_answer: str | None
    system_score: float
    parsed: bool
    policy_answer: str | None
    policy_score: float
    replies: tuple[str, ...]
    transcript: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    credit: Mapping[str, float] = field(default_factory=dict)

    @property
    def reward(self) -> float | None:
        """The system score; None for a failed episode (TRL leaves such rows out of the advantages)."""
        return None if self.error else self.system_score

    def metrics(self) -> dict[str, float]:
        """Flat metrics: ``system_score``, ``policy_score``, ``parsed``, ``credit_loo/<member>``."""
        out = {"system_score": self.system_score, "policy_score": self.policy_score, "parsed": float(self.parsed)}
        out.update({f"credit_loo/{m}": v for m, v in self.credit.items()})
        return out

    def as_dict(self) -> dict[str, Any]:
        """The fields as plain data (shallow: the transcript's turns are dicts already)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.update(replies=list(self.replies), credit=dict(self.credit))
        return out


class _Unasked(Generator):
    """The seat in a counterfactual: every Ask its recorded replies do not answer is a miss."""

    identity = "seat-replay"

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        raise BackendError("the smaller coalition asks the policy something it was not asked")


class SeatDriver:
    """The system ``source`` names with one policy seat (see the module doc)."""

    def __init__(self, source: System | SystemSpec, *, policy_name: str = "policy", policy_style: str = "chat",
                 in_coalition: bool = True, batched: bool = False, wait_s: float = WAIT_S, model_process: bool = False):
        check_style(policy_style)
        self.system = seated_system(source, {policy_name: policy_style}, in_coalition=in_coalition)
        if not self.system.items:
            raise ConfigError("the system has no items: give it a split (split='train' or 'test')")
        self.system.prepare()
        self.policy_name, self.policy_style = policy_name, policy_style
        self.stats = RunStats()
        self.model_process: ModelProcess | None = None
        self.batcher: WaveBatcher | None = None
        if batched:  # the batcher's local models may answer from a process of their own (agents.model_process)
            backends, self.model_process = (in_model_process(self.system.backends) if model_process
                                            else (self.system.backends, None))
            if self.model_process is not None:
                self.model_process.wait_ready()
            self.batcher = WaveBatcher(backends, self.stats, wait_s=wait_s)
        self._without_policy: dict[tuple[str, int], float] = {}
        self._index: dict[str, Item] | None = None

    # -- what the outside sees ------------------------------------------------------------------------------
    @property
    def items(self) -> list[Item]:
        """The items, as the policy may see them (no gold answer, no scorer data)."""
        return [it.for_policy() for it in self.system.items]

    def first_prompt(self, item: Item) -> list[dict[str, str]]:
        """The question as the policy's prompt style puts it (the first prompt of protocols that open by asking
        every member; later prompts are what the protocol writes)."""
        return [{"role": m.role, "content": m.content}
                for m in self.system.task.prompt(item.for_policy(), self.policy_style)]

    def item(self, item_id: str) -> Item:
        """The item ``item_id`` of the system's split, else of any split of its task (a TRL row's train item)."""
        if self._index is None:
            self._index = {it.id: it for split in SPLITS for it in self.system.task.items(split)}
            self._index.update({it.id: it for it in self.system.items})
        if item_id not in self._index:
            raise UnknownNameError("item id", item_id, self._index)
        return self._index[item_id]

    def pending(self, run: SeatRun) -> Ask | None:
        """What the seat is asked now (its item the policy's view), or None when it is not asked."""
        ask = run.episode.pending(self.policy_name)
        if ask is None or ask.item is None:
            return ask
        return dataclasses.replace(ask, item=ask.item.for_policy())

    # -- driving episodes ----------------------------------------------------------------------------------
    def begin(self, item: Item, seed: int) -> SeatRun:
        """The episode on ``item`` with ``seed``, its members not run yet (:meth:`advance` or the batcher)."""
        return SeatRun(item, seed, SeatedEpisode(self.system.start(item, seed), [self.policy_name], None))

    def give(self, run: SeatRun, text: str) -> None:
        """The seat's reply to its pending Ask (members not run yet); a run whose seat is not asked takes none."""
        if run.done:
            raise EpisodeStateError("the episode has ended; start a new one")
        if not isinstance(text, str):
            raise ActionError(f"a reply is text, not {type(text).__name__}")
        if run.episode.pending(self.policy_name) is not None:
            run.episode.answer(self.policy_name, Sample(text=text))

    def advance(self, runs: Sequence[SeatRun]) -> None:
        """Run the members of ``runs`` until each waits for the seat or ended (batched together when
        ``batched``: with every other caller's episodes)."""
        if self.batcher is None:
            drive([r.episode for r in runs], self.system.backends, self.stats)
        else:
            for run in runs:
                self.batcher.run(run.episode)

    async def advance_async(self, run: SeatRun, caller: Hashable | None = None) -> None:
        """:meth:`advance` for one run, awaited (batched drivers hold no thread while the wave runs). ``caller``:
        who plays it (a server's session), whose next episode the batcher's waves may wait for until
        :meth:`leave`."""
        if self.batcher is None:
            self.advance([run])
        else:
            await self.batcher.run_async(run.episode, caller)

    def join(self, caller: Hashable) -> None:
        """``caller`` (a server's session, just opened) will play episodes: the batcher's waves wait for its first
        as for its next (until :meth:`leave`)."""
        if self.batcher is not None:
            self.batcher.join(caller)

    def leave(self, caller: Hashable) -> None:
        """``caller`` plays no more episodes (its session closed)."""
        if self.batcher is not None:
            self.batcher.leave(caller)

    def start(self, item: Item, seed: int) -> SeatRun:
        run = self.begin(item, seed)
        self.advance([run])
        return run

    def answer(self, run: SeatRun, text: str) -> None:
        self.give(run, text)
        self.advance([run])

    def start_many(self, starts: Sequence[tuple[Item, int]]) -> list[SeatRun]:
        runs = [self.begin(item, seed) for item, seed in starts]
        self.advance(runs)
        return runs

    def answer_many(self, runs: Sequence[SeatRun], texts: Sequence[str]) -> None:
        for run, text in zip(runs, texts):
            self.give(run, text)
        self.advance(runs)

    def fail(self, run: SeatRun, reason: str) -> None:
        """End ``run`` as failed (its seat could not answer: the policy's model failed on it)."""
        run.episode.fail(reason)
        if self.batcher is not None:
            self.batcher.forget(run.episode)

    def close(self, run: SeatRun | None = None) -> None:
        """Forget one abandoned run, or (no run) stop the batcher and the model process."""
        if self.batcher is not None:
            if run is None:
                self.batcher.close()
            else:
                self.batcher.forget(run.episode)
        if run is None and self.model_process is not None:
            self.model_process.close()
            self.model_process = None

    # -- the end of an episode -----------------------------------------------------------------------------
    def records(self, runs: Sequence[SeatRun], credit: bool = False) -> list[SeatRecord]:
        """Each finished run's record, its answers scored in one call (execution-based tasks run together)."""
        if not all(run.done for run in runs):
            raise EpisodeStateError("the episode has not ended: answer the seat's pending Ask first")
        finished = [(self.system.context(run.item, run.seed), run.episode) for run in runs]
        out = []
        for run, info in zip(runs, final_infos(self.system, finished, [self.policy_name])):
            answer, score = info["own"][self.policy_name]
            replies = tuple(s.text for a, s in run.episode.seat_calls if a.member == self.policy_name)
            out.append(SeatRecord(
                run.item.id, run.seed, info["system_answer"], float(info["system_score"]), bool(info["parsed"]),
                answer, float(score), replies, info["transcript"], info.get("details", {}), info["cost"],
                info["error"], self._credits(run, info["system_score"]) if credit and not info["error"] else {}))
        return out

    def record(self, run: SeatRun, credit: bool = False) -> SeatRecord:
        return self.records([run], credit)[0]

    def replay(self, item_id: str, seed: int, replies: Sequence[str]) -> SeatRecord:
        """The record of the episode on ``item_id`` and ``seed`` with ``replies`` seated in order (what a TRL row
        or a served episode recorded: replaying it checks it)."""
        run = self.start(self.item(item_id), seed)
        pending = list(replies)
        while not run.done:
            if not pending:
                raise ConfigError(f"the replay of {item_id!r} asks the seat more often than the record has replies")
            self.answer(run, pending.pop(0))
        return self.record(run)

    # -- leave-one-out --------------------------------------------------------------------------------------
    def _credits(self, run: SeatRun, full: float) -> dict[str, float]:
        members = list(self.system.members)
        out: dict[str, float] = {}
        for member in members:
            rest = [m for m in members if m != member]
            if len(rest) < self.system.protocol.min_members:
                continue
            value = self._value(run, rest)
            if value is not None:
                out[member] = full - value
        return out

    def _value(self, run: SeatRun, members: list[str]) -> float | None:
        """The system score of ``members`` on the run's item and seed, replaying the run's replies where they
        match; None when the seat would be asked something it was not."""
        without_policy = self.policy_name not in members
        key = (run.item.id, run.seed)
        if without_policy and key in self._without_policy:
            return self._without_policy[key]
        ctx = self.system.context(run.item, run.seed, members)
        outcome = run_programs([self.system.protocol.start(ctx)], self._replaying(run))[0]
        if isinstance(outcome, ProgramFailed) and not without_policy:
            return None
        value = score_outcomes(self.system.task, [ctx], [outcome])[0].score
        if without_policy:
            self._without_policy[key] = value
        return value

    def _replaying(self, run: SeatRun) -> dict[str, Generator]:
        """Every name bound to its backend behind the run's recorded replies (the seat: to nothing else)."""
        cost, cache = CounterfactualCost(), GenerationCache(None, memory_bytes=None)  # one episode: keep all
        backends: dict[str, Generator] = {**self.system.backends, self.policy_name: _Unasked()}
        store = {(a.member, ask_key(backends[a.member].identity, a)): s
                 for a, s in [*run.episode.seat_calls, *run.episode.member_calls] if a.member in backends}
        return {name: Replayed(CachedGenerator(backend, cache), store, cost) for name, backend in backends.items()}


__all__ = ["SeatDriver", "SeatRecord", "SeatRun"]
