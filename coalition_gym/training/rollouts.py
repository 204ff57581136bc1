"""Rollouts: executions of a System whose K >= 1 trainable seats (one for a single policy) each sample behind
their own recording shim, with the sub-team values each seat's credit needs (:mod:`.credit`).

Each execution (rollout) is tagged: the seats' Asks carry ``info["rollout"]``, and each shim records for every
call the prompt token ids, the sampled token ids and their log-probs under the sampling distribution, tagged
with that rollout (and, once collected, its seat). Collaborators' text only ever enters the seats' prompts, so
the loss (on the recorded sampled tokens) touches a seat's own tokens alone. A rollout may hold any number of
calls (debate rounds, SLM-MUX samples, none at all under routing).

Collaborator draws inside a group (``draws``): with ``"shared"`` the G executions of an item share one episode
seed, so every collaborator, helper and tie-break draws exactly as in its group-mates, and only the seats' Asks
are re-seeded per execution. A group's reward differences are then caused by the seats' replies alone
(directly, or through what the collaborators make of them in later rounds), and the leave-one-out baseline
cancels execution by execution, not just in expectation. With ``"fresh"`` every execution draws everything
anew; ``"episode"``: one execution per item with the runner's episode seed (evaluation).

Counterfactuals (credit ``loo`` or ``shapley``). For each execution and each sub-team S of the seats the credit
mode needs (other than the full team, which is the execution itself), the protocol program runs again with the
same episode seed, the frozen collaborators and the seats of S (coalition order kept), and the seats of S
re-seeded exactly as in the real execution. Every Ask is first looked up among the replies of the real
executions (same member, prompt, sampling parameters and seed: the same sample): one-shot protocols are
answered entirely from them (``replayed``) and cost nothing. An Ask the real executions never made (a member
reading different peers, a helper judging different candidates) is generated: a seat's by its policy, *not*
recorded for training; a frozen member's or helper's through the generation cache shared by the whole call.
Those are counted in :attr:`CounterfactualCost.generations`. A sub-team program that does not depend on the
execution (no seat in it) runs once per group under shared draws. A sub-team that cannot play the protocol (no
member at all, or fewer than ``protocol.min_members``) is worth 0, as in :mod:`coalition_gym.valuation.game`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

from ..agents.base import Generator, settled, stable_hash, with_system_prompt
from ..agents.cache import CachedGenerator, GenerationCache, ask_key
from ..envs.protocols import EpisodeContext, ProgramGen
from ..envs.runner import ProgramFailed, RunStats, episode_seed, run_programs, score_outcomes
from ..envs.seated import own_answer_of
from ..envs.system import System
from ..errors import BackendError, ConfigError
from ..tasks.base import Task
from ..types import Ask, Item, Sample
from .credit import needed_coalitions, seat_credit


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
    seat: str = ""  # the trainable seat that made the call (set by :func:`collect`)


@dataclass
class Rollout:
    """One execution of a system with K >= 1 trainable seats (one for a single policy). ``own_scores``: each
    seat's own answer inside the system (``answers``), scored alone (0 when it was not asked); a seat's *solo*
    score is the seat alone, measured elsewhere. ``values``: v(S) of every sub-team the credit mode needs,
    ``credit``: each seat's credit in this execution (:mod:`.credit`; ``system``: the reward)."""

    index: int
    item: Item
    group: int  # rollouts of one item share a group: their advantages are relative to each other
    reward: float  # the system's score in this execution
    calls: list[PolicyCall] = field(default_factory=list)  # every seat's recorded calls (``PolicyCall.seat``)
    own_scores: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str | None] = field(default_factory=dict)  # seat -> its own extracted answer
    values: dict[frozenset[str], float] = field(default_factory=dict)
    credit: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def calls_of(self, seat: str) -> list[PolicyCall]:
        return [c for c in self.calls if c.seat == seat]

    @property
    def own_score(self) -> float:
        """The one seat's own score (a single policy's rollout; 0 with none recorded)."""
        return self._only(self.own_scores, 0.0)

    @property
    def own_answer(self) -> str | None:
        """The one seat's own extracted answer (a single policy's rollout)."""
        return self._only(self.answers, None)

    @staticmethod
    def _only(by_seat: Mapping[str, Any], default: Any) -> Any:
        if len(by_seat) > 1:
            raise ConfigError(f"a rollout of seats {list(by_seat)} has no single own score or answer; read the "
                              "seat's own")
        return next(iter(by_seat.values()), default)


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


