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
from typing import Any, Sequence

from ..agents.base import Generator, settled
from ..envs.runner import ProgramFailed, run_programs
from ..errors import ConfigError, PromptTooLongError
from ..tasks.base import SPLITS
from ..types import Ask, Sample
from .rollouts import protocol_asks, tag_policy_asks
from .trl_adapter import PolicySeat, completion_text

TURNS = ("first", "all")


@dataclass
class Row:
    """One execution's TRL row: the policy's tokens (``env_mask`` 1) and the text it did not write (0)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[tuple[str, int, str]] = field(default_factory=list)  # every call's (role, round, text)


@dataclass(frozen=True)
class EpisodeRecord:
    """What one row's execution was: enough to replay it through a :class:`~coalition_gym.envs.seated.SeatedEpisode`."""

    item_id: str
    episode_seed: int
    replies: tuple[str, ...]  # the policy's replies, in the order it was asked
    system_score: float | None  # None: the execution failed (TRL leaves the row out of the advantages)
    policy_solo_score: float
    error: str | None = None


class RowPolicy(Generator):
    """The policy's backend during a rollout: samples from an :class:`~coalition_gym.agents.hf.HFGenerator`
    over the trainer's model and builds each execution's :class:`Row` (executions told apart by the
    ``info["rollout"]`` that :func:`tag_policy_asks` adds)."""

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



def rollout_output(rows: Sequence[Row], records: Sequence[EpisodeRecord], pad_id: int) -> dict[str, list[Any]]:
    """What a ``rollout_func`` returns to GRPOTrainer: each row's tokens, log-probs and mask, and each
    execution's system score and the policy's own score (the reward function's extra columns)."""
    end = [pad_id]  # a row in which the policy was never asked: one masked token, no gradient
    return {"prompt_ids": [r.prompt_ids or end for r in rows],
            "completion_ids": [r.completion_ids or end for r in rows],
            "logprobs": [r.logprobs or [0.0] for r in rows],
            "env_mask": [r.env_mask or [0] for r in rows],
            "system_score": [r.system_score for r in records],
            "policy_solo_score": [r.policy_solo_score for r in records]}

