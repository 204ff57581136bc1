"""What every benchmark writes the same way: the machine it ran on, and its JSON result."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from coalition_gym import __version__

_IMPORTED = time.perf_counter()


def shipped_zoo() -> dict[str, dict[str, str]]:
    """recipe -> model -> sha256 of the zoo models the package ships (what zoo: names load)."""
    from coalition_gym.agents.zoo import ZOO_RECIPES, shipped

    out = {}
    for name in ZOO_RECIPES:
        manifest = shipped.shipped_manifest(name)
        if manifest is not None:
            out[name] = {m: e["sha256"] for m, e in manifest["models"].items()}
    return out


def machine_info() -> dict[str, Any]:
    """The machine, and the shipped zoo's fingerprints: a result names the weights it ran on."""
    return {"platform": platform.platform(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "cpu_count": os.cpu_count(),
            "coalition_gym": __version__, "shipped_zoo": shipped_zoo()}


def elapsed_seconds() -> float:
    """Seconds since this process started, imports included (Linux: from /proc; elsewhere: since this module
    was imported). Each result records it as ``total_seconds``: what ``make bench`` reports per script."""
    try:
        stat = Path("/proc/self/stat").read_text()
        started = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return round(float(Path("/proc/uptime").read_text().split()[0]) - started, 2)
    except (OSError, ValueError, IndexError):
        return round(time.perf_counter() - _IMPORTED, 2)


def write_json(path: str | Path, data: Any) -> Path:
    """Write then rename, so a killed run never leaves a half-written result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path
