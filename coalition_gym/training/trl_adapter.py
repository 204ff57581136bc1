"""Use a one-shot protocol's *system outcome* as a TRL ``GRPOTrainer`` reward function.

TRL samples completions for a prompt; :class:`SystemOutcomeReward` seats each completion as the
policy's reply inside the protocol, runs the frozen collaborators (and helpers), and returns the
system's score. The dataset it builds holds the policy's first prompt and the item id::

    reward = SystemOutcomeReward("majority_vote", task="rg/basic_arithmetic", collaborators="sim:demo")
    trainer = GRPOTrainer(model=..., reward_funcs=reward, train_dataset=reward.dataset("train"), ...)

Only one-shot protocols fit (the policy is asked exactly once per execution: majority vote,
LLM-Blender, SLM-MUX with ``samples=1``); a protocol that asks the policy again raises a ConfigError.
For multi-round protocols (debate, feedback, Mixture-of-Agents with the policy as a proposer) give
``GRPOTrainer`` a :class:`~coalition_gym.training.trl_rollouts.ProtocolRollout` as its ``rollout_func``,
or use this project's own C-RL trainer (``cgym train --method crl``).

Collaborators' draws depend on the item and on TRL's optimiser step (a counter of reward calls when called
without TRL's ``trainer_state``), not on the completion, so all completions of one prompt in a batch face the
same collaborators (common random numbers), on every rank of a multi-process run; their
first-round generations are computed once and shared through an in-memory generation cache.

For a model with a chat template, build the dataset with ``conversational=True``: TRL then applies the template
(the zoo's opens with the BOS token it was trained with), so the policy reads what the project's own trainer
gives it; plain-text prompts reach the model without it.
"""

from __future__ import annotations

import random
import warnings
from typing import Any, Callable, Sequence

from ..agents.base import stable_hash
from ..agents.cache import GenerationCache
from ..envs.executors import wrap_with_cache
from ..envs.runner import ProgramFailed
from ..envs.seated import SeatedEpisode, own_answer_of
from ..envs.system import System, SystemSpec, seated_system, system_source
from ..errors import ConfigError
from ..tasks.base import SPLITS
from ..types import Sample
from .probe import ProbeResult, ProbeSetting, probe_rollouts, refuse_without_signal


def completion_text(completion: Any) -> str:
    """TRL passes plain strings, or for conversational data a list of {"role", "content"} messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise ConfigError(f"cannot read a completion of type {type(completion).__name__}; expected str or messages")


class NoSignalWarning(UserWarning):
    """TRL's rewards had zero spread inside every prompt's group for several steps: nothing is learned."""


class ZeroSignalWatch:
    """Counts consecutive reward calls in which every prompt's completions scored alike (zero reward std inside
    every group: TRL's ``frac_reward_zero_std`` 1, ``grad_norm`` 0) and, after ``steps`` of them, warns once
    through ``warn`` (default: ``warnings.warn`` with :class:`NoSignalWarning`). ``steps`` 0: never."""

    def __init__(self, steps: int = 5, warn: Callable[[str], None] | None = None):
        if steps < 0:
            raise ConfigError(f"watch_steps={steps}: use 0 (no watch) or more")
        self.steps, self.warn = steps, warn
        self.silent_calls, self.warned = 0, False

    def observe(self, keys: Sequence[Any], rewards: Sequence[float | None]) -> float:
        """Count one step's groups (rows sharing a key); returns the share of groups whose rewards differ (the
        groups that can teach anything)."""
        groups: dict[str, set[float]] = {}
        for key, value in zip(keys, rewards):
            if value is not None:
                groups.setdefault(str(key), set()).add(round(float(value), 12))
        informative = sum(len(v) > 1 for v in groups.values()) / len(groups) if groups else 0.0
        self.silent_calls = 0 if informative > 0 else self.silent_calls + 1
        if self.steps and self.silent_calls >= self.steps and not self.warned:
            self.warned = True
            message = (f"no learning signal: the rewards had zero spread inside every prompt's group for "
                       f"{self.silent_calls} consecutive steps, so every advantage and gradient is 0. Run the "
                       "adapter's probe(model, tokenizer) for the likely cause")
            if self.warn is not None:
                self.warn(message)
            else:
                warnings.warn(message, NoSignalWarning, stacklevel=3)
        return informative


def prompt_key(prompt: Any) -> str:
    """A prompt as text (conversational prompts: their contents joined, as the plain dataset writes them)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return "\n\n".join(str(m.get("content", "")) for m in prompt)
    raise ConfigError(f"cannot read a prompt of type {type(prompt).__name__}; expected str or messages")


def trl_episode_seed(seed: int, item_id: str, call: int) -> int:
    """The episode seed of ``item_id`` in TRL's ``call``-th batch: every completion of the item in that batch faces
    the same collaborator draws (common random numbers), whatever the policy writes, on every rank and wire."""
    return stable_hash("trl", seed, item_id, call) % 2**31


