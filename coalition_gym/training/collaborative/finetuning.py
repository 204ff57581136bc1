"""Multi-agent finetuning on one coalition (see settings.py for the method).

Each iteration the current members debate every training prompt (the protocol's own debate program,
``rounds`` rounds) and the debate's majority answer is the consensus. Each member's SFT set is built
from its own turns only: its first answer where it agrees with the consensus (weight 1, "generation"
data), and its later turns where its final answer agrees with the consensus, weighted ``fixed_weight``
where its first answer was wrong (it fixed its mistake) and ``1 - fixed_weight`` where it stayed right
("critic" data). A member with no such turn is left as it was, and the record says so. At test time the
fine-tuned members debate and the majority answers.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Sequence

from ...agents.base import Generator, stable_hash
from ...agents.pools import Pool
from ...envs.runner import ProgramFailed, episode_seed, run_programs
from ...envs.system import System, SystemSpec
from ...tasks.base import Task
from ...types import Ask, Item, Outcome, Sample
from ..recipes import RecipeContext
from .common import CoalitionInputs, CoalitionTraining
from .members import check_trainable
from .settings import MultiagentFinetuningSettings
from .updates import Example, Optimisation, sft_train


class Recorder(Generator):
    """Passes Asks through and keeps every (Ask, Sample) pair: the debate's turns with their prompts."""

    def __init__(self, inner: Generator):
        self.inner, self.identity = inner, inner.identity
        self.seen: list[tuple[Ask, Sample]] = []

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        samples = self.inner.generate(asks)
        self.seen += list(zip(asks, samples))
        return samples


def debate_examples(task: Task, outcomes: Sequence[Outcome | ProgramFailed], items: Sequence[Item],
                    turns: Sequence[tuple[Ask, Sample]], fixed_weight: float) -> dict[str, list[Example]]:
    """Each member's SFT examples from one debate over ``items`` (see the module docstring)."""
    consensus = {it.id: o.answer for it, o in zip(items, outcomes) if isinstance(o, Outcome) and o.answer is not None}
    by_member: dict[tuple[str, str], list[tuple[Ask, Sample, str | None]]] = defaultdict(list)
    for ask, sample in turns:
        if ask.item is not None and ask.item.id in consensus:
            by_member[ask.member, ask.item.id].append((ask, sample, task.extract(sample.text, ask.item)))
    out: dict[str, list[Example]] = defaultdict(list)
    for (member, item_id), seq in by_member.items():
        seq.sort(key=lambda t: t[0].round)
        agreed = consensus[item_id]
        first, last = seq[0][2], seq[-1][2]
        if first == agreed:
            out[member].append(Example(seq[0][0], seq[0][1].text, 1.0))
        if last == agreed:
            weight = fixed_weight if first != agreed else 1.0 - fixed_weight
            out[member] += [Example(a, s.text, weight) for a, s, _ in seq[1:] if weight > 0]
    return out


def train_multiagent_finetuning(settings: MultiagentFinetuningSettings, context: RecipeContext) -> CoalitionTraining:
    """The multi-agent finetuning recipe's ``train(settings, context)``: one coalition's training."""
    given = CoalitionInputs.of(context, "multiagent_finetuning")
    members, task, train, seed, work_dir = given.members, given.task, given.train, given.seed, given.work_dir
    check_trainable(members, "multiagent_finetuning")
    names = list(members)
    styles = {n: m.style for n, m in members.items()}
    generations = 0
    iterations = []
    for it in range(settings.iterations):
        start = time.perf_counter()
        recorders = {n: Recorder(m.generator) for n, m in members.items()}
        # the members debate through recorders, without dev scores (ties fall back to the protocol's rule)
        spec = SystemSpec(settings.evaluation, task, Pool(members=dict(recorders), styles=styles), names, split=None)
        debate = System.build(spec, dev_scores={})
        contexts = [debate.context(item, episode_seed(stable_hash("maf", seed, it), item)) for item in train]
        outcomes = run_programs([settings.evaluation.start(ctx) for ctx in contexts], recorders)
        turns = [pair for r in recorders.values() for pair in r.seen]
        generations += len(turns)
        examples = debate_examples(task, outcomes, train, turns, settings.fixed_weight)
        entry: dict = {"iteration": it, "debates": len(train),
                       "failed_debates": sum(isinstance(o, ProgramFailed) for o in outcomes),
                       "consensus": sum(isinstance(o, Outcome) and o.answer is not None for o in outcomes),
                       "examples": {n: len(examples.get(n, [])) for n in names}, "updates": {}, "not_trained": {}}
        for name, member in members.items():
            if not member.trainable:
                continue
            if not examples.get(name):
                entry["not_trained"][name] = "no turn of its agreed with the debate's majority"
                continue
            opt = Optimisation(settings.lr, settings.epochs, settings.batch_size,
                               stable_hash(seed, it, name) % 2**31)
            entry["updates"][name] = sft_train(member, examples[name], opt)
            member.mark_updated(f"maf:{it}")
            member.save(work_dir / name)
        entry["seconds"] = time.perf_counter() - start
        iterations.append(entry)
    record = {"method": "multiagent_finetuning", "iterations": iterations,
              "frozen": {n: m.frozen_reason for n, m in members.items() if not m.trainable}}
    return CoalitionTraining(answerers=names, members=members, record=record, generations=generations)
