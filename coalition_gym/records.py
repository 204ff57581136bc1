"""What a result file needs to be cited and re-run: the run record.

Every CLI output folder gets ``run.json`` and every summary carries it under ``"run"``: package
version, git commit (when run from a checkout), the exact command line, start and end time (UTC),
Python/torch/transformers/gymnasium/numpy versions, the pool with each member's and helper's identity
(backend kind; model folder + weight fingerprint, base URL + served model name, or the simulated
profile), the task (name, options, split) and the seeds.
"""

from __future__ import annotations

import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from .version import __version__

LIBRARIES = ("torch", "transformers", "gymnasium", "pettingzoo", "numpy", "reasoning-gym")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")


def git_commit(folder: Path | None = None) -> dict[str, Any] | None:
    """The checkout's commit and whether it had uncommitted changes; None outside a git checkout."""
    folder = folder or Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def describe_pool(pool: Any, members: Sequence[str] | None = None) -> dict[str, Any]:
    """The pool's name and, per member and helper, what its backend says about itself."""
    chosen = list(members) if members is not None else list(pool.members)
    return {"name": pool.name, "coalition": chosen,
            "members": {n: g.describe() for n, g in pool.members.items()},
            "helpers": {n: g.describe() for n, g in pool.helpers.items()}}


def describe_task(task: Any, split: str | None = None) -> dict[str, Any]:
    return {**task.describe(), "split": split}


class RunRecord:
    """Started when a command starts; :meth:`finish` fills in the end time and what the run used."""

    def __init__(self, argv: Sequence[str] | None = None):
        self.started = time.time()
        argv = list(sys.argv[1:] if argv is None else argv)
        self.data: dict[str, Any] = {
            "package": "coalition-gym", "version": __version__, "git": git_commit(),
            "command": "cgym " + shlex.join(argv), "argv": argv, "started": _iso(self.started),
            "platform": platform.platform(), "versions": library_versions()}

    def finish(self, **fields: Any) -> dict[str, Any]:
        """The record with the end time, wall seconds and ``fields`` (pool, task, seeds ...)."""
        now = time.time()
        self.data.update({"finished": _iso(now), "wall_seconds": round(now - self.started, 3)})
        self.data.update({k: v for k, v in fields.items() if v is not None})
        return dict(self.data)

