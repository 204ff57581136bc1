"""Trained router: a classifier learned from dev outcomes (which member answered which dev item
correctly) reads each question and picks the one member who answers it.

Learning happens inside the protocol, from the members' own answers, so it works with every driver
(runner, gym and PettingZoo envs, coalition games):

- The dev set is the first ``dev_items`` items of the task's ``dev_split``. Each member answers each
  dev item once, with a seed fixed by (``dev_seed``, dev item, member): the same in every episode
  and coalition, so a generation cache shares these answers everywhere.
- What the router knows (every member's dev outcomes, per task and member name) is a
  :class:`RouterKnowledge`, the protocol's learned state (:meth:`TrainedRouter.fresh_learned`): the
  System keeps one and hands it to every episode as ``ctx.learned``, so a member is measured once per
  System (the protocol's settings stay plain settings). Call ``knowledge.forget(members)`` when a
  member changes (e.g. a policy being trained) to measure it again.
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

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ...agents.base import Generator, derive_seed, stable_hash
from ...errors import BackendError, ConfigError
from ...learners.router_model import RouterKnowledge
from ...settings_check import setting
from ...tasks.base import SPLITS, Task
from ...types import Ask, Item, Outcome, Sample, Turn
from ..dispatch import dispatch
from .base import EpisodeContext, ProgramGen, Protocol
from .routing import answer_wave


@dataclass
class TrainedRouter(Protocol):
    name: ClassVar[str] = "trained_router"
    description: ClassVar[str] = ("Trained router: a classifier learned from members' dev outcomes picks "
                                  "the member who answers")

    learner: Any = "logistic"
    dev_items: int = setting(50, ge=1, doc="dev items every member answers to train the router")
    dev_split: str = setting("dev", choices=SPLITS, doc="the split the dev items come from")
    dev_seed: int = setting(0, ge=0, doc="seeds the members' dev answers the router learns from")
    seat_prior: float | None = setting(None, ge=0, le=1, doc="assumed dev accuracy of a seat answered from "
                                       "outside (none: the frozen members' mean)")

    def __post_init__(self) -> None:
        super().__post_init__()
        RouterKnowledge(self.learner)  # refuses an unknown learner name now, not at the first episode

    def fresh_learned(self) -> RouterKnowledge:
        """What the router knows (measured dev outcomes, assumed seat accuracies, fitted predictors): empty.
        Share one between Systems to share what was measured."""
        return RouterKnowledge(self.learner)

    def settings(self) -> dict[str, Any]:
        """The settings, with a callable learner named by its qualified name (so reports stay JSON)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
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

    def dev_outcomes(self, known: RouterKnowledge, task: Task) -> dict[str, np.ndarray]:
        """The dev scores ``known`` holds for ``task``, per member."""
        key, _ = self.dev_set(task)
        return known.measured(key)

    def prepare(self, learned: RouterKnowledge, task: Task, backends: Mapping[str, Generator],
                frozen: Sequence[str], seats: Sequence[str], styles: Mapping[str, str] | None = None) -> None:
        """Measure the frozen members' dev outcomes now and enter every seat with an assumed accuracy."""
        known = self.fit(learned, task, backends, frozen, styles) if frozen else {}
        prior = self.seat_prior
        if prior is None:
            prior = float(np.mean([known[m].mean() for m in frozen])) if frozen else 0.5
        key, _ = self.dev_set(task)
        for seat in seats:  # routed as if its dev accuracy were ``prior`` on every question, never asked
            learned.assume(key, seat, prior)

    def fit(self, known: RouterKnowledge, task: Task, backends: Mapping[str, Generator], members: Sequence[str],
            styles: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        """Measure into ``known`` the dev outcomes of ``members`` not measured yet, now, with one batched call
        per backend; episodes then route from their first wave. Returns the outcomes known for ``task``."""
        key, dev = self.dev_set(task)
        todo = [m for m in dict.fromkeys(members) if (key, m) not in known.outcomes]
        asks = self._dev_asks(task, styles or {}, todo, dev)
        samples = dispatch(asks, backends)
        failed = next((s for s in samples if isinstance(s, BaseException)), None)
        if failed is not None:
            raise BackendError(f"trained_router: measuring dev outcomes failed: {failed}")
        self._record(known, task, key, asks, samples)  # type: ignore[arg-type]
        return self.dev_outcomes(known, task)

    def _dev_asks(self, task: Task, styles: Mapping[str, str], members: Sequence[str],
                  dev: Sequence[Item]) -> list[Ask]:
        return [Ask(member=m, messages=tuple(task.prompt(it, styles.get(m, "chat"))), params=self.params,
                    seed=derive_seed(self.dev_seed, it.id, m, 0, 0, "dev"), role="dev", round=0, item=it,
                    info={"dev": True})
                for m in members for it in dev]

    def _record(self, known: RouterKnowledge, task: Task, key: int, asks: Sequence[Ask],
                samples: Sequence[Sample]) -> None:
        scores: dict[str, list[float]] = {}
        assert all(ask.item is not None for ask in asks)
        answers = [task.extract(sample.text, ask.item) for ask, sample in zip(asks, samples)]
        for ask, result in zip(asks, task.score_batch(answers, [ask.item for ask in asks])):  # type: ignore[misc]
            scores.setdefault(ask.member, []).append(result.score)
        for member, values in scores.items():
            known.record(key, member, values)

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

        known: RouterKnowledge = ctx.learned if ctx.learned is not None else self.fresh_learned()
        key, dev = self.dev_set(ctx.task)
        speculative: dict[str, Sample] = {}
        fit: dict[str, Any] = {"dev_items": len(dev), "members": [], "calls": 0}
        missing = [m for m in members if not known.knows(key, m)]
        if missing:
            mine = [m for m in missing if (key, m) not in known.claimed]
            known.claimed.update((key, m) for m in mine)
            dev_asks = self._dev_asks(ctx.task, ctx.styles, mine, dev)
            question = [answer_wave(ctx, m, self.params) for m in members]
            samples = yield dev_asks + question
            self._record(known, ctx.task, key, dev_asks, samples[: len(dev_asks)])
            speculative = {a.member: s for a, s in zip(question, samples[len(dev_asks):])}
            fit["members"] += mine
            fit["calls"] += len(dev_asks)
            late = [m for m in missing if (key, m) not in known.outcomes]  # their measuring episode failed
            if late:
                dev_asks = self._dev_asks(ctx.task, ctx.styles, late, dev)
                samples = yield dev_asks
                self._record(known, ctx.task, key, dev_asks, samples)
                fit["members"] += late
                fit["calls"] += len(dev_asks)

        scores, accuracy = known.scores(key, members, [it.question for it in dev], ctx.item.question)
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
        assumed = [m for m in members if (key, m) in known.assumed]
        if assumed:
            details["assumed"] = assumed
        if fit["calls"]:
            details["fit"] = fit
        final = ctx.task.extract(sample.text, ctx.item)
        return Outcome(answer=final, text=sample.text, transcript=tuple(transcript), details=details)
