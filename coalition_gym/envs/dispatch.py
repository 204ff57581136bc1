"""One batched call per backend (:func:`dispatch`) and what calls cost (:class:`RunStats`, :class:`EpisodeCost`).

The runner drives protocol programs wave by wave through :func:`dispatch`; dev-score measurement and the
seated environments answer their Asks through it too, without the program machinery.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..agents.base import Generator, settle
from ..errors import BackendError
from ..types import Ask, Outcome, Sample


@dataclass
class RunStats:
    waves: int = 0
    backend_calls: int = 0
    asks: int = 0
    backend_seconds: float = 0.0
    wall_seconds: float = 0.0
    per_backend: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def batching_factor(self) -> float:
        """Mean number of Asks per backend call."""
        return self.asks / self.backend_calls if self.backend_calls else 0.0

    def record(self, backend: Generator, n_asks: int, seconds: float) -> None:
        self.backend_calls += 1
        self.asks += n_asks
        self.backend_seconds += seconds
        row = self.per_backend.setdefault(backend.identity, {"calls": 0, "asks": 0, "seconds": 0.0})
        row["calls"] += 1
        row["asks"] += n_asks
        row["seconds"] += seconds


def sample_tokens(sample: Sample) -> int:
    """Tokens of one reply: ``len(token_ids)`` when the backend gave them, else the count the backend
    reported (``n_tokens``: an OpenAI-compatible server's ``usage``), else the number of
    whitespace-separated words of the text (a backend-independent stand-in)."""
    if sample.token_ids is not None:
        return len(sample.token_ids)
    return int(sample.n_tokens) if sample.n_tokens is not None else len(sample.text.split())


@dataclass
class EpisodeCost:
    """What one protocol execution spent: Asks answered and tokens generated."""

    calls: int = 0
    tokens: int = 0

    def add(self, samples: Sequence[Sample]) -> None:
        self.calls += len(samples)
        self.tokens += sum(sample_tokens(s) for s in samples)

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "tokens": self.tokens}


def with_cost(outcome: Outcome, cost: EpisodeCost) -> Outcome:
    """The outcome with ``details["cost"]`` set (a protocol's own details are kept)."""
    return dataclasses.replace(outcome, details={**outcome.details, "cost": cost.as_dict()})


def dispatch(asks: Sequence[Ask], backends: Mapping[str, Generator], stats: RunStats | None = None,
             on_call: Callable[[], None] | None = None) -> list[Sample | BaseException]:
    """Answer ``asks`` with one call per backend; a slot holds the exception if its Ask failed. ``on_call``
    hears of each backend call done (a progress bar's generations move within a long wave)."""
    out: list[Sample | BaseException | None] = [None] * len(asks)
    groups: dict[int, tuple[Generator, list[int]]] = {}
    for k, ask in enumerate(asks):
        backend = backends.get(ask.member)
        if backend is None:
            out[k] = BackendError(f"no backend is bound to {ask.member!r}; bound names: "
                                  f"{', '.join(sorted(backends))}")
            continue
        groups.setdefault(id(backend), (backend, []))[1].append(k)
    for backend, idx in groups.values():
        batch = [asks[k] for k in idx]
        start = time.perf_counter()
        results = settle(backend, batch)
        if stats is not None:
            stats.record(backend, len(batch), time.perf_counter() - start)
        for k, result in zip(idx, results):
            out[k] = result
        if on_call is not None:
            on_call()
    return out  # type: ignore[return-value]


__all__ = ["RunStats", "EpisodeCost", "dispatch", "sample_tokens", "with_cost"]
