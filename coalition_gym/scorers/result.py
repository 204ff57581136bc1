"""What every scorer returns: a score in [0, 1] and whether the answer could be read at all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ScoreResult:
    """``parsed`` is False when the answer was missing or unreadable (it then scores 0);
    ``reason`` says why a parsed answer got its score, in a few words."""

    score: float
    parsed: bool
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score!r} must lie in [0, 1]")


def unparsed(reason: str = "no answer") -> ScoreResult:
    return ScoreResult(0.0, False, reason)


def as_text(answer: object, limit: int | None = None) -> str | None:
    """An answer as text: None and empty stay None, bytes are decoded leniently (non-UTF-8 bytes
    become U+FFFD), anything else goes through ``str``. ``limit`` cuts very long answers."""
    if answer is None:
        return None
    if isinstance(answer, (bytes, bytearray)):
        text = bytes(answer).decode("utf-8", errors="replace")
    else:
        text = str(answer)
    if limit is not None and len(text) > limit:
        text = text[:limit]
    return text if text.strip() else None
