"""What a training run writes: ``metrics.jsonl`` (one row per step and evaluation, optionally sent to
TensorBoard, wandb or trackio: ``report_to``), ``report.json`` / ``per_item.json`` (test scores with 95% CIs
for the best *and* the last checkpoint, the dev score and CI at the selected step, rescue/drag against Base,
the verdict against Base, the learning-signal summary) and the folder's ``summary.md`` table.

Every run's report is one header (:class:`ReportInputs`' ``header``, built by the trainer for any number of seats)
and the scores its strategy reports: a policy's collaborative and solo scores against Base (:func:`policy_scores`),
a team's system score and per-seat views against the untrained team (:func:`.team.strategy.team_scores`)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..result_files import JsonLines, write_json
from ..valuation.stats import rescue_drag
from .diagnostics import summarise_signal
from .verdict import paired_verdict, verdict_line


def _finite(value: Any) -> Any:
    """JSON has no NaN: undefined numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: ``--report-to``: where the metric rows go besides ``metrics.jsonl`` (as TRL's ``report_to``), and the package each
#: needs
REPORT_TO = {"none": None, "tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def check_report_to(name: str) -> None:
    """Refuse an unknown tracker, or one whose package is not installed (before any training)."""
    from ..errors import ConfigError, did_you_mean

    if name not in REPORT_TO:
        raise ConfigError(f"report_to={name!r}.{did_you_mean(name, REPORT_TO)} Use one of {', '.join(REPORT_TO)}")
    package = REPORT_TO[name]
    if package is not None and importlib.util.find_spec(package) is None:
        raise ConfigError(f"--report-to {name} needs the {package} package: pip install {package}")


class MetricsLog:
    """``metrics.jsonl``, one row per step and evaluation, and the same numbers sent to ``report_to``'s tracker
    (TensorBoard under ``out/tensorboard``; wandb or trackio as a run named after ``out``)."""

    def __init__(self, out: Path, report_to: str = "none", config: dict[str, Any] | None = None):
        self.path = out / "metrics.jsonl"
        self.tracker: Any = None
        self.report_to = report_to
        check_report_to(report_to)
        if report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self.tracker = SummaryWriter(str(out / "tensorboard"))
        elif report_to in ("wandb", "trackio"):
            tracker = importlib.import_module(report_to)
            tracker.init(project="coalition-gym", name=out.name, config=config or {})
            self.tracker = tracker

    def _send(self, row: dict[str, Any]) -> None:
        numbers = {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and k != "step"}
        step = int(row.get("step", 0))
        if self.report_to == "tensorboard":
            for key, value in numbers.items():
                self.tracker.add_scalar(key, value, step)
        elif numbers:
            self.tracker.log(numbers, step=step)

    def write(self, row: dict[str, Any]) -> None:
        row = {k: _finite(v) for k, v in row.items()}
        with JsonLines(self.path) as lines:
            lines.write(row)
        if self.tracker is not None:
            self._send(row)

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


@dataclass
class ReportInputs:
    """What a run's report is built from, whatever its seats: the ``header`` every report starts with (method,
    seed, seats, selection, dev score at the best step, protocol, members, probe, config, failures ...), the test
    results per evaluation mode of the ``last`` and the ``best`` checkpoint, the untrained seats' test scores
    (``before``; None when the strategy compares with Base instead), Base's per-item test scores when given, the
    metric rows, each seat's model spec and checkpoint folder, and the run folder the report goes to."""

    header: dict[str, Any]
    last: Mapping[str, Any]
    best: Mapping[str, Any]
    before: dict[str, Any] | None
    base_per_item: dict[str, list[float]] | None
    rows: list[dict[str, Any]]
    seat_policies: Mapping[str, str]
    seat_folders: Mapping[str, Path]
    out: Path


def policy_scores(inputs: ReportInputs, weights: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's report (``weights``: seat -> its base weights' record): its collaborative and solo test scores
    of the best and the last checkpoint, rescue/drag and the verdict against Base's per-item scores when given,
    its leave-one-out effect where the collaborators alone form a coalition; writes ``report.json`` and
    ``per_item.json``."""
    best, base = inputs.best, inputs.base_per_item
    per_item = {m: best[m].per_item for m in ("collab", "solo")}
    (seat_weights,) = weights.values()
    result: dict[str, Any] = {
        **inputs.header, "collab": best["collab"].to_dict(), "solo": best["solo"].to_dict(),
        "last": {m: r.to_dict() for m, r in inputs.last.items()}, "policy_weights": seat_weights,
        "signal": summarise_signal(inputs.rows)}
    if base is not None:  # the verdict: the paired system difference to Base on the test items
        result["verdict"] = paired_verdict(base.get("collab", []), per_item["collab"], result["best_direction"])
    for mode in ("collab", "solo"):
        moves = vs_base(base, mode, per_item[mode])
        if moves is not None:
            result[f"vs_base_{mode}"] = moves
    without = best.get("without")
    if without is not None:  # the policy's leave-one-out effect on the system, item by item
        moves = vs_base({"collab": without.per_item}, "collab", per_item["collab"]) or {}
        result["vs_without_policy"] = {"without": without.to_dict(), **moves,
                                       "loo": best["collab"].mean - without.mean}
        per_item["without"] = without.per_item
    write_report(inputs.out, result, per_item)
    return result


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


def run_summary(folder: str | Path) -> str:
    """``summary.md``: :func:`summary_table`, and the curves' file where it is drawn."""
    curves = Path(folder) / "curves.png"
    drawn = f"\ncurves (dev score, reward and informative groups per step): {curves}\n" if curves.is_file() else ""
    return summary_table(folder) + drawn


def summary_table(folder: str | Path) -> str:
    """A markdown table of every report.json under ``folder`` (every method run so far), then each trained
    method's verdict against Base (:mod:`.verdict`) and what "best" means where it is not the highest."""
    rows = ["| method | seed | best step | dev at best [95% CI] | system (best) [95% CI] | solo (best) [95% CI] | "
            "system (last) | rescue | drag | informative groups | pivotality |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    notes: list[str] = []
    for path in sorted(Path(folder).rglob("report.json")):
        r = json.loads(path.read_text())
        if "collab" not in r:  # a team's report and its seats' (policy_scores' columns are not theirs)
            continue
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
