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

Episode seeds are the in-process adapters' (``stable_hash("trl", seed, item_id, global_step + 1)``): all G rows of
a prompt face the same collaborator draws; the policy's own samples are seeded per row. Rows are spread over the
servers round-robin, and their requests go out in parallel (one thread per session), so two servers run two
episodes' frozen members at once. :attr:`last_episodes` records each row (item, episode seed, the seat's replies,
the reward), enough to replay it in-process: the rewards are the in-process environment's (tests).
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ..agents.base import stable_hash
from ..errors import ConfigError
from ..tasks import make as make_task
from ..tasks.base import SPLITS
from ..training.trl_rollouts import TURNS, EpisodeRecord, Row, RowPolicy, rollout_output
from ..types import Ask, Message, Sample, SamplingParams
from .openenv_client import ServedEnv


class ServedRollout:
    """A ``GRPOTrainer`` ``rollout_func`` over ``cgym serve`` servers at ``urls`` (see the module doc). ``task`` and
    ``task_kwargs`` name the servers' task (the trainer builds its dataset from it; the servers hold the pool);
    ``policy_style``: the style the servers render the seat's prompts in (for the dataset's text)."""

    def __init__(self, urls: Sequence[str], *, task: str, task_kwargs: dict[str, Any] | None = None,
                 token: str | None = None, turns: str = "first", policy_style: str = "chat", seed: int = 0):
        if not urls:
            raise ConfigError("ServedRollout needs at least one server URL (start one with `cgym serve ENV_ID`)")
        if turns not in TURNS:
            raise ConfigError(f"turns={turns!r}; use one of {', '.join(TURNS)}")
        self.urls, self.token, self.turns, self.seed, self.policy_style = list(urls), token, turns, seed, policy_style
        self.task = make_task(task, **dict(task_kwargs or {}))
        self.calls = 0
        self.last_episodes: list[EpisodeRecord] = []
        self._by_prompt: dict[str, str] = {}
        self._sessions: list[ServedEnv] = []
        self.__name__ = "system_outcome_served"
        self.reward = self._make_reward()

    # -- the dataset --------------------------------------------------------------------------------------------
    def dataset_rows(self, split: str = "train", limit: int | None = None) -> list[dict[str, Any]]:
        """Per item of ``split``: the seat's first prompt (as the task renders it) and the item id."""
        if split not in SPLITS:
            raise ConfigError(f"split {split!r} is not one of {', '.join(SPLITS)}")
        rows = []
        for item in list(self.task.items(split))[:limit]:
            prompt = "\n\n".join(m.content for m in self.task.prompt(item, self.policy_style))
            if prompt in self._by_prompt:
                continue  # rollout_func sees prompts only: a repeated prompt could not be told apart
            self._by_prompt[prompt] = item.id
            rows.append({"prompt": prompt, "item_id": item.id})
        if not rows:
            raise ConfigError(f"task {self.task.name!r} has no items in split {split!r}")
        return rows

    def dataset(self, split: str = "train", limit: int | None = None):
        from datasets import Dataset

        return Dataset.from_list(self.dataset_rows(split, limit))

    def item_id_for(self, prompt: Any) -> str:
        key = prompt if isinstance(prompt, str) else "\n\n".join(str(m.get("content", "")) for m in prompt)
        if key not in self._by_prompt:
            raise ConfigError(f"prompt {key[:60]!r} is not in the dataset; build train_dataset with "
                              "ServedRollout.dataset()")
        return self._by_prompt[key]

    def episode_seed(self, item_id: str, call: int) -> int:
        return stable_hash("trl", self.seed, item_id, call) % 2**31

    # -- the rollout -------------------------------------------------------------------------------------------
    def session(self, row: int) -> ServedEnv:
        while len(self._sessions) <= row:
            k = len(self._sessions)
            self._sessions.append(ServedEnv(self.urls[k % len(self.urls)], self.token))
        return self._sessions[row]

    def run(self, item_ids: Sequence[str], policy: Any, step: int, row_offset: int = 0
            ) -> tuple[list[Row], list[EpisodeRecord]]:
        """Every row's episode on the servers with ``policy`` (a :class:`RowPolicy`) answering the seat."""
        seeds = [self.episode_seed(item_id, step) for item_id in item_ids]
        sessions = [self.session(i) for i in range(len(item_ids))]
        calls = [0] * len(item_ids)
        with ThreadPoolExecutor(max_workers=max(1, len(sessions))) as pool:
            results = list(pool.map(lambda i: sessions[i].reset(item_id=item_ids[i], episode_seed=seeds[i]),
                                    range(len(sessions))))
            while not all(r.done for r in results):
                live = [i for i, r in enumerate(results) if not r.done]
                asked = [i for i in live if r_asked(results[i])]
                asks = [self._ask(results[i].observation, i, row_offset + i, seeds[i], calls[i]) for i in asked]
                samples = policy.generate(asks) if asks else []
                texts = {i: "" for i in live}
                for i, sample in zip(asked, samples):
                    if not isinstance(sample, Sample):
                        raise ConfigError(f"the policy failed on row {i}: {sample}")
                    texts[i] = sample.text
                    calls[i] += 1
                stepped = list(pool.map(lambda i: sessions[i].step(texts[i]), live))
                for i, result in zip(live, stepped):
                    results[i] = result
        rows_by: dict[int, Row] = getattr(policy, "rows", {})
        rows, records = [], []
        for i, (item_id, seed, result) in enumerate(zip(item_ids, seeds, results)):
            row = rows_by.get(i, Row())
            meta = result.observation.get("details") or {}
            error = meta.get("error")
            rows.append(row)
            records.append(EpisodeRecord(item_id, seed, tuple(text for _, _, text in row.replies),
                                         None if error else float(result.reward or 0.0),
                                         float(meta.get("policy_score") or 0.0), error))
        return rows, records

    def _ask(self, observation: dict[str, Any], rollout: int, row: int, episode_seed: int, call: int) -> Ask:
        messages = tuple(Message(m["role"], m["content"]) for m in observation.get("messages") or [])
        return Ask("policy", messages, seed=stable_hash("served", episode_seed, row, call),
                   params=SamplingParams(max_new_tokens=int(observation.get("max_new_tokens") or 512)),
                   role=str(observation.get("role") or "answer"), round=int(observation.get("round") or 0),
                   info={"rollout": rollout})

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        import torch

        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        self.calls = int(trainer.state.global_step) + 1  # step k seeds with k + 1, as the in-process adapters
        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        hf = HFGenerator(model, trainer.processing_class,
                         HFOptions(max_new_tokens=int(args.max_completion_length), fast_decode="off"),
                         identity="trl-policy")
        policy = RowPolicy(hf, self.turns, float(args.temperature),
                           float(args.top_p if args.top_p is not None else 1.0))
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                rows, records = self.run([self.item_id_for(p) for p in prompts], policy, self.calls,
                                         row_offset=int(trainer.accelerator.process_index) * len(prompts))
        finally:
            model.train(was_training)
        failed = [r for r in records if r.system_score is None]
        if failed:
            warnings.warn(f"{len(failed)} of {len(records)} served episodes failed (reward None); the first: "
                          f"{failed[0].error}", RuntimeWarning, stacklevel=2)
        self.last_episodes = records
        return rollout_output(rows, records, hf.pad_id)

    def close(self) -> None:
        for session in self._sessions:
            session.close()
        self._sessions = []

    def _make_reward(self) -> Any:
        def reward(prompts: Sequence[Any], completions: Sequence[Any],
                   system_score: Sequence[float | None] | None = None, **kwargs: Any) -> list[float | None]:
            if system_score is None:
                raise ConfigError("the served reward reads the system scores its rollout_func returns; pass "
                                  "rollout_func=<the ServedRollout> to GRPOTrainer too")
            return [None if s is None else float(s) for s in system_score]

        reward.__name__ = self.__name__
        return reward


def r_asked(result: Any) -> bool:
    """Whether a served step result asks the seat (False: the protocol goes on, or ends, without it)."""
    return bool((result.observation or {}).get("policy_asked"))
