"""Output folders of ``cgym``: writable before work starts, and never silently overwritten.

A folder holds *a run* when it has a ``run.json``; the run's arguments (the parsed options that shape
results, :func:`run_arguments`) are recorded there. The same command again may resume or repeat it
(finished work is reused from ``--cache`` or the checkpoints); a folder that holds a run with other
arguments, or files that are no run, is refused unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..result_files import write_run_record

#: Options that change where work is kept or how it is reported, never the results.
RESULT_NEUTRAL = frozenset({"func", "record", "overwrite", "out", "cache", "executor", "address", "num_cpus",
                            "max_failures", "imports", "force", "report_to"})
#: Options naming a folder a command writes to.
FOLDER_OPTIONS = ("out", "cache", "save_trained", "export")


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_output_folder(path: str, option: str = "out") -> None:
    """Refuse, before any work, a folder that cannot be written: a file in its place or on its way,
    or one where creating the folder or a file in it fails (permissions, /proc, a read-only or full
    disk). The check really writes, and removes what it created."""
    target = Path(path).expanduser()
    existing = target
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == target else f"lies under {existing}, which is a file"
        raise ConfigError(f"{_flag(option)} {path}: {where}; give a folder path")
    created = [p for p in [target, *target.parents] if not p.exists()]
    probe = target / f".cgym-write-check-{uuid.uuid4().hex[:8]}"
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{_flag(option)} {path}: cannot write there ({exc.strerror or exc}); choose "
                          "another folder") from None
    finally:
        for folder in created:  # deepest first: leave the disk as it was
            try:
                folder.rmdir()
            except OSError:
                pass


def run_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options that shape a run's results, as plain data (what ``run.json`` records)."""
    chosen = {k: v for k, v in vars(args).items() if k not in RESULT_NEUTRAL}
    return json.loads(json.dumps(chosen, default=str))


def _recorded_arguments(record: dict[str, Any]) -> dict[str, Any] | None:
    """A run record's arguments; for records older than the ``arguments`` field, its argv re-parsed."""
    if isinstance(record.get("arguments"), dict):
        return record["arguments"]
    argv = record.get("argv")
    if not isinstance(argv, list):
        return None
    from .parser import build_parser

    try:
        return run_arguments(build_parser().parse_args([str(a) for a in argv]))
    except SystemExit:  # a command line this version no longer accepts
        return None


def _shown(value: Any) -> str:
    return "not given" if value is None else repr(value)


def _difference(theirs: dict[str, Any], mine: dict[str, Any]) -> str:
    keys = [k for k in sorted(set(theirs) | set(mine)) if theirs.get(k) != mine.get(k)]
    shown = [f"{_flag(k)} {_shown(theirs.get(k))} there, {_shown(mine.get(k))} here" for k in keys[:3]]
    return "; ".join(shown) + ("; ..." if len(keys) > 3 else "")


def check_fresh_output(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that holds another run (other arguments, per its ``run.json``) or files
    that are no run, unless ``--overwrite``; the same arguments again resume or repeat the run. A
    ``train`` root holds many runs (one folder per method and seed, each checking its own config), so it
    is refused only when it holds another command's run or files that are no training run."""
    if not getattr(args, "out", None) or getattr(args, "overwrite", True):
        return
    folder = Path(args.out).expanduser()
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    record_file = folder / "run.json"
    try:
        record = json.loads(record_file.read_text()) if record_file.is_file() else None
    except (OSError, ValueError):
        record = None
    theirs = _recorded_arguments(record) if isinstance(record, dict) else None
    if args.command == "train":
        _check_training_root(args, folder, theirs)
        return
    if theirs is None:
        raise ConfigError(f"--out {args.out} already holds files that are not a cgym run record (no readable "
                          "run.json); pass --overwrite to write into it anyway, or choose another folder")
    mine = run_arguments(args)
    if theirs != mine:
        raise ConfigError(f"--out {args.out} holds a run with other arguments ({_difference(theirs, mine)}); "
                          "pass --overwrite to replace it, or choose another folder")


def _check_training_root(args: argparse.Namespace, folder: Path, theirs: dict[str, Any] | None) -> None:
    """A training root may hold training runs only: a record of another command, or entries that are not
    run folders of `cgym train` (``<method>-seed<seed>/config.json``) or its own files, are refused."""
    if theirs is not None and theirs.get("command") != "train":
        raise ConfigError(f"--out {args.out} holds a `cgym {theirs.get('command')}` run; training would rewrite its "
                          "run.json; choose another folder, or pass --overwrite to train into it anyway")
    own = {"run.json", "summary.md"}
    # run folders hold their config.json; an --export inside --out holds the pool.yaml it wrote
    foreign = sorted(p.name for p in folder.iterdir() if p.name not in own
                     and not (p.is_dir() and any((p / f).is_file() for f in ("config.json", "pool.yaml"))))
    if foreign:
        raise ConfigError(f"--out {args.out} holds files that are not training runs ({', '.join(foreign[:3])}"
                          f"{', ...' if len(foreign) > 3 else ''}); choose another folder, or pass --overwrite to "
                          "train into it anyway")


def mark_unfinished(args: argparse.Namespace, status: str) -> None:
    """After an interrupt or a late failure: a ``run.json`` with the arguments and ``status`` in an
    ``--out`` that got results but no record yet, so the same command can resume into it."""
    out = getattr(args, "out", None)
    record = getattr(args, "record", None)
    if not out or record is None:
        return
    folder = Path(out).expanduser()
    try:
        if not folder.is_dir() or not any(folder.iterdir()) or (folder / "run.json").is_file():
            return
        write_run_record(folder, {**record.data, "status": status})
    except OSError:
        pass  # the folder itself is what failed: nothing more can be kept there


def _cached_generations(folder: Path) -> int | None:
    """How many generations the cache files in ``folder`` hold; None if they cannot be read."""
    import sqlite3

    total = 0
    try:
        for file in sorted(folder.glob("*.sqlite")):
            with contextlib.closing(sqlite3.connect(f"file:{file}?mode=ro", uri=True, timeout=5)) as db:
                total += db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
    except sqlite3.Error:
        return None
    return total


def where_kept(args: argparse.Namespace) -> str:
    """What a stopped command leaves for its rerun, in words (with counts where they are cheap)."""
    if getattr(args, "command", None) == "train":
        runs = sorted(p.parent.name for p in Path(args.out).glob("*/last"))
        which = f" ({', '.join(runs)})" if runs else ""
        return f"finished steps are checkpointed in {args.out}{which}"
    if getattr(args, "cache", None):
        count = _cached_generations(Path(args.cache))
        return (f"{'' if count is None else f'{count:,} '}finished generations are kept in --cache "
                f"{args.cache}")
    if hasattr(args, "cache"):
        return "nothing was kept (no --cache: add --cache DIR to make a run resumable)"
    return "nothing was kept (this command is quick to repeat)"