class ProtocolRollout(PolicySeat):
    """A ``GRPOTrainer`` ``rollout_func`` ``(prompts, trainer) -> dict`` running the protocol with the trainer's
    model in the policy seat (see the module doc); :attr:`reward` is the matching reward function. The
    arguments are :class:`~coalition_gym.training.trl_adapter.SystemOutcomeReward`'s, plus ``turns``.
    :attr:`last_episodes`: the latest batch's executions, one :class:`EpisodeRecord` per row."""

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
        self._by_prompt: dict[str, str] = {}
        self._all_prompts: dict[str, str] | None = None
        self.last_episodes: list[EpisodeRecord] = []
        self.reward = self._make_reward()

    # -- the dataset and its prompts --------------------------------------------------------------
    @staticmethod
    def prompt_key(prompt: Any) -> str:
        """A prompt as text (conversational prompts: their contents joined, as the plain dataset writes them)."""
        if isinstance(prompt, str):
            return prompt
        if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
            return "\n\n".join(str(m.get("content", "")) for m in prompt)
        raise ConfigError(f"cannot read a prompt of type {type(prompt).__name__}; expected str or messages")

    def dataset_rows(self, split: str = "train", limit: int | None = None,
                     conversational: bool = False) -> list[dict[str, Any]]:
        """As :meth:`PolicySeat.dataset_rows`; ``rollout_func`` sees prompts only, so an item is found by its
        prompt, and an item whose prompt repeats an earlier row's is left out (it would be unreachable)."""
        rows, seen, dropped = [], set(), []
        for row in super().dataset_rows(split, limit, conversational):
            key = self.prompt_key(row["prompt"])
            if key in seen:
                dropped.append(row["item_id"])
                continue
            seen.add(key)
            self._by_prompt.setdefault(key, row["item_id"])
            rows.append(row)
        if dropped:
            warnings.warn(f"{len(dropped)} items repeat an earlier item's prompt and are left out of the dataset "
                          f"(rollout_func sees prompts only): {dropped[:3]}", UserWarning, stacklevel=2)
        return rows

    def item_for_prompt(self, prompt: Any) -> Any:
        key = self.prompt_key(prompt)
        if key not in self._by_prompt:
            if self._all_prompts is None:
                self._all_prompts = {}
                for split in SPLITS:
                    if self.system.task.items(split):
                        for row in reversed(PolicySeat.dataset_rows(self, split)):  # the first item of a prompt wins
                            self._all_prompts[self.prompt_key(row["prompt"])] = row["item_id"]
            if key not in self._all_prompts:
                raise ConfigError(f"prompt {key[:60]!r} is not the first prompt of any item of task "
                                  f"{self.system.task.name!r}; build train_dataset with ProtocolRollout.dataset()")
            self._by_prompt[key] = self._all_prompts[key]
        return self._item(self._by_prompt[key])

    # -- the rollout --------------------------------------------------------------------------------
    def policy_backend(self, trainer: Any) -> RowPolicy:
        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        hf = HFGenerator(model, trainer.processing_class,
                         HFOptions(max_new_tokens=int(args.max_completion_length), fast_decode="off"),
                         identity="trl-policy")
        return RowPolicy(hf, self.turns, float(args.temperature), float(args.top_p if args.top_p is not None else 1.0))

    def run(self, prompts: Sequence[Any], policy: Generator, step: int, row_offset: int = 0
            ) -> tuple[list[Row], list[EpisodeRecord]]:
        """Every prompt's execution with ``policy`` (a :class:`RowPolicy`) in the seat, episode seeds from
        TRL's ``step``; rows are numbered from ``row_offset`` (this rank's first row) for the policy's seeds."""
        items = [self.item_for_prompt(p) for p in prompts]  # every prompt checked before any work
        seeds = [self.episode_seed(item.id, step) for item in items]
        programs = [tag_policy_asks(self.system.start(item, seed), self.policy_name, i, reseed=row_offset + i)
                    for i, (item, seed) in enumerate(zip(items, seeds))]
        outcomes = run_programs(programs, {**self.backends, self.policy_name: policy})
        failed = [o for o in outcomes if isinstance(o, ProgramFailed)]
        if failed and len(failed) == len(outcomes):  # no signal at all: a setting that cannot work
            raise ConfigError(f"every execution of the batch failed; the first: {failed[0]}")
        if failed:
            warnings.warn(f"{len(failed)} of {len(outcomes)} executions failed (reward None: TRL gives them no "
                          f"advantage); the first: {failed[0]}", RuntimeWarning, stacklevel=3)
        rows_by: dict[int, Row] = getattr(policy, "rows", {})
        rows, records = [], []
        for i, (item, seed, outcome) in enumerate(zip(items, seeds, outcomes)):
            row = rows_by.get(i, Row())
            system, own = self.scores(item, outcome, row.replies)
            rows.append(row)
            error = str(outcome) if isinstance(outcome, ProgramFailed) else None
            records.append(EpisodeRecord(item.id, seed, tuple(text for _, _, text in row.replies),
                                         None if error else system, own, error))
        return rows, records

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        import torch

        self.calls = int(trainer.state.global_step) + 1  # step k seeds with k + 1, on every rank
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
                   policy_solo_score: Sequence[float] | None = None, **kwargs: Any) -> list[float | None]:
            if system_score is None:
                raise ConfigError(f"{reward.__name__} reads the system scores its rollout_func returns; pass "
                                  "rollout_func=<the ProtocolRollout> to GRPOTrainer too")
            log_metric = kwargs.get("log_metric")
            solo = [own for own, system in zip(policy_solo_score or (), system_score) if system is not None]
            if callable(log_metric) and solo:  # over the rows TRL scores, as its reward mean is
                log_metric("policy_solo_score", sum(solo) / len(solo))
            rewards = [None if s is None else float(s) for s in system_score]
            self.watch.observe([self.prompt_key(p) for p in prompts], rewards)
            return rewards

        reward.__name__ = self.__name__  # TRL names the reward column by it
        return reward


def replay(rollout: PolicySeat, record: EpisodeRecord) -> tuple[float, float]:
    """(system score, the policy's own score) of ``record``'s execution replayed with its recorded replies
    seated through a :class:`~coalition_gym.envs.seated.SeatedEpisode` (no model runs but the collaborators)."""
    from ..envs.seated import SeatedEpisode

    item = rollout._item(record.item_id)
    episode = SeatedEpisode(rollout.system.start(item, record.episode_seed), [rollout.policy_name], rollout.backends)
    replies = list(record.replies)
    while not episode.done and episode.pending(rollout.policy_name) is not None:
        if not replies:
            raise ConfigError(f"the replay of {record.item_id!r} asks the policy more often than the record "
                              "has replies")
        episode.answer(rollout.policy_name, Sample(text=completion_text(replies.pop(0))))
    return rollout.scores(item, episode.outcome, [(a.role, a.round, s.text) for a, s in episode.seat_calls])


__all__ = ["EpisodeRecord", "ProtocolRollout", "Row", "RowPolicy", "TURNS", "replay", "rollout_output"]
