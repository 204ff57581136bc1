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
from typing import Sequence

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
    members, task, train, dev, seed, work_dir = (given.members, given.task, given.train, given.dev, given.seed,
                                                 given.work_dir)
    check_trainable(members, "sparta")
    names = list(members)
    reps = Reputations(names, settings.initial_k, settings.min_k, settings.decay_rate, settings.decay_steps,
                       settings.scaling_factor, settings.window, settings.min_deviation, settings.epsilon)
    params = settings.evaluation.params  # the members answer as they will at evaluation
    greedy = SamplingParams(temperature=0.0, max_new_tokens=settings.evaluation.max_new_tokens)
    rng = random.Random(stable_hash("sparta", seed, *sorted(names)))
    counts = JudgeCounts()
    generations = 0
    iterations = []
    best: dict[str, tuple[float, int]] = {}  # member -> (dev score, iteration) of its best checkpoint
    for it in range(settings.iterations):
        start = time.perf_counter()
        duels = deal_duels(names, len(train), reps, rng, settings.random_match_prob, settings.num_opponents)
        replies: dict[tuple[str, int], str] = {}
        for name in names:  # each member answers its prompts in one batch
            mine = sorted({k for k, a, b in duels if name in (a, b)})
            asks, samples = answer_all(members[name], task, [train[k] for k in mine], params, seed, f"sparta{it}")
            generations += len(samples)
            replies.update({(name, k): s.text for k, s in zip(mine, samples)})
        scores: dict[int, dict[str, tuple[float, float]]] = {k: {} for k, _, _ in duels}
        for judge in names:
            todo = [(k, r) for k, a, b in duels if judge not in (a, b) for r in (replies[a, k], replies[b, k])]
            jobs = [Judgement(train[k], r, task.extract(r, train[k])) for k, r in todo]
            got = score_responses(members[judge], judge_mode(members[judge], settings.judge), task, jobs, seed,
                                  f"sparta{it}", counts)
            generations += len(got)
            in_order = iter(got)  # the order of ``todo``: duel by duel, first reply then second
            for (k, a, b) in duels:
                if judge not in (a, b):
                    scores[k][judge] = (next(in_order), next(in_order))
        prefs, ties, unjudged = [], 0, 0
        for k, a, b in duels:
            margin = reps.weighted_difference(scores[k]) if scores[k] else None
            if margin is None:
                unjudged += 1
                continue
            reps.update(a, b, margin)
            if margin == 0:
                ties += 1
                continue
            win, lose = (a, b) if margin > 0 else (b, a)
            prefs.append(Preference(train[k], replies[win, k], replies[lose, k], abs(margin)))
        entry: dict = {"iteration": it, "duels": len(duels), "pairs": len(prefs), "ties_dropped": ties,
                       "unjudged": unjudged, "reputations": reps.to_dict(), "updates": {}, "dev": {}}
        if not prefs:
            entry["no_training"] = ("no preference pairs: " + ("no member outside a duel to judge it"
                                                               if unjudged == len(duels) else
                                                               "every judged duel was a tie"))
        else:
            for name, member in members.items():
                if not member.trainable:
                    continue
                opt = Optimisation(settings.lr, settings.epochs, settings.batch_size,
                                   stable_hash(seed, it, name) % 2**31)
                entry["updates"][name] = dpo_train(member, task, prefs, settings.beta, opt)
                member.mark_updated(f"sparta:{it}")
                score = dev_score(member, task, dev, greedy, seed)
                generations += len(dev)
                entry["dev"][name] = score
                if name not in best or score > best[name][0]:
                    best[name] = (score, it)
                    member.save(work_dir / name)  # each member's best checkpoint so far
        entry["seconds"] = time.perf_counter() - start
        iterations.append(entry)
    modes = {n: judge_mode(m, settings.judge) for n, m in members.items()}
    record = {"method": "sparta", "iterations": iterations,
              "judging": {"scored": counts.scored, "unparseable": counts.unparseable, "modes": modes},
              "frozen": {n: m.frozen_reason for n, m in members.items() if not m.trainable}}
    if best:
        chosen = max(best, key=lambda n: (best[n][0], -best[n][1], -names.index(n)))
        record["selected"] = {"member": chosen, "iteration": best[chosen][1], "dev_score": best[chosen][0]}
    else:  # nothing was trained: the best member as it was
        untrained = {n: dev_score(m, task, dev, greedy, seed) for n, m in members.items()}
        generations += len(dev) * len(members)
        chosen = max(untrained, key=lambda n: (untrained[n], -names.index(n)))
        record["selected"] = {"member": chosen, "iteration": None, "dev_score": untrained[chosen],
                              "why": "no iteration produced a preference pair; the best untrained member answers",
                              "untrained_dev": untrained}
    record["best_per_member"] = {n: {"dev_score": s, "iteration": i} for n, (s, i) in best.items()}
    return CoalitionTraining(answerers=[chosen], members=members, record=record, generations=generations)
