"""Finding and reading dataset files: JSONL (optionally gzipped), JSON, CSV and Parquet.

Where a dataset's files are looked for, first hit wins:
1. the ``path=`` given to the task (a file, or a folder searched with the dataset's patterns);
2. the folder in the dataset's own environment variable, e.g. ``COALITION_GYM_GSM8K``;
3. ``$COALITION_GYM_DATA/<task name>/``;
4. the Hugging Face hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
   ``~/.cache/huggingface/hub``): ``datasets--<org>--<name>/snapshots/*/``, as left there by
   ``huggingface-cli download <org>/<name> --repo-type dataset`` or by ``datasets.load_dataset``.
Nothing is ever downloaded. When no file is found, the error names the dataset to download and
every place that was searched. A record that lacks a field raises an error naming the file, the
line (record number for JSON/Parquet) and the field.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..errors import ConfigError

DATA_ENV = "COALITION_GYM_DATA"


class DataNotFoundError(ConfigError):
    """A dataset's files are not on this machine."""


class DataFormatError(ConfigError):
    """A dataset file is unreadable or a record lacks a field."""


@dataclass(frozen=True)
class Record:
    """One row of a dataset file, with where it came from (for error messages)."""

    data: dict[str, Any]
    path: str
    line: int  # 1-based line (JSONL, CSV) or record number (JSON, Parquet)

    def get(self, field: str, default: Any = None) -> Any:
        return self.data.get(field, default)

    def require(self, *fields: str) -> Any:
        """The first of ``fields`` present (alternative spellings); error naming file, line, field."""
        for name in fields:
            if name in self.data and self.data[name] is not None:
                return self.data[name]
        wanted = " or ".join(repr(f) for f in fields)
        have = ", ".join(sorted(map(str, self.data))) or "none"
        raise DataFormatError(f"{self.path}, line {self.line}: missing field {wanted} (fields present: {have})")


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def env_var(task_name: str) -> str:
    return "COALITION_GYM_" + "".join(c if c.isalnum() else "_" for c in task_name).upper()


def search_roots(task_name: str, hf_repo: str | None, path: str | os.PathLike | None) -> list[tuple[str, Path]]:
    """(how it was configured, folder or file) in search order."""
    roots: list[tuple[str, Path]] = []
    if path is not None:
        roots.append(("path argument", Path(path).expanduser()))
    own = env_var(task_name)
    if os.environ.get(own):
        roots.append((f"${own}", Path(os.environ[own]).expanduser()))
    if os.environ.get(DATA_ENV):
        roots.append((f"${DATA_ENV}/{task_name}", Path(os.environ[DATA_ENV]).expanduser() / task_name))
    if hf_repo:
        repo_dir = hub_cache() / f"datasets--{hf_repo.replace('/', '--')}" / "snapshots"
        snapshots = (sorted(repo_dir.glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
                     if repo_dir.is_dir() else [])
        roots += [("Hugging Face cache", snap) for snap in snapshots] or [("Hugging Face cache", repo_dir)]
    return roots


def find_files(task_name: str, split: str, patterns: Sequence[str], hf_repo: str | None,
               path: str | os.PathLike | None = None) -> list[Path]:
    """The files of one split; DataNotFoundError says what to download and where to put it."""
    roots = search_roots(task_name, hf_repo, path)
    for _, root in roots:
        if root.is_file():
            return [root]
        if root.is_dir():
            found: list[Path] = []
            for pattern in patterns:
                found += sorted(p for p in root.glob(pattern) if p.is_file() and _readable_suffix(p))
            if found:
                return list(dict.fromkeys(found))
    searched = "; ".join(f"{how}: {root}" for how, root in roots) or "nowhere (no path given)"
    hint = (f"download it with `huggingface-cli download {hf_repo} --repo-type dataset` (it lands in the "
            "Hugging Face cache, which is searched), or " if hf_repo else "")
    raise DataNotFoundError(
        f"task {task_name!r}: no data file for split {split!r} (looked for {', '.join(patterns)}). To use it, "
        f"{hint}put the files in a folder and pass path=<folder>, or set ${env_var(task_name)}=<folder> or "
        f"${DATA_ENV}=<parent folder> (files under <parent folder>/{task_name}/). Searched: {searched}.")


_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".parquet")


def _readable_suffix(path: Path) -> bool:
    return path.name.endswith(_SUFFIXES)


def read_records(path: str | os.PathLike) -> Iterator[Record]:
    """Records of one file, by its suffix."""
    p = Path(path)
    name = p.name
    try:
        if name.endswith((".jsonl", ".jsonl.gz")):
            yield from _jsonl(p)
        elif name.endswith((".json", ".json.gz")):
            yield from _json(p)
        elif name.endswith(".csv"):
            yield from _csv(p)
        elif name.endswith(".parquet"):
            yield from _parquet(p)
        else:
            raise DataFormatError(f"{p}: unknown file type; use one of {', '.join(_SUFFIXES)}")
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{p}: not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise DataFormatError(f"{p}: cannot read ({exc})") from exc


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _jsonl(path: Path) -> Iterator[Record]:
    with _open_text(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{path}, line {number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(data, dict):
                raise DataFormatError(f"{path}, line {number}: expected a JSON object, got {type(data).__name__}")
            yield Record(data, str(path), number)


def _json(path: Path) -> Iterator[Record]:
    with _open_text(path) as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    rows = _rows_of(data)
    if rows is None:
        raise DataFormatError(f"{path}: expected a list of objects, or an object with an 'examples', 'data' or "
                              "'rows' list")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataFormatError(f"{path}, record {number}: expected a JSON object, got {type(row).__name__}")
        yield Record(row, str(path), number)


def _rows_of(data: Any) -> list | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("examples", "data", "rows", "instances"):
            if isinstance(data.get(key), list):
                shared = {k: v for k, v in data.items() if k != key and not isinstance(v, (list, dict))}
                return [{**shared, **row} if isinstance(row, dict) else row for row in data[key]]
    return None


def _csv(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            yield Record({k: v for k, v in row.items() if k is not None}, str(path), reader.line_num)


def _parquet(path: Path) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        pq = None
    if pq is not None:
        rows: Iterable[dict] = pq.read_table(path).to_pylist()
    else:
        try:
            import pandas as pd
        except ImportError as exc:
            raise DataFormatError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow, or "
                                  "pip install 'coalition-gym[data]'); or convert the file to JSONL") from exc
        rows = pd.read_parquet(path).to_dict(orient="records")
    for number, row in enumerate(rows, start=1):
        yield Record(dict(row), str(path), number)


__all__ = ["Record", "DataNotFoundError", "DataFormatError", "find_files", "read_records", "search_roots",
           "hub_cache", "env_var", "DATA_ENV"]
