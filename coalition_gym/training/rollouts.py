"""Rollouts: protocol executions with the trainable policy behind a recording shim.

Each execution (rollout) is tagged: the policy's Asks carry ``info["rollout"]``, and the shim records
for every policy call the prompt token ids, the sampled token ids and their log-probs under the
sampling distribution, tagged with that rollout. Collaborators' text only ever enters the policy's
prompts, so the loss (on the recorded sampled tokens) touches the policy's own tokens alone. A rollout
may hold any number of policy calls (debate rounds, SLM-MUX samples, none at all under routing).

Collaborator draws inside a group (``draws``): with ``"shared"`` the G executions of an item share one
episode seed, so every collaborator, helper and tie-break draws exactly as in its group-mates, and
only the policy's Asks are re-seeded per execution. A group's reward differences are then caused by
the policy's replies alone (directly, or through what the collaborators make of them in later rounds),
and the leave-one-out baseline cancels execution by execution, not just in expectation. With
``"fresh"`` every execution draws everything anew.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

from ..agents.base import Generator, settled, stable_hash, with_system_prompt
from ..agents.cache import GenerationCache
from ..envs.executors import wrap_with_cache
from ..envs.protocols import EpisodeContext, ProgramGen
from ..envs.runner import ProgramFailed, RunStats, episode_seed, run_programs, score_outcomes
from ..envs.seated import own_answer_of
from ..envs.system import System
from ..errors import BackendError, ConfigError
from ..tasks.base import Task
from ..types import Ask, Item, Sample


@dataclass
class PolicyCall:
    rollout: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    temperature: float
    round: int
    text: str
    role: str = "answer"  # the Ask's role: helper roles never count as the policy's own answer
    sampler_logprobs: list[float] | None = None  # the rollout engine's own, when the trainer recomputed ``logprobs``


@dataclass
class Rollout:
    index: int
    item: Item
    group: int  # rollouts of one item share a group: their advantages are relative to each other
    reward: float
    solo_score: float  # the policy's own answer, scored alone
    calls: list[PolicyCall] = field(default_factory=list)
    error: str | None = None
    policy_answer: str | None = None  # the policy's own extracted answer (majority of its last round)


class RecordingPolicy(Generator):
    """Wraps the policy's backend (HF, or vLLM via ``agents.vllm_engine.VLLMPolicy``); records every call
    it answers (see module doc). The backend needs ``encode_prompt`` (or ``encode_prompts``) and token ids
    with log-probs."""

    def __init__(self, backend: Any, system_prompt: str = "", temperature: float | None = None):
        self.backend = backend
        self.system_prompt = system_prompt
        self.temperature = temperature  # None: the protocol's; 0: greedy (evaluation only)
        self.identity = (backend.identity + (f":sys{stable_hash(system_prompt):x}" if system_prompt else "")
                         + (f":t{temperature}" if temperature is not None else ""))
        self.calls: list[PolicyCall] = []

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = [with_system_prompt(a, self.system_prompt) for a in asks]
        if self.temperature is not None:
            asks = [dataclasses.replace(a, params=dataclasses.replace(a.params, temperature=self.temperature))
                    for a in asks]
        batched = getattr(self.backend, "encode_prompts", None)  # one tokenizer call when the backend has it
        prompts = batched(asks) if batched is not None else [self.backend.encode_prompt(a) for a in asks]
        sample_after = getattr(self.backend, "sample_after", None)  # HF: sample after these very prompts (one
        # tokenisation per call); other backends (vLLM) render and tokenise their own
        samples = (settled(sample_after(asks, prompts), "prompts fill the context") if sample_after is not None
                   else self.backend.generate(asks))
        for ask, prompt, sample in zip(asks, prompts, samples):
            if sample.token_ids is None or sample.logprobs is None:
                raise BackendError(f"policy backend {self.backend.identity!r} returned no token ids/log-probs; "
                                   "training needs an HF backend")
            self.calls.append(PolicyCall(int(ask.info.get("rollout", -1)), prompt,
                                         list(sample.token_ids), list(sample.logprobs), ask.params.temperature,
                                         ask.round, sample.text, ask.role))
        return samples


def tag_policy_asks(program: ProgramGen, policy_name: str | Collection[str], rollout: int,
                    reseed: int | None = None) -> ProgramGen:
    """Pass a program through, adding ``info["rollout"]`` to the policy's Asks (no effect on what any
    model sees). ``reseed``: mix this execution number into the policy's seeds (shared draws: the
    episode seed is the group's, so without it the G executions would all sample alike).
    ``policy_name``: the policy's seat, or several trainable seats (each re-seeded alike)."""
    names = {policy_name} if isinstance(policy_name, str) else set(policy_name)

    def tag(ask: Ask) -> Ask:
        if ask.member not in names:
            return ask
        seed = ask.seed if reseed is None else stable_hash("execution", ask.seed, reseed)
        return dataclasses.replace(ask, seed=seed, info={**ask.info, "rollout": rollout})

    replies = None
    try:
        while True:
            asks = program.send(replies) if replies is not None else next(program)
            asks = [tag(a) for a in asks]
            replies = yield asks
    except StopIteration as stop:
        return stop.value


