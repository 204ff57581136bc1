"""The parts of the gain report's page (``gain.html``, assembled by :func:`.gain_files.page`): the sortable gain
table and the Pareto plot (score against cost per item, every protocol and baseline, 95% CI error bars on both
axes) drawn as inline SVG.

Inline SVG rather than the PNG: every point is an element of the page (``g.point`` with its label, kind,
score and cost as data attributes and a tooltip), so a reader can hover it and a test can count it; the page
still fetches nothing (the leaderboard pages' Content-Security-Policy holds).
"""

from __future__ import annotations

import html as _html
import math
from typing import Any, Sequence

from . import html
from .gain import GainReport
from .tables import fmt_ci

WIDTH, HEIGHT = 820, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 230, 34, 52  # plot margins; the legend sits in the right one
#: marker shape and colour per kind of point (the PNG's colours)
STYLES = {"protocol": ("circle", "#1f77b4"), "best_single": ("square", "#d62728"),
          "self_consistency": ("triangle", "#ff7f0e"), "pool_vote": ("diamond", "#2ca02c")}


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    if not high > low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


def _marker(shape: str, x: float, y: float, colour: str, r: float = 5.0) -> str:
    fill = f'fill="{colour}" stroke="#222" stroke-width="0.6"'
    if shape == "circle":
        return f'<circle class="marker" cx="{x:.2f}" cy="{y:.2f}" r="{r}" {fill}/>'
    if shape == "square":
        return f'<rect class="marker" x="{x - r:.2f}" y="{y - r:.2f}" width="{2 * r}" height="{2 * r}" {fill}/>'
    if shape == "triangle":
        pts = f"{x:.2f},{y - r * 1.2:.2f} {x - r * 1.1:.2f},{y + r * 0.8:.2f} {x + r * 1.1:.2f},{y + r * 0.8:.2f}"
    else:  # diamond
        pts = f"{x:.2f},{y - r * 1.3:.2f} {x + r:.2f},{y:.2f} {x:.2f},{y + r * 1.3:.2f} {x - r:.2f},{y:.2f}"
    return f'<polygon class="marker" points="{pts}" {fill}/>'


def _short(label: str) -> str:
    return label.split(" (")[0].replace("self-consistency", "SC")


