"""A task that interleaves several tasks: the setting of routers and specialists.

Items keep their own ids and categories (so a simulated specialist knows its field), and each item is
extracted and scored by the task it came from (the mixture's answer kind, :class:`PartsAnswer`). Items
alternate between the parts in a fixed order.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import ConfigError
from ..scorers.kinds import NO_CONTEXT, AnswerKind, ScoringContext
from ..scorers.result import ScoreResult
from ..types import Item, Message
from .base import Task


class PartsAnswer(AnswerKind):
    """A mixture's answer kind: each item is read and scored by the part it came from, each part's
    items in one batch (code parts run in parallel)."""

    name = "mixture"

    def __init__(self, name: str, parts: Sequence[Task], owner: Callable[[Item], Task]):
        self.mixture, self.parts, self.owner = name, parts, owner

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        """With the item, its own task extracts (a code reply to a HumanEval item is code, not a
        number); without one, only parts that extract alike can answer."""
        if item is not None:
            return self.owner(item).extract(text, item)
        ways = {(type(p).extract, type(p.kind).extract) for p in self.parts}
        if len(ways) > 1:
            raise ConfigError(f"{self.mixture!r}: its parts extract answers differently; pass the item")
        return self.parts[0].extract(text)

    def score(self, answer: str, item: Item) -> ScoreResult:
        return self.score_batch([answer], [item])[0]

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item],
                    context: ScoringContext = NO_CONTEXT) -> list[ScoreResult]:
        out: list[ScoreResult | None] = [None] * len(items)
        by_part: dict[int, list[int]] = {}
        for k, item in enumerate(items):
            by_part.setdefault(id(self.owner(item)), []).append(k)
        for idx in by_part.values():
            part = self.owner(items[idx[0]])
            for k, result in zip(idx, part.score_batch([answers[k] for k in idx], [items[k] for k in idx])):
                out[k] = result
        return out  # type: ignore[return-value]


class MixtureTask(Task):
    category = "mixed"

    def __init__(self, parts: Sequence[Task]):
        if len(parts) < 2:
            raise ConfigError("a mixture needs at least two tasks")
        names = [p.name for p in parts]
        if len(set(names)) != len(names):
            raise ConfigError(f"a mixture lists a task twice: {names}")
        self.parts = list(parts)
        self.name = "mix:" + ",".join(names)
        self.max_split_overlap = max(p.max_split_overlap for p in parts)
        self._owner: dict[str, Task] = {}
        self._splits: dict[str, list[Item]] = {}
        self.answer_kind = PartsAnswer(self.name, self.parts, self.owner)

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        if split not in self._splits:
            lists = [list(p.items(split)) for p in self.parts]
            mixed = [lst[k] for k in range(max(map(len, lists))) for lst in lists if k < len(lst)]
            for part, lst in zip(self.parts, lists):
                self._owner.update({it.id: part for it in lst})
            self._splits[split] = mixed
        return self._splits[split]

    def owner(self, item: Item) -> Task:
        if item.id not in self._owner:
            for split in ("test", "dev", "train"):
                self.items(split)
        if item.id not in self._owner:
            raise ConfigError(f"item {item.id!r} belongs to no part of {self.name!r}")
        return self._owner[item.id]

    def prompt(self, item: Item, style: str = "chat") -> list[Message]:
        return self.owner(item).prompt(item, style)
