"""The gain report's Pareto plot, drawn once: score against mean cost per item for every protocol and baseline,
95% CI error bars on both axes, the Pareto front dashed, axes and a legend.

:func:`pareto_plot` computes the plot's geometry once, as a :class:`Scene` of shapes in pixel coordinates
(origin top left); :func:`to_svg` writes it as inline SVG for ``gain.html`` (every point a ``g.point`` with
its label, kind, score and cost as data attributes and a tooltip, so a reader can hover it and a test can
count it; the page fetches nothing) and :func:`to_png` replays the same shapes with matplotlib for
``pareto.png``. The two files show one drawing.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gain import GainReport

WIDTH, HEIGHT = 820, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 230, 34, 52  # plot margins; the legend sits in the right one
#: marker shape and colour per kind of point
STYLES = {"protocol": ("circle", "#1f77b4"), "best_single": ("square", "#d62728"),
          "self_consistency": ("triangle", "#ff7f0e"), "pool_vote": ("diamond", "#2ca02c")}
FONT_PX = 11


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


@dataclass(frozen=True)
class Shape:
    """One drawing primitive, in pixels. ``kind``: ``line`` and ``polyline`` (``xy``: their points), ``rect``
    (``xy``: top left and bottom right corners), ``marker`` (``xy``: its centre; ``marker``: circle, square,
    triangle or diamond; ``size``: its radius) or ``text`` (``xy``: the baseline's anchor point)."""

    kind: str
    xy: tuple[tuple[float, float], ...]
    colour: str = "#222"
    cls: str = ""
    width: float = 1.0
    dash: str = ""  # "5,4": 5 px drawn, 4 px gap
    fill: str = "none"  # rects
    text: str = ""
    anchor: str = "start"  # start | middle | end
    marker: str = "circle"
    size: float = 5.0
    rotate: bool = False  # text read bottom to top
    bold: bool = False


@dataclass
class Group:
    """Shapes that belong together: a point (with its data attributes and tooltip) or a legend entry."""

    cls: str
    shapes: list[Shape]
    attrs: dict[str, str] = field(default_factory=dict)
    tip: str = ""


@dataclass
class Scene:
    title: str  # what the picture shows, in words (the SVG's title)
    groups: list[Group]
    width: int = WIDTH
    height: int = HEIGHT


def _short(label: str) -> str:
    return label.split(" (")[0].replace("self-consistency", "SC")


def pareto_plot(report: GainReport) -> Scene:
    """The plot's geometry (see the module doc), computed once for both formats."""
    pts = points(report)
    front = pareto_front(pts)
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

    frame = [Shape("rect", ((LEFT, TOP), (LEFT + inner_w, TOP + inner_h)), colour="#999", fill="#fcfcfc")]
    for t in x_ticks:
        frame += [Shape("line", ((sx(t), TOP), (sx(t), TOP + inner_h)), "#e6e6e6", "grid"),
                  Shape("text", ((sx(t), TOP + inner_h + 16),), cls="xtick", text=f"{t:g}", anchor="middle")]
    for t in y_ticks:
        frame += [Shape("line", ((LEFT, sy(t)), (LEFT + inner_w, sy(t))), "#e6e6e6", "grid"),
                  Shape("text", ((LEFT - 6, sy(t) + 4),), cls="ytick", text=f"{t:g}", anchor="end")]
    frame += [Shape("text", ((LEFT + inner_w / 2, HEIGHT - 12),), text=f"mean cost per item ({report.unit}; 95% CI)",
                    anchor="middle"),
              Shape("text", ((16, TOP + inner_h / 2),), text="score (95% CI)", anchor="middle", rotate=True),
              Shape("text", ((LEFT, TOP - 12),), bold=True,
                    text=f"{report.pool}, {report.task}: protocols against baselines ({report.n_items} items)")]
    if len(front) > 1:
        frame.append(Shape("polyline", tuple((sx(p["cost"]["value"]), sy(p["score"]["value"])) for p in front),
                           "#777", "front", dash="5,4"))
    groups = [Group("", frame)]
    for n, p in enumerate(pts):
        shape, colour = STYLES.get(p["kind"], ("circle", "#888"))
        s, c = p["score"], p["cost"]
        x, y = sx(c["value"]), sy(s["value"])
        tip = (f"{p['label']}: score {s['value']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] at "
               f"{c['value']:.4g} {report.unit}/item [{c['ci'][0]:.4g}, {c['ci'][1]:.4g}]")
        shapes = [Shape("line", ((x, sy(s["ci"][0])), (x, sy(s["ci"][1]))), colour, "ybar", 1.2),
                  Shape("line", ((sx(c["ci"][0]), y), (sx(c["ci"][1]), y)), colour, "xbar", 1.2)]
        shapes += [Shape("line", ((x - 3, sy(v)), (x + 3, sy(v))), colour, "cap") for v in s["ci"]]
        shapes += [Shape("marker", ((x, y),), colour, "marker", marker=shape),
                   Shape("text", ((x + 7, y + (-6 if n % 2 else 13)),), cls="label", text=_short(p["label"]))]
        groups.append(Group("point", shapes, {"label": p["label"], "kind": p["kind"], "score": repr(s["value"]),
                                              "cost": repr(c["value"]),
                                              "front": str(any(q is p for q in front)).lower()}, tip))
    legend = {"protocol": "protocol", "best_single": f"best single ({report.best_member})",
              "self_consistency": f"self-consistency@k ({report.best_member})", "pool_vote": "pool majority vote"}
    lx, ly = WIDTH - RIGHT + 18, TOP + 8
    for k, (kind, text) in enumerate(legend.items()):
        shape, colour = STYLES[kind]
        groups.append(Group("legend", [Shape("marker", ((lx, ly + 20 * k),), colour, "marker", marker=shape),
                                       Shape("text", ((lx + 12, ly + 20 * k + 4),), text=text)]))
    k = len(legend)
    groups.append(Group("legend", [Shape("line", ((lx - 6, ly + 20 * k), (lx + 6, ly + 20 * k)), "#777", dash="5,4"),
                                   Shape("text", ((lx + 12, ly + 20 * k + 4),), text="Pareto front")]))
    return Scene(f"Pareto plot: score against mean {report.unit} per item, every protocol and baseline, 95% CIs",
                 groups)


# -- SVG ------------------------------------------------------------------------------------------------------

def _svg_marker(s: Shape) -> str:
    (x, y), r, colour = s.xy[0], s.size, s.colour
    fill = f'fill="{colour}" stroke="#222" stroke-width="0.6"'
    if s.marker == "circle":
        return f'<circle class="marker" cx="{x:.2f}" cy="{y:.2f}" r="{r}" {fill}/>'
    if s.marker == "square":
        return f'<rect class="marker" x="{x - r:.2f}" y="{y - r:.2f}" width="{2 * r}" height="{2 * r}" {fill}/>'
    if s.marker == "triangle":
        pts = f"{x:.2f},{y - r * 1.2:.2f} {x - r * 1.1:.2f},{y + r * 0.8:.2f} {x + r * 1.1:.2f},{y + r * 0.8:.2f}"
    else:  # diamond
        pts = f"{x:.2f},{y - r * 1.3:.2f} {x + r:.2f},{y:.2f} {x:.2f},{y + r * 1.3:.2f} {x - r:.2f},{y:.2f}"
    return f'<polygon class="marker" points="{pts}" {fill}/>'


def _svg_shape(s: Shape) -> str:
    cls = f'class="{s.cls}" ' if s.cls else ""
    dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
    width = f' stroke-width="{s.width}"' if s.width != 1.0 else ""
    if s.kind == "marker":
        return _svg_marker(s)
    if s.kind == "line":
        (x1, y1), (x2, y2) = s.xy
        return f'<line {cls}x1="{x1:.2f}" x2="{x2:.2f}" y1="{y1:.2f}" y2="{y2:.2f}" stroke="{s.colour}"{width}{dash}/>'
    if s.kind == "polyline":
        line = " ".join(f"{x:.2f},{y:.2f}" for x, y in s.xy)
        return f'<polyline {cls}points="{line}" fill="none" stroke="{s.colour}"{width}{dash}/>'
    if s.kind == "rect":
        (x1, y1), (x2, y2) = s.xy
        return (f'<rect {cls}x="{x1}" y="{y1}" width="{x2 - x1}" height="{y2 - y1}" fill="{s.fill}" '
                f'stroke="{s.colour}"/>')
    (x, y), text = s.xy[0], html.escape(s.text)
    weight = ' font-weight="600"' if s.bold else ""
    if s.rotate:
        return (f'<text {cls}transform="translate({x:g},{y:.1f}) rotate(-90)" text-anchor="{s.anchor}"{weight}>'
                f"{text}</text>")
    return f'<text {cls}x="{x:.2f}" y="{y:.2f}" text-anchor="{s.anchor}"{weight}>{text}</text>'


def to_svg(scene: Scene, svg_id: str = "pareto") -> str:
    """The scene as an inline ``<svg>`` (trusted markup: numbers and escaped labels)."""
    out = [f'<svg id="{svg_id}" xmlns="http://www.w3.org/2000/svg" width="{scene.width}" height="{scene.height}" '
           f'viewBox="0 0 {scene.width} {scene.height}" role="img" font-family="system-ui, sans-serif" '
           f'font-size="{FONT_PX}">', f"<title>{html.escape(scene.title)}</title>"]
    for g in scene.groups:
        inner = "".join(_svg_shape(s) for s in g.shapes)
        if not g.cls:
            out += [_svg_shape(s) for s in g.shapes]
            continue
        attrs = "".join(f' data-{k}="{html.escape(v, quote=True)}"' for k, v in g.attrs.items())
        tip = f"<title>{html.escape(g.tip)}</title>" if g.tip else ""
        out.append(f'<g class="{g.cls}"{attrs}>{tip}{inner}</g>')
    out.append("</svg>")
    return "\n".join(out)


# -- PNG ------------------------------------------------------------------------------------------------------

PX = 0.72  # points per pixel at the SVG's 100 pixels per inch
_MARKERS = {"circle": "o", "square": "s", "triangle": "^", "diamond": "D"}
_ANCHORS = {"start": "left", "middle": "center", "end": "right"}


def _dashes(dash: str) -> list[float]:
    return [float(v) * PX for v in dash.split(",")]


def to_png(scene: Scene, path: Path, dpi: int = 120) -> Path:
    """The same scene drawn by matplotlib into a PNG (the SVG's pixels at ``dpi``/100 scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig = plt.figure(figsize=(scene.width / 100, scene.height / 100), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, scene.width)
    ax.set_ylim(scene.height, 0)
    ax.axis("off")
    for z, s in enumerate(s for g in scene.groups for s in g.shapes):
        xs, ys = [p[0] for p in s.xy], [p[1] for p in s.xy]
        if s.kind in ("line", "polyline"):
            line, = ax.plot(xs, ys, color=s.colour, linewidth=s.width * PX, zorder=z)
            if s.dash:
                line.set_dashes(_dashes(s.dash))
        elif s.kind == "rect":
            ax.add_patch(Rectangle((xs[0], ys[0]), xs[1] - xs[0], ys[1] - ys[0], facecolor=s.fill, edgecolor=s.colour,
                                   linewidth=PX, zorder=z))
        elif s.kind == "marker":
            ax.plot(xs, ys, linestyle="none", marker=_MARKERS.get(s.marker, "o"), markersize=2 * s.size * PX,
                    markerfacecolor=s.colour, markeredgecolor="#222", markeredgewidth=0.6 * PX, zorder=z)
        else:
            ax.text(xs[0], ys[0], s.text, fontsize=FONT_PX * PX, ha=_ANCHORS[s.anchor], va="baseline",
                    rotation=90 if s.rotate else 0, rotation_mode="anchor", fontweight="bold" if s.bold else "normal",
                    zorder=z)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["Group", "Scene", "Shape", "STYLES", "nice_ticks", "pareto_front", "pareto_plot", "points", "to_png",
           "to_svg"]
