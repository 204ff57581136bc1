"""The pairwise-interaction parts of a leaderboard: the matrices in summary.json (strict JSON: the undefined
diagonal is null), one sentence naming the most complementary pair, a heatmap PNG (``interactions.png``,
the top and bottom pairs labelled as the sentence names them, :func:`extreme_labels`) and an interactive
heatmap for leaderboard.html
(switch between the Shapley and Banzhaf index; hover or click a cell for its value and CI).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..valuation.interactions import INDICES, Interactions, PairMatrix
from ..valuation.stats import fmt_number, signed, signed_ci

DEFINITIONS = {
    "shapley": "Shapley interaction index of a pair (Grabisch-Roubens; shapiq's SII = k-SII of order 2): "
               "sum over S without i, j of |S|!(n-|S|-2)!/(n-1)! (v(S+ij) - v(S+i) - v(S+j) + v(S))",
    "banzhaf": "Banzhaf interaction index of a pair (shapiq's BII of order 2): the mean over S without i, j of "
               "v(S+ij) - v(S+i) - v(S+j) + v(S)",
}


def _listed(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if not math.isfinite(float(x)) else float(x) for x in row] for row in matrix]


def _matrix_part(m: PairMatrix) -> dict[str, Any]:
    return {"value": _listed(m.value), "ci_low": _listed(m.ci_low), "ci_high": _listed(m.ci_high),
            "stderr": _listed(m.stderr)}


def interaction_summary(found: Interactions) -> dict[str, Any]:
    """What summary.json keeps under ``interactions``: both matrices with CIs, every pair, the extremes."""
    banzhaf = {(r["a"], r["b"]): r for r in found.banzhaf.pairs()}
    pairs = [{"a": r["a"], "b": r["b"], "shapley": r["value"], "shapley_ci": r["ci"], "shapley_stderr": r["stderr"],
              "banzhaf": banzhaf[r["a"], r["b"]]["value"], "banzhaf_ci": banzhaf[r["a"], r["b"]]["ci"]}
             for r in found.shapley.pairs()]
    details = {k: v for k, v in found.details.items() if isinstance(v, (int, float, str)) and
               (not isinstance(v, float) or math.isfinite(v))}
    out: dict[str, Any] = {
        "players": list(found.shapley.players), "exact": found.exact, "definitions": DEFINITIONS,
        "reported": "shapley", **{index: _matrix_part(getattr(found, index)) for index in INDICES},
        "pairs": pairs, "most_complementary": pairs[0], "most_redundant": pairs[-1], "cost": details,
        "shapley_values": {p: {"value": float(v), "ci": [float(lo), float(hi)]} for p, v, lo, hi in
                           zip(found.values.players, found.values.values, found.values.ci_low, found.values.ci_high)}}
    out["sentence"] = interaction_sentence(out)
    return out


def _excludes_zero(ci: list[float]) -> str:
    return "CI excludes 0" if ci[0] > 0 or ci[1] < 0 else "CI includes 0"


def extreme_labels(summary: dict[str, Any]) -> dict[str, str]:
    """What the two marked pairs are called, in the sentence and on the heatmap alike: the top pair is the most
    complementary only when its interaction is positive (else the least redundant), the bottom one the most
    redundant only when negative (else the least complementary)."""
    best, worst = summary["most_complementary"]["shapley"], summary["most_redundant"]["shapley"]
    return {"most_complementary": "most complementary" if best > 0 else "least redundant",
            "most_redundant": "most redundant" if worst < 0 else "least complementary"}


def interaction_sentence(summary: dict[str, Any]) -> str:
    """The most complementary pair with its CI, and the most redundant one (named by :func:`extreme_labels`)."""
    best, worst = summary["most_complementary"], summary["most_redundant"]
    labels = extreme_labels(summary)
    how = "exact" if summary["exact"] else "sampled"
    lead = ("Most complementary pair" if best["shapley"] > 0 else "No pair is complementary; the least redundant")
    tail = labels["most_redundant"] if worst["shapley"] < 0 else "no pair is redundant; the least complementary"
    return (f"{lead}: {best['a']} + {best['b']}, Shapley interaction {signed(best['shapley'])} "
            f"{signed_ci(best['shapley_ci'])} ({_excludes_zero(best['shapley_ci'])}); "
            f"{tail}: {worst['a']} + {worst['b']}, {signed(worst['shapley'])} "
            f"{signed_ci(worst['shapley_ci'])} ({_excludes_zero(worst['shapley_ci'])}); "
            f"{how} pairwise Shapley interaction index, 95% CIs.")


def _limit(summary: dict[str, Any]) -> float:
    values = [abs(x) for index in INDICES for row in summary[index]["value"] for x in row if x is not None]
    return max(values + [1e-9])


def heatmap_png(summary: dict[str, Any], path: Path, title: str = "") -> Path:
    """The Shapley interaction matrix as a heatmap (red: complementary, blue: redundant), the most
    complementary and the most redundant pair outlined and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    players = summary["players"]
    n = len(players)
    matrix = np.array([[np.nan if x is None else x for x in row] for row in summary["shapley"]["value"]])
    limit = _limit(summary)
    side = max(4.0, 0.6 * n + 1.5)
    fig, ax = plt.subplots(figsize=(side + 1.8, side + 1.0), dpi=120)
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_xticks(range(n), players, rotation=45, ha="right")
    ax.set_yticks(range(n), players)
    if n <= 12:
        for i in range(n):
            for j in range(n):
                if i != j:
                    ax.text(j, i, fmt_number(matrix[i, j], "+.2f"), ha="center", va="center", fontsize=7)
    labels = []
    names = extreme_labels(summary)
    colors = {"most complementary": "darkred", "most redundant": "navy"}  # red and blue, as the colour bar reads
    for key in ("most_complementary", "most_redundant"):
        pair, label = summary[key], names[key]
        color = colors.get(label, "dimgray")  # a least redundant (or least complementary) pair is neither
        mark = "".join(word[0].upper() for word in label.split())  # MC, LR, MR or LC: as the label says
        i, j = players.index(pair["a"]), players.index(pair["b"])
        for r, c in ((i, j), (j, i)):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor=color, lw=2.5))
            ax.text(c + 0.42, r - 0.42, mark, ha="right", va="top", fontsize=7, color=color, weight="bold")
        labels.append((f"{mark}: {label}: {pair['a']} + {pair['b']}, Shapley interaction {signed(pair['shapley'])} "
                       f"{signed_ci(pair['shapley_ci'])}", color))
    fig.colorbar(image, ax=ax, label="+ complementary, - redundant", shrink=0.8)
    ax.set_title(title or "Pairwise Shapley interactions", fontsize=9, wrap=True)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    for k, (text, color) in enumerate(labels):
        fig.text(0.02, 0.05 - 0.035 * k, text, color=color, fontsize=8, weight="bold")
    fig.savefig(path)
    plt.close(fig)
    return path


