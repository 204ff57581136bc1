"""What every benchmark writes the same way: the machine it ran on, and its JSON result."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

from coalition_gym import __version__


def machine_info() -> dict[str, Any]:
    return {"platform": platform.platform(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "cpu_count": os.cpu_count(),
            "coalition_gym": __version__}


def write_json(path: str | Path, data: Any) -> Path:
    """Write then rename, so a killed run never leaves a half-written result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path
