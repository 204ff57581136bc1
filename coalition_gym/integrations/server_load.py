"""A ``cgym serve`` server's load, as an operator reads it: ``/metrics`` in Prometheus' text format and a console
line every ``report_every_s`` seconds. Both read ``Served.load()``: a dict with ``sessions_open`` and the totals
``sessions``, ``episodes``, ``steps``, ``failed``, ``waves``, ``waits_given_up`` (those present), and ``backends``:
per backend identity its ``calls``, the ``asks`` they carried and their ``seconds`` (mean batch size = asks / calls)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

#: load() key -> (metric name, type, help); counters end in _total as Prometheus names them
METRICS = {
    "sessions_open": ("cgym_sessions_open", "gauge", "sessions open now"),
    "sessions": ("cgym_sessions_total", "counter", "sessions opened"),
    "episodes": ("cgym_episodes_total", "counter", "episodes finished"),
    "steps": ("cgym_steps_total", "counter", "steps taken by the policy seat"),
    "failed": ("cgym_failed_episodes_total", "counter", "episodes that ended in a failure"),
    "waves": ("cgym_waves_total", "counter", "waves of member requests sent to the backends"),
    "waits_given_up": ("cgym_waits_given_up_total", "counter", "waves that stopped waiting for open sessions that "
                       "did not come back in time (not waited for again until they do)"),
}
BACKEND_METRICS = {
    "calls": ("cgym_backend_calls_total", "calls to the backend (one per wave it was asked in)"),
    "asks": ("cgym_backend_asks_total", "requests the calls carried (mean batch size: asks / calls)"),
    "seconds": ("cgym_backend_seconds_total", "seconds spent in the backend's calls"),
}


def backend_rows(load: dict[str, Any], label: Callable[[str], str] = str) -> dict[str, dict[str, float]]:
    """Per backend (named by ``label(identity)``: a scrubbed name; backends that share one are summed) its
    calls, asks and seconds."""
    rows: dict[str, dict[str, float]] = {}
    for identity, row in sorted((load.get("backends") or {}).items()):
        into = rows.setdefault(label(identity), {k: 0.0 for k in BACKEND_METRICS})
        for key in BACKEND_METRICS:
            into[key] += float(row.get(key, 0) or 0)
    return rows


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def prometheus_text(load: dict[str, Any], label: Callable[[str], str] = str) -> str:
    """``load`` in Prometheus' text exposition format (version 0.0.4)."""
    lines: list[str] = []
    for key, (name, kind, about) in METRICS.items():
        if key in load:
            lines += [f"# HELP {name} {about}", f"# TYPE {name} {kind}", f"{name} {_number(load[key])}"]
    rows = backend_rows(load, label)
    for key, (name, about) in BACKEND_METRICS.items():
        lines += [f"# HELP {name} {about}", f"# TYPE {name} counter"]
        lines += [f'{name}{{backend="{_label_value(b)}"}} {_number(row[key])}' for b, row in rows.items()]
    return "\n".join(lines) + "\n"


class LoadReporter:
    """The console's load line: sessions open, episodes/s and steps/s since the previous line, and per backend
    the mean batch size of its calls since then."""

    def __init__(self, load: Callable[[], dict[str, Any]], label: Callable[[str], str] = str,
                 clock: Callable[[], float] = time.monotonic):
        self.load, self.label, self.clock = load, label, clock
        self._last, self._at = self._snapshot(), clock()

    def _snapshot(self) -> dict[str, Any]:
        load = self.load()
        return {"load": load, "backends": backend_rows(load, self.label)}

    def line(self) -> str:
        now, snapshot = self.clock(), self._snapshot()
        seconds = max(now - self._at, 1e-9)
        load, last = snapshot["load"], self._last["load"]
        rate = {k: (load.get(k, 0) - last.get(k, 0)) / seconds for k in ("episodes", "steps")}
        batches = []
        for name, row in snapshot["backends"].items():
            before = self._last["backends"].get(name, {"calls": 0.0, "asks": 0.0})
            calls, asks = row["calls"] - before["calls"], row["asks"] - before["asks"]
            batches.append(f"{name} {asks / calls:.1f} ({_number(calls)} call{'' if calls == 1 else 's'})" if calls
                           else f"{name} idle")
        self._last, self._at = snapshot, now
        return (f"load over {seconds:.1f} s: {load.get('sessions_open', 0)} sessions open, "
                f"{rate['episodes']:.2f} episodes/s, {rate['steps']:.2f} steps/s; mean batch: "
                f"{', '.join(batches) or 'no backend called yet'}")

    async def run(self, every_s: float, say: Callable[[str], None]) -> None:
        """Say :meth:`line` every ``every_s`` seconds until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            say(self.line())
