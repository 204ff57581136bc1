"""Math answers: boxed exact match, numeric match with tolerance, and symbolic equivalence.

``score_math`` tries, in order: exact match after normalisation, numeric match within tolerance,
then mathematical equivalence by the ``math-verify`` package (``\\frac{1}{2}`` = ``0.5``,
``2\\sqrt{2}`` = ``\\sqrt{8}``, intervals, sets). Answers longer than ``MAX_MATH_CHARS`` are
compared only exactly: symbolic parsing of huge inputs can take unbounded time.
"""

from __future__ import annotations

import math
import re
import threading
from fractions import Fraction

from .answers import extract_final_answer, last_boxed, normalize_answer
from .result import ScoreResult, as_text, unparsed

MAX_MATH_CHARS = 2_000
_LATEX_NOISE = (r"\left", r"\right", r"\!", r"\,", r"\;", r"\:", r"\displaystyle", "^\\circ", "^{\\circ}", r"\%",
                "%", r"\$", "$")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\{([^{}]*)\}")
_FRAC = re.compile(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def extract_boxed(text: object) -> str | None:
    """The answer of a math reply: the last ``\\boxed{}``, else the usual final-answer rule."""
    reply = as_text(text)
    if reply is None:
        return None
    boxed = last_boxed(reply[-100_000:])
    if boxed is not None and boxed.strip():
        return normalize_answer(boxed)
    return extract_final_answer(reply[-100_000:])


def normalize_math(answer: str) -> str:
    """Canonical text of a math answer: latex spacing/sizing removed, text wrappers unwrapped,
    ``\\dfrac`` -> ``\\frac``, no spaces, numbers in shortest form."""
    s = normalize_answer(answer)
    s = _TEXT_WRAP.sub(r"\1", s)
    for noise in _LATEX_NOISE:
        s = s.replace(noise, "")
    s = s.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac")
    s = "".join(s.split()).rstrip(".")
    return normalize_answer(s) if s else s


def parse_number(text: str) -> float | None:
    """A single number written as ``1,234.5``, ``-3/4``, ``\\frac{3}{4}``, ``45%``, ``1e-3``; else None."""
    s = normalize_math(text).replace(",", "")
    frac = _FRAC.fullmatch(s)
    if frac:
        s = f"{frac.group(1)}/{frac.group(2)}"
    try:
        if re.fullmatch(r"[+-]?\d+/\d+", s):
            value = float(Fraction(s))
        elif _NUMBER.fullmatch(s):
            value = float(s)
        else:
            return None
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def boxed_match(answer: object, gold: str) -> ScoreResult:
    text = as_text(answer)
    if text is None:
        return unparsed()
    ok = normalize_math(text) == normalize_math(gold)
    return ScoreResult(float(ok), True, "exact match" if ok else "different")


def numeric_match(answer: object, gold: str | float, rel_tol: float = 1e-4, abs_tol: float = 1e-8) -> ScoreResult:
    """1 when both are numbers within ``rel_tol`` (relative) or ``abs_tol`` (absolute)."""
    text = as_text(answer, limit=1000)
    if text is None:
        return unparsed()
    value = parse_number(text)
    target = gold if isinstance(gold, float) else parse_number(str(gold))
    if value is None:
        return ScoreResult(0.0, False, "not a number")
    if target is None:
        return ScoreResult(0.0, True, "gold is not a number")
    ok = math.isclose(value, target, rel_tol=rel_tol, abs_tol=abs_tol)
    return ScoreResult(float(ok), True, "within tolerance" if ok else f"{value:g} != {target:g}")


def math_equivalent(answer: str, gold: str, timeout_seconds: int = 5) -> bool:
    """Symbolic equivalence by math-verify. Its timeouts use SIGALRM, which works only in the main
    thread; elsewhere it runs without one (inputs are capped at MAX_MATH_CHARS)."""
    if len(answer) > MAX_MATH_CHARS or len(gold) > MAX_MATH_CHARS:
        return False
    from math_verify import parse, verify

    timeout = timeout_seconds if threading.current_thread() is threading.main_thread() else None
    try:
        target = parse(_as_latex(gold), parsing_timeout=timeout)
        guess = parse(_as_latex(answer), parsing_timeout=timeout)
        if not target or not guess:
            return False
        return bool(verify(target, guess, timeout_seconds=timeout))
    except Exception:  # a hostile answer must never crash scoring
        return False


def _as_latex(text: str) -> str:
    return text if "\\boxed" in text or text.strip().startswith("$") else f"${text}$"


def score_math(answer: object, gold: str, rel_tol: float = 1e-4) -> ScoreResult:
    """Exact, then numeric, then symbolic match (see the module doc)."""
    text = as_text(answer)
    if text is None:
        return unparsed()
    if normalize_math(text) == normalize_math(gold):
        return ScoreResult(1.0, True, "exact match")
    num = numeric_match(text, gold, rel_tol=rel_tol)
    if num.score == 1.0:
        return num
    if math_equivalent(text, gold):
        return ScoreResult(1.0, True, "equivalent (math-verify)")
    return ScoreResult(0.0, True, "not equivalent")


__all__ = ["extract_boxed", "normalize_math", "parse_number", "boxed_match", "numeric_match", "math_equivalent",
           "score_math", "MAX_MATH_CHARS"]