@dataclass
class CounterfactualCost:
    """What a call of :func:`collect` ran beside its executions for the seats' credit (see the module doc)."""

    executions: int = 0  # full-team executions run
    counterfactuals: int = 0  # sub-coalition programs run for credit
    generations: int = 0  # generations the counterfactuals needed beyond the real executions (seats + collaborators)
    replayed: int = 0  # counterfactual asks answered from the real execution's own samples (free)
    failed: int = 0  # counterfactual programs that failed (their sub-team scored 0, as a failed episode does)

    def add(self, other: "CounterfactualCost") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class _Tap(Generator):
    """The real executions' side: answers through ``inner`` and keeps every reply by (member, ask key)."""

    def __init__(self, inner: Generator, store: dict[tuple[str, str], Sample]):
        self.inner, self.store, self.identity = inner, store, inner.identity

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        samples = self.inner.generate(asks)
        for ask, sample in zip(asks, samples):
            if isinstance(sample, Sample):
                self.store[(ask.member, ask_key(self.identity, ask))] = sample
        return samples


class Replayed(Generator):
    """The counterfactuals' side: a reply of the real executions where one matches, else ``fallback`` (a
    CachedGenerator: what it really generates is counted by its ``misses``)."""

    def __init__(self, fallback: Any, store: Mapping[tuple[str, str], Sample], cost: CounterfactualCost):
        self.fallback, self.store, self.cost, self.identity = fallback, store, cost, fallback.identity

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        out: list[Sample | None] = [self.store.get((a.member, ask_key(self.identity, a))) for a in asks]
        todo = [k for k, s in enumerate(out) if s is None]
        self.cost.replayed += len(asks) - len(todo)
        if todo:
            before = self.fallback.misses
            fresh = self.fallback.generate([asks[k] for k in todo])
            self.cost.generations += self.fallback.misses - before
            for k, s in zip(todo, fresh):
                out[k] = s
        return out  # type: ignore[return-value]


class _Unrecorded(Generator):
    """A seat's policy generating for a counterfactual: its own sampling settings, nothing kept for training."""

    def __init__(self, policy: RecordingPolicy):
        self.policy, self.identity = policy, policy.identity

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        start = len(self.policy.calls)
        try:
            return self.policy.generate(asks)
        finally:
            del self.policy.calls[start:]


def _seat_policies(system: System, policies: "RecordingPolicy | Mapping[str, RecordingPolicy]", credit: str
                   ) -> dict[str, RecordingPolicy]:
    """seat -> its RecordingPolicy (a bare one answers a system's only seat), checked against the system."""
    seats = tuple(system.seats)
    if isinstance(policies, RecordingPolicy):
        if len(seats) != 1:
            raise ConfigError(f"collect: one policy answers a system of one seat; this one has {list(seats)}: pass "
                              "seat -> policy")
        policies = {seats[0]: policies}
    if not seats:
        raise ConfigError("collect: the system has no trainable seats; give it at least one seat")
    needed_coalitions(seats, credit)  # refuses an unknown mode and K above the Shapley limit
    missing, extra = [s for s in seats if s not in policies], [p for p in policies if p not in system.seats]
    if missing or extra:
        raise ConfigError(f"collect: policies must answer exactly the system's seats {list(seats)}; "
                          f"missing {missing}, not seats {extra}")
    if len({id(policies[s]) for s in seats}) != len(seats):
        raise ConfigError("collect: two seats share one RecordingPolicy, so their calls could not be told "
                          "apart; give each seat its own RecordingPolicy (they may wrap the same backend)")
    outside = [s for s in seats if s not in system.members]
    if outside and credit != "system":
        raise ConfigError(f"credit={credit!r} removes seats from the coalition, but seats {outside} are not "
                          f"coalition members (the coalition: {list(system.members)}); use credit='system'")
    return {s: policies[s] for s in seats}


