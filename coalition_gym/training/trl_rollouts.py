"""Train a policy seated in a *multi-round* protocol with TRL's ``GRPOTrainer``, rewarded by the system outcome.

:class:`ProtocolRollout` is a ``rollout_func`` for ``GRPOTrainer`` (TRL >= 1.x)::

    rollout = ProtocolRollout("debate", task="zoo:arith", collaborators="sim:demo", members=["atlas", "delta"])
    trainer = GRPOTrainer(model=..., processing_class=tokenizer, args=GRPOConfig(...),
                          reward_funcs=rollout.reward, rollout_func=rollout, train_dataset=rollout.dataset("train"))

**Why ``rollout_func``.** TRL documents two ways to put a model in a multi-turn environment.
``environment_factory`` lets *the model* drive: TRL generates, parses tool calls from the text and calls the
environment's methods as tools, appending their results. A protocol is the other way round: the protocol
program drives, asking the policy (and the collaborators) with prompts it renders itself, several times per
execution (debate rounds, feedback revisions, Mixture-of-Agents layers), and the policy never calls tools.
``rollout_func`` hands us the whole generation step: we run every execution to its end with
:func:`~coalition_gym.envs.runner.run_programs` (the collaborators' Asks batched per backend, the policy's
Asks sampled from the trainer's current model), and return per TRL row the token ids TRL trains on, an
``env_mask`` (1: the policy's tokens, 0: text it did not write) and the system score, which
:attr:`ProtocolRollout.reward` hands to TRL as the reward.

**What TRL trains on.** TRL's loss takes one prompt + completion per row (one row per execution; advantages
are relative within the G rows of a prompt), while the policy answers several prompts per execution, and a
later prompt is in general *not* the earlier prompt plus the earlier reply (debate's default
``history="previous"`` shows only the last round). Concatenating the calls would score a later reply in a
context it was never sampled in (a biased gradient), so ``turns`` picks one of two exact forms:

- ``turns="first"`` (default): the policy sees exactly the protocol's prompts in every call, as in our C-RL
  trainer and the gym envs; the row is the policy's *first* call (prompt + reply). Its later replies are
  sampled from the same current model and shape the outcome, but TRL's loss does not see their tokens: the
  gradient is the first call's part of the policy gradient (unbiased), not the whole of it. For the whole
  of it, use ``cgym train --method crl``, whose loss takes every call with its own prompt.
- ``turns="all"``: every call is trained. The policy is asked in *one growing context*: call k is sampled
  after the row so far (earlier prompts and replies), followed by the protocol's prompt k (only the new
  tokens when prompt k already extends the row), so the row is exactly what was sampled and the loss is
  the exact policy gradient of every reply, prompts masked out by ``env_mask``. The price: the policy sees
  its earlier calls too (more than the protocol shows it, unless the protocol keeps full history, e.g. debate
  with ``history="full"``), and the context grows with every call; a call whose context does not fit the
  model raises a ConfigError (use ``turns="first"`` or fewer rounds).

**Common random numbers.** An execution's episode seed is the item's and TRL's step's
(:meth:`~coalition_gym.training.trl_adapter.PolicySeat.episode_seed` with ``global_step + 1``, as
:class:`~coalition_gym.training.trl_adapter.SystemOutcomeReward` uses with its call counter), never the
row's: all G executions of a prompt in one step face the same collaborator, helper and tie-break draws, on
every rank, and a resumed run draws what an uninterrupted one would. Only the policy's own Asks are
re-seeded per row (:func:`~coalition_gym.training.rollouts.tag_policy_asks`), as our C-RL's shared draws do.
The collaborators' replies go through an in-memory generation cache, so identical Asks (first rounds) run
once per group.

The policy is sampled with the project's HF sampler on the trainer's model (TRL's ``temperature`` and
``top_p``; at most ``max_completion_length`` new tokens per call), not with TRL's vLLM engine.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from ..agents.base import Generator, settle, settled, stable_hash
from ..errors import ConfigError, PromptTooLongError
from ..types import Ask, Sample
from .rollouts import protocol_asks
from .seat_driver import SeatDriver, SeatRecord
from .trl_adapter import PolicySeat, PromptIndex, ZeroSignalWatch, prompt_key, trl_episode_seed

TURNS = ("first", "all")


@dataclass
class Row:
    """One execution's TRL row: the policy's tokens (``env_mask`` 1) and the text it did not write (0)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[tuple[str, int, str]] = field(default_factory=list)  # every call's (role, round, text)