def pareto_svg(report: GainReport, pts: Sequence[dict[str, Any]], front: Sequence[dict[str, Any]]) -> str:
    """The Pareto plot as an inline ``<svg id="pareto">``: one ``g.point`` per point of ``pts`` (every protocol
    and distinct baseline, :func:`.gain_files.points`; error bars: the 95% CIs of score and of cost), ``front``
    (:func:`.gain_files.pareto_front`) as ``polyline.front``, axes and a legend."""
    x_ticks = nice_ticks(0.0, max([p["cost"]["ci"][1] for p in pts] + [p["cost"]["value"] for p in pts] + [1e-9]))
    lows = [min(p["score"]["ci"][0], p["score"]["value"]) for p in pts]
    highs = [max(p["score"]["ci"][1], p["score"]["value"]) for p in pts]
    y_low, y_high = (0.0, 1.0) if min(lows) >= 0 and max(highs) <= 1 else (min(lows), max(highs))
    y_ticks = nice_ticks(y_low, y_high)
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(v: float) -> float:
        return LEFT + (v - x0) / (x1 - x0) * inner_w

    def sy(v: float) -> float:
        return TOP + (y1 - v) / (y1 - y0) * inner_h

    unit = _html.escape(report.unit)
    out = [f'<svg id="pareto" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" font-family="system-ui, sans-serif" font-size="11">',
           f"<title>Pareto plot: score against mean {unit} per item, every protocol and baseline, 95% CIs</title>",
           f'<rect x="{LEFT}" y="{TOP}" width="{inner_w}" height="{inner_h}" fill="#fcfcfc" stroke="#999"/>']
    for t in x_ticks:
        out.append(f'<line class="grid" x1="{sx(t):.2f}" x2="{sx(t):.2f}" y1="{TOP}" y2="{TOP + inner_h}" '
                   f'stroke="#e6e6e6"/><text class="xtick" x="{sx(t):.2f}" y="{TOP + inner_h + 16}" '
                   f'text-anchor="middle">{t:g}</text>')
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + inner_w}" y1="{sy(t):.2f}" y2="{sy(t):.2f}" '
                   f'stroke="#e6e6e6"/><text class="ytick" x="{LEFT - 6}" y="{sy(t) + 4:.2f}" '
                   f'text-anchor="end">{t:g}</text>')
    out.append(f'<text x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">mean cost per item '
               f"({unit}; 95% CI)</text>")
    out.append(f'<text transform="translate(16,{TOP + inner_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
               "score (95% CI)</text>")
    out.append(f'<text x="{LEFT}" y="{TOP - 12}" font-weight="600">{_html.escape(report.pool)}, '
               f"{_html.escape(report.task)}: protocols against baselines ({report.n_items} items)</text>")
    if len(front) > 1:
        line = " ".join(f"{sx(p['cost']['value']):.2f},{sy(p['score']['value']):.2f}" for p in front)
        out.append(f'<polyline class="front" points="{line}" fill="none" stroke="#777" stroke-dasharray="5,4"/>')
    for n, p in enumerate(pts):
        shape, colour = STYLES.get(p["kind"], ("circle", "#888"))
        s, c = p["score"], p["cost"]
        x, y = sx(c["value"]), sy(s["value"])
        label = _html.escape(p["label"], quote=True)
        tip = (f"{p['label']}: score {s['value']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] at "
               f"{c['value']:.4g} {report.unit}/item [{c['ci'][0]:.4g}, {c['ci'][1]:.4g}]")
        on_front = any(q is p for q in front)
        out.append(
            f'<g class="point" data-label="{label}" data-kind="{p["kind"]}" data-score="{s["value"]!r}" '
            f'data-cost="{c["value"]!r}" data-front="{str(on_front).lower()}"><title>{_html.escape(tip)}</title>'
            f'<line class="ybar" x1="{x:.2f}" x2="{x:.2f}" y1="{sy(s["ci"][0]):.2f}" y2="{sy(s["ci"][1]):.2f}" '
            f'stroke="{colour}" stroke-width="1.2"/>'
            f'<line class="xbar" x1="{sx(c["ci"][0]):.2f}" x2="{sx(c["ci"][1]):.2f}" y1="{y:.2f}" y2="{y:.2f}" '
            f'stroke="{colour}" stroke-width="1.2"/>'
            + "".join(f'<line class="cap" x1="{x - 3:.2f}" x2="{x + 3:.2f}" y1="{sy(v):.2f}" y2="{sy(v):.2f}" '
                      f'stroke="{colour}"/>' for v in s["ci"])
            + _marker(shape, x, y, colour)
            + f'<text class="label" x="{x + 7:.2f}" y="{y + (-6 if n % 2 else 13):.2f}">'
              f"{_html.escape(_short(p['label']))}</text></g>")
    legend = {"protocol": "protocol", "best_single": f"best single ({report.best_member})",
              "self_consistency": f"self-consistency@k ({report.best_member})", "pool_vote": "pool majority vote"}
    lx, ly = WIDTH - RIGHT + 18, TOP + 8
    for k, (kind, text) in enumerate(legend.items()):
        shape, colour = STYLES[kind]
        out.append(f'<g class="legend">{_marker(shape, lx, ly + 20 * k, colour)}'
                   f'<text x="{lx + 12}" y="{ly + 20 * k + 4}">{_html.escape(text)}</text></g>')
    k = len(legend)
    out.append(f'<g class="legend"><line x1="{lx - 6}" x2="{lx + 6}" y1="{ly + 20 * k}" y2="{ly + 20 * k}" '
               f'stroke="#777" stroke-dasharray="5,4"/><text x="{lx + 12}" y="{ly + 20 * k + 4}">Pareto front</text>'
               "</g>")
    out.append("</svg>")
    return "\n".join(out)


def gain_table(report: GainReport) -> html.Table:
    """One row per protocol; numeric columns sort by value."""
    headers = ["protocol", "score [95% CI]", f"{report.unit}/item", f"best single ({report.best_member})",
               "self-consistency@k", "k", "cost ratio", "pool vote (own cost)", "best baseline", "gain [95% CI]",
               "verdict"]
    body = []
    for r in report.rows:
        single, sc, vote = (next(b for b in r.baselines if b["kind"] == kind)
                            for kind in ("best_single", "self_consistency", "pool_vote"))
        body.append([html.Cell(r.protocol), html.ci_cell(r.score["value"], r.score["ci"]),
                     html.Cell(f"{r.cost['value']:.4g}", r.cost["value"]),
                     html.ci_cell(single["score"]["value"], single["score"]["ci"]),
                     html.ci_cell(sc["score"]["value"], sc["score"]["ci"]),
                     html.Cell(str(r.match.k), r.match.k), html.Cell(f"{r.match.ratio:.2f}", r.match.ratio),
                     html.Cell(f"{fmt_ci(vote['score']['value'], vote['score']['ci'])} @ "
                               f"{vote['cost']['value']:.4g}" + ("" if vote["admissible"] else " (n/a)"),
                               vote["score"]["value"]),
                     html.Cell(r.best_baseline), html.ci_cell(r.gain["value"], r.gain["ci"]), html.Cell(r.verdict)])
    return html.Table(headers, body, id="gain")


__all__ = ["gain_table", "nice_ticks", "pareto_svg"]
