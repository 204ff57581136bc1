"""One redaction for every error text, log line and output file: configured secrets never leave.
The same writers keep JSON strict: a non-finite number is written as null, never as NaN.

A secret is the value of an environment variable a backend was configured to read its key from
(``api_key_env``; registered by the backend), of a well-known key variable (``OPENAI_API_KEY``,
``HF_TOKEN`` ...), or a value passed to :func:`register_secret`. Values shorter than
``MIN_SECRET_LENGTH`` are ignored: redacting "abc" everywhere would mangle ordinary text.
``Authorization: Bearer ...`` values are redacted whatever they hold (a server may echo a key that
was never configured here).

The writers below (:func:`write_text`, :func:`write_json`, :class:`JsonLines`) are the only way the
library writes result files, so nothing reaches disk unredacted. A report's folder is written by one call,
:func:`write_bundle` (summary JSON, Markdown, CSV, PNG, HTML, results.jsonl and run.json), and a run record
by :func:`write_run_record` (``run.json``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol

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


@functools.lru_cache(maxsize=64)
def _secrets_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation of the secrets, longest first (at a position the longest one is taken whole): a text is
    scanned once, however many secrets there are (a server scrubs every string of every response)."""
    return re.compile("|".join(map(re.escape, values))) if values else None


def redact(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every secret (and every bearer token) replaced by ``[REDACTED]``."""
    pattern = _secrets_pattern(tuple(secrets() if values is None else values))
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    # the case-blind scan is slow; most texts have no bearer at all
    return _BEARER.sub(_bearer_redacted, text) if "bearer" in text.lower() else text


def _bearer_redacted(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED


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


#: the run record's file in every output folder (``records.RunRecord``'s data)
RUN_FILE = "run.json"


def write_run_record(folder: str | os.PathLike, record: Any) -> Path:
    """``folder/run.json``: the one writer of a run record (the folder is made if missing)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return write_json(folder / RUN_FILE, record)


class SupportsCsv(Protocol):
    def to_csv(self) -> str: ...


@dataclass
class Bundle:
    """What one report writes into its folder, every part optional: ``summary`` (strict JSON), ``markdown``,
    ``csv`` (a table, rendered with its ``to_csv``, or the text), ``png`` (draws the plot into the path it is
    given), ``html`` (the page, or a function of the PNG's bytes for a page that embeds the plot),
    ``results`` (one JSON line each: ``results.jsonl``), ``figures`` (more pictures: file name -> draw) and
    ``record`` (``run.json``, :func:`write_run_record`). Files are named ``<stem>.<json|md|csv|png|html>``
    unless ``names`` (part -> file name) says otherwise."""

    stem: str
    record: Any = None
    summary: Any = None
    markdown: str | None = None
    csv: "SupportsCsv | str | None" = None
    png: Callable[[Path], Any] | None = None
    html: "str | Callable[[bytes | None], str] | None" = None
    results: Iterable[Any] | None = None
    figures: Mapping[str, Callable[[Path], Any]] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def path(self, folder: Path, part: str) -> Path:
        default = {"results": "results.jsonl"}.get(part, f"{self.stem}.{part}")
        return folder / self.names.get(part, default)


def write_bundle(folder: str | os.PathLike, bundle: Bundle) -> dict[str, Path]:
    """Write every part ``bundle`` has into ``folder`` (made if missing), through this module's redacting
    writers; returns part (``results``, ``json``, ``run``, ``md``, ``csv``, ``png``, a figure's file name,
    ``html``) -> path, in the order written. The PNG is drawn before the page that may embed it."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if bundle.results is not None:
        paths["results"] = bundle.path(out, "results")
        with JsonLines(paths["results"], "w") as lines:
            for row in bundle.results:
                lines.write(row)
    if bundle.summary is not None:
        paths["json"] = write_json(bundle.path(out, "json"), bundle.summary)
    if bundle.record is not None:
        paths["run"] = write_run_record(out, bundle.record)
    if bundle.markdown is not None:
        paths["md"] = write_text(bundle.path(out, "md"), bundle.markdown)
    if bundle.csv is not None:
        text = bundle.csv if isinstance(bundle.csv, str) else bundle.csv.to_csv()
        paths["csv"] = write_text(bundle.path(out, "csv"), text)
    png: bytes | None = None
    if bundle.png is not None:
        paths["png"] = bundle.path(out, "png")
        bundle.png(paths["png"])
        png = paths["png"].read_bytes()
    for name, draw in bundle.figures.items():
        paths[name] = out / name
        draw(paths[name])
    if bundle.html is not None:
        page = bundle.html if isinstance(bundle.html, str) else bundle.html(png)
        paths["html"] = write_text(bundle.path(out, "html"), page)
    return paths
