"""Several replicas of one model (e.g. several ``vllm serve`` processes) behind one Generator.

A batch is split round-robin across the replicas, the parts are sent concurrently, and the samples
come back in the original order. Replicas must serve the same model with the same settings: a sample
depends only on its Ask (and seed), so which replica answered does not matter, and the generation
cache keys use the first replica's identity.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ..errors import ConfigError, PartialBatchError
from ..types import Ask, Sample
from .base import Generator, settle


class ReplicaGenerator(Generator):
    def __init__(self, replicas: Sequence[Generator]):
        if not replicas:
            raise ConfigError("ReplicaGenerator needs at least one replica")
        self.replicas = list(replicas)
        self.identity = self.replicas[0].identity
        self._pool = ThreadPoolExecutor(max_workers=len(self.replicas), thread_name_prefix="replica")

    def describe(self) -> dict:
        return {"kind": "replicas", "identity": self.identity, "replicas": [r.describe() for r in self.replicas]}

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        n = len(self.replicas)
        parts = [list(range(k, len(asks), n)) for k in range(n)]
        futures = [(idx, self._pool.submit(settle, rep, [asks[i] for i in idx]))
                   for rep, idx in zip(self.replicas, parts) if idx]
        out: list[Sample | BaseException | None] = [None] * len(asks)
        for idx, future in futures:
            for i, result in zip(idx, future.result()):
                out[i] = result
        failed = [r for r in out if isinstance(r, BaseException)]
        if failed:  # what the other replicas answered is kept, never re-sent
            raise PartialBatchError(f"{len(failed)} of {len(asks)} requests failed; first: {failed[0]}", out)
        return out  # type: ignore[return-value]
