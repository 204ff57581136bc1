"""One redaction for every error text, log line and output file: configured secrets never leave.
The same writers keep JSON strict: a non-finite number is written as null, never as NaN.

A secret is the value of an environment variable a backend was configured to read its key from
(``api_key_env``; registered by the backend), of a well-known key variable (``OPENAI_API_KEY``,
``HF_TOKEN`` ...), or a value passed to :func:`register_secret`. Values shorter than
``MIN_SECRET_LENGTH`` are ignored: redacting "abc" everywhere would mangle ordinary text.
``Authorization: Bearer ...`` values are redacted whatever they hold (a server may echo a key that
was never configured here).

The writers below (:func:`write_text`, :func:`write_json`, :class:`JsonLines`) are the only way the
library writes result files, so nothing reaches disk unredacted.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
KNOWN_KEY_VARIABLES = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN",
                       "ANTHROPIC_API_KEY", "TOGETHER_API_KEY", "VLLM_API_KEY", "WANDB_API_KEY")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}")

_lock = threading.Lock()
_registered: set[str] = set()
_variables: set[str] = set(KNOWN_KEY_VARIABLES)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (ignored when empty or too short to be a key)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def register_key_variable(name: str | None) -> None:
    """Redact whatever the environment variable ``name`` holds, now and after it changes."""
    if name:
        with _lock:
            _variables.add(name)


def secrets() -> list[str]:
    """Every value redacted now, longest first (so a key containing another is removed whole)."""
    with _lock:
        values = set(_registered)
        names = list(_variables)
    values.update(v for v in (os.environ.get(n) for n in names) if v and len(v) >= MIN_SECRET_LENGTH)
    values.update([json.dumps(v)[1:-1] for v in values])  # as it appears inside JSON text too
    return sorted(values, key=len, reverse=True)


def redact(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every secret (and every bearer token) replaced by ``[REDACTED]``."""
    for value in secrets() if values is None else values:
        if value in text:
            text = text.replace(value, REDACTED)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def redact_data(data: Any, values: Iterable[str] | None = None) -> Any:
    """A JSON-like structure with every string (keys included) redacted."""
    values = secrets() if values is None else list(values)
    if isinstance(data, str):
        return redact(data, values)
    if isinstance(data, dict):
        return {redact_data(k, values): redact_data(v, values) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, values) for v in data]
    return data


def strict(data: Any) -> Any:
    """The data with every non-finite float (NaN, infinity) as None: strict JSON, which every parser reads."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: strict(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [strict(v) for v in data]
    return data


def dumps(data: Any, **kwargs: Any) -> str:
    """Strict ``json.dumps`` of the data (no NaN), then redacted (covers whatever ``default=`` makes)."""
    return redact(json.dumps(strict(data), allow_nan=False, **kwargs))


def write_text(path: str | os.PathLike, text: str) -> Path:
    path = Path(path)
    path.write_text(redact(text))
    return path


def write_json(path: str | os.PathLike, data: Any, **kwargs: Any) -> Path:
    path = Path(path)
    path.write_text(dumps(data, **{"indent": 2, **kwargs}))
    return path


class JsonLines:
    """Appends one redacted JSON object per line to a file, flushed per line (a killed run keeps them)."""

    def __init__(self, path: str | os.PathLike, mode: str = "a", **dump_kwargs: Any):
        self.path = Path(path)
        self._fh = self.path.open(mode)
        self._kwargs = dump_kwargs

    def write(self, row: Any) -> None:
        self._fh.write(dumps(row, **self._kwargs) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "JsonLines":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
