"""The gain report's files: JSON (strict), Markdown, CSV, HTML (:mod:`.gain_html`) and a Pareto plot (score against
cost, error bars)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..result_files import write_json, write_text
from . import html
from .gain import CI_TEXT, GainReport
from .gain_html import gain_table, pareto_svg
from .tables import fmt_ci


def title(report: GainReport) -> str:
    return (f"Gain over cost-matched baselines: pool {report.pool}, {report.task} ({report.n_items} items), "
            f"cost in {report.unit}")


def _baseline(row: Any, kind: str) -> dict[str, Any]:
    return next(b for b in row.baselines if b["kind"] == kind)


def _cell(entry: dict[str, Any]) -> str:
    return f"{fmt_ci(entry['score']['value'], entry['score']['ci'])} @ {entry['cost']['value']:.4g}"


def table_rows(report: GainReport) -> tuple[list[str], list[list[str]]]:
    """The header and one row per protocol (score [CI] @ mean cost for the protocol and each baseline)."""
    unit = report.unit
    header = ["protocol", f"score @ {unit}/item", f"best single ({report.best_member})", "self-consistency@k",
              "k (cost ratio)", "pool vote (own cost)", "best baseline", "gain [95% CI]", "verdict"]
    rows = []
    for r in report.rows:
        single, sc, vote = (_baseline(r, k) for k in ("best_single", "self_consistency", "pool_vote"))
        rows.append([r.protocol, f"{fmt_ci(r.score['value'], r.score['ci'])} @ {r.cost['value']:.4g}", _cell(single),
                     _cell(sc), f"{r.match.k} ({r.match.ratio:.2f})",
                     _cell(vote) + ("" if vote["admissible"] else " (n/a)"), r.best_baseline,
                     fmt_ci(r.gain["value"], r.gain["ci"]), r.verdict])
    return header, rows


def notes(report: GainReport) -> list[str]:
    return [f"Cost: {report.unit} = {_unit_text(report)}. score @ cost: mean score [{CI_TEXT}] @ mean cost per item.",
            f"Best single member chosen on dev ({report.dev['source']} dev scores): {report.best_member}. "
            "Self-consistency@k: that member's majority of k answers, k chosen so its mean cost per item matches "
            "the protocol's (cost ratio = baseline / protocol, matched on average). The pool vote is at its own "
            "cost; it competes for the best baseline only when it costs at most the protocol's (n/a: it does "
            "not, or the protocol is majority_vote itself).",
            "gain = protocol score minus the best baseline's; verdict: protocol (CI above 0), baseline (below 0), "
            "no difference (spans 0).",
            f"{sum(r.beats_baseline for r in report.rows)} of {len(report.rows)} protocols beat their best "
            "cost-matched baseline with the CI above 0."]


def _unit_text(report: GainReport) -> str:
    from .baselines import UNITS

    return UNITS[report.unit]


def markdown(report: GainReport) -> str:
    header, rows = table_rows(report)
    lines = [f"# {title(report)}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [""] + notes(report)
    lines += report.failures().markdown()
    return "\n".join(lines) + "\n"


def csv_text(report: GainReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["protocol", "system", "kind", "unit", "k", "score", "score_ci_low", "score_ci_high", "cost",
                     "cost_ci_low", "cost_ci_high", "cost_ratio", "admissible", "gain", "gain_ci_low", "gain_ci_high"])
    for r in report.rows:
        writer.writerow([r.protocol, r.protocol, "protocol", report.unit, r.match.k, r.score["value"], *r.score["ci"],
                         r.cost["value"], *r.cost["ci"], 1.0, "", "", "", ""])
        for b in r.baselines:
            writer.writerow([r.protocol, b["name"], b["kind"], report.unit, b.get("k", ""), b["score"]["value"],
                             *b["score"]["ci"], b["cost"]["value"], *b["cost"]["ci"], b["cost_ratio"], b["admissible"],
                             b["gain"]["value"], *b["gain"]["ci"]])
    return out.getvalue()


def points(report: GainReport) -> list[dict[str, Any]]:
    """Every protocol and every distinct baseline as (label, kind, score estimate, cost estimate)."""
    out = [{"label": r.protocol, "kind": "protocol", "score": r.score, "cost": r.cost} for r in report.rows]
    seen: set[str] = set()
    for r in report.rows:
        for b in r.baselines:
            if b["name"] not in seen:
                seen.add(b["name"])
                out.append({"label": b["label"], "kind": b["kind"], "score": b["score"], "cost": b["cost"]})
    return out


def pareto_front(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points no other point beats on both axes (higher score at no more cost), cheapest first."""
    front = [p for p in pts if not any(q is not p and q["score"]["value"] >= p["score"]["value"]
                                       and q["cost"]["value"] <= p["cost"]["value"]
                                       and (q["score"]["value"], -q["cost"]["value"])
                                       != (p["score"]["value"], -p["cost"]["value"]) for q in pts)]
    return sorted(front, key=lambda p: p["cost"]["value"])