def _bound(system: System, policies: Mapping[str, Generator], cache: GenerationCache | None,
           wrap: Any) -> dict[str, Generator]:
    """Every name bound to ``wrap(generator, is_seat)``, one wrapper per distinct backend object (so names sharing
    a backend still share its batched call): the pool's names through ``cache`` (when given), each seat its own."""
    made: dict[int, Generator] = {}
    out: dict[str, Generator] = {}
    for name, backend in system.backends.items():
        if id(backend) not in made:
            made[id(backend)] = wrap(CachedGenerator(backend, cache) if cache is not None else backend, False)
        out[name] = made[id(backend)]
    for seat, policy in policies.items():
        out[seat] = wrap(policy, True)
    return out


def collect(system: System, items: Sequence[Item], policies: "RecordingPolicy | Mapping[str, RecordingPolicy]",
            plan: RolloutPlan, credit: str = "system", *, members: Sequence[str] | None = None,
            stats: RunStats | None = None, cost: CounterfactualCost | None = None) -> list[Rollout]:
    """Run ``plan``'s executions of every item in ``system``, whose seats (K >= 1 trainable seats) are answered by
    ``policies`` (seat -> its RecordingPolicy; a bare one for a system of one seat), with the sub-team values
    ``credit`` needs (see the module doc; ``system``: none). ``members``: a sub-coalition (e.g. the collaborators
    without the policy), default the system's coalition. Returns the rollouts (index = execution number in this
    call); what the counterfactuals cost is added to ``cost`` when given. Every seat's own answers are scored in
    one call."""
    seated = _seat_policies(system, policies, credit)
    seats = tuple(seated)
    needed = needed_coalitions(seats, credit)
    full = frozenset(seats)
    task, protocol = system.task, system.protocol
    spent = CounterfactualCost()
    counterfactual = any(sub != full for sub in needed)
    # a group's executions under shared draws ask the collaborators the same first asks, and counterfactuals replay
    # them: both share one cache over this call
    # (all kept: an entry regenerated on a batch-dependent engine could differ from the one it replays)
    cache = GenerationCache(None, memory_bytes=None) if plan.draws == "shared" or counterfactual else None

    # the real executions: every seat samples (recorded), the pool's names through the cache
    contexts, groups, executions = plan_contexts(system, items, plan, members)
    store: dict[tuple[str, str], Sample] = {}
    starts = {s: len(seated[s].calls) for s in seats}
    backends = _bound(system, seated, cache, (lambda gen, seat: _Tap(gen, store)) if counterfactual
                      else (lambda gen, seat: gen))
    programs = [tag_policy_asks(protocol.start(ctx), seats, i, executions[i]) for i, ctx in enumerate(contexts)]
    outcomes = run_programs(programs, backends, stats)
    results = score_outcomes(task, contexts, outcomes)
    spent.executions = len(contexts)
    calls: dict[int, list[PolicyCall]] = {}
    for s in seats:
        for call in seated[s].calls[starts[s]:]:
            call.seat = s
            calls.setdefault(call.rollout, []).append(call)
        del seated[s].calls[starts[s]:]  # the rollouts own them now
    values: list[dict[frozenset[str], float]] = [{full: r.score} for r in results]
    if counterfactual:
        _counterfactuals(system, (contexts, executions), needed, seated, (cache, store, spent, stats), values)

    # each seat's own answer, scored alone (one scoring call for the whole batch)
    answers = {(i, s): policy_answer(task, [c for c in calls.get(i, []) if c.seat == s], ctx.item)
               for i, ctx in enumerate(contexts) for s in seats}
    asked = [(i, s) for (i, s) in answers if any(c.seat == s for c in calls.get(i, []))]
    scored = task.score_batch([answers[k] for k in asked], [contexts[k[0]].item for k in asked]) if asked else []
    own = dict(zip(asked, (r.score for r in scored)))
    rollouts = []
    for i, (ctx, outcome, result) in enumerate(zip(contexts, outcomes, results)):
        rollouts.append(Rollout(
            index=i, item=ctx.item, group=groups[i], reward=result.score, calls=calls.get(i, []),
            own_scores={s: own.get((i, s), 0.0) for s in seats}, answers={s: answers[(i, s)] for s in seats},
            values=values[i], credit=seat_credit(values[i], seats, credit),
            error=result.error if isinstance(outcome, ProgramFailed) else None))
    if cost is not None:
        cost.add(spent)
    return rollouts