def first_prompt_rows(task: Any, policy_style: str, split: str, limit: int | None = None,
                      conversational: bool = False) -> list[dict[str, Any]]:
    """Per item of ``split``: the seat's first prompt (as the task renders it in ``policy_style``) and the item id."""
    if split not in SPLITS:
        raise ConfigError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    rows = []
    for item in list(task.items(split))[:limit]:
        messages = task.prompt(item, policy_style)
        prompt: Any = ([{"role": m.role, "content": m.content} for m in messages] if conversational
                       else "\n\n".join(m.content for m in messages))
        rows.append({"prompt": prompt, "item_id": item.id})
    if not rows:
        raise ConfigError(f"task {task.name!r} has no items in split {split!r}")
    return rows


class PromptIndex:
    """A ``rollout_func`` sees prompts only: the dataset's rows (:func:`first_prompt_rows`, an item whose prompt
    repeats an earlier row's left out with a warning: it would be unreachable) and the way back from a prompt to
    its item id (the first item of any split with that first prompt, for prompts of rows built elsewhere)."""

    def __init__(self, task: Any, policy_style: str):
        self.task, self.policy_style = task, policy_style
        self._by_prompt: dict[str, str] = {}
        self._all: dict[str, str] | None = None

    def rows(self, split: str = "train", limit: int | None = None, conversational: bool = False
             ) -> list[dict[str, Any]]:
        rows, seen, dropped = [], set(), []
        for row in first_prompt_rows(self.task, self.policy_style, split, limit, conversational):
            key = prompt_key(row["prompt"])
            if key in seen:
                dropped.append(row["item_id"])
                continue
            seen.add(key)
            self._by_prompt.setdefault(key, row["item_id"])
            rows.append(row)
        if dropped:
            warnings.warn(f"{len(dropped)} items repeat an earlier item's prompt and are left out of the dataset "
                          f"(rollout_func sees prompts only): {dropped[:3]}", UserWarning, stacklevel=3)
        return rows

    def item_id(self, prompt: Any) -> str:
        key = prompt_key(prompt)
        if key not in self._by_prompt:
            if self._all is None:
                self._all = {}
                for split in SPLITS:
                    if self.task.items(split):
                        for row in reversed(first_prompt_rows(self.task, self.policy_style, split)):
                            self._all[prompt_key(row["prompt"])] = row["item_id"]
            if key not in self._all:
                raise ConfigError(f"prompt {key[:60]!r} is not the first prompt of any item of task "
                                  f"{self.task.name!r}; build train_dataset with the rollout's .dataset()")
            self._by_prompt[key] = self._all[key]
        return self._by_prompt[key]

    def check(self, prompts: Sequence[Any]) -> None:
        """Every prompt found (a ConfigError before any work otherwise)."""
        for prompt in prompts:
            self.item_id(prompt)


