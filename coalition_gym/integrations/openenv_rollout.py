"""TRL's ``GRPOTrainer`` training a policy seat served by ``cgym serve`` processes: the frozen members run in the
servers, the trainer's model answers the seat over OpenEnv's WebSocket sessions.

:class:`ServedRollout` is a ``rollout_func`` (with :attr:`ServedRollout.reward` the matching reward function)::

    rollout = ServedRollout(["http://127.0.0.1:8123", "http://127.0.0.1:8124"], task="zoo:arith")
    trainer = GRPOTrainer(model=..., processing_class=tokenizer, args=GRPOConfig(...), reward_funcs=rollout.reward,
                          rollout_func=rollout, train_dataset=rollout.dataset("train"))

**Why ``rollout_func`` and not TRL's OpenEnv harness.** ``trl.experimental.async_grpo.openenv_harness`` drives
OpenEnv sessions from ``AsyncGRPOTrainer``, which samples through a vLLM server (``vllm_client``): no CPU path, and
its sessions are tool-calling agents (``HarnessAdapter`` / MCP tools), whereas a protocol asks the policy with
prompts it writes itself. ``GRPOTrainer``'s ``rollout_func`` fits what a served protocol is: per row, reset a
session with the item and the step's episode seed, sample the seat's reply to each prompt the server sends with the
trainer's current model (:class:`~coalition_gym.training.trl_rollouts.RowPolicy`, the in-process rollout's own
sampler, ``turns`` as there), step it, until the server says done; the reward is the system's score it returns.

It is the in-process :class:`~coalition_gym.training.trl_rollouts.ProtocolRollout` with another
:class:`~coalition_gym.training.trl_rollouts.RowSeats`: the same row loop
(:func:`~coalition_gym.training.trl_rollouts.play_rows`), episode seeds (``stable_hash("trl", seed, item_id,
global_step + 1)``: all G rows of a
prompt face the same collaborator draws; the policy's own samples are seeded per row and call), dataset and
reward function, which reports each step's share of informative groups (``informative_groups``) and warns when
none can teach anything. Rows are spread over the servers round-robin; each turn's requests go out in parallel (one
thread per session), and each server batches its sessions' member requests. :attr:`ServedRollout.last_episodes` holds
each
row's :class:`~coalition_gym.training.seat_driver.SeatRecord` as the server built it (item, episode seed, the
seat's replies, the reward), enough to replay it in-process: the rewards are the in-process environment's (tests).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from ..tasks import make as make_task
from ..training.seat_driver import SeatRecord
from ..training.trl_adapter import PromptIndex, ZeroSignalWatch
from ..training.trl_rollouts import TURNS, RowRollout, RowSeats, SeatTurn
from ..types import Ask, Message, SamplingParams
from .openenv_client import ServedEnv


class ServedRollout(RowRollout):
    """A ``GRPOTrainer`` ``rollout_func`` over ``cgym serve`` servers at ``urls`` (see the module doc). ``task`` and
    ``task_kwargs`` name the servers' task (the trainer builds its dataset from it; the servers hold the pool);
    ``policy_style``: the style the servers render the seat's prompts in (for the dataset's text); ``watch_steps``:
    warn after this many consecutive steps in which no group's rewards differed (0: never)."""

    def __init__(self, urls: Sequence[str], *, task: str, task_kwargs: dict[str, Any] | None = None,
                 token: str | None = None, turns: str = "first", policy_style: str = "chat", seed: int = 0,
                 watch_steps: int = 5):
        if not urls:
            raise ConfigError("ServedRollout needs at least one server URL (start one with `cgym serve ENV_ID`)")
        if turns not in TURNS:
            raise ConfigError(f"turns={turns!r}; use one of {', '.join(TURNS)}")
        self.urls, self.token, self.turns, self.seed = list(urls), token, turns, seed
        self.prompts = PromptIndex(make_task(task, **dict(task_kwargs or {})), policy_style)
        self.watch = ZeroSignalWatch(watch_steps)
        self.calls = 0
        self.last_episodes: list[SeatRecord] = []
        self._sessions: list[ServedEnv] = []
        self.__name__ = "system_outcome_served"
        self.reward = self._make_reward()

    def session(self, row: int) -> ServedEnv:
        while len(self._sessions) <= row:
            k = len(self._sessions)
            self._sessions.append(ServedEnv(self.urls[k % len(self.urls)], self.token))
        return self._sessions[row]

    def seats(self, rows: int) -> RowSeats:
        return SessionSeats([self.session(i) for i in range(rows)])

    def close(self) -> None:
        for session in self._sessions:
            session.close()
        self._sessions = []


class SessionSeats:
    """:class:`~coalition_gym.training.trl_rollouts.RowSeats` over the wire: row i is a server session; every
    turn's requests go out in parallel (one thread per session), where the servers batch them."""

    def __init__(self, sessions: Sequence[ServedEnv]):
        self.sessions = list(sessions)
        self.item_ids: list[str] = []
        self.seeds: list[int] = []

    def reset(self, item_ids: Sequence[str], seeds: Sequence[int]) -> list[SeatTurn]:
        self.item_ids, self.seeds = list(item_ids), list(seeds)
        with ThreadPoolExecutor(max_workers=max(1, len(item_ids))) as pool:
            results = list(pool.map(lambda i: self.sessions[i].reset(item_id=item_ids[i], episode_seed=seeds[i]),
                                    range(len(item_ids))))
        return [self._turn(i, r) for i, r in enumerate(results)]

    def step(self, rows: Sequence[int], texts: Sequence[str], fail: Mapping[int, str]) -> dict[int, SeatTurn]:
        going = [(i, t) for i, t in zip(rows, texts) if i not in fail]
        out = {i: SeatTurn(record=self._failed(i, reason)) for i, reason in fail.items()}
        with ThreadPoolExecutor(max_workers=max(1, len(going))) as pool:
            results = list(pool.map(lambda row: self.sessions[row[0]].step(row[1]), going))
        out.update({i: self._turn(i, r) for (i, _), r in zip(going, results)})
        return out

    def _turn(self, row: int, result: Any) -> SeatTurn:
        observation = result.observation or {}
        if result.done:
            return SeatTurn(record=served_record(observation.get("details") or {}))
        if not observation.get("policy_asked"):
            return SeatTurn()  # the protocol goes on (or ends) without the seat: step with any text
        return SeatTurn(ask=served_ask(observation))

    def _failed(self, row: int, reason: str) -> SeatRecord:
        return SeatRecord(self.item_ids[row], self.seeds[row], None, 0.0, False, None, 0.0, (), error=reason)


def served_ask(observation: Mapping[str, Any]) -> Ask:
    """The seat's request as the server sent it (its messages, role, round and reply length)."""
    messages = tuple(Message(m["role"], m["content"]) for m in observation.get("messages") or [])
    return Ask("policy", messages, seed=0, params=SamplingParams(  # the row loop seeds it
        max_new_tokens=int(observation.get("max_new_tokens") or 512)),
               role=str(observation.get("role") or "answer"), round=int(observation.get("round") or 0))


def served_record(details: Mapping[str, Any]) -> SeatRecord:
    """The server's end-of-episode details as the :class:`SeatRecord` the server built them from."""
    fields = SeatRecord.__dataclass_fields__
    data = {k: details[k] for k in fields if k in details}
    data["replies"] = tuple(data.get("replies") or ())
    return SeatRecord(**data)