def _counterfactuals(system: System, planned: tuple[list[EpisodeContext], list[int | None]],
                     needed: Sequence[frozenset[str]], seated: Mapping[str, RecordingPolicy],
                     shared: tuple[Any, dict[tuple[str, str], Sample], CounterfactualCost, RunStats | None],
                     values: list[dict[frozenset[str], float]]) -> None:
    """Fill ``values`` with every needed sub-team's score per execution, replayed from the real replies in
    ``shared``'s store where they match (see the module doc), counting the cost."""
    contexts, executions = planned
    cache, store, cost, stats = shared
    seats, protocol = tuple(seated), system.protocol
    full = frozenset(seats)
    unique: dict[tuple, tuple[EpisodeContext, int]] = {}  # program key -> (context, execution it is tagged for)
    wanted: list[tuple[int, frozenset[str], tuple]] = []
    for i, ctx in enumerate(contexts):
        for sub in needed:
            if sub == full:
                continue
            members = tuple(m for m in system.members if m not in system.seats or m in sub)
            if not members or len(members) < protocol.min_members:
                values[i][sub] = 0.0
                continue
            # with no seat in it the program is the same for every execution sharing this episode seed
            key = (ctx.seed, ctx.item.id, members, executions[i] if sub else None)
            if key not in unique:
                unique[key] = (system.context(ctx.item, ctx.seed, members), i)
            wanted.append((i, sub, key))
    if not unique:
        return
    keys = list(unique)
    backends = _bound(system, seated, cache, lambda gen, seat: Replayed(
        CachedGenerator(_Unrecorded(gen), cache) if seat else gen, store, cost))
    programs = [tag_policy_asks(protocol.start(unique[k][0]), seats, unique[k][1], executions[unique[k][1]])
                for k in keys]
    scored = score_outcomes(system.task, [unique[k][0] for k in keys], run_programs(programs, backends, stats))
    cost.counterfactuals = len(keys)
    cost.failed = sum(r.error is not None for r in scored)
    by_key = {k: r.score for k, r in zip(keys, scored)}
    for i, sub, key in wanted:
        values[i][sub] = by_key[key]


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


def _rollout_shard(weights: dict[str, PolicyWeights], system: System, items: Sequence[Item], plan: RolloutPlan,
                   credit: str) -> tuple[list[Rollout], CounterfactualCost]:
    """A Ray task: rebuild every seat's policy from its weights and collect this shard's rollouts (with the
    counterfactuals ``credit`` needs, and what they cost)."""
    cost = CounterfactualCost()
    rollouts = collect(system, items, {seat: w.rebuild() for seat, w in weights.items()}, plan, credit, cost=cost)
    return rollouts, cost


def collect_distributed(executor: Any, system: System, items: Sequence[Item],
                        policies: "RecordingPolicy | Mapping[str, RecordingPolicy]", plan: RolloutPlan,
                        credit: str = "system", cost: CounterfactualCost | None = None) -> list[Rollout]:
    """:func:`collect` spread over a Ray executor, whole items per shard, for any number of seats (each seat's
    weights shipped once). Seeds depend on the item and execution, never on the shard, and a seat's credit on
    its own execution's sub-teams, so the rollouts equal the local ones; what the counterfactuals cost is
    added to ``cost`` when given."""
    _ = system.dev  # measured here, once, and shipped with the system (a worker never measures)
    seated = _seat_policies(system, policies, credit)
    shared = {"weights": {seat: PolicyWeights.of(p) for seat, p in seated.items()}, "system": system,
              "credit": credit}
    n = min(len(items), executor.workers)
    size = -(-len(items) // n)
    shards = [{"items": list(items[i:i + size]), "plan": dataclasses.replace(plan, first_group=plan.first_group + i)}
              for i in range(0, len(items), size)]
    rollouts: list[Rollout] = []
    for part, spent in executor.map(_rollout_shard, shards, shared):
        offset = len(rollouts)
        for r in part:  # indices are per shard: make them global, calls included
            r.index += offset
            for call in r.calls:
                call.rollout = r.index
        rollouts += part
        if cost is not None:
            cost.add(spent)
    return rollouts


__all__ = ["PolicyCall", "PolicyWeights", "Rollout", "RolloutPlan", "RecordingPolicy", "CounterfactualCost", "collect",
           "collect_distributed",
           "tag_policy_asks", "plan_contexts", "with_system_prompt", "policy_answer", "protocol_asks"]
