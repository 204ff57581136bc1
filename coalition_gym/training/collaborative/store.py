"""Trained coalitions on disk, keyed by everything that determines the training: the method and its
settings, the coalition and its members' identities (weights), the task and the exact training and
dev items, and the seed. ``<root>/<key>/`` holds each trained member's HF folder and ``training.json``,
written last: a coalition is reused only once its folder is complete (a killed run retrains at most the
coalition it was training), and a finished coalition is never trained again."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path

from ...agents.pools import Pool
from ...result_files import write_json
from .common import CoalitionTraining
from .members import load_member

FORMAT = 1
MANIFEST = "training.json"


class TrainedCheckpoints:
    def __init__(self, root: str | os.PathLike | None = None):
        self.temporary = root is None
        self.root = Path(tempfile.mkdtemp(prefix="cgym-trained-")) if root is None else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.temporary:  # removed once nothing can read it any more (or at exit)
            weakref.finalize(self, shutil.rmtree, str(self.root), True)

    def folder(self, key: str) -> Path:
        return self.root / key

    def work_dir(self, key: str) -> Path:
        """A fresh folder to train in (whatever a killed run left there is discarded)."""
        work = self.root / f".partial-{key}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        return work

    def load(self, key: str, pool: Pool) -> CoalitionTraining | None:
        folder = self.folder(key)
        try:
            data = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        if data.get("format") != FORMAT:
            return None
        members = {name: load_member(name, pool, folder / entry["folder"] if entry["folder"] else None,
                                     entry["identity"])
                   for name, entry in data["members"].items()}
        return CoalitionTraining(answerers=list(data["answerers"]), members=members, record=data["record"],
                                 generations=int(data["generations"]))

    def save(self, key: str, work: Path, result: CoalitionTraining, identities: dict[str, str],
             seconds: float) -> None:
        entries = {name: {"folder": name if (work / name).is_dir() else None, "identity": identities[name]}
                   for name in result.members}
        write_json(work / MANIFEST, {"format": FORMAT, "key": key, "answerers": result.answerers, "members": entries,
                                     "record": result.record, "generations": result.generations,
                                     "seconds": seconds})
        final = self.folder(key)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(work, final)
