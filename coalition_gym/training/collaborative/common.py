"""What both coalition-training recipes share: what one coalition's training reads from its
``RecipeContext``, the result of training it, answering a batch of items with one member, and scoring a
member on dev."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ...agents.base import derive_seed
from ...errors import ConfigError
from ...tasks.base import Task
from ...types import Ask, Item, Sample, SamplingParams
from ..recipes import RecipeContext
from .members import Member


@dataclass
class CoalitionInputs:
    """One coalition's training inputs, read from a coalition recipe's :class:`RecipeContext`."""

    members: dict[str, Member]
    task: Task
    train: list[Item]
    dev: list[Item]
    seed: int
    work_dir: Path

    @classmethod
    def of(cls, context: RecipeContext, recipe: str) -> "CoalitionInputs":
        if context.out is None or context.task is None or not context.members:
            raise ConfigError(f"{recipe} trains a coalition: its RecipeContext needs members, a task and out (the "
                              "work folder); TrainedCoalitionGame builds one per coalition")
        return cls(dict(context.members), context.task, list(context.train_items), list(context.dev_items),
                   int(context.seed), Path(context.out))


@dataclass
class CoalitionTraining:
    """A trained coalition: who answers at test time, the members behind those names, and the record."""

    answerers: list[str]  # the evaluation coalition, in order (Sparta: the one selected checkpoint)
    members: dict[str, Member]  # every coalition member as trained (frozen ones as they were)
    record: dict[str, Any] = field(default_factory=dict)
    generations: int = 0  # samples generated while training (judging and dev scoring included)


def answer_all(member: Member, task: Task, items: Sequence[Item], params: SamplingParams, seed: int,
               tag: str) -> tuple[list[Ask], list[Sample]]:
    """The member answers each item once (one batched call); seeds depend on member, item and tag only."""
    asks = [Ask(member.name, tuple(task.prompt(it, member.style)), params=params, item=it,
                seed=derive_seed(seed, it.id, member.name, 0, 0, tag)) for it in items]
    return asks, member.generator.generate(asks)


def dev_score(member: Member, task: Task, items: Sequence[Item], params: SamplingParams, seed: int) -> float:
    """Mean score of the member's single answers on ``items``."""
    _, samples = answer_all(member, task, items, params, seed, "dev")
    answers = [task.extract(s.text, it) for s, it in zip(samples, items)]
    results = task.score_batch(answers, list(items))
    return sum(r.score for r in results) / max(len(results), 1)
