"""Trained router: a classifier learned from dev outcomes (which member answered which dev item
correctly) reads each question and picks the one member who answers it.

Learning happens inside the protocol, from the members' own answers, so it works with every driver
(runner, gym and PettingZoo envs, coalition games):

- The dev set is the first ``dev_items`` items of the task's ``dev_split``. Each member answers each
  dev item once, with a seed fixed by (``dev_seed``, dev item, member): the same in every episode
  and coalition, so a generation cache shares these answers everywhere.
- The protocol object remembers every member's dev outcomes (per task and member name), so a member
  is measured once per protocol object. Call :meth:`TrainedRouter.forget` when a member changes
  (e.g. a policy being trained) to measure it again.
- The environments fit the router when they are built (:meth:`TrainedRouter.prepare`): the frozen
  members answer the dev items then, outside any episode. A seat answered from outside (the gym
  policy, PettingZoo agents) cannot be asked before an episode and is never asked dev items inside
  one: it enters the router with an *assumed* dev accuracy, ``seat_prior`` (default: the frozen
  members' mean dev accuracy), as its predicted score on every question. So the policy answers
  exactly the questions on which no frozen member is predicted to beat an average member, and every
  episode is one question (reset with a seed replays it exactly).
- The first episode that needs a member's outcomes asks its dev items *and*, in the same wave, every
  member the question (so no further wave is needed whichever member gets routed). Episodes started
  while those outcomes are on their way only ask every member the question, and route once the
  outcomes are in. The routed member's answer is the same sample in every case (same Ask, same
  seed), so results do not depend on scheduling; only the cost of those first episodes is higher
  (``details["fit"]`` reports the dev Asks an episode made, ``details["asked_every_member"]``
  whether it asked everyone). In a batch of episodes run together before anything is measured, that
  is every episode of the batch; :meth:`TrainedRouter.fit` measures ahead of time instead, so that
  every episode asks one member only.
- The router for a coalition is ``learner(dev questions, outcomes of its members)`` (see
  ``router_model``; default ``"logistic"``: logistic regression on hashed n-grams), fitted once per
  coalition. The chosen member is the one with the highest predicted score; ties go to the better
  dev accuracy, then to coalition order. ``learner`` may be any callable with that signature.

A coalition of one needs no routing: its member answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from ...agents.base import Generator, derive_seed, stable_hash
from ...errors import BackendError, ConfigError
from ...learners.router_model import RouterKnowledge
from ...tasks.base import SPLITS, Task
from ...types import Ask, Item, Outcome, Sample, Turn
from .base import EpisodeContext, ProgramGen, Protocol
from .routing import answer_wave


@dataclass
class TrainedRouter(Protocol):
    name: ClassVar[str] = "trained_router"
    description: ClassVar[str] = ("Trained router: a classifier learned from members' dev outcomes picks "
                                  "the member who answers")

    learner: Any = "logistic"
    dev_items: int = 50
    dev_split: str = "dev"
    dev_seed: int = 0
    seat_prior: float | None = None
    #: what the router knows (measured dev outcomes, assumed seat accuracies, fitted predictors); give
    #: one to share it between protocol objects, or leave None for a fresh one
    knowledge: RouterKnowledge | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seat_prior is not None and not 0.0 <= self.seat_prior <= 1.0:
            raise ConfigError(f"trained_router: seat_prior={self.seat_prior} must be an accuracy in [0, 1]")
        if self.dev_items < 1:
            raise ConfigError(f"trained_router: dev_items={self.dev_items} must be >= 1")
        if self.dev_split not in SPLITS:
            raise ConfigError(f"trained_router: dev_split={self.dev_split!r}; use one of {', '.join(SPLITS)}")
        if self.knowledge is None:
            self.knowledge = RouterKnowledge(self.learner)  # refuses an unknown learner name

    def settings(self) -> dict[str, Any]:
        """The settings, with a callable learner named by its qualified name (so reports stay JSON)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "knowledge"}  # state is no setting
        if callable(self.learner):
            out["learner"] = getattr(self.learner, "__qualname__", type(self.learner).__name__)
        return out

    # -- what the router knows --------------------------------------------------------------------
    def dev_set(self, task: Task) -> tuple[int, list[Item]]:
        items = list(task.items(self.dev_split))[: self.dev_items]
        if not items:
            raise ConfigError(f"trained_router: task {task.name!r} has no items in split {self.dev_split!r} "
                              "to learn the router from")
        return stable_hash("dev-set", task.name, *(it.id for it in items)), items

    @property
    def known(self) -> RouterKnowledge:
        assert self.knowledge is not None  # set in __post_init__
        return self.knowledge

    def dev_outcomes(self, task: Task) -> dict[str, np.ndarray]:
        """The dev scores measured so far for ``task``, per member."""
        key, _ = self.dev_set(task)
        return self.known.measured(key)

    def forget(self, members: Iterable[str] | None = None) -> None:
        """Drop what was measured about ``members`` (all members if None); they are measured again."""
        self.known.forget(None if members is None else list(members))

    def prepare(self, task: Task, backends: Mapping[str, Generator], frozen: Sequence[str], seats: Sequence[str],
                styles: Mapping[str, str] | None = None) -> None:
        """Measure the frozen members' dev outcomes now and enter every seat with an assumed accuracy."""
        known = self.fit(task, backends, frozen, styles) if frozen else {}
        prior = self.seat_prior
        if prior is None:
            prior = float(np.mean([known[m].mean() for m in frozen])) if frozen else 0.5
        for seat in seats:
            self.assume(task, seat, prior)

    def assume(self, task: Task, member: str, accuracy: float) -> None:
        """Route ``member`` as if its dev accuracy were ``accuracy`` on every question, without asking it."""
        key, _ = self.dev_set(task)
        self.known.assume(key, member, accuracy)

    def fit(self, task: Task, backends: Mapping[str, Generator], members: Sequence[str],
            styles: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        """Measure the dev outcomes of ``members`` not measured yet, now, with one batched call per
        backend; episodes then route from their first wave. Returns the outcomes known for ``task``."""
        from ..runner import dispatch  # the runner imports this package

        key, dev = self.dev_set(task)
        todo = [m for m in dict.fromkeys(members) if (key, m) not in self.known.outcomes]
        asks = self._dev_asks(task, styles or {}, todo, dev)
        samples = dispatch(asks, backends)
        failed = next((s for s in samples if isinstance(s, BaseException)), None)
        if failed is not None:
            raise BackendError(f"trained_router: measuring dev outcomes failed: {failed}")
        self._record(task, key, asks, samples)  # type: ignore[arg-type]
        return self.dev_outcomes(task)

    def _dev_asks(self, task: Task, styles: Mapping[str, str], members: Sequence[str],
                  dev: Sequence[Item]) -> list[Ask]:
        return [Ask(member=m, messages=tuple(task.prompt(it, styles.get(m, "chat"))), params=self.params,
                    seed=derive_seed(self.dev_seed, it.id, m, 0, 0, "dev"), role="dev", round=0, item=it,
                    info={"dev": True})
                for m in members for it in dev]

    def _record(self, task: Task, key: int, asks: Sequence[Ask], samples: Sequence[Sample]) -> None:
        scores: dict[str, list[float]] = {}
        for ask, sample in zip(asks, samples):
            assert ask.item is not None
            scores.setdefault(ask.member, []).append(task.score(task.extract(sample.text, ask.item), ask.item))
        for member, values in scores.items():
            self.known.record(key, member, values)

    # -- the program ---------------------------------------------------------------------------------
    def choose(self, members: Sequence[str], scores: np.ndarray, dev_accuracy: np.ndarray) -> str:
        top = scores.max()
        tied = [k for k in range(len(members)) if scores[k] >= top - 1e-12]
        best_dev = max(dev_accuracy[k] for k in tied)
        return members[next(k for k in tied if dev_accuracy[k] == best_dev)]

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        if len(members) == 1:
            ask = answer_wave(ctx, members[0], self.params)
            (sample,) = yield [ask]
            final = ctx.task.extract(sample.text, ctx.item)
            turn = Turn(members[0], "answer", 1, sample.text, final)
            return Outcome(answer=final, text=sample.text, transcript=(turn,),
                           details={"chosen": members[0], "routed_by": "alone"})

        key, dev = self.dev_set(ctx.task)
        speculative: dict[str, Sample] = {}
        fit: dict[str, Any] = {"dev_items": len(dev), "members": [], "calls": 0}
        missing = [m for m in members if not self.known.knows(key, m)]
        if missing:
            mine = [m for m in missing if (key, m) not in self.known.claimed]
            self.known.claimed.update((key, m) for m in mine)
            dev_asks = self._dev_asks(ctx.task, ctx.styles, mine, dev)
            question = [answer_wave(ctx, m, self.params) for m in members]
            samples = yield dev_asks + question
            self._record(ctx.task, key, dev_asks, samples[: len(dev_asks)])
            speculative = {a.member: s for a, s in zip(question, samples[len(dev_asks):])}
            fit["members"] += mine
            fit["calls"] += len(dev_asks)
            late = [m for m in missing if (key, m) not in self.known.outcomes]  # their measuring episode failed
            if late:
                dev_asks = self._dev_asks(ctx.task, ctx.styles, late, dev)
                samples = yield dev_asks
                self._record(ctx.task, key, dev_asks, samples)
                fit["members"] += late
                fit["calls"] += len(dev_asks)

        scores, accuracy = self.known.scores(key, members, [it.question for it in dev], ctx.item.question)
        chosen = self.choose(members, scores, accuracy)
        transcript: list[Turn] = []
        if chosen in speculative:
            for m in members:
                text = speculative[m].text
                transcript.append(Turn(m, "answer", 1, text, ctx.task.extract(text, ctx.item)))
            sample = speculative[chosen]
        else:
            (sample,) = yield [answer_wave(ctx, chosen, self.params)]
            transcript.append(Turn(chosen, "answer", 1, sample.text, ctx.task.extract(sample.text, ctx.item)))
        details: dict[str, Any] = {"chosen": chosen, "routed_by": "router",
                                   "scores": {m: float(s) for m, s in zip(members, scores)},
                                   "asked_every_member": bool(speculative)}
        assumed = [m for m in members if (key, m) in self.known.assumed]
        if assumed:
            details["assumed"] = assumed
        if fit["calls"]:
            details["fit"] = fit
        final = ctx.task.extract(sample.text, ctx.item)
        return Outcome(answer=final, text=sample.text, transcript=tuple(transcript), details=details)
