"""Free-text answers: normalised exact match and token F1 (SQuAD-style normalisation)."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable

from .result import ScoreResult, as_text, unparsed

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_MAX_CHARS = 200_000


def normalize_text(text: str) -> str:
    """Lower case, punctuation and English articles removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_text(prediction).split(), normalize_text(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def score_f1(answer: object, golds: str | Iterable[str]) -> ScoreResult:
    """Best token F1 against any gold answer."""
    text = as_text(answer, limit=_MAX_CHARS)
    if text is None:
        return unparsed()
    refs = [golds] if isinstance(golds, str) else list(golds)
    best = max((token_f1(text, g) for g in refs), default=0.0)
    return ScoreResult(best, True, f"token F1 {best:.3f}")


def score_exact(answer: object, golds: str | Iterable[str]) -> ScoreResult:
    text = as_text(answer, limit=_MAX_CHARS)
    if text is None:
        return unparsed()
    refs = [golds] if isinstance(golds, str) else list(golds)
    ok = any(normalize_text(text) == normalize_text(g) for g in refs)
    return ScoreResult(float(ok), True, "exact match" if ok else "different")


__all__ = ["normalize_text", "token_f1", "score_f1", "score_exact"]