class RowPolicy(Generator):
    """The policy's backend during a rollout: samples from an :class:`~coalition_gym.agents.hf.HFGenerator`
    over the trainer's model and builds each execution's :class:`Row` (executions told apart by the
    ``info["rollout"]`` that :func:`.rollouts.tag_policy_asks` adds)."""

    identity = "trl-rollout-policy"

    def __init__(self, hf: Any, turns: str, temperature: float, top_p: float):
        self.hf, self.turns, self.temperature, self.top_p = hf, turns, temperature, top_p
        self.rows: dict[int, Row] = {}

    def context(self, ask: Ask) -> list[int]:
        """The tokens call ``ask`` is sampled after (see the module doc)."""
        prompt = self.hf.encode_prompt(ask)
        row = self.rows.get(int(ask.info["rollout"]))
        if self.turns == "first" or row is None:
            return prompt
        sofar = row.prompt_ids + row.completion_ids
        return sofar + (prompt[len(sofar):] if prompt[:len(sofar)] == sofar else prompt)

    def record(self, ask: Ask, context: list[int], sample: Sample) -> None:
        row = self.rows.setdefault(int(ask.info["rollout"]), Row())
        tokens, logprobs = list(sample.token_ids or ()), list(sample.logprobs or ())
        if not row.replies:
            row.prompt_ids, row.completion_ids, row.logprobs = context, tokens, logprobs
            row.env_mask = [1] * len(tokens)
        elif self.turns == "all":
            new = context[len(row.prompt_ids) + len(row.completion_ids):]
            row.completion_ids += new + tokens
            row.logprobs += [0.0] * len(new) + logprobs
            row.env_mask += [0] * len(new) + [1] * len(tokens)
        row.replies.append((ask.role, ask.round, sample.text))

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = [dataclasses.replace(a, params=dataclasses.replace(a.params, temperature=self.temperature,
                                                                  top_p=self.top_p)) for a in asks]
        out: list[Sample | BaseException | None] = [None] * len(asks)
        pending = list(range(len(asks)))
        while pending:  # one call per execution at a time: under turns="all" a later call sees the earlier one
            now: list[int] = []
            later: list[int] = []
            taken: set[int] = set()
            for k in pending:
                rollout = int(asks[k].info["rollout"])
                (later if rollout in taken else now).append(k)
                taken.add(rollout)
            contexts = [self.context(asks[k]) for k in now]
            for j, sample in enumerate(self.hf.sample_after([asks[k] for k in now], contexts)):
                if isinstance(sample, PromptTooLongError):  # this execution fails (its reward: None); others go on
                    sample = PromptTooLongError(self.too_long(asks[now[j]], len(contexts[j])))
                elif isinstance(sample, Sample):
                    self.record(asks[now[j]], contexts[j], sample)
                out[now[j]] = sample
            pending = later
        return settled(out, "policy contexts fill the model's context")  # the runner fails only those

    def too_long(self, ask: Ask, tokens: int) -> str:
        return (f"the policy's context for {ask.role!r} round {ask.round} has {tokens} tokens, the model's whole "
                f"context is {self.hf.context}" + (" (turns='all' keeps every earlier call in it; use turns='first', "
                                                    "fewer rounds or a longer-context model)"
                                                    if self.turns == "all" else ""))



def rollout_output(rows: Sequence[Row], records: Sequence[SeatRecord], pad_id: int) -> dict[str, list[Any]]:
    """What a ``rollout_func`` returns to GRPOTrainer: each row's tokens, log-probs and mask, and each
    execution's system score (None: it failed) and the policy's own score (the reward function's extra columns)."""
    end = [pad_id]  # a row in which the policy was never asked: one masked token, no gradient
    return {"prompt_ids": [r.prompt_ids or end for r in rows],
            "completion_ids": [r.completion_ids or end for r in rows],
            "logprobs": [r.logprobs or [0.0] for r in rows],
            "env_mask": [r.env_mask or [0] for r in rows],
            "system_score": [r.reward for r in records],
            "policy_score": [r.policy_score for r in records]}


# -- one TRL step's rows, on any wire ------------------------------------------------------------------------

@dataclass
class SeatTurn:
    """Where one row's episode stands: the Ask its seat must answer now (None: not asked), or its record."""

    ask: Ask | None = None
    record: SeatRecord | None = None

    @property
    def done(self) -> bool:
        return self.record is not None


class RowSeats(Protocol):
    """One TRL step's episodes, one per row, wherever they run (in process: a :class:`SeatDriver`; over the wire:
    a server's sessions). ``fail`` holds rows whose policy sample failed: they end, recorded as failed."""

    def reset(self, item_ids: Sequence[str], seeds: Sequence[int]) -> list[SeatTurn]: ...

    def step(self, rows: Sequence[int], texts: Sequence[str], fail: Mapping[int, str]) -> dict[int, SeatTurn]: ...


