"""Old import paths kept for one release after a module moved (see docs/DESIGN.md, "Moved modules").

An old module file holds one line, ``moved(__name__, "new.path")``: importing it warns once and binds
the old name to the new module object itself, so ``monkeypatch`` and ``is`` checks see one module.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def moved(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
