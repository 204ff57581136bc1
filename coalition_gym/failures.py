"""Failed episodes, counted and shown, and the limit past which a command exits non-zero.

An episode *fails* when its protocol program cannot finish: a backend error after its retries, a
malformed reply, a bug in the program. A failed episode scores 0 (the system gave no answer), so it
enters a coalition's value, and every value built on it, as a wrong answer. That is the honest
reading for a deployed system, but a value pulled down by an outage is not a property of the
models, so every command counts failures, prints the first distinct errors, writes them to its
output, and exits with :data:`EXIT_TOO_MANY_FAILURES` when they pass ``--max-failures``.

``--max-failures`` is a count (``3``: more than 3 failed episodes is too many) or a percentage
(``5%``). The default is "any coalition whose every episode failed, or more than 10% of episodes".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .errors import ConfigError
from .result_files import redact

EXIT_TOO_MANY_FAILURES = 3
DEFAULT_FRACTION = 0.10
SHOWN_ERRORS = 5
HOW_FAILURES_COUNT = "a failed episode scores 0 (no answer) and enters every value as a wrong answer"


@dataclass(frozen=True)
class FailureLimit:
    """How many failed episodes a run tolerates. Neither set: the default rule."""

    count: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, text: str) -> "FailureLimit":
        text = text.strip()
        if text in ("", "default"):
            return cls()
        try:
            if text.endswith("%"):
                percent = float(text[:-1])
                if 0 <= percent <= 100:
                    return cls(fraction=percent / 100)
            else:
                count = int(text)
                if count >= 0:
                    return cls(count=count)
        except ValueError:
            pass
        raise ConfigError(f"{text!r} is not a failure limit; give a count such as 0 or 3, "
                          "a percentage such as 5%, or 'default'")

    def describe(self) -> str:
        if self.count is not None:
            return f"more than {self.count} failed episode{'s' if self.count != 1 else ''}"
        if self.fraction is not None:
            return f"more than {self.fraction:.0%} of episodes failed"
        return f"a coalition with every episode failed, or more than {DEFAULT_FRACTION:.0%} of episodes failed"


@dataclass
class FailureSummary:
    """Failed episodes of a run: how many, in which coalitions, and the first distinct errors."""

    episodes: int = 0
    failed: int = 0
    per_coalition: dict[tuple[str, ...], list[int]] = field(default_factory=dict)  # [failed, episodes]
    errors: Counter = field(default_factory=Counter)  # insertion order = order of first occurrence

    def add(self, coalition: Sequence[str], error: str | None) -> None:
        key = tuple(sorted(coalition))
        row = self.per_coalition.setdefault(key, [0, 0])
        row[1] += 1
        self.episodes += 1
        if error is not None:
            row[0] += 1
            self.failed += 1
            self.errors[redact(error)[:400]] += 1

    def add_records(self, records: Iterable[Any]) -> "FailureSummary":
        """Add episodes given as EpisodeResults or their ``to_dict`` rows."""
        for r in records:
            if isinstance(r, dict):
                self.add(r["coalition"], r["error"])
            else:
                self.add(r.coalition, r.error)
        return self

    def merge(self, other: "FailureSummary") -> None:
        self.episodes += other.episodes
        self.failed += other.failed
        for key, (failed, total) in other.per_coalition.items():
            row = self.per_coalition.setdefault(key, [0, 0])
            row[0] += failed
            row[1] += total
        self.errors.update(other.errors)

    @property
    def whole_coalitions(self) -> list[tuple[str, ...]]:
        """Coalitions in which every episode failed (their value is 0 only because nothing ran)."""
        return [c for c, (failed, total) in self.per_coalition.items() if total and failed == total]

    def exceeds(self, limit: FailureLimit) -> bool:
        if self.failed == 0:
            return False
        if limit.count is not None:
            return self.failed > limit.count
        fraction = limit.fraction if limit.fraction is not None else DEFAULT_FRACTION
        too_many = self.failed > fraction * self.episodes
        return too_many or (limit.fraction is None and bool(self.whole_coalitions))

    def markdown(self) -> list[str]:
        """The failures as a paragraph of a markdown report (a blank line, then one sentence); none: []."""
        if not self.failed:
            return []
        return ["", "Failed episodes: " + "; ".join(line.strip() for line in self.lines()) + "."]

    def lines(self) -> list[str]:
        """What a person reads: the count, the coalitions that never ran, the first distinct errors."""
        if not self.failed:
            return []
        out = [f"{self.failed} of {self.episodes} episodes failed ({HOW_FAILURES_COUNT})"]
        whole = self.whole_coalitions
        if whole:
            shown = ", ".join("{" + ",".join(c) + "}" for c in whole[:5])
            out.append(f"  every episode failed in {len(whole)} coalition{'s' if len(whole) != 1 else ''}: {shown}"
                       + (" ..." if len(whole) > 5 else ""))
        for error, n in list(self.errors.items())[:SHOWN_ERRORS]:
            out.append(f"  {n} x {error}")
        if len(self.errors) > SHOWN_ERRORS:
            out.append(f"  ... and {len(self.errors) - SHOWN_ERRORS} more distinct errors")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "failed": self.failed, "how_they_count": HOW_FAILURES_COUNT,
                "whole_coalitions": [list(c) for c in self.whole_coalitions],
                "per_coalition": [{"coalition": list(c), "failed": f, "episodes": t}
                                  for c, (f, t) in self.per_coalition.items() if f],
                "errors": [{"error": e, "count": n} for e, n in self.errors.items()]}


def verdict(summary: FailureSummary, limit: FailureLimit, say: Any) -> int:
    """Print the failures (with ``say``) and return the exit code the limit gives: 0 or 3."""
    for line in summary.lines():
        say(line)
    if summary.exceeds(limit):
        say(f"too many failures ({limit.describe()}): exit status {EXIT_TOO_MANY_FAILURES}; what finished is kept. "
            "Fix the cause, or pass --max-failures to accept them.")
        return EXIT_TOO_MANY_FAILURES
    return 0
