"""Team rollouts: executions of a System whose K trainable seats each sample behind their own recording shim,
with the sub-team values each seat's credit needs (:mod:`.credit`).

Draws are those of single-seat :func:`~coalition_gym.training.rollouts.collect`: with ``draws="shared"`` the G
executions of an item share one episode seed, so frozen collaborators, helpers and tie-breaks draw alike in
all of them and only the seats' Asks are re-seeded per execution (every seat, in every execution); with
``"episode"`` one execution per item with the runner's episode seed (evaluation); ``"fresh"`` draws everything
anew per execution.

Counterfactuals. For each execution and each sub-team S of the seats that the credit mode needs (other than the
full team, which is the execution itself), the protocol program runs again with the same episode seed, the
frozen collaborators and the seats of S (coalition order kept), and the seats of S re-seeded exactly as in the
real execution. Every Ask is first looked up among the replies of the real executions (same member, prompt,
sampling parameters and seed: the same sample): one-shot protocols are answered entirely from them
(``replayed``) and cost nothing. An Ask the real executions never made (a member reading different peers, a
helper judging different candidates) is generated: a seat's by its policy, *not* recorded for training; a
frozen member's or helper's through the generation cache shared by the whole call. Those are counted in
:attr:`CounterfactualCost.generations`. A sub-team program that does not depend on the execution (no seat in it)
runs once per group under shared draws. A sub-team that cannot play the protocol (no member at all, or fewer
than ``protocol.min_members``) is worth 0, as in :mod:`coalition_gym.valuation.game`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...agents.base import Generator
from ...agents.cache import CachedGenerator, GenerationCache, ask_key
from ...envs.protocols import EpisodeContext
from ...envs.runner import ProgramFailed, RunStats, run_programs, score_outcomes
from ...envs.system import System
from ...errors import ConfigError
from ...types import Ask, Item, Sample
from ..rollouts import PolicyCall, RecordingPolicy, RolloutPlan, plan_contexts, policy_answer, tag_policy_asks
from .credit import needed_coalitions, seat_credit


@dataclass
class TeamRollout:
    index: int
    item: Item
    group: int  # the G executions of one item share a group
    reward: float  # the full team's system score in this execution
    values: dict[frozenset[str], float]  # v(S) for every S in needed_coalitions(seats, mode)
    credit: dict[str, float]  # seat -> its credit in this execution (seat_credit)
    calls: dict[str, list[PolicyCall]]  # seat -> its recorded calls in the full execution (what it trains on)
    solo_scores: dict[str, float]  # seat -> its own answer scored alone (0 when it was not asked)
    error: str | None = None
    answers: dict[str, str | None] = field(default_factory=dict)  # seat -> its own extracted answer


@dataclass
class CounterfactualCost:
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


class _Replay(Generator):
    """The counterfactuals' side: a reply of the real executions where one matches, else ``fallback`` (a
    CachedGenerator: what it really generates is counted by its ``misses``)."""

    def __init__(self, fallback: CachedGenerator, store: Mapping[tuple[str, str], Sample], cost: CounterfactualCost):
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


def _check(system: System, policies: Mapping[str, RecordingPolicy], credit: str) -> tuple[str, ...]:
    seats = tuple(system.seats)
    if not seats:
        raise ConfigError("collect_team: the system has no trainable seats; give it at least one seat")
    needed_coalitions(seats, credit)  # refuses an unknown mode and K above the Shapley limit
    missing, extra = [s for s in seats if s not in policies], [p for p in policies if p not in system.seats]
    if missing or extra:
        raise ConfigError(f"collect_team: policies must answer exactly the system's seats {list(seats)}; "
                          f"missing {missing}, not seats {extra}")
    if len({id(policies[s]) for s in seats}) != len(seats):
        raise ConfigError("collect_team: two seats share one RecordingPolicy, so their calls could not be told "
                          "apart; give each seat its own RecordingPolicy (they may wrap the same backend)")
    outside = [s for s in seats if s not in system.members]
    if outside and credit != "system":
        raise ConfigError(f"credit={credit!r} removes seats from the coalition, but seats {outside} are not "
                          f"coalition members (the coalition: {list(system.members)}); use credit='system'")
    return seats


def _bound(system: System, policies: Mapping[str, RecordingPolicy], cache: GenerationCache,
           wrap: Any) -> dict[str, Generator]:
    """Every name bound to ``wrap(generator)``, one wrapper per distinct backend object (so names sharing a
    backend still share its batched call): the pool's names through the generation cache, each seat its own."""
    made: dict[int, Generator] = {}
    out: dict[str, Generator] = {}
    for name, backend in system.backends.items():
        if id(backend) not in made:
            made[id(backend)] = wrap(CachedGenerator(backend, cache), False)
        out[name] = made[id(backend)]
    for seat, policy in policies.items():
        out[seat] = wrap(policy, True)
    return out