def policy_answer(task: Task, calls: Sequence[PolicyCall], item: Item | None = None) -> str | None:
    """The policy's own answer in an execution (:func:`~coalition_gym.envs.seated.own_answer_of`)."""
    return own_answer_of(task, item, [(c.role, c.round, c.text) for c in calls])


@dataclass(frozen=True)
class RolloutPlan:
    """Which executions :func:`collect` runs: ``group_size`` executions of every item, drawn from ``seed``
    (see the module doc for ``draws``; ``"episode"``: one execution per item with the runner's episode seed,
    as ``cgym eval --seed seed`` runs it); group numbers start at ``first_group``."""

    group_size: int
    seed: int
    draws: str = "shared"
    first_group: int = 0

    def __post_init__(self) -> None:
        if self.draws not in ("shared", "fresh", "episode") or (self.draws == "episode" and self.group_size != 1):
            raise ConfigError(f"draws={self.draws!r}; use 'shared' or 'fresh' ('episode' with group_size 1)")


def plan_contexts(system: System, items: Sequence[Item], plan: RolloutPlan, members: Sequence[str] | None = None
                  ) -> tuple[list[EpisodeContext], list[int], list[int | None]]:
    """``plan``'s executions of every item: their episode contexts, group numbers and execution numbers (the
    ``reseed`` of :func:`tag_policy_asks`: the execution's number inside its group under shared draws, None
    otherwise, where the episode seed alone differs)."""
    seed = plan.seed
    contexts, groups, executions = [], [], []
    for g, item in enumerate(items):
        for k in range(plan.group_size):
            episode = ("rollout", seed, item.id) if plan.draws == "shared" else ("rollout", seed, item.id, k)
            contexts.append(system.context(item, episode_seed(seed, item) if plan.draws == "episode"
                                           else stable_hash(*episode) % 2**31, members))
            groups.append(plan.first_group + g)
            executions.append(k if plan.draws == "shared" else None)  # episode: seeds as the runner gives them
    return contexts, groups, executions


def collect(system: System, items: Sequence[Item], policy: RecordingPolicy, plan: RolloutPlan, *,
            members: Sequence[str] | None = None, stats: RunStats | None = None) -> list[Rollout]:
    """Run ``plan``'s executions of every item in ``system``, whose one seat is the policy (answered by
    ``policy``); ``members``: a sub-coalition (e.g. the collaborators without the policy), default the
    system's coalition."""
    if len(system.seats) != 1:
        raise ConfigError(f"collect: the system needs exactly one seat, the policy; it has {list(system.seats)}")
    (policy_name,) = system.seats
    task = system.task
    contexts, groups, executions = plan_contexts(system, items, plan, members)
    start = len(policy.calls)
    programs = [tag_policy_asks(system.protocol.start(ctx), policy_name, i, executions[i])
                for i, ctx in enumerate(contexts)]
    backends = dict(system.backends)
    if plan.draws == "shared":  # a group's executions ask the collaborators the same first asks: answer each once
        backends = wrap_with_cache(backends, GenerationCache(None))
    outcomes = run_programs(programs, {**backends, policy_name: policy}, stats)
    by_rollout: dict[int, list[PolicyCall]] = {}
    for call in policy.calls[start:]:
        by_rollout.setdefault(call.rollout, []).append(call)
    rollouts = []
    for i, (ctx, outcome, result) in enumerate(zip(contexts, outcomes, score_outcomes(task, contexts, outcomes))):
        calls = by_rollout.get(i, [])
        answer = policy_answer(task, calls, ctx.item)
        own_score = task.score_batch([answer], [ctx.item])[0].score if calls else 0.0
        rollouts.append(Rollout(i, ctx.item, groups[i], result.score, own_score,
                                calls, result.error if isinstance(outcome, ProgramFailed) else None, answer))
    del policy.calls[start:]  # the rollouts own them now
    return rollouts


