"""Sparta alignment on one coalition (see settings.py for the method).

Each iteration, on the same training prompts (fresh samples): the prompts are dealt in rounds of one
per member, in a shuffled order; the dealt member duels an opponent (random with probability
``random_match_prob``, else one of the ``num_opponents`` closest in reputation); every coalition member
outside the duel judges both responses; the judges' scores, weighted by their current reputations, give
the duel's margin, which moves both duellists' reputations and makes the better response "chosen"
(a margin of exactly 0, or a duel nobody could judge, gives no pair, counted). Every trainable member is
then trained by DPO on all of the iteration's pairs, with itself before the iteration as the reference,
and scored on dev. After the last iteration the best (member, iteration) checkpoint on dev answers
alone; when no iteration produced a single pair, the best untrained member on dev answers (the
reference implementation's fallback), and the record says why.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...agents.base import stable_hash
from ...types import SamplingParams
from ..recipes import RecipeContext
from .common import CoalitionInputs, CoalitionTraining, answer_all, dev_score
from .judging import JudgeCounts, Judgement, judge_mode, score_responses
from .members import check_trainable
from .reputation import Reputations
from .settings import SpartaSettings
from .updates import Optimisation, Preference, dpo_train


def deal_duels(members: Sequence[str], n_prompts: int, reputations: Reputations, rng: random.Random,
               random_prob: float, closest: int) -> list[tuple[int, str, str]]:
    """(prompt index, first, opponent) for every prompt: full rounds deal one prompt to each member in
    a shuffled order; the prompts left over go to random members."""
    duels = []
    width = len(members)
    for k in range(n_prompts):
        if k % width == 0:
            order = rng.sample(list(members), width)
        first = order[k % width] if n_prompts - (k - k % width) >= width else rng.choice(list(members))
        duels.append((k, first, reputations.opponent(first, rng, random_prob, closest)))
    return duels


def train_sparta(settings: SpartaSettings, context: RecipeContext) -> CoalitionTraining:
    """The Sparta recipe's ``train(settings, context)``: one coalition's training (``context.members`` on
    ``context.task``'s train items, selected on its dev items, in the work folder ``context.out``)."""
    given = CoalitionInputs.of(context, "sparta")
    check_trainable(given.members, "sparta")
    run = _SpartaRun(settings, given)
    iterations = [run.iteration(it) for it in range(settings.iterations)]
    members, selected = given.members, run.selected()
    modes = {n: judge_mode(m, settings.judge) for n, m in members.items()}
    record: dict[str, Any] = {
        "method": "sparta", "iterations": iterations,
        "judging": {"scored": run.counts.scored, "unparseable": run.counts.unparseable, "modes": modes},
        "frozen": {n: m.frozen_reason for n, m in members.items() if not m.trainable}, "selected": selected,
        "best_per_member": {n: {"dev_score": s, "iteration": i} for n, (s, i) in run.best.items()}}
    return CoalitionTraining(answerers=[selected["member"]], members=members, record=record,
                             generations=run.generations)


@dataclass
class _SpartaRun:
    """One coalition's Sparta training as it goes: the reputations, the generations spent, the judges' counts and
    each member's best checkpoint on dev (member -> (dev score, iteration))."""

    settings: SpartaSettings
    given: CoalitionInputs
    generations: int = 0
    counts: JudgeCounts = field(default_factory=JudgeCounts)
    best: dict[str, tuple[float, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s, self.names = self.settings, list(self.given.members)
        self.reps = Reputations(self.names, s.initial_k, s.min_k, s.decay_rate, s.decay_steps, s.scaling_factor,
                                s.window, s.min_deviation, s.epsilon)
        self.rng = random.Random(stable_hash("sparta", self.given.seed, *sorted(self.names)))
        self.greedy = SamplingParams(temperature=0.0, max_new_tokens=s.evaluation.max_new_tokens)

    def iteration(self, it: int) -> dict:
        """Duel, judge, move the reputations, train every trainable member on the pairs; the iteration's record."""
        start = time.perf_counter()
        train = self.given.train
        duels = deal_duels(self.names, len(train), self.reps, self.rng, self.settings.random_match_prob,
                           self.settings.num_opponents)
        replies = self._replies(duels, it)
        prefs, ties, unjudged = self._preferences(duels, replies, self._scores(duels, replies, it))
        entry: dict = {"iteration": it, "duels": len(duels), "pairs": len(prefs), "ties_dropped": ties,
                       "unjudged": unjudged, "reputations": self.reps.to_dict(), "updates": {}, "dev": {}}
        if not prefs:
            entry["no_training"] = ("no preference pairs: " + ("no member outside a duel to judge it"
                                                               if unjudged == len(duels) else
                                                               "every judged duel was a tie"))
        else:
            self._train(prefs, it, entry)
        entry["seconds"] = time.perf_counter() - start
        return entry

    def _replies(self, duels: list[tuple[int, str, str]], it: int) -> dict[tuple[str, int], str]:
        """(member, prompt) -> its reply: each member answers its prompts in one batch, as it will at evaluation."""
        g, replies = self.given, {}
        for name in self.names:
            mine = sorted({k for k, a, b in duels if name in (a, b)})
            _, samples = answer_all(g.members[name], g.task, [g.train[k] for k in mine],
                                    self.settings.evaluation.params, g.seed, f"sparta{it}")
            self.generations += len(samples)
            replies.update({(name, k): s.text for k, s in zip(mine, samples)})
        return replies

    def _scores(self, duels: list[tuple[int, str, str]], replies: dict[tuple[str, int], str],
                it: int) -> dict[int, dict[str, tuple[float, float]]]:
        """prompt -> judge -> (first reply's score, second's): every member outside a duel judges both replies."""
        g = self.given
        scores: dict[int, dict[str, tuple[float, float]]] = {k: {} for k, _, _ in duels}
        for judge in self.names:
            todo = [(k, r) for k, a, b in duels if judge not in (a, b) for r in (replies[a, k], replies[b, k])]
            jobs = [Judgement(g.train[k], r, g.task.extract(r, g.train[k])) for k, r in todo]
            got = score_responses(g.members[judge], judge_mode(g.members[judge], self.settings.judge), g.task, jobs,
                                  g.seed, f"sparta{it}", self.counts)
            self.generations += len(got)
            in_order = iter(got)  # the order of ``todo``: duel by duel, first reply then second
            for (k, a, b) in duels:
                if judge not in (a, b):
                    scores[k][judge] = (next(in_order), next(in_order))
        return scores

    def _preferences(self, duels: list[tuple[int, str, str]], replies: dict[tuple[str, int], str],
                     scores: dict[int, dict[str, tuple[float, float]]]) -> tuple[list[Preference], int, int]:
        """The duels' preference pairs (the reputation-weighted margins move the reputations), the ties and the
        duels nobody could judge."""
        prefs, ties, unjudged = [], 0, 0
        for k, a, b in duels:
            margin = self.reps.weighted_difference(scores[k]) if scores[k] else None
            if margin is None:
                unjudged += 1
                continue
            self.reps.update(a, b, margin)
            if margin == 0:
                ties += 1
                continue
            win, lose = (a, b) if margin > 0 else (b, a)
            prefs.append(Preference(self.given.train[k], replies[win, k], replies[lose, k], abs(margin)))
        return prefs, ties, unjudged

    def _train(self, prefs: list[Preference], it: int, entry: dict) -> None:
        """DPO on the pairs for every trainable member, scored on dev; a member's best checkpoint is saved."""
        g, s = self.given, self.settings
        for name, member in g.members.items():
            if not member.trainable:
                continue
            opt = Optimisation(s.lr, s.epochs, s.batch_size, stable_hash(g.seed, it, name) % 2**31)
            entry["updates"][name] = dpo_train(member, g.task, prefs, s.beta, opt)
            member.mark_updated(f"sparta:{it}")
            score = dev_score(member, g.task, g.dev, self.greedy, g.seed)
            self.generations += len(g.dev)
            entry["dev"][name] = score
            if name not in self.best or score > self.best[name][0]:
                self.best[name] = (score, it)
                member.save(g.work_dir / name)  # each member's best checkpoint so far

    def selected(self) -> dict[str, Any]:
        """Who answers: the best (member, iteration) checkpoint on dev; with nothing trained, the best member as
        it was."""
        best, names = self.best, self.names
        if best:
            chosen = max(best, key=lambda n: (best[n][0], -best[n][1], -names.index(n)))
            return {"member": chosen, "iteration": best[chosen][1], "dev_score": best[chosen][0]}
        g = self.given
        untrained = {n: dev_score(m, g.task, g.dev, self.greedy, g.seed) for n, m in g.members.items()}
        self.generations += len(g.dev) * len(g.members)
        chosen = max(untrained, key=lambda n: (untrained[n], -names.index(n)))
        return {"member": chosen, "iteration": None, "dev_score": untrained[chosen],
                "why": "no iteration produced a preference pair; the best untrained member answers",
                "untrained_dev": untrained}