def row_ask(ask: Ask, policy_name: str, rollout: int, seed: int) -> Ask:
    """The seat's Ask as the row's policy samples it: its own seed (the G rows of a prompt share the episode seed,
    so without it they would sample alike) and the row it belongs to (``info["rollout"]``, read by RowPolicy)."""
    return dataclasses.replace(ask, member=policy_name, seed=seed, info={**ask.info, "rollout": rollout})


def play_rows(seats: RowSeats, item_ids: Sequence[str], seeds: Sequence[int], policy: Generator,
              row_offset: int = 0) -> list[SeatRecord]:
    """Every row's episode with ``policy`` answering its seat: all rows' pending Asks go to the policy in one call
    per turn; the seat's seeds derive from (episode seed, row, call), never from the wire."""
    turns = seats.reset(item_ids, seeds)
    calls = [0] * len(turns)
    while live := [i for i, turn in enumerate(turns) if not turn.done]:
        asked = [i for i in live if turns[i].ask is not None]
        asks = [row_ask(turns[i].ask, "policy", i, stable_hash("row", seeds[i], row_offset + i, calls[i]))  # type: ignore[arg-type]
                for i in asked]
        texts, fail = {i: "" for i in live}, {}
        for i, reply in zip(asked, settle(policy, asks) if asks else []):
            if isinstance(reply, Sample):
                texts[i] = reply.text
                calls[i] += 1
            else:
                fail[i] = f"the policy failed: {type(reply).__name__}: {reply}"
        for i, turn in seats.step(live, [texts[i] for i in live], fail).items():
            turns[i] = turn
    return [turn.record for turn in turns]  # type: ignore[misc]


class DriverSeats:
    """:class:`RowSeats` in process: a :class:`SeatDriver`'s episodes, every turn's member Asks of all rows in one
    batched call per backend per wave."""

    def __init__(self, driver: SeatDriver):
        self.driver = driver
        self.runs: list[Any] = []

    def reset(self, item_ids: Sequence[str], seeds: Sequence[int]) -> list[SeatTurn]:
        self.runs = self.driver.start_many([(self.driver.item(i), s) for i, s in zip(item_ids, seeds)])
        return self._turns(range(len(self.runs)))

    def step(self, rows: Sequence[int], texts: Sequence[str], fail: Mapping[int, str]) -> dict[int, SeatTurn]:
        going = [i for i in rows if i not in fail]
        for i, reason in fail.items():
            self.driver.fail(self.runs[i], reason)
        self.driver.answer_many([self.runs[i] for i in going], [t for i, t in zip(rows, texts) if i not in fail])
        return dict(zip(rows, self._turns(rows)))

    def _turns(self, rows: Sequence[int] | range) -> list[SeatTurn]:
        ended = [i for i in rows if self.runs[i].done]
        records = dict(zip(ended, self.driver.records([self.runs[i] for i in ended])))
        return [SeatTurn(record=records[i]) if i in records else SeatTurn(ask=self.driver.pending(self.runs[i]))
                for i in rows]