def collect_team(system: System, items: Sequence[Item], policies: Mapping[str, RecordingPolicy], plan: RolloutPlan,
                 credit: str, *, stats: RunStats | None = None) -> tuple[list[TeamRollout], CounterfactualCost]:
    """Run ``plan``'s executions of every item in ``system``, whose seats (the K trainable seats) are answered
    by ``policies`` (seat -> its RecordingPolicy), with the sub-team values ``credit`` needs (see the module
    doc); returns the rollouts (index = execution number in this call) and what the counterfactuals cost."""
    seats = _check(system, policies, credit)
    needed = needed_coalitions(seats, credit)
    full = frozenset(seats)
    task, protocol = system.task, system.protocol
    cache = GenerationCache(None)  # shared by the real executions and the counterfactuals of this call
    cost = CounterfactualCost()

    # the real executions: every seat samples (recorded), the pool's names through the cache
    contexts, groups, executions = plan_contexts(system, items, plan)
    store: dict[tuple[str, str], Sample] = {}
    starts = {s: len(policies[s].calls) for s in seats}
    backends = _bound(system, policies, cache, lambda gen, seat: _Tap(gen, store))
    programs = [tag_policy_asks(system.protocol.start(ctx), seats, i, executions[i]) for i, ctx in enumerate(contexts)]
    outcomes = run_programs(programs, backends, stats)
    results = score_outcomes(task, contexts, outcomes)
    cost.executions = len(contexts)
    calls: dict[str, dict[int, list[PolicyCall]]] = {s: {} for s in seats}
    for s in seats:
        for call in policies[s].calls[starts[s]:]:
            calls[s].setdefault(call.rollout, []).append(call)
        del policies[s].calls[starts[s]:]  # the rollouts own them now

    # the counterfactuals: each needed sub-team, replayed from the real replies where they match
    values: list[dict[frozenset[str], float]] = [{full: r.score} for r in results]
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
    if unique:
        keys = list(unique)
        cf_backends = _bound(system, policies, cache, lambda gen, seat: _Replay(
            CachedGenerator(_Unrecorded(gen), cache) if seat else gen, store, cost))
        cf_programs = [tag_policy_asks(protocol.start(unique[k][0]), seats, unique[k][1], executions[unique[k][1]])
                       for k in keys]
        cf_contexts = [unique[k][0] for k in keys]
        scored = score_outcomes(task, cf_contexts, run_programs(cf_programs, cf_backends, stats))
        cost.counterfactuals = len(keys)
        cost.failed = sum(r.error is not None for r in scored)
        by_key = {k: r.score for k, r in zip(keys, scored)}
        for i, sub, key in wanted:
            values[i][sub] = by_key[key]

    # each seat's own answer, scored alone (one scoring call)
    answers = {(i, s): policy_answer(task, calls[s].get(i, []), ctx.item) for i, ctx in enumerate(contexts)
               for s in seats}
    asked = [k for k in answers if calls[k[1]].get(k[0])]
    solo = dict(zip(asked, (r.score for r in task.score_batch([answers[k] for k in asked],
                                                                [contexts[k[0]].item for k in asked]))))
    rollouts = []
    for i, (ctx, outcome, result) in enumerate(zip(contexts, outcomes, results)):
        rollouts.append(TeamRollout(
            index=i, item=ctx.item, group=groups[i], reward=result.score, values=values[i],
            credit=seat_credit(values[i], seats, credit), calls={s: calls[s].get(i, []) for s in seats},
            solo_scores={s: solo.get((i, s), 0.0) for s in seats},
            error=result.error if isinstance(outcome, ProgramFailed) else None,
            answers={s: answers[(i, s)] for s in seats}))
    return rollouts, cost


__all__ = ["TeamRollout", "CounterfactualCost", "collect_team"]