class PolicySeat:
    """What both TRL entry points share: the system with one policy seat (answered by TRL's model), the
    dataset of the policy's first prompts, item look-up, the episode seeds and the scoring of an episode."""

    def __init__(self, system: System | SystemSpec | str | None = None, *, policy_name: str = "policy",
                 policy_style: str = "chat", seed: int = 0, watch_steps: int = 5,
                 on_no_signal: Callable[[str], None] | None = None, **spec: Any):
        """``system``: the System (or spec, or protocol name) the policy plays in; else ``spec`` are a
        :class:`SystemSpec`'s fields and protocol settings (default protocol ``majority_vote``, split
        ``test``: the split the dataset's rows are drawn from is chosen per call). ``watch_steps``: after this
        many consecutive reward calls in which every prompt's completions scored alike (zero reward std: no
        gradient), ``on_no_signal`` is called once with a warning (default: ``warnings.warn``)."""
        self.watch = ZeroSignalWatch(watch_steps, on_no_signal)
        system = system_source(system, spec, defaults={"protocol": "majority_vote", "split": "test"})
        self.system = seated_system(system, {policy_name: policy_style})
        self.policy_name, self.policy_style, self.seed = policy_name, policy_style, seed
        self.coalition = tuple(self.system.members)
        self.styles = self.system.styles
        self.backends = wrap_with_cache(self.system.backends, GenerationCache(None))
        self.dev_scores = self.system.dev  # the frozen members' (not the policy's)
        self.calls = 0
        self._index: dict | None = None
        self.__name__ = f"system_outcome_{self.system.protocol.name}"  # TRL names reward columns by it

    def probe(self, model: Any, tokenizer: Any, *, groups: int = 8, group_size: int = 4, max_new_tokens: int = 16,
              temperature: float | None = None, force: bool = False) -> ProbeResult:
        """The pre-training probe every trainer runs (:mod:`.probe`), before ``GRPOTrainer.train()``: ``groups``
        train items, ``group_size`` executions each, with ``model`` sampled in the policy seat (``temperature``
        None: the protocol's); the informative-group share, the policy's pivotality and its own score, printed.
        Raises :class:`~coalition_gym.training.probe.NoSignalError` with the likely cause when no group is
        informative (TRL would log ``grad_norm`` 0 and ``frac_reward_zero_std`` 1 throughout), unless ``force``."""
        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions
        from .rollouts import RecordingPolicy, RolloutPlan, collect

        items = list(self.system.task.items("train"))
        items = random.Random(stable_hash("probe-items", self.seed)).sample(items, min(groups, len(items)))
        hf = HFGenerator(model, tokenizer, HFOptions(max_new_tokens=max_new_tokens),
                         identity=f"{self.policy_name}:probe")
        was_training = bool(getattr(model, "training", False))
        model.eval()
        try:
            rollouts = collect(self.system, items, {self.policy_name: RecordingPolicy(hf, "", temperature)},
                               RolloutPlan(group_size, stable_hash("probe", self.seed)))
        finally:
            model.train(was_training)
        results = probe_rollouts(rollouts, [r.reward for r in rollouts], group_size, [self.policy_name])
        protocol = self.system.protocol
        setting = ProbeSetting("GRPOTrainer", self.system.task.name, group_size, protocol.name,
                               str(getattr(self.system.pool, "name", list(self.coalition))), protocol.settings())
        refuse_without_signal(results, setting, force, print, "Pass probe(..., force=True) to train anyway.")
        return results[self.policy_name]

    def dataset_rows(self, split: str = "train", limit: int | None = None,
                     conversational: bool = False) -> list[dict[str, Any]]:
        """The rows of :meth:`dataset`."""
        return first_prompt_rows(self.system.task, self.policy_style, split, limit, conversational)

    def dataset(self, split: str = "train", limit: int | None = None, conversational: bool = False):
        """A ``datasets.Dataset`` with the policy's first prompt and the item id, per item of ``split``."""
        from datasets import Dataset

        return Dataset.from_list(self.dataset_rows(split, limit, conversational))

    def _item(self, item_id: str):
        if self._index is None:
            self._index = {it.id: it for split in SPLITS for it in self.system.task.items(split)}
        if item_id not in self._index:
            raise ConfigError(f"item {item_id!r} is not in task {self.system.task.name!r}")
        return self._index[item_id]

    def episode_seed(self, item_id: str, call: int) -> int:
        return trl_episode_seed(self.seed, item_id, call)

    def scores(self, item: Any, outcome: Any, seat_replies: Sequence[tuple[str, int, str]]) -> tuple[float, float]:
        """(system score, the policy's own score) of a finished episode; ``seat_replies``: the policy's
        ``(role, round, text)`` replies. A failed or unfinished episode scores 0."""
        if outcome is None or isinstance(outcome, ProgramFailed):
            return 0.0, 0.0
        own = own_answer_of(self.system.task, item, seat_replies)
        system_result, own_result = self.system.task.score_batch([outcome.answer, own], [item, item])
        return system_result.score, own_result.score


class SystemOutcomeReward(PolicySeat):
    """Callable reward function ``(prompts, completions, item_id, **kw) -> list[float]``."""

    def score_completion(self, item_id: str, completion: Any, episode_seed: int) -> tuple[float, float]:
        """(system score, the policy's own score) with ``completion`` seated as the policy's reply."""
        item = self._item(item_id)
        episode = SeatedEpisode(self.system.start(item, episode_seed), [self.policy_name], self.backends)
        text = completion_text(completion)
        if episode.pending(self.policy_name) is not None:
            episode.answer(self.policy_name, Sample(text=text))
        if not episode.done:
            raise ConfigError(f"protocol {self.system.protocol.name!r} asked the policy more than once; the TRL "
                              "reward adapter supports one-shot protocols only (one-shot: "
                              "SystemOutcomeReward; multi-round: trl_rollouts.ProtocolRollout as GRPOTrainer's "
                              "rollout_func, or `cgym train --method crl`)")
        return self.scores(item, episode.outcome, [(a.role, a.round, s.text) for a, s in episode.seat_calls])

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], item_id: Sequence[str],
                 **kwargs: Any) -> list[float]:
        trainer_state = kwargs.get("trainer_state")  # TRL passes it: seed by its step, so every rank of a
        # multi-process run and a resumed run draw the collaborators alike; called by hand, count the calls
        self.calls = int(trainer_state.global_step) + 1 if trainer_state is not None else self.calls + 1
        rewards, solo = [], []
        for iid, completion in zip(item_id, completions):
            system, own = self.score_completion(iid, completion, self.episode_seed(iid, self.calls))
            rewards.append(system)
            solo.append(own)
        self.watch.observe(item_id, rewards)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and solo:  # the policy's solo score next to the system reward
            log_metric("policy_score", sum(solo) / len(solo))
        return rewards
