"""One policy seat inside a system, driven from outside one reply at a time: what a served environment needs.

A :class:`SeatService` is the system with one seat (the policy), its items, the policy's view of each item and
the scoring of a finished episode: the system score (the reward), the policy's own score and, per coalition
member, its leave-one-out credit. An outside RL stack (a verifiers environment, an OpenEnv server) starts an
episode, hands each prompt the protocol writes for the seat to its own model, gives the reply back, and reads the
scores at the end. Nothing it hands out carries a gold answer or scorer data: prompts are the Asks' messages,
items are :meth:`~coalition_gym.types.Item.for_policy` views.

Seeds follow the project's rule (:func:`~coalition_gym.envs.runner.episode_seed`): an episode's seed depends on
the run seed and the item, never on the coalition or on what the policy writes, so with the same model in the
seat the scores are those of ``cgym run``/``cgym eval`` on the same items and seed.

Leave-one-out credit of member ``m`` is the system score minus that of the coalition without ``m`` on the same
item and seed. Without the policy the frozen members play alone (computed once per item and seed; generations
the episode already made are reused through its generation cache). Without a frozen member the policy's
recorded replies are replayed: when the smaller coalition would ask the policy something it was not asked (a
debate's peers changed), that member's credit is not reported, and neither is any member's whose removal leaves
fewer members than the protocol needs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from ..agents.base import Generator
from ..agents.cache import GenerationCache
from ..envs.executors import wrap_with_cache
from ..envs.runner import episode_seed, run_programs, score_outcomes
from ..envs.seated import SeatedEpisode, final_infos
from ..envs.system import System, SystemSpec, seated_system
from ..errors import BackendError, ConfigError, EpisodeStateError
from ..tasks.base import check_style
from ..types import Ask, Item, Message, Sample


def messages_of(ask: Ask) -> list[dict[str, str]]:
    """An Ask's chat messages as plain ``{"role", "content"}`` dicts (what an OpenAI-style client sends)."""
    return [{"role": m.role, "content": m.content} for m in ask.messages]


@dataclass
class SeatEpisode:
    """One running episode: the seated protocol execution, its item and seed."""

    item: Item
    seed: int
    episode: SeatedEpisode
    backends: Mapping[str, Generator]  # the frozen members and helpers, behind the episode's generation cache

    @property
    def done(self) -> bool:
        return self.episode.done


@dataclass(frozen=True)
class SeatScores:
    """A finished episode's scores: ``reward`` (the system score), the policy's own score, and the
    leave-one-out credit of each member it could be computed for (member name -> credit)."""

    reward: float
    policy_score: float
    credit: Mapping[str, float] = field(default_factory=dict)
    parsed: bool = False
    error: str | None = None

    def metrics(self, policy_name: str) -> dict[str, float]:
        """Flat metric names: ``policy_score``, ``credit_loo/<member>`` (the policy's under its seat name)."""
        out = {"system_score": self.reward, "policy_score": self.policy_score, "parsed": float(self.parsed)}
        out.update({f"credit_loo/{m}": v for m, v in self.credit.items()})
        return out


class _Replay(Generator):
    """The policy's recorded replies, answered again by (messages, seed); anything else is a miss."""

    identity = "replay"

    def __init__(self, calls: Sequence[tuple[Ask, Sample]]):
        self.replies = {(a.messages, a.seed): s for a, s in calls}
        self.missed = False

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        out = []
        for ask in asks:
            sample = self.replies.get((ask.messages, ask.seed))
            if sample is None:
                self.missed = True
                raise BackendError("the smaller coalition asks the policy something it was not asked")
            out.append(sample)
        return out


