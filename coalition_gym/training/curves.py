"""``curves.png``: a training run's curves, drawn from its ``metrics.jsonl`` rows. Three panels against the
step: the dev score (Base, or a team untrained, as a dashed line), the mean reward, and the informative-group
share (a team: one curve per seat, on the seat's credit). One curve per method (and seat)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .reporting import MetricsLog

PANELS = (("dev_score", "dev score"), ("reward_mean", "reward (mean)"),
          ("informative_groups", "informative groups (share)"))


@dataclass
class Curves:
    """What one run contributes: its label, its metric rows and, for a team, its seats."""

    label: str
    rows: list[dict[str, Any]]
    seats: list[str] = field(default_factory=list)

    def series(self, key: str) -> list[tuple[str, list[int], list[float]]]:
        """(label, steps, values) of ``key``: a team's informative groups once per seat."""
        keys = [(f"{self.label} {s}", f"{s}/{key}") for s in self.seats] if key == "informative_groups" and \
            self.seats else [(self.label, key)]
        out = []
        for label, name in keys:
            points = [(int(r["step"]), float(r[name])) for r in self.rows
                      if r.get(name) is not None and "step" in r and "probe" not in r and "candidate" not in r]
            if points:
                out.append((label, [p[0] for p in points], [p[1] for p in points]))
        return out


def plot_curves(runs: Sequence[Curves], path: Path, base: float | None = None, base_label: str = "Base") -> Path:
    """Draw ``runs`` into ``path`` (PNG), ``base`` as a dashed line on the dev-score panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.8))
    for ax, (key, title) in zip(axes, PANELS):
        for run in runs:
            for label, steps, values in run.series(key):
                ax.plot(steps, values, marker="o", markersize=3, label=label)
        if key == "dev_score" and base is not None:
            ax.axhline(base, color="grey", linestyle="--", label=f"{base_label} {base:.3f}")
        ax.set_title(title)
        ax.set_xlabel("step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no training steps", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run_curves(root: str | Path) -> Path:
    """``root/curves.png`` for the policy runs under ``root`` (one folder per method and seed, Base's dev score
    as the line)."""
    root = Path(root)
    runs, base = [], None
    for report_path in sorted(root.glob("*/report.json")):
        report = json.loads(report_path.read_text())
        if report["method"] == "base":
            base = report.get("best_dev_score")
            continue
        runs.append(Curves(report_path.parent.name, MetricsLog(report_path.parent).rows()))
    return plot_curves(runs, root / "curves.png", base)


def team_curves(folder: str | Path, method: str, seats: Sequence[str]) -> Path:
    """``folder/curves.png`` for a team run: the team's dev score and reward, each seat's informative groups, and
    the untrained team's dev score (step 0) as the line."""
    folder = Path(folder)
    rows = MetricsLog(folder).rows()
    start = next((r["dev_score"] for r in rows if r.get("step") == 0 and r.get("dev_score") is not None), None)
    return plot_curves([Curves(method, rows, list(seats))], folder / "curves.png", start, "untrained team")


__all__ = ["Curves", "PANELS", "plot_curves", "run_curves", "team_curves"]
