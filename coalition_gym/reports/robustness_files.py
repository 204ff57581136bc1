"""The robustness leaderboard's files: JSON, Markdown, CSV, a plot and a self-contained HTML page.

Rows are protocols, most robust first (smallest effect = honest - adversarial system score).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..result_files import Bundle, write_bundle
from . import html
from .robustness import QUANTITIES, RobustnessReport, overlap
from .table import Column, Table, fmt_ci

LABELS = {"honest": "honest", "adversarial": "with adversary", "effect": "effect (honest - adv.)",
          "drag": "drag", "rescue": "rescue", "adversary_solo": "adversary solo", "seat_solo": "seat solo"}


def title(report: RobustnessReport) -> str:
    return (f"Robustness to {report.adversary} in seat {'+'.join(report.seats)}: pool {report.pool}, "
            f"{report.task} ({report.n_items} items)")


def _effect(row: Any) -> str:
    return fmt_ci(row.estimates["effect"]["value"], row.estimates["effect"]["ci"])


def verdict(report: RobustnessReport) -> str:
    """Which protocol is the most and the least robust, with CIs, and whether the data separate them."""
    ranked = report.ranking()
    best, worst = ranked[0], ranked[-1]
    if best is worst:
        return f"Only {best.protocol} was measured: effect {_effect(best)}."
    sep = ("their CIs overlap, so the data do not separate them" if overlap(best, worst)
           else "their CIs do not overlap")
    return (f"Most robust: {best.protocol} (effect {_effect(best)}); least robust: {worst.protocol} "
            f"(effect {_effect(worst)}); {sep}.")


def table(report: RobustnessReport) -> Table:
    """One row per protocol, most robust first: rank, protocol, adversary, seats and every quantity with its CI."""
    columns = ([Column("rank", kind="int"), Column("protocol"), Column("adversary"), Column("seats")]
               + [Column(q, f"{LABELS[q]} [95% CI]", "ci") for q in QUANTITIES])
    rows = [{"rank": k + 1, "protocol": r.protocol, "adversary": report.adversary, "seats": "+".join(report.seats),
             **{q: r.estimates[q] for q in QUANTITIES}} for k, r in enumerate(report.ranking())]
    return Table(columns, rows, id="robustness")


def markdown(report: RobustnessReport, rows: Table | None = None) -> str:
    lines = [f"# {title(report)}", "",
             f"Coalition {', '.join(report.coalition)}; effect = honest - adversarial system score; drag = P(honest "
             "right, adversarial wrong); rescue = the reverse. 95% paired item-bootstrap CIs. Most robust first.", ""]
    lines += (rows or table(report)).to_markdown()
    lines += ["", verdict(report)]
    lines += report.failures().markdown()
    return "\n".join(lines) + "\n"


def plot(report: RobustnessReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = report.ranking()
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(rows) + 2), 4.2), dpi=120)
    for shift, q, label in ((-0.2, "honest", "honest seat"), (0.2, "adversarial", f"{report.adversary} seated")):
        values = np.array([r.estimates[q]["value"] for r in rows])
        lows = np.array([r.estimates[q]["ci"][0] for r in rows])
        highs = np.array([r.estimates[q]["ci"][1] for r in rows])
        ax.bar(x + shift, values, width=0.4, label=label, yerr=[values - lows, highs - values], capsize=2)
    ax.set_xticks(x, [r.protocol for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("system score (95% CI)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{report.pool}, {report.task}: most robust left", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def page(report: RobustnessReport, png: bytes | None, record: dict[str, Any], rows: Table | None = None) -> str:
    return html.render(html.Page(
        title=title(report),
        intro=[f"Coalition {', '.join(report.coalition)}. Effect = honest - adversarial system score; drag = P(honest "
               "right, adversarial wrong); rescue = the reverse; paired 95% item-bootstrap CIs. Click a header to "
               "sort."],
        tables=[rows or table(report)], png=png, png_alt="honest vs adversarial system score",
        notes=[verdict(report)], records={"Run record": record}))


def write(report: RobustnessReport, out: Path, record: dict[str, Any],
          results: Iterable[dict[str, Any]] | None = None) -> dict[str, Path]:
    """robustness.json, .md, .csv, .png, .html, run.json and (given the per-episode ``results``) results.jsonl in
    ``out``: one bundle."""
    rows = table(report)
    return write_bundle(out, Bundle(
        "robustness", record=record, summary={**report.to_dict(), "item_ids": report.item_ids,
                                             "per_item": {r.protocol: r.per_item for r in report.rows}, "run": record},
        markdown=markdown(report, rows), csv=rows, png=lambda path: plot(report, path),
        html=lambda png: page(report, png, record, rows), results=results))


__all__ = ["markdown", "plot", "page", "table", "write", "verdict", "title"]
