"""The Task interface: items, prompt rendering, answer extraction and scoring.

A task scores itself (reasoning-gym's convention); protocols only call ``extract`` to compare
answers and never decide what counts as correct.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Sequence

from ..errors import ConfigError
from ..prompts import ANSWER_INSTRUCTION, SYSTEM_PROMPT
from ..scorers.answers import extract_final_answer
from ..scorers.result import ScoreResult
from ..types import Item, Message

SPLITS = ("train", "dev", "test")
PROMPT_STYLES = ("chat", "compact")



class Task(ABC):
    """A dataset of items that knows how to ask for, extract and score answers."""

    name: str = "task"
    category: str = "general"
    source: str = ""  # where the items come from, for `cgym tasks`
    held_out: bool = False  # True: evaluation only (test split); no train/dev items
    #: The share of test questions that may also be train questions (:func:`split_overlap`); a task with
    #: a small question space states its own, so ``check_task`` passes it knowingly and no other.
    max_split_overlap: float = 0.05

    @abstractmethod
    def items(self, split: str = "test") -> Sequence[Item]:
        """The items of ``split`` (one of SPLITS), in a fixed order."""

    @abstractmethod
    def score(self, answer: str | None, item: Item) -> float:
        """Score in [0, 1] of one extracted answer; None (unparseable) scores 0. The simple hook a task
        implements; drivers call :meth:`score_batch`."""

    def score_detail(self, answer: str | None, item: Item) -> ScoreResult:
        """One answer's score with whether it could be read and why it scored what it did."""
        return ScoreResult(float(self.score(answer, item)), answer is not None,
                           "no answer" if answer is None else "")

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item]) -> list[ScoreResult]:
        """The one batch scoring method every driver calls: a ScoreResult per answer. Execution-based
        tasks (code, kernels) override it to run the programs in parallel in the sandbox."""
        return [self.score_detail(a, i) for a, i in zip(answers, items)]

    def extract(self, text: str | None, item: Item | None = None) -> str | None:
        """The canonical final answer of a reply, or None when it has none. ``item`` is the item the
        reply answers (a mixture extracts with that item's own task)."""
        return extract_final_answer(text)

    def prompt(self, item: Item, style: str = "chat") -> list[Message]:
        """The question as chat messages, in the member's prompt style."""
        check_style(style)
        if style == "compact":
            return [Message("user", f"{item.question}\nAnswer:")]
        return [Message("system", SYSTEM_PROMPT),
                Message("user", f"{item.question}\n\n{ANSWER_INSTRUCTION}")]

    def describe(self) -> dict[str, Any]:
        """What a run record says about the task: its name and the options it was built with."""
        out: dict[str, Any] = {"name": self.name, "category": self.category, "source": self.source,
                               "held_out": self.held_out}
        for key in ("dataset", "size", "seed", "config", "options", "path"):
            value = getattr(self, key, None)
            if value is not None:
                out[key] = json.loads(json.dumps(value, default=str))  # paths, configs: as plain data
        parts = getattr(self, "parts", None)
        if parts:
            out["parts"] = [part.describe() for part in parts]
        return out

    def check_split(self, split: str) -> None:
        if split not in SPLITS:
            raise ConfigError(f"task {self.name!r}: unknown split {split!r}; use one of {', '.join(SPLITS)}")


def check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ConfigError(f"unknown prompt style {style!r}; use one of {', '.join(PROMPT_STYLES)}")


def split_overlap(task: Task, split: str = "train", against: str = "test") -> float:
    """Share of ``against``'s items whose question also occurs in ``split``: how far a score on
    ``against`` measures memorised questions rather than held-out ones."""
    seen = {item.question for item in task.items(split)}
    items = list(task.items(against))
    return sum(item.question in seen for item in items) / len(items) if items else 0.0
