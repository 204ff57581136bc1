"""What a training run writes: ``metrics.jsonl`` (one row per step and evaluation, optionally
TensorBoard), ``report.json`` / ``per_item.json`` (test scores with 95% CIs for the best *and* the last
checkpoint, the dev score and CI at the selected step, rescue/drag against Base, the learning-signal
summary) and the folder's ``summary.md`` table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..result_files import JsonLines, write_json
from ..valuation.stats import rescue_drag
from .verdict import verdict_line


def _finite(value: Any) -> Any:
    """JSON has no NaN: undefined numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLog:
    def __init__(self, out: Path, tensorboard: bool = False):
        self.path = out / "metrics.jsonl"
        self.writer = None
        if tensorboard:
            from ..errors import ConfigError

            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError("--tensorboard needs the tensorboard package: pip install tensorboard") from exc
            self.writer = SummaryWriter(str(out / "tensorboard"))

    def write(self, row: dict[str, Any]) -> None:
        row = {k: _finite(v) for k, v in row.items()}
        with JsonLines(self.path) as lines:
            lines.write(row)
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(key, value, row.get("step", 0))

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


def vs_base(base_per_item: dict[str, list[float]] | None, mode: str, mine: list[float]) -> dict[str, float] | None:
    """Rescue (Base wrong, this right) and drag (Base right, this wrong) shares on the same items."""
    if base_per_item is None or len(base_per_item.get(mode, [])) != len(mine):
        return None
    moves = rescue_drag(base_per_item[mode], mine)
    return {"rescue": moves.rescue, "drag": moves.drag}


def write_report(out: Path, result: dict[str, Any], per_item: dict[str, Any]) -> None:
    write_json(out / "report.json", result, default=_finite)
    write_json(out / "per_item.json", per_item, indent=None)


def _cell(score: dict[str, Any] | None) -> str:
    if not score:
        return "-"
    return f"{score['mean']:.3f} [{score['ci'][0]:.3f}, {score['ci'][1]:.3f}]"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _trend(report: dict[str, Any], key: str) -> str:
    """First fifth -> last fifth of training, from the report's signal summary."""
    signal = report.get("signal") or {}
    first, last = (signal.get("first") or {}).get(key), (signal.get("last") or {}).get(key)
    return "-" if first is None or last is None else f"{first:.2f} -> {last:.2f}"


def summary_table(folder: str | Path) -> str:
    """A markdown table of every report.json under ``folder`` (every method run so far), then each trained
    method's verdict against Base (:mod:`.verdict`) and what "best" means where it is not the highest."""
    rows = ["| method | seed | best step | dev at best [95% CI] | system (best) [95% CI] | solo (best) [95% CI] | "
            "system (last) | rescue | drag | informative groups | pivotality |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    notes: list[str] = []
    for path in sorted(Path(folder).rglob("report.json")):
        r = json.loads(path.read_text())
        vs = r.get("vs_base_collab") or {}
        last = (r.get("last") or {}).get("collab")
        rows.append(f"| {r['method']} | {r['seed']} | {r['best_step']} | {_cell(r.get('dev_at_best'))} | "
                    f"{_cell(r['collab'])} | {_cell(r['solo'])} | {_cell(last)} | {_num(vs.get('rescue'))} | "
                    f"{_num(vs.get('drag'))} | {_trend(r, 'informative_groups')} | {_trend(r, 'pivotality')} |")
        if r.get("best_direction", "higher") != "higher":
            notes.append(f"best step of {r['method']}: its {r['best_direction']} dev score (reward "
                         f"{r['config'].get('reward', '')}: an adversary)")
        if r.get("verdict"):
            notes.append(verdict_line(r["method"], r["verdict"]))
    return "\n".join(rows) + "\n" + "".join(f"\n{note}" for note in notes) + ("\n" if notes else "")