class SeatService:
    """The system ``source`` names with one policy seat (see the module doc). ``seed``: the run seed the
    episode seeds derive from; ``credit``: compute leave-one-out credits at the end of each episode.

    Backend calls (the frozen members, the helpers) are serialised by a lock, so episodes may be driven from
    several threads; the policy's replies come from the caller."""

    def __init__(self, source: System | SystemSpec, *, policy_name: str = "policy", policy_style: str = "chat",
                 seed: int = 0, credit: bool = True):
        check_style(policy_style)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"seed={seed!r} must be an int")
        self.system = seated_system(source, {policy_name: policy_style})
        if not self.system.items:
            raise ConfigError("the system has no items: give it a split (split='train' or 'test')")
        self.system.prepare()
        self.policy_name, self.policy_style, self.seed, self.credit = policy_name, policy_style, seed, credit
        self._lock = threading.Lock()
        self._without_policy: dict[tuple[str, int], float] = {}

    # -- what the outside sees ------------------------------------------------------------------------
    @property
    def items(self) -> list[Item]:
        """The items, as the policy may see them (no gold answer, no scorer data)."""
        return [it.for_policy() for it in self.system.items]

    def first_prompt(self, item: Item) -> list[dict[str, str]]:
        """The question as the policy's prompt style puts it (the first prompt of protocols that open by
        asking every member; later prompts are what the protocol writes)."""
        messages: list[Message] = self.system.task.prompt(item.for_policy(), self.policy_style)
        return [{"role": m.role, "content": m.content} for m in messages]

    def episode_seed(self, item: Item) -> int:
        return episode_seed(self.seed, item)

    # -- driving an episode ---------------------------------------------------------------------------
    def start(self, item_id: str) -> SeatEpisode:
        """Start the episode on ``item_id`` and run the frozen members until the policy is asked (or the end)."""
        item = self.system.item(item_id)
        seed = self.episode_seed(item)
        # the system's cache when it has one; else one per episode, which its leave-one-out runs share (a cache
        # kept across a training run's episodes would only grow: later rounds see the policy's new replies)
        backends = wrap_with_cache(self.system.backends, self.system.cache or GenerationCache(None))
        with self._lock:
            episode = SeatedEpisode(self.system.start(item, seed), [self.policy_name], backends)
        return SeatEpisode(item, seed, episode, backends)

    def pending(self, run: SeatEpisode) -> Ask | None:
        """What the policy is asked now (its item is the policy's view), or None when it is not asked."""
        ask = run.episode.pending(self.policy_name)
        if ask is None or ask.item is None:
            return ask
        return replace(ask, item=ask.item.for_policy())

    def answer(self, run: SeatEpisode, text: str) -> None:
        """The policy's reply to its pending Ask; the frozen members then run until it is asked again."""
        if not isinstance(text, str):
            raise ConfigError(f"a reply is text, not {type(text).__name__}")
        if run.episode.pending(self.policy_name) is None:
            raise EpisodeStateError("the policy is not being asked anything in this episode")
        with self._lock:
            run.episode.answer(self.policy_name, Sample(text=text))

    def scores(self, run: SeatEpisode) -> SeatScores:
        """The finished episode's reward, the policy's own score and the members' leave-one-out credits."""
        if not run.done:
            raise EpisodeStateError("the episode has not ended: answer the policy's pending Ask first")
        ctx = self.system.context(run.item, run.seed)
        info = final_infos(self.system, [(ctx, run.episode)], [self.policy_name])[0]  # one scoring call
        calls = [(a, s) for a, s in run.episode.seat_calls if a.member == self.policy_name]
        credit = self._credits(run, calls, info["system_score"]) if self.credit else {}
        return SeatScores(info["system_score"], info["own"][self.policy_name][1], credit, info["parsed"],
                          info["error"])

    # -- leave-one-out ------------------------------------------------------------------------------------
    def _credits(self, run: SeatEpisode, calls: Sequence[tuple[Ask, Sample]], full: float) -> dict[str, float]:
        members = list(self.system.members)
        out: dict[str, float] = {}
        for member in members:
            rest = [m for m in members if m != member]
            if len(rest) < self.system.protocol.min_members:
                continue
            value = self._value(run, rest, calls)
            if value is not None:
                out[member] = full - value
        return out

    def _value(self, run: SeatEpisode, members: list[str], calls: Sequence[tuple[Ask, Sample]]) -> float | None:
        """The system score of ``members`` on the run's item and seed; None when it cannot be known."""
        without_policy = self.policy_name not in members
        key = (run.item.id, run.seed)
        if without_policy and key in self._without_policy:
            return self._without_policy[key]
        replay = _Replay(calls)
        backends = dict(run.backends) if without_policy else {**run.backends, self.policy_name: replay}
        ctx = self.system.context(run.item, run.seed, members)
        with self._lock:
            outcome = run_programs([self.system.protocol.start(ctx)], backends)[0]
        if replay.missed:
            return None
        value = score_outcomes(self.system.task, [ctx], [outcome])[0].score
        if without_policy:
            self._without_policy[key] = value
        return value