def plot(report: GainReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = points(report)
    fig, ax = plt.subplots(figsize=(8.4, 4.6), dpi=120)
    styles = {"protocol": ("o", "tab:blue"), "best_single": ("s", "tab:red"),
              "self_consistency": ("^", "tab:orange"), "pool_vote": ("D", "tab:green")}
    legend = {"protocol": "protocol", "best_single": f"best single ({report.best_member})",
              "self_consistency": f"self-consistency@k ({report.best_member})", "pool_vote": "pool majority vote"}
    shown: set[str] = set()
    for n, p in enumerate(pts):
        marker, colour = styles.get(p["kind"], ("x", "gray"))
        s, c = p["score"], p["cost"]
        ax.errorbar(c["value"], s["value"], yerr=[[s["value"] - s["ci"][0]], [s["ci"][1] - s["value"]]],
                    xerr=[[c["value"] - c["ci"][0]], [c["ci"][1] - c["value"]]], fmt=marker, color=colour,
                    capsize=2, markersize=6, label=None if p["kind"] in shown else legend.get(p["kind"], p["kind"]))
        shown.add(p["kind"])
        short = p["label"].split(" (")[0].replace("self-consistency", "SC")
        ax.annotate(short, (c["value"], s["value"]), textcoords="offset points", xytext=(4, 4 if n % 2 else -10),
                    fontsize=7)
    front = pareto_front(pts)
    ax.plot([p["cost"]["value"] for p in front], [p["score"]["value"] for p in front], "--", color="gray",
            linewidth=0.8, label="Pareto front")
    ax.set_xlabel(f"mean cost per item ({report.unit})")
    ax.set_ylabel("score (95% CI)")
    ax.set_title(f"{report.pool}, {report.task}: protocols (o) vs baselines", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def page(report: GainReport, record: dict[str, Any]) -> str:
    """gain.html: the sortable table, the Pareto plot (inline SVG, :mod:`.gain_html`), the notes, the run record."""
    pts = points(report)
    return html.render(html.Page(
        title=title(report),
        intro=[f"Coalition {', '.join(report.coalition)}. Each protocol against the best single member (chosen on "
               f"dev), its self-consistency at a matched cost and the pool's vote; {CI_TEXT}s. Click a column "
               "header to sort; hover a point of the plot for its numbers."],
        tables=[gain_table(report)], figures=[pareto_svg(report, pts, pareto_front(pts))], notes=notes(report),
        records={"Run record": record}))


def write(report: GainReport, out: Path, record: dict[str, Any]) -> dict[str, Path]:
    """gain.json, gain.md, gain.csv, gain.html (table and Pareto plot), pareto.png and run.json in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / f"gain.{k}" for k in ("json", "md", "csv", "html")}
    paths["png"] = out / "pareto.png"
    paths["run"] = out / "run.json"
    write_json(paths["json"], {**report.to_dict(), "pareto_front": [p["label"] for p in pareto_front(points(report))],
                               "item_ids": report.item_ids,
                               "per_item": {r.protocol: r.per_item for r in report.rows}, "run": record})
    write_text(paths["md"], markdown(report))
    write_text(paths["csv"], csv_text(report))
    write_text(paths["html"], page(report, record))
    plot(report, paths["png"])
    write_json(paths["run"], record)
    return paths


__all__ = ["csv_text", "markdown", "notes", "page", "pareto_front", "plot", "points", "table_rows", "title",
           "write"]
