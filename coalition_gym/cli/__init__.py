"""``cgym``: measure and train multi-LLM collaboration from the command line.

Every option is checked before any work starts (exit 2 with one line); too many failed episodes
exit 3 (see :mod:`coalition_gym.failures`); every output folder gets a run record (``run.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from ..errors import CoalitionGymError, ConfigError
from ..records import RunRecord
from ..redaction import redact
from .parser import build_parser


def check_output_folder(path: str, option: str = "out") -> None:
    """Refuse, before any work, an output folder that cannot be written: a file in its place or on
    its way, or a first existing folder on its way this user cannot write to."""
    target = Path(path).expanduser()
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == target else f"lies under {probe}, which is a file"
        raise ConfigError(f"--{option.replace('_', '-')} {path}: {where}; give a folder path")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--{option.replace('_', '-')} {path}: {probe} is not writable by this user; choose another "
                          "folder")


def check_fresh_output(args: argparse.Namespace) -> None:
    """Refuse to write results into a folder that already holds some, unless told to replace them
    (``--overwrite``) or to resume (``--cache``, where finished work is reused)."""
    if not hasattr(args, "overwrite") or args.overwrite or getattr(args, "cache", None) or not args.out:
        return
    folder = Path(args.out).expanduser()
    if folder.is_dir() and any(folder.iterdir()):
        resume = " or --cache DIR to resume a run" if hasattr(args, "cache") else ""
        raise ConfigError(f"--out {args.out} already holds results; pass --overwrite to replace them{resume}, "
                          "or choose another folder")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # numbers are range-checked by their argparse types; a bad one exits 2 with one line
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # returned, not raised: main() is also called as a function
        return int(stop.code or 0)
    args.record = RunRecord(argv)  # started now: the run record's start time and command line
    try:
        for option in ("out", "cache", "save_trained"):
            if getattr(args, option, None):
                check_output_folder(getattr(args, option), option)
        check_fresh_output(args)
        return args.func(args)
    except CoalitionGymError as exc:
        print(f"cgym: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `cgym envs | head`: the reader left; say nothing more, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141



__all__ = ["main", "build_parser", "check_output_folder", "check_fresh_output"]