class _ProbeReplies(Generator):
    """Canned replies that parsers of answers, rankings, verdicts and routes accept: every route and
    verdict names candidate ``pick``; answers are all the same (``vary=False``: every member looks
    certain) or all different (``vary=True``: nobody does, so cascades escalate). Notes who was asked."""

    identity = "probe"

    def __init__(self, asked: set[str], name: str, pick: int, vary: bool, counter: list[int]):
        self.asked, self.name, self.pick, self.vary, self.counter = asked, name, pick, vary, counter

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        self.asked.add(self.name)
        out = []
        for _ in asks:
            self.counter[0] += 1
            answer = self.counter[0] if self.vary else 0
            out.append(Sample(text=f"Ranking: [{self.pick}] > [1]\n[[{self.pick}]]\nAnswer: {answer}"))
        return out


def protocol_asks(system: System, items: Sequence[Item], member: str) -> bool | None:
    """Whether ``system``'s protocol can ask ``member`` anything with the system's coalition: its programs
    are driven with canned replies for every name of the pool and coalition (no model runs), once for every
    route/verdict choice, with certain and with uncertain answers. False when no such run asks ``member``;
    None when every probe program failed, so the question stays open."""
    # no dev scores (measuring would run models) and a learned state of its own (canned replies teach nothing)
    probe = system.replace(dev_scores={}, learned=None)
    protocol, coalition, names = probe.protocol, probe.members, list(probe.backends)
    contexts = [probe.context(item, k) for k, item in enumerate(items)]
    any_finished = False
    for pick in range(1, len(coalition) + 1):
        for vary in (False, True):
            asked: set[str] = set()
            counter = [0]
            backends = {n: _ProbeReplies(asked, n, pick, vary, counter) for n in {*names, *coalition}}
            outcomes = run_programs([protocol.start(ctx) for ctx in contexts], backends)
            if member in asked:
                return True
            any_finished = any_finished or not all(isinstance(o, ProgramFailed) for o in outcomes)
    return False if any_finished else None


@dataclass
class PolicyWeights:
    """What a Ray worker needs to rebuild the policy: the HF model's config and weights, its tokenizer and
    decoding settings, and the recording shim's system prompt and temperature."""

    model_config: Any
    state: Any
    tokenizer: Any
    max_new_tokens: int
    identity: str
    system_prompt: str
    temperature: float | None

    @classmethod
    def of(cls, policy: RecordingPolicy) -> "PolicyWeights":
        hf = policy.backend
        # a LoRA policy ships base + adapter merged: the worker rebuilds a plain model from the config
        weights = hf.model.merged_state_dict() if hasattr(hf.model, "merged_state_dict") else hf.model.state_dict()
        state = {k: v.detach().cpu() for k, v in weights.items()}
        return cls(hf.model.config, state, hf.tokenizer, hf.max_new_tokens, hf.identity, policy.system_prompt,
                   policy.temperature)

    def rebuild(self) -> RecordingPolicy:
        import torch
        from transformers import AutoModelForCausalLM

        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        torch.set_num_threads(1)  # one worker per core
        model = AutoModelForCausalLM.from_config(self.model_config)
        model.load_state_dict(self.state)
        model.eval()
        return RecordingPolicy(HFGenerator(model, self.tokenizer, HFOptions(max_new_tokens=self.max_new_tokens),
                                           identity=self.identity), self.system_prompt, self.temperature)


def _rollout_shard(weights: PolicyWeights, system: System, items: Sequence[Item], plan: RolloutPlan) -> list[Rollout]:
    """A Ray task: rebuild the policy from its weights and collect this shard's rollouts."""
    return collect(system, items, weights.rebuild(), plan)


def collect_distributed(executor: Any, system: System, items: Sequence[Item], policy: RecordingPolicy,
                        plan: RolloutPlan) -> list[Rollout]:
    """:func:`collect` spread over a Ray executor, whole items per shard. Seeds depend on the item and
    execution, never on the shard, so the rollouts equal the local ones."""
    _ = system.dev  # measured here, once, and shipped with the system (a worker never measures)
    shared = {"weights": PolicyWeights.of(policy), "system": system}
    n = min(len(items), executor.workers)
    size = -(-len(items) // n)
    shards = [{"items": list(items[i:i + size]), "plan": dataclasses.replace(plan, first_group=plan.first_group + i)}
              for i in range(0, len(items), size)]
    rollouts: list[Rollout] = []
    for part in executor.map(_rollout_shard, shards, shared):
        offset = len(rollouts)
        for r in part:  # indices are per shard: make them global, calls included
            r.index += offset
            for call in r.calls:
                call.rollout = r.index
        rollouts += part
    return rollouts


__all__ = ["PolicyCall", "PolicyWeights", "Rollout", "RolloutPlan", "RecordingPolicy", "collect", "collect_distributed",
           "tag_policy_asks", "plan_contexts", "with_system_prompt", "policy_answer", "protocol_asks"]