class RowRollout:
    """What every TRL ``rollout_func`` here shares: the call TRL makes (the trainer's model behind a
    :class:`RowPolicy`, the step's episode seeds, :func:`play_rows` over :meth:`seats`), failures counted and
    shown, :attr:`last_episodes` (one :class:`SeatRecord` per row) and ``reward`` (set by each kind), the matching
    reward
    function, which watches for steps in which no group can teach anything. Subclasses give ``prompts`` (a
    :class:`PromptIndex`), ``seed``, ``turns``, ``watch`` and :meth:`seats`."""

    prompts: "PromptIndex"
    seed: int
    turns: str
    watch: ZeroSignalWatch
    __name__: str

    def seats(self, rows: int) -> RowSeats:
        raise NotImplementedError

    def dataset_rows(self, split: str = "train", limit: int | None = None,
                     conversational: bool = False) -> list[dict[str, Any]]:
        """Per item of ``split`` (first ``limit``): the seat's first prompt and the item id (:class:`PromptIndex`)."""
        return self.prompts.rows(split, limit, conversational)

    def dataset(self, split: str = "train", limit: int | None = None, conversational: bool = False):
        """A ``datasets.Dataset`` of :meth:`dataset_rows` (TRL's ``train_dataset``)."""
        from datasets import Dataset

        return Dataset.from_list(self.dataset_rows(split, limit, conversational))

    def episode_seed(self, item_id: str, call: int) -> int:
        return trl_episode_seed(self.seed, item_id, call)

    def run(self, prompts: Sequence[Any], policy: Generator, step: int, row_offset: int = 0
            ) -> tuple[list[Row], list[SeatRecord]]:
        """Every prompt's episode with ``policy`` (a :class:`RowPolicy`) in the seat, episode seeds from TRL's
        ``step``; rows are numbered from ``row_offset`` (this rank's first row) for the policy's seeds."""
        item_ids = [self.prompts.item_id(p) for p in prompts]  # every prompt checked before any work
        seeds = [self.episode_seed(item_id, step) for item_id in item_ids]
        records = play_rows(self.seats(len(item_ids)), item_ids, seeds, policy, row_offset)
        failed = [r for r in records if r.error is not None]
        if failed and len(failed) == len(records):  # no signal at all: a setting that cannot work
            raise ConfigError(f"every execution of the batch failed; the first: {failed[0].error}")
        if failed:
            warnings.warn(f"{len(failed)} of {len(records)} executions failed (reward None: TRL gives them no "
                          f"advantage); the first: {failed[0].error}", RuntimeWarning, stacklevel=3)
        rows_by: dict[int, Row] = getattr(policy, "rows", {})
        return [rows_by.get(i, Row()) for i in range(len(records))], records

    def policy_backend(self, trainer: Any) -> RowPolicy:
        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        hf = HFGenerator(model, trainer.processing_class,
                         HFOptions(max_new_tokens=int(args.max_completion_length), fast_decode="off"),
                         identity="trl-policy")
        return RowPolicy(hf, self.turns, float(args.temperature), float(args.top_p if args.top_p is not None else 1.0))

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        import torch

        self.calls = int(trainer.state.global_step) + 1  # step k seeds with k + 1, on every rank
        self.prompts.check(prompts)
        policy = self.policy_backend(trainer)
        model = policy.hf.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                rows, records = self.run(prompts, policy, self.calls,
                                         row_offset=int(trainer.accelerator.process_index) * len(prompts))
        finally:
            model.train(was_training)
        self.last_episodes = records
        return rollout_output(rows, records, policy.hf.pad_id)

    def _make_reward(self) -> Any:
        def reward(prompts: Sequence[Any], completions: Sequence[Any],
                   system_score: Sequence[float | None] | None = None,
                   policy_score: Sequence[float] | None = None, **kwargs: Any) -> list[float | None]:
            if system_score is None:
                raise ConfigError(f"{reward.__name__} reads the system scores its rollout_func returns; pass "
                                  "rollout_func=<the rollout> to GRPOTrainer too")
            log_metric = kwargs.get("log_metric")
            own = [score for score, system in zip(policy_score or (), system_score) if system is not None]
            rewards = [None if s is None else float(s) for s in system_score]
            informative = self.watch.observe([prompt_key(p) for p in prompts], rewards)
            if callable(log_metric):
                if own:  # over the rows TRL scores, as its reward mean is
                    log_metric("policy_score", sum(own) / len(own))
                log_metric("informative_groups", informative)
            return rewards

        reward.__name__ = self.__name__  # TRL names the reward column by it
        return reward


class ProtocolRollout(RowRollout, PolicySeat):
    """A ``GRPOTrainer`` ``rollout_func`` ``(prompts, trainer) -> dict`` running the protocol with the trainer's
    model in the policy seat (see the module doc); :attr:`reward` is the matching reward function. The
    arguments are :class:`~coalition_gym.training.trl_adapter.SystemOutcomeReward`'s, plus ``turns``.
    :attr:`last_episodes`: the latest batch's executions, one :class:`SeatRecord` per row."""

    def __init__(self, system: Any = None, *, turns: str = "first", **kwargs: Any):
        if turns not in TURNS:
            raise ConfigError(f"turns={turns!r}; use one of {', '.join(TURNS)}")
        if system is None and "protocol" not in kwargs:
            system = "debate"
        super().__init__(system, **kwargs)
        self.turns = turns
        probe_items = list(self.system.items)[:4]
        if protocol_asks(self.system, probe_items, self.policy_name) is False:
            raise ConfigError(f"protocol {self.system.protocol.name!r} never asks the policy seat "
                              f"{self.policy_name!r} with coalition {list(self.coalition)}: there is nothing to train")
        self.prompts = PromptIndex(self.system.task, self.policy_style)
        self.driver = SeatDriver(self.system, policy_name=self.policy_name, policy_style=self.policy_style)
        self.last_episodes: list[SeatRecord] = []
        self.reward = self._make_reward()

    def seats(self, rows: int) -> RowSeats:
        return DriverSeats(self.driver)


def replay(rollout: PolicySeat, record: SeatRecord) -> tuple[float, float]:
    """(system score, the policy's own score) of ``record``'s execution replayed with its recorded replies seated
    (no model runs but the collaborators)."""
    replayed = SeatDriver(rollout.system, policy_name=rollout.policy_name, policy_style=rollout.policy_style
                          ).replay(record.item_id, record.episode_seed, record.replies)
    return replayed.system_score, replayed.policy_score


__all__ = ["DriverSeats", "ProtocolRollout", "Row", "RowPolicy", "RowRollout", "RowSeats", "SeatTurn", "TURNS",
           "play_rows", "replay", "rollout_output"]
