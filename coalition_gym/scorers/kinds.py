"""Answer kinds: for each kind of answer a task expects, one object that says how the question is
shown, what the reply must end with, how the final answer is read (the parser, ``extract``) and how it
is scored (the rubric, ``score``), as verifiers' Parser and Rubric do. Every task is composed of one
(``Task.answer_kind``); a dataset spec or a task names it, and :func:`register_answer_kind` adds one.

``extract`` and ``score`` see the item, so a kind can read what it needs from it (the number of
options, the answer type, the relevance table, the tests). What the task lends its kind (sandbox
parallelism and limits, kernel settings, the option count) comes in a :class:`ScoringContext`.
``score_batch`` runs execution-based kinds (code, kernels) in parallel in the sandbox; the others
score one by one.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import ConfigError, UnknownNameError
from ..sandbox.launcher import Limits
from ..sandbox.two_process import SplitProgram
from ..types import Item
from . import choice as mc
from .answers import extract_final_answer, normalize_answer
from .code import CODE_LIMITS, assert_split, extract_code, humaneval_split, score_programs
from .kernels import KernelConfig, score_kernels
from .mathematics import extract_boxed, numeric_match, score_math
from .ranking import parse_ranking, score_ranking
from .result import ScoreResult, as_text, unparsed
from .text import score_exact, score_f1

FINAL_LINE = "Think it through, then end your reply with a final line of the form 'Answer: <{}>'."


@dataclass(frozen=True)
class ScoringContext:
    """What a task lends its kind: the sandbox's parallelism and limits, the kernel settings, the
    option count."""

    workers: int | None = None
    kernel: KernelConfig | None = None
    n_options: int = 4
    numeric_fallback: bool = False
    limits: Limits | None = None  # None: the code kind's CODE_LIMITS
    #: the task's data files (the tests and expected outputs of every item): the sandbox hides them
    hidden: tuple[str, ...] = ()


NO_CONTEXT = ScoringContext()


class AnswerKind(ABC):
    """A parser (``extract``) and a rubric (``score``). A new scorer subclasses it and writes ``score``
    only: the final-answer parser, the guard against unreadable and hostile answers and the batch
    call are inherited."""

    name = "answer"
    instruction = FINAL_LINE.format("answer")

    def question(self, item: Item) -> str:
        return item.question

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        """The parser: a reply's final answer, or None when it has none."""
        return extract_final_answer(as_text(text))

    @abstractmethod
    def score(self, answer: str, item: Item) -> ScoreResult:
        """The rubric: the score of a readable answer (``score_one`` guards it)."""

    def score_one(self, answer: str | None, item: Item) -> ScoreResult:
        """``score`` that never raises: a hostile answer scores 0 with the reason."""
        if as_text(answer) is None:
            return unparsed()
        try:
            return self.score(str(as_text(answer)), item)
        except Exception as exc:  # a hostile answer must never crash a run
            return ScoreResult(0.0, False, f"scoring failed: {type(exc).__name__}")

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item],
                    context: ScoringContext = NO_CONTEXT) -> list[ScoreResult]:
        """A ScoreResult per extracted answer: what ``Task.score_batch`` returns."""
        return [self.score_one(a, i) for a, i in zip(answers, items)]


class Choice(AnswerKind):
    name = "choice"
    instruction = "Think it through, then end with a final line 'Answer: <letter>'."

    def question(self, item: Item) -> str:
        if not item.choices:
            return item.question
        letters = mc.letters(len(item.choices))
        return "\n".join([item.question, ""] + [f"{letters[i]}) {c}" for i, c in enumerate(item.choices)])

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        letter = mc.extract_choice(text, n_options=context.n_options)  # letters beyond an item's options score 0
        if letter is None and context.numeric_fallback:
            return extract_final_answer(as_text(text))
        return letter

    def score(self, answer: str, item: Item) -> ScoreResult:
        if item.meta.get("numeric"):
            return numeric_match(answer, item.gold, rel_tol=item.meta.get("rel_tol", 0.01))
        return mc.score_choice(answer, item.gold)


class Math(AnswerKind):
    name = "math"
    instruction = "Think it through, then put the final answer in \\boxed{}."

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        return extract_boxed(text)

    def score(self, answer: str, item: Item) -> ScoreResult:
        return score_math(answer, item.gold)


class Numeric(AnswerKind):
    name = "numeric"
    instruction = FINAL_LINE.format("number")

    def score(self, answer: str, item: Item) -> ScoreResult:
        return numeric_match(answer, item.gold)


class TheoremQA(AnswerKind):
    name = "theoremqa"

    def score(self, answer: str, item: Item) -> ScoreResult:
        return score_theoremqa(answer, item.gold, item.meta.get("answer_type", ""))


class Exact(AnswerKind):
    name = "exact"

    def score(self, answer: str, item: Item) -> ScoreResult:
        if re.fullmatch(r"\([A-Z]\)", item.gold):  # an option letter in parentheses, as BBH writes it
            letter = mc.extract_choice(answer, n_options=26)
            return mc.score_choice(letter, item.gold[1]) if letter else unparsed("no option letter")
        return score_exact(answer, item.gold)


class F1(AnswerKind):
    name = "f1"
    instruction = ""

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        reply = as_text(text)
        return reply.strip() if reply else None

    def score(self, answer: str, item: Item) -> ScoreResult:
        return score_f1(answer, item.gold)


