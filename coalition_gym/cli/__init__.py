"""``cgym``: measure and train multi-LLM collaboration from the command line.

Every option is checked before any work starts (exit 2 with one line); too many failed episodes
exit 3 (see :mod:`coalition_gym.failures`); every output folder gets a run record (``run.json``).
An interrupt (SIGINT, SIGTERM) ends with one line saying what was kept and how to resume, and exit
130 / 143. ``--import MODULE`` and installed ``coalition_gym.plugins`` entry points bring a user's
own protocols, tasks, backends, methods and adversaries (:mod:`coalition_gym.plugins`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import warnings
from typing import Any, Sequence

from ..errors import CoalitionGymError
from ..plugins import import_plugins, load_entry_points
from ..records import RunRecord
from ..result_files import redact
from .outputs import FOLDER_OPTIONS, check_fresh_output, check_output_folder, mark_unfinished, run_arguments, where_kept
from .parser import build_parser


class Terminated(BaseException):
    """SIGTERM, raised where the program stands, like KeyboardInterrupt for SIGINT."""


def _raise_terminated(signum, frame):  # noqa: ARG001 - the signal handler's signature
    raise Terminated()


def _say(line: str) -> None:
    print(f"cgym: {redact(line)}", file=sys.stderr, flush=True)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """A warning as one ``cgym: warning:`` line: its text, not Python's source line and location."""
    _say(f"warning: {' '.join(str(message).split())}")


def check_members(args: argparse.Namespace) -> None:
    """``--members`` against the pool (``--pool``, or ``--collaborators`` for training) where that is cheap."""
    members = getattr(args, "members", None)
    pool = getattr(args, "pool", None) or getattr(args, "collaborators", None)
    if members and pool is None and getattr(args, "command", None) == "train" and not any(
            str(s).startswith("collaborators=") for s in getattr(args, "set", None) or []):
        from ..training.config import DEFAULT_RUN  # the pool `cgym train` trains beside when none is named

        pool = DEFAULT_RUN["collaborators"]
    if members and isinstance(pool, str):
        from ..agents.pools import check_member_names

        check_member_names(pool, [m.strip() for m in members.split(",") if m.strip()])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # numbers are range-checked by their argparse types; a bad one exits 2 with one line
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # returned, not raised: main() is also called as a function
        return int(stop.code or 0)
    args.record = RunRecord(argv)  # started now: the run record's start time and command line
    args.record.data["arguments"] = run_arguments(args)
    previous_term = None
    if hasattr(signal, "SIGTERM") and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        try:
            previous_term = signal.signal(signal.SIGTERM, _raise_terminated)
        except ValueError:  # not the main thread: leave signals alone
            previous_term = None
    started = False
    previous_show = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        load_entry_points(lambda line: _say(f"warning: {line}"))
        import_plugins(args.imports)
        check_members(args)  # a typo in a name is named before anything about the output folder
        for option in FOLDER_OPTIONS:
            if getattr(args, option, None):
                check_output_folder(getattr(args, option), option)
        check_fresh_output(args)
        started = True
        return args.func(args)
    except CoalitionGymError as exc:  # nearly always a check before work: nothing to mark
        _say(f"error: {exc}")
        return 2
    except (KeyboardInterrupt, Terminated) as stop:
        name, code = ("SIGTERM", 143) if isinstance(stop, Terminated) else ("SIGINT", 130)
        if started and getattr(args, "service", False):  # a server's normal end: no work to keep or resume
            _say(f"stopped ({name}); the server held no work to keep")
            return 0
        if started:
            mark_unfinished(args, "interrupted")
        print(file=sys.stderr)  # end a progress bar's line
        _say(f"interrupted ({name}); {where_kept(args)}; resume with: cgym {shlex.join(argv)}"
             if started else f"interrupted ({name}) before any work started")
        return code
    except BrokenPipeError:  # `cgym envs | head`: the reader left; say nothing more, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a write that failed mid-run (full disk, a folder removed): what is kept, not a trace
        if started:
            mark_unfinished(args, "failed")
        where = f" ({exc.filename})" if exc.filename else ""
        _say(f"error: {exc.strerror or exc}{where}; {where_kept(args)}")
        return 1
    finally:
        warnings.showwarning = previous_show
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)


__all__ = ["main", "build_parser", "check_output_folder", "check_fresh_output"]
