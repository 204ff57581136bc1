"""The gain report's files, one bundle: JSON (strict), Markdown, CSV, HTML and the Pareto plot (:mod:`.pareto`:
score against cost, error bars; inline SVG in the page and pareto.png, one drawing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..result_files import Bundle, write_bundle
from . import html
from .gain import CI_TEXT, GainReport
from .pareto import Scene, pareto_front, pareto_plot, points, to_png, to_svg
from .table import Column, Table


def title(report: GainReport) -> str:
    return (f"Gain over cost-matched baselines: pool {report.pool}, {report.task} ({report.n_items} items), "
            f"cost in {report.unit}")


def _baseline(row: Any, kind: str) -> dict[str, Any]:
    return next(b for b in row.baselines if b["kind"] == kind)


def _at(entry: dict[str, Any], note: str = "") -> dict[str, Any]:
    return {"score": entry["score"], "cost": entry["cost"], "note": note}


def table(report: GainReport) -> Table:
    """The gain table: one row per protocol, its score and cost against each baseline's (score [CI] @ mean cost),
    the cost match, the best baseline, the gain and the verdict."""
    columns = [Column("protocol"), Column("score", "score [95% CI]", "ci"),
               Column("cost", f"{report.unit}/item", "number", ".4g"),
               Column("best_single", f"best single ({report.best_member})", "at"),
               Column("self_consistency", "self-consistency@k", "at"), Column("k", kind="int"),
               Column("cost_ratio", "cost ratio", "number", ".2f"), Column("pool_vote", "pool vote (own cost)", "at"),
               Column("best_baseline", "best baseline"), Column("gain", "gain [95% CI]", "ci"), Column("verdict")]
    rows = []
    for r in report.rows:
        single, sc, vote = (_baseline(r, k) for k in ("best_single", "self_consistency", "pool_vote"))
        rows.append({"protocol": r.protocol, "score": r.score, "cost": r.cost["value"], "best_single": _at(single),
                     "self_consistency": _at(sc, "" if r.match.matched else f" (k capped at {r.match.k}: not "
                                                 "cost-matched)"), "k": r.match.k, "cost_ratio": r.match.ratio,
                     "pool_vote": _at(vote, "" if vote["admissible"] else " (n/a)"), "best_baseline": r.best_baseline,
                     "gain": r.gain, "verdict": r.verdict})
    return Table(columns, rows, id="gain")


def systems_table(report: GainReport) -> Table:
    """Every system measured, per protocol: the protocol itself, then each baseline with its cost ratio, whether
    it competes for the best baseline and its gain (gain.csv)."""
    columns = [Column("protocol"), Column("system"), Column("kind"), Column("unit"), Column("k", kind="int"),
               Column("score", "score [95% CI]", "ci"), Column("cost", "cost [95% CI]", "ci", ".4g"),
               Column("cost_ratio", "cost ratio", "number", ".2f"), Column("cost_matched", "cost-matched"),
               Column("admissible"), Column("gain", "gain [95% CI]", "ci")]
    rows: list[dict[str, Any]] = []
    for r in report.rows:
        rows.append({"protocol": r.protocol, "system": r.protocol, "kind": "protocol", "unit": report.unit,
                     "k": r.match.k, "score": r.score, "cost": r.cost, "cost_ratio": 1.0})
        rows += [{"protocol": r.protocol, "system": b["name"], "kind": b["kind"], "unit": report.unit, "k": b.get("k"),
                  "score": b["score"], "cost": b["cost"], "cost_ratio": b["cost_ratio"],
                  "cost_matched": b["cost_matched"], "admissible": b["admissible"], "gain": b["gain"]}
                 for b in r.baselines]
    return Table(columns, rows, "Every system measured, per protocol", id="systems")


def notes(report: GainReport) -> list[str]:
    return [f"Cost: {report.unit} = {_unit_text(report)}. score @ cost: mean score [{CI_TEXT}] @ mean cost per item.",
            f"Best single member chosen on dev ({report.dev['source']} dev scores): {report.best_member}. "
            "Self-consistency@k: that member's majority of k answers, k chosen so its mean cost per item matches "
            "the protocol's (cost ratio = baseline / protocol, matched on average). The pool vote is at its own "
            "cost; it competes for the best baseline only when it costs at most the protocol's (n/a: it does "
            "not, or the protocol is majority_vote itself).",
            *[f"{r.protocol}: self-consistency is capped at k = {r.match.k} (max_k), cost ratio {r.match.ratio:.2f}: "
              "not cost-matched, it spends less than the protocol" for r in report.rows if not r.match.matched],
            "gain = protocol score minus the best baseline's; verdict: protocol (CI above 0), baseline (below 0), "
            "no difference (spans 0).",
            f"{sum(r.beats_baseline for r in report.rows)} of {len(report.rows)} protocols beat their best "
            "cost-matched baseline with the CI above 0."]


def _unit_text(report: GainReport) -> str:
    from .baselines import UNITS

    return UNITS[report.unit]


def markdown(report: GainReport) -> str:
    lines = [f"# {title(report)}", ""] + table(report).to_markdown()
    lines += ["", "Every system measured, per protocol:", ""] + systems_table(report).to_markdown()
    lines += [""] + notes(report)
    lines += report.failures().markdown()
    return "\n".join(lines) + "\n"


def page(report: GainReport, record: dict[str, Any], plot: Scene | None = None) -> str:
    """gain.html: the sortable tables, the Pareto plot (inline SVG), the notes, the run record."""
    return html.render(html.Page(
        title=title(report),
        intro=[f"Coalition {', '.join(report.coalition)}. Each protocol against the best single member (chosen on "
               f"dev), its self-consistency at a matched cost and the pool's vote; {CI_TEXT}s. Click a column "
               "header to sort; hover a point of the plot for its numbers."],
        tables=[table(report), systems_table(report)], figures=[to_svg(plot or pareto_plot(report))],
        notes=notes(report), records={"Run record": record}))


def write(report: GainReport, out: Path, record: dict[str, Any],
          results: Iterable[dict[str, Any]] | None = None) -> dict[str, Path]:
    """gain.json, gain.md, gain.csv, gain.html (tables and Pareto plot), pareto.png, run.json and (given the
    per-episode ``results``) results.jsonl in ``out``: one bundle."""
    plot = pareto_plot(report)
    summary = {**report.to_dict(), "pareto_front": [p["label"] for p in pareto_front(points(report))],
               "item_ids": report.item_ids, "per_item": {r.protocol: r.per_item for r in report.rows}, "run": record}
    return write_bundle(out, Bundle("gain", record=record, summary=summary, markdown=markdown(report),
                                    csv=systems_table(report), png=lambda path: to_png(plot, path),
                                    html=page(report, record, plot), results=results, names={"png": "pareto.png"}))


__all__ = ["markdown", "notes", "page", "systems_table", "table", "title", "write"]
