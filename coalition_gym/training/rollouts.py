"""Rollouts: protocol executions with the trainable policy behind a recording shim.

Each execution (rollout) is tagged: the policy's Asks carry ``info["rollout"]``, and the shim records
for every policy call the prompt token ids, the sampled token ids and their log-probs under the
sampling distribution, tagged with that rollout. Collaborators' text only ever enters the policy's
prompts, so the loss (on the recorded sampled tokens) touches the policy's own tokens alone. A rollout
may hold any number of policy calls (debate rounds, SLM-MUX samples, none at all under routing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..agents.base import Generator, stable_hash
from ..envs.protocols import EpisodeContext, Protocol, ProgramGen
from ..envs.runner import ProgramFailed, RunStats, run_programs, score_outcomes
from ..envs.protocols.voting import majority_of
from ..errors import BackendError
from ..tasks.base import Task
from ..types import Ask, Item, Message, Sample


@dataclass
class PolicyCall:
    rollout: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    temperature: float
    round: int
    text: str


@dataclass
class Rollout:
    index: int
    item: Item
    group: int  # rollouts of one item share a group: their advantages are relative to each other
    reward: float
    solo_score: float  # the policy's own answer, scored alone
    calls: list[PolicyCall] = field(default_factory=list)
    error: str | None = None


def with_system_prompt(ask: Ask, system_prompt: str) -> Ask:
    """The Ask with the policy's system prompt replaced (or added; merged into the first user turn
    for compact prompts that have no system turn)."""
    if not system_prompt:
        return ask
    messages = list(ask.messages)
    if messages and messages[0].role == "system":
        messages[0] = Message("system", system_prompt)
    elif messages and messages[0].role == "user" and len(messages) == 1:
        messages[0] = Message("user", f"{system_prompt}\n{messages[0].content}")
    else:
        messages.insert(0, Message("system", system_prompt))
    return dataclasses.replace(ask, messages=tuple(messages))


class RecordingPolicy(Generator):
    """Wraps the policy's HF backend; records every call it answers (see module doc)."""

    def __init__(self, backend: Any, system_prompt: str = ""):
        self.backend = backend
        self.system_prompt = system_prompt
        self.identity = backend.identity + (f":sys{stable_hash(system_prompt):x}" if system_prompt else "")
        self.calls: list[PolicyCall] = []

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = [with_system_prompt(a, self.system_prompt) for a in asks]
        samples = self.backend.generate(asks)
        for ask, sample in zip(asks, samples):
            if sample.token_ids is None or sample.logprobs is None:
                raise BackendError(f"policy backend {self.backend.identity!r} returned no token ids/log-probs; "
                                   "training needs an HF backend")
            self.calls.append(PolicyCall(int(ask.info.get("rollout", -1)), self.backend.encode_prompt(ask),
                                         list(sample.token_ids), list(sample.logprobs), ask.params.temperature,
                                         ask.round, sample.text))
        return samples


def tag_policy_asks(program: ProgramGen, policy_name: str, rollout: int) -> ProgramGen:
    """Pass a program through, adding ``info["rollout"]`` to the policy's Asks (no effect on seeds or
    on what any model sees)."""
    replies = None
    try:
        while True:
            asks = program.send(replies) if replies is not None else next(program)
            asks = [dataclasses.replace(a, info={**a.info, "rollout": rollout}) if a.member == policy_name else a
                    for a in asks]
            replies = yield asks
    except StopIteration as stop:
        return stop.value


def policy_solo_score(task: Task, item: Item, calls: Sequence[PolicyCall]) -> float:
    """The policy's own answer (majority of its last round's replies), scored alone."""
    if not calls:
        return 0.0
    last = max(c.round for c in calls)
    answer, _, _ = majority_of([task.extract(c.text) for c in calls if c.round == last])
    return task.score(answer, item)