def _color(value: float | None, limit: float) -> str:
    if value is None:
        return "#eeeeee"
    t = max(-1.0, min(1.0, value / limit))
    fade = round(255 * (1 - abs(t)))  # white at 0, red (complementary) or blue (redundant) at the limit
    return f"rgb(255,{fade},{fade})" if t > 0 else f"rgb({fade},{fade},255)"


HEATMAP_SCRIPT = """
(function () {
  var table = document.getElementById("interactions");
  var detail = document.getElementById("interaction-detail");
  function show(cell, index) {
    detail.textContent = cell.dataset.a + " + " + cell.dataset.b + ": " + index + " interaction " +
      cell.dataset[index] + " [" + cell.dataset[index + "Low"] + ", " + cell.dataset[index + "High"] + "]";
  }
  function use(index) {
    table.dataset.index = index;
    table.querySelectorAll("td.pair").forEach(function (cell) {
      cell.textContent = cell.dataset[index];
      cell.style.background = cell.dataset[index + "Color"];
    });
    document.querySelectorAll("button.interaction-index").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.index === index));
    });
  }
  table.querySelectorAll("td.pair").forEach(function (cell) {
    cell.addEventListener("mouseenter", function () { show(cell, table.dataset.index); });
    cell.addEventListener("click", function () { show(cell, table.dataset.index); });
  });
  document.querySelectorAll("button.interaction-index").forEach(function (b) {
    b.addEventListener("click", function () { use(b.dataset.index); });
  });
})();
"""


def heatmap_html(summary: dict[str, Any], table_id: str = "interactions", caption: str = "") -> str:
    """An interactive heatmap table (trusted markup built from numbers and escaped names)."""
    players, limit = summary["players"], _limit(summary)
    esc = html.escape
    head = "".join(f'<th scope="col">{esc(p)}</th>' for p in players)
    rows = []
    for i, a in enumerate(players):
        cells = [f'<th scope="row">{esc(a)}</th>']
        for j, b in enumerate(players):
            if i == j:
                cells.append('<td class="diag">&middot;</td>')
                continue
            attrs = {"data-a": a, "data-b": b}
            for index in INDICES:
                part = summary[index]
                value = part["value"][i][j]
                attrs[f"data-{index}"] = signed(value)
                attrs[f"data-{index}-low"] = signed(part["ci_low"][i][j])
                attrs[f"data-{index}-high"] = signed(part["ci_high"][i][j])
                attrs[f"data-{index}-color"] = _color(value, limit)
            text = " ".join(f'{k}="{esc(v, quote=True)}"' for k, v in attrs.items())
            cells.append(f'<td class="pair num" {text} style="background:{attrs["data-shapley-color"]}">'
                         f'{esc(attrs["data-shapley"])}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    buttons = "".join(f'<button type="button" class="interaction-index" data-index="{index}" '
                      f'aria-pressed="{str(index == "shapley").lower()}">{index.capitalize()}</button> '
                      for index in INDICES)
    title = esc(caption or "Pairwise interactions (red: complementary, blue: redundant); hover or click a cell")
    live = table_id == "interactions"  # one interactive heatmap per page; others (compare) are static
    script, detail = (f"<script>{HEATMAP_SCRIPT}</script>", 'id="interaction-detail" ') if live else ("", "")
    return (f'<section class="interactions"><h2>{title}</h2>{f"<p>Index: {buttons}</p>" if live else ""}'
            f'<table id="{esc(table_id, quote=True)}" data-index="shapley"><thead><tr><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table><p {detail}class="note">'
            f'{esc(summary["sentence"])}</p></section>{script}')


def dumps_summary(summary: dict[str, Any]) -> str:
    """Strict JSON of an interaction summary (a check for tests and tools: no NaN anywhere)."""
    return json.dumps(summary, allow_nan=False)


__all__ = ["DEFINITIONS", "dumps_summary", "heatmap_html", "heatmap_png", "interaction_sentence",
           "interaction_summary"]
