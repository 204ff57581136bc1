"""Adapter for reasoning-gym's procedural datasets (``rg/<dataset>``), which run fully offline.

Each split is generated from its own seed, ``seed + k * SPLIT_STRIDE`` (test k=0, dev 1, train 2).
reasoning-gym seeds item ``i`` with ``seed + i``, so seeds one apart would make the splits shifted
copies of each other (they did, until this was fixed: 99.9% of test questions were train questions);
the stride keeps the splits' seed ranges disjoint for any size below it. A generator with a small
question space (one-digit arithmetic has 360 questions) still repeats questions across splits, as
independent draws from it do: :func:`.base.split_overlap` tells how much.
The answer kind reads the final ``Answer:`` line and scores with reasoning-gym's own ``score_answer``
(:class:`ReasoningGymAnswer`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import ConfigError, UnknownNameError
from ..scorers.answers import normalize_answer
from ..scorers.kinds import AnswerKind
from ..scorers.result import ScoreResult, unparsed
from ..types import Item
from .base import SPLITS, Task

_SPLIT_INDEX = {"test": 0, "dev": 1, "train": 2}
SPLIT_STRIDE = 1_000_003  # > any split size, so the seed ranges seed + [0, size) never meet


def _datasets() -> dict[str, Any]:
    from reasoning_gym.factory import DATASETS

    return DATASETS


def rg_dataset_names() -> list[str]:
    return sorted(_datasets())


def rg_category(dataset: str) -> str:
    """reasoning-gym's own grouping, read off the dataset's package (arithmetic, logic, games ...)."""
    cls = _datasets()[dataset][0]
    return cls.__module__.split(".")[1]


class ReasoningGymAnswer(AnswerKind):
    """A reasoning-gym dataset's answer kind: the final-answer parser, and the dataset's own
    ``score_answer`` as the rubric (clamped to [0, 1]; it judges every answer but None, the empty one
    too, and a judge that raises on a hostile answer gives 0)."""

    name = "reasoning_gym"

    def __init__(self, judge: Callable[[str, Item], float]):
        self.judge = judge

    def score(self, answer: str, item: Item) -> ScoreResult:
        try:
            return ScoreResult(float(max(0.0, min(1.0, self.judge(answer, item)))), True, "")
        except Exception:  # a scorer must never crash a run on a hostile answer
            return ScoreResult(0.0, True, "")

    def score_one(self, answer: str | None, item: Item) -> ScoreResult:
        return unparsed() if answer is None else self.score(answer, item)


class ReasoningGymTask(Task):
    def __init__(self, dataset: str, size: int = 200, seed: int = 0,
                 config: Mapping[str, Any] | None = None, name: str | None = None):
        """``name`` (default ``rg/<dataset>``) is what reports call the task and the prefix of its item
        ids; a preset with its own config (``zoo:arith``) passes the name it is made with."""
        if dataset not in _datasets():
            raise UnknownNameError("reasoning-gym dataset", dataset, _datasets())
        if int(size) < 1:
            raise ConfigError(f"task rg/{dataset}: size={size} must be >= 1")
        self.dataset, self.size, self.seed = dataset, int(size), int(seed)
        self.config = dict(config or {})
        self.name = name or f"rg/{dataset}"
        self.category = rg_category(dataset)
        self._splits: dict[str, tuple[Any, list[Item]]] = {}
        if self.answer_kind is None:  # reasoning-gym's own judge, unless a subclass names another kind
            self.answer_kind = ReasoningGymAnswer(self.score_answer)

    def _load(self, split: str) -> tuple[Any, list[Item]]:
        self.check_split(split)
        if split not in self._splits:
            import reasoning_gym

            try:
                data = reasoning_gym.create_dataset(self.dataset, size=self.size,
                                                    seed=self.seed + _SPLIT_INDEX[split] * SPLIT_STRIDE, **self.config)
            except (TypeError, ValueError, AssertionError) as exc:
                raise ConfigError(f"task {self.name}: bad dataset config {self.config!r}: {exc}") from exc
            items = []
            for index, entry in enumerate(data):
                meta = dict(entry.get("metadata") or {})
                meta["entry"] = entry
                items.append(Item(id=f"{self.name}/{split}/{index}", question=entry["question"],
                                  gold=normalize_answer(str(entry["answer"])),
                                  category=self.category, meta=meta))
            self._splits[split] = (data, items)
        return self._splits[split]

    def items(self, split: str = "test") -> list[Item]:
        return self._load(split)[1]

    def score_answer(self, answer: str, item: Item) -> float:
        """The dataset's ``score_answer`` for one readable answer (may raise on a hostile one)."""
        entry = item.meta.get("entry") if item.meta else None
        if entry is None:
            entry = {"question": item.question, "answer": item.gold, "metadata": dict(item.meta)}
        return self._load("test")[0].score_answer(answer, entry)


__all__ = ["ReasoningGymTask", "ReasoningGymAnswer", "rg_dataset_names", "rg_category", "SPLITS"]