def collect(protocol: Protocol, task: Task, items: Sequence[Item], coalition: Sequence[str],
            backends: Mapping[str, Generator], policy: RecordingPolicy, policy_name: str, group_size: int,
            seed: int, styles: Mapping[str, str], dev_scores: Mapping[str, float] | None = None,
            stats: RunStats | None = None, first_group: int = 0) -> list[Rollout]:
    """``group_size`` executions of every item; each has its own episode seed, so the policy and the
    collaborators both draw afresh."""
    contexts, groups = [], []
    for g, item in enumerate(items):
        for k in range(group_size):
            contexts.append(EpisodeContext(item=item, task=task, members=tuple(coalition),
                                           seed=stable_hash("rollout", seed, item.id, k) % 2**31,
                                           styles=styles, dev_scores=dev_scores or {}))
            groups.append(first_group + g)
    start = len(policy.calls)
    programs = [tag_policy_asks(protocol.start(ctx), policy_name, i) for i, ctx in enumerate(contexts)]
    outcomes = run_programs(programs, {**backends, policy_name: policy}, stats)
    by_rollout: dict[int, list[PolicyCall]] = {}
    for call in policy.calls[start:]:
        by_rollout.setdefault(call.rollout, []).append(call)
    rollouts = []
    for i, (ctx, outcome, result) in enumerate(zip(contexts, outcomes, score_outcomes(task, contexts, outcomes))):
        calls = by_rollout.get(i, [])
        rollouts.append(Rollout(i, ctx.item, groups[i], result.score, policy_solo_score(task, ctx.item, calls),
                                calls, result.error if isinstance(outcome, ProgramFailed) else None))
    del policy.calls[start:]  # the rollouts own them now
    return rollouts


def _rollout_shard(model_config: Any, state: Any, tokenizer: Any, max_new_tokens: int, identity: str,
                   system_prompt: str, protocol: Protocol, task: Task, coalition: Sequence[str],
                   backends: Mapping[str, Generator], policy_name: str, group_size: int, seed: int,
                   styles: Mapping[str, str], dev_scores: Mapping[str, float], items: Sequence[Item],
                   first_group: int) -> list[Rollout]:
    """A Ray task: rebuild the policy from its weights and collect this shard's rollouts."""
    import torch
    from transformers import AutoModelForCausalLM

    from ..agents.hf import HFGenerator

    torch.set_num_threads(1)  # one worker per core
    model = AutoModelForCausalLM.from_config(model_config)
    model.load_state_dict(state)
    model.eval()
    policy = RecordingPolicy(HFGenerator(model, tokenizer, max_new_tokens=max_new_tokens, identity=identity),
                             system_prompt)
    return collect(protocol, task, items, coalition, backends, policy, policy_name, group_size, seed, styles,
                   dev_scores, first_group=first_group)


def collect_distributed(executor: Any, policy: RecordingPolicy, protocol: Protocol, task: Task,
                        items: Sequence[Item], coalition: Sequence[str], backends: Mapping[str, Generator],
                        policy_name: str, group_size: int, seed: int, styles: Mapping[str, str],
                        dev_scores: Mapping[str, float] | None = None, first_group: int = 0) -> list[Rollout]:
    """:func:`collect` spread over a Ray executor, whole items per shard. Seeds depend on the item and
    execution, never on the shard, so the rollouts equal the local ones."""
    hf = policy.backend
    state = {k: v.detach().cpu() for k, v in hf.model.state_dict().items()}
    shared = {"model_config": hf.model.config, "state": state, "tokenizer": hf.tokenizer,
              "max_new_tokens": hf.max_new_tokens, "identity": hf.identity, "system_prompt": policy.system_prompt,
              "protocol": protocol, "task": task, "coalition": list(coalition), "backends": dict(backends),
              "policy_name": policy_name, "group_size": group_size, "seed": seed, "styles": dict(styles),
              "dev_scores": dict(dev_scores or {})}
    n = min(len(items), executor.workers)
    size = -(-len(items) // n)
    shards = [{"items": list(items[i:i + size]), "first_group": first_group + i} for i in range(0, len(items), size)]
    rollouts: list[Rollout] = []
    for part in executor.map(_rollout_shard, shards, shared):
        offset = len(rollouts)
        for r in part:  # indices are per shard: make them global, calls included
            r.index += offset
            for call in r.calls:
                call.rollout = r.index
        rollouts += part
    return rollouts


__all__ = ["PolicyCall", "Rollout", "RecordingPolicy", "collect", "collect_distributed", "tag_policy_asks",
           "with_system_prompt", "policy_solo_score"]
