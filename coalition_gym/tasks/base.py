"""The Task interface: items, prompt rendering, answer extraction and scoring.

A task is its items plus an answer kind (``answer_kind``: a parser and a rubric, scorers/kinds.py).
Drivers call one scoring method, :meth:`Task.score_batch`; protocols only call ``extract`` to compare
answers and never decide what counts as correct.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Sequence

from ..errors import ConfigError
from ..prompts import SYSTEM_PROMPT
from ..scorers.kinds import ANSWER_KINDS, NO_CONTEXT, AnswerKind, ScoringContext, resolve_answer_kind
from ..scorers.result import ScoreResult
from ..types import Item, Message

SPLITS = ("train", "dev", "test")
PROMPT_STYLES = ("chat", "compact")


class Task(ABC):
    """A dataset of items composed with an answer kind that shows questions and reads and scores answers.

    A new task writes ``items`` and names its ``answer_kind`` (a registered name such as ``"numeric"``,
    or an :class:`AnswerKind`); a new scorer is an AnswerKind that writes its rubric, ``score``."""

    name: str = "task"
    category: str = "general"
    source: str = ""  # where the items come from, for `cgym tasks`
    held_out: bool = False  # True: evaluation only (test split); no train/dev items
    #: The share of test questions that may also be train questions (:func:`split_overlap`); a task with
    #: a small question space states its own, so ``check_task`` passes it knowingly and no other.
    max_split_overlap: float = 0.05
    #: How questions are shown and answers read and scored: an AnswerKind or a registered kind's name.
    answer_kind: AnswerKind | str | None = None

    @abstractmethod
    def items(self, split: str = "test") -> Sequence[Item]:
        """The items of ``split`` (one of SPLITS), in a fixed order."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.score is not Task.score:
            raise ConfigError(f"task class {cls.__name__} overrides score: a task's rubric is its answer kind; set "
                              "answer_kind to an AnswerKind whose score(answer, item) returns a ScoreResult "
                              "(examples/custom_scorer.py)")

    @property
    def kind(self) -> AnswerKind:
        """The task's answer kind, resolved (a name is looked up in the answer-kind registry)."""
        if self.answer_kind is None:
            raise ConfigError(f"task {self.name!r} has no answer kind: set answer_kind to an AnswerKind or a "
                              f"registered kind's name ({', '.join(ANSWER_KINDS)})")
        return resolve_answer_kind(self.answer_kind)

    def scoring_context(self) -> ScoringContext:
        """What the task lends its kind (sandbox workers and limits, kernel settings, option count)."""
        return NO_CONTEXT

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item]) -> list[ScoreResult]:
        """The one scoring method every driver calls: a ScoreResult per extracted answer (None, an
        unreadable answer, scores 0). Execution-based kinds run the programs in parallel in the sandbox."""
        return self.kind.score_batch(answers, items, self.scoring_context())

    def score(self, answer: str | None, item: Item) -> float:
        """One answer's score in [0, 1]: a convenience over :meth:`score_batch`."""
        return self.score_batch([answer], [item])[0].score

    def extract(self, text: str | None, item: Item | None = None) -> str | None:
        """The canonical final answer of a reply, or None when it has none: the kind's parser. ``item``
        is the item the reply answers (a mixture extracts with that item's own task)."""
        return self.kind.extract(text, item, self.scoring_context())

    def prompt(self, item: Item, style: str = "chat") -> list[Message]:
        """The question as chat messages, in the member's prompt style: the kind shows the question and
        says how the reply must end."""
        check_style(style)
        text = self.kind.question(item)
        if style == "compact":
            return [Message("user", f"{text}\nAnswer:")]
        instruction = self.kind.instruction
        return [Message("system", SYSTEM_PROMPT), Message("user", f"{text}\n\n{instruction}" if instruction else text)]

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
