"""A user's own parts in ``cgym``: modules that register protocols, tasks, backends, training
methods or adversaries when imported.

Two ways in, both read by every subcommand:

- ``cgym --import MODULE`` (repeatable, before the subcommand): a module name on ``sys.path`` (the
  current folder included) or a path to a ``.py`` file. A module that cannot be imported is an error
  (exit 2): the user asked for it.
- the ``coalition_gym.plugins`` entry-point group of installed distributions, loaded at start-up::

      [project.entry-points."coalition_gym.plugins"]
      mine = "mypkg.protocols"            # a module: importing it registers its parts
      other = "mypkg.setup:register"      # a callable: called once, with no arguments

  A plugin that fails to load is reported by name on stderr and the command goes on without it: one
  broken installed package must not take every ``cgym`` command down.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

from .errors import ConfigError

ENTRY_POINT_GROUP = "coalition_gym.plugins"


def import_module(spec: str):
    """Import ``spec``: a dotted module name, or a path to a ``.py`` file (imported under its stem,
    so a second ``--import`` of the same file reuses it)."""
    path = Path(spec).expanduser()
    if spec.endswith(".py"):
        if not path.is_file():
            raise ConfigError(f"--import {spec}: no such file")
        name = path.stem
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path.resolve()):
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path.resolve())
        if loader_spec is None or loader_spec.loader is None:
            raise ConfigError(f"--import {spec}: not an importable Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # the console script's path lacks the current folder; `python -m` has it
    return importlib.import_module(spec)


def import_plugins(specs: Sequence[str]) -> None:
    """Import each ``--import`` module; any failure is a one-line ConfigError naming the module."""
    for spec in specs:
        try:
            import_module(spec)
        except ConfigError:
            raise
        except Exception as exc:  # the user's module: whatever it raised, say which and why
            raise ConfigError(f"--import {spec} failed: {type(exc).__name__}: {exc}") from exc


def load_entry_points(warn: Callable[[str], None], group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Load every installed plugin of ``group``; returns the names loaded. A failing plugin is
    reported through ``warn`` by name and skipped."""
    loaded = []
    for point in metadata.entry_points(group=group):
        try:
            target = point.load()
            if point.attr is not None and callable(target):
                target()
        except Exception as exc:  # a broken plugin is reported and skipped, never fatal
            warn(f"plugin {point.name!r} ({point.value}) failed to load and is skipped: "
                 f"{type(exc).__name__}: {exc}")
            continue
        loaded.append(point.name)
    return loaded


__all__ = ["ENTRY_POINT_GROUP", "import_module", "import_plugins", "load_entry_points"]
