"""Old import paths kept for one release after a module moved (see docs/DESIGN.md, "Moved modules").

An old module file holds one line, ``moved(__name__, "new.path")``: importing it warns once and binds
the old name to the new module object itself, so ``monkeypatch`` and ``is`` checks see one module.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any, Iterator, Mapping


def moved(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)


class ColumnView(Mapping[str, Any]):
    """A read-only ``name -> record.<column>`` view of a registry of records: an old per-column dict
    (``BACKEND_OPTIONS``, ``POOL_ABOUT`` ...) kept importable for one release after the records replaced it."""

    def __init__(self, registry: Mapping[str, Any], column: str):
        self._registry, self._column = registry, column

    def __getitem__(self, name: str) -> Any:
        return getattr(self._registry[name], self._column)

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry)

    def __len__(self) -> int:
        return len(self._registry)