class Ranking(AnswerKind):
    name = "ranking"
    instruction = ""

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        ranked = parse_ranking(text)
        return "\n".join(ranked) if ranked else None

    def score(self, answer: str, item: Item) -> ScoreResult:
        return score_ranking(answer, item.meta["relevance"], k=100, adjusted=True)


class Code(AnswerKind):
    """A fenced Python program, scored by its tests in the sandbox (all of a batch in parallel)."""

    name = "code"
    instruction = "Write the Python function in a ```python code block."

    def extract(self, text: Any, item: Item | None = None, context: ScoringContext = NO_CONTEXT) -> str | None:
        return extract_code(text)

    def program(self, answer: str, item: Item) -> SplitProgram:
        """The two-process program that tests ``answer``: an item that names an entry point is checked by
        its ``check(candidate)`` function (HumanEval's harness), any other by its assert statements
        (MBPP)."""
        meta = item.meta
        if "entry_point" in meta:
            return humaneval_split(meta["prompt"], answer, meta["test"], meta["entry_point"])
        return assert_split(answer, meta["tests"], meta.get("setup", ""))

    def score(self, answer: str, item: Item) -> ScoreResult:
        return self.score_batch([answer], [item])[0]

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item],
                    context: ScoringContext = NO_CONTEXT) -> list[ScoreResult]:
        programs = [None if as_text(a) is None else self.program(str(a), i) for a, i in zip(answers, items)]
        limits = CODE_LIMITS if context.limits is None else context.limits
        return score_programs(programs, limits=limits, workers=context.workers, hidden=context.hidden)


class Kernel(Code):
    """Like code (a fenced program, scored in the sandbox), but a faster drop-in module for a reference."""

    name = "kernel"
    instruction = ("Write a faster drop-in replacement named ModelNew (same constructor and forward signature) in "
                   "one ```python code block. It may use custom kernels (torch.utils.cpp_extension, Triton) or "
                   "better PyTorch operations.")

    def question(self, item: Item) -> str:
        return f"Here is a PyTorch reference module:\n```python\n{item.question}\n```"

    def score_batch(self, answers: Sequence[str | None], items: Sequence[Item],
                    context: ScoringContext = NO_CONTEXT) -> list[ScoreResult]:
        return score_kernels([(i.meta["reference"], None if as_text(a) is None else str(a))
                              for a, i in zip(answers, items)], context.kernel or KernelConfig(),
                             workers=context.workers or 1, hidden=context.hidden)


def score_theoremqa(answer: str, gold: str, answer_type: str) -> ScoreResult:
    """TheoremQA by answer type: bool -> True/False; integer/float -> numeric within 1%; list ->
    element-wise numeric; anything else -> math equivalence."""
    kind = answer_type.lower()
    if kind == "bool":
        said = normalize_answer(answer).lower()
        if said not in ("true", "false", "yes", "no"):
            return ScoreResult(0.0, False, "not true/false")
        ok = (said in ("true", "yes")) == (gold.strip().lower() in ("true", "yes"))
        return ScoreResult(float(ok), True, "bool match" if ok else "wrong bool")
    if kind.startswith("list"):
        got = [p for p in re.split(r"[,\s]+", answer.strip("[]() ")) if p]
        want = [p for p in re.split(r"[,\s]+", gold.strip("[]() ")) if p]
        if len(got) != len(want):
            return ScoreResult(0.0, True, f"{len(got)} elements, expected {len(want)}")
        ok = all(numeric_match(g, w, rel_tol=0.01).score == 1.0 or g == w for g, w in zip(got, want))
        return ScoreResult(float(ok), True, "list match" if ok else "list differs")
    if kind in ("integer", "float"):
        result = numeric_match(answer, gold, rel_tol=0.01)
        if result.parsed:
            return result
    return score_math(answer, gold, rel_tol=0.01)


#: answer kind name -> kind: the registry dataset specs and tasks name their kind in
ANSWER_KINDS: dict[str, AnswerKind] = {}


def register_answer_kind(name: str, kind: AnswerKind) -> None:
    """Make ``kind`` available by name wherever an answer kind is named: a task's ``answer_kind``, a
    dataset spec's ``kind``. The built-ins go through this call too."""
    if not isinstance(name, str) or not name or not isinstance(kind, AnswerKind):
        raise ConfigError(f"register_answer_kind needs a name and an AnswerKind instance, got {name!r}, {kind!r}")
    if name in ANSWER_KINDS and ANSWER_KINDS[name] is not kind:
        raise ConfigError(f"answer kind {name!r} is already registered")
    ANSWER_KINDS[name] = kind


def resolve_answer_kind(kind: AnswerKind | str) -> AnswerKind:
    """An answer kind, given as itself or by its registered name."""
    if isinstance(kind, AnswerKind):
        return kind
    if isinstance(kind, str) and kind in ANSWER_KINDS:
        return ANSWER_KINDS[kind]
    raise UnknownNameError("answer kind", str(kind), ANSWER_KINDS)


for _kind in (Choice(), Math(), Numeric(), TheoremQA(), Exact(), F1(), Code(), Kernel(), Ranking()):
    register_answer_kind(_kind.name, _kind)

__all__ = ["AnswerKind", "ANSWER_KINDS", "ScoringContext", "NO_CONTEXT", "register_answer_kind",
           "resolve_answer_kind", "score_theoremqa", "Choice", "Math", "Numeric", "TheoremQA", "Exact", "F1",
           "Code", "Kernel", "Ranking"]
