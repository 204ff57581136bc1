"""A persistent generation cache (SQLite, JSON values, no pickle) and a caching Generator wrapper.

A generation is keyed by the backend's identity, the rendered prompt (the chat messages), the
sampling parameters and the seed. Because seeds never depend on the coalition, the same member
asked the same prompt in two coalitions hits the same key, so coalition games share work.

Every batch is committed before ``generate`` returns, so a run killed at any moment keeps every
finished generation; restarting with the same arguments recomputes only what is missing. A cache
file that cannot be read is reported (``CacheWarning``) and the run goes on without it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from ..errors import PartialBatchError
from ..types import Ask, Sample
from .base import Generator

SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    sample TEXT NOT NULL
)
"""


class CacheWarning(UserWarning):
    """The cache could not be used as asked; the run continues (without it, or without one entry)."""


def ask_key(identity: str, ask: Ask) -> str:
    payload = json.dumps([identity, [[m.role, m.content] for m in ask.messages],
                          [ask.params.temperature, ask.params.top_p, ask.params.max_new_tokens], ask.seed],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _encode(sample: Sample) -> str:
    return json.dumps({"text": sample.text, "token_ids": sample.token_ids, "logprobs": sample.logprobs,
                       "finish_reason": sample.finish_reason, "n_tokens": sample.n_tokens}, ensure_ascii=False)


def _decode(raw: str) -> Sample:
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError("not a stored sample")
    ids, lps = data.get("token_ids"), data.get("logprobs")
    return Sample(text=data["text"], token_ids=tuple(ids) if ids is not None else None,
                  logprobs=tuple(lps) if lps is not None else None,
                  finish_reason=str(data.get("finish_reason", "stop")),
                  n_tokens=int(data["n_tokens"]) if data.get("n_tokens") is not None else None)


#: the memory layer's default size: the most recently used generations up to about this many bytes
MEMORY_BYTES = 1 << 30


def _sample_bytes(key: str, sample: Sample) -> int:
    """About what an entry costs in memory: key, Sample, text, token ids and log-probs as Python objects."""
    ids, lps = sample.token_ids or (), sample.logprobs or ()
    return 320 + len(key) + sys.getsizeof(sample.text) + 36 * len(ids) + 32 * len(lps)


class GenerationCache:
    """Key -> Sample, in memory and (when ``path`` is given) in an SQLite file.

    The memory layer keeps the most recently used entries up to ``memory_bytes`` (about; None: all). A
    64-member ``cgym eval`` asks for 21 million generations, almost all used once (a debate's later rounds
    quote the coalition's own peers), so keeping all took about 9 GB; what coalitions share (a member's
    first answer to an item) is used again and again and stays. An entry pushed out is read back from the
    file, or without one generated again from the same prompt and seed: the same text on a deterministic
    backend (simulated, transformers), possibly not on a batch-dependent GPU engine."""

    def __init__(self, path: str | Path | None = None, *, memory_bytes: int | None = MEMORY_BYTES):
        self.path = Path(path) if path is not None else None
        self.status = "memory"
        self.memory_bytes = memory_bytes
        self._memory: OrderedDict[str, Sample] = OrderedDict()  # oldest use first
        self._memory_used = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._open()

    def _open(self) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=60)  # Ray workers may share the file
            check = db.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(SCHEMA)
            db.commit()
        except (sqlite3.Error, OSError) as exc:
            self._disable(f"cannot use {self.path}: {exc}")
            return
        self._db = db
        self.status = "ok"

    def _disable(self, reason: str) -> None:
        warnings.warn(f"generation cache disabled, continuing without it ({reason}); move or delete the "
                      "file to start a fresh cache", CacheWarning, stacklevel=3)
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None
        self.status = f"disabled: {reason}"

    def __len__(self) -> int:
        if self._db is not None:
            try:
                return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
            except sqlite3.Error:
                pass
        return len(self._memory)

    def _remember(self, key: str, sample: Sample) -> None:
        old = self._memory.pop(key, None)
        if old is not None:
            self._memory_used -= _sample_bytes(key, old)
        self._memory[key] = sample  # newest last
        self._memory_used += _sample_bytes(key, sample)
        if self.memory_bytes is not None:
            while self._memory_used > self.memory_bytes and len(self._memory) > 1:
                self._memory_used -= _sample_bytes(*self._memory.popitem(last=False))

    def get_many(self, keys: Sequence[str]) -> dict[str, Sample]:
        found = {k: self._memory[k] for k in keys if k in self._memory}
        if self.memory_bytes is not None:
            for key in found:  # used again: last to go
                self._memory.move_to_end(key)
        missing = [k for k in keys if k not in found]
        if missing and self._db is not None:
            try:
                for start in range(0, len(missing), 500):
                    chunk = missing[start:start + 500]
                    rows = self._db.execute(
                        f"SELECT key, sample FROM generations WHERE key IN ({','.join('?' * len(chunk))})",
                        chunk).fetchall()
                    for key, raw in rows:
                        try:
                            found[key] = _decode(raw)
                            self._remember(key, found[key])
                        except (ValueError, TypeError, json.JSONDecodeError):
                            warnings.warn(f"ignoring an unreadable cache entry {key[:12]}...; it will be "
                                          "generated again", CacheWarning, stacklevel=2)
            except sqlite3.Error as exc:
                self._disable(f"read failed: {exc}")
        return found

    def put_many(self, entries: Sequence[tuple[str, str, Sample]]) -> None:
        """Store ``(key, identity, sample)`` entries; on disk they are committed before returning."""
        for key, _, sample in entries:
            self._remember(key, sample)
        if self._db is not None and entries:
            try:
                with self._db:
                    self._db.executemany("INSERT OR REPLACE INTO generations VALUES (?, ?, ?)",
                                         [(k, ident, _encode(s)) for k, ident, s in entries])
            except sqlite3.Error as exc:
                self._disable(f"write failed: {exc}")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class CachedGenerator(Generator):
    """Answers from the cache where it can and sends one batch of the unique misses to ``inner``."""

    def __init__(self, inner: Generator, cache: GenerationCache):
        self.inner = inner
        self.cache = cache
        self.identity = inner.identity
        self.hits = 0
        self.misses = 0

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        keys = [ask_key(self.identity, a) for a in asks]
        known = self.cache.get_many(list(dict.fromkeys(keys)))
        todo: dict[str, Ask] = {}
        for key, ask in zip(keys, asks):
            if key not in known and key not in todo:
                todo[key] = ask
        partial: PartialBatchError | None = None
        if todo:
            try:
                fresh = self.inner.generate(list(todo.values()))
            except PartialBatchError as exc:  # cache what succeeded; report per Ask in the caller's order
                fresh, partial = exc.results, exc
            if not isinstance(fresh, list) or len(fresh) != len(todo):
                return fresh  # let the runner report the malformed reply
            self.cache.put_many([(k, self.identity, s) for k, s in zip(todo, fresh) if isinstance(s, Sample)])
            known.update(zip(todo, fresh))
        self.misses += len(todo)
        self.hits += len(asks) - len(todo)
        if partial is not None:
            raise PartialBatchError(str(partial), [known[k] for k in keys]) from partial
        return [known[k] for k in keys]
