"""Self-contained HTML pages for leaderboards: one file, no network, no CDN.

A page holds sortable tables (:class:`.table.Table`, the same columns as the report's Markdown and CSV;
click a column header: numbers sort by value, not by text), an
embedded PNG, notes and the run record. The sorting script is a few lines of plain JavaScript
inside the page.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from typing import Any

from .table import Table


@dataclass
class Page:
    title: str
    intro: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    png: bytes | None = None  # an image shown under the tables
    png_alt: str = "solo vs compositional strength"
    figures: list[str] = field(default_factory=list)  # trusted inline markup (e.g. an SVG plot), under the tables
    notes: list[str] = field(default_factory=list)
    records: dict[str, Any] = field(default_factory=dict)  # label -> run record, shown folded


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: left; white-space: nowrap; }
th { cursor: pointer; background: #f4f4f4; user-select: none; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
td.num { font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 12px; }
img { max-width: 560px; display: block; margin: 1em 0; }
.note { color: #555; }
"""

# Sort a table by the clicked column; data-sort holds the number (or text) a cell sorts by.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var descending = th.getAttribute("aria-sort") !== "descending";
      table.querySelectorAll("th").forEach(function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
        var nx = parseFloat(x), ny = parseFloat(y);
        var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def render(page: Page) -> str:
    parts = [f"<h1>{html.escape(page.title)}</h1>"]
    parts += [f"<p>{html.escape(line)}</p>" for line in page.intro]
    parts += [t.to_html() for t in page.tables]
    parts += page.figures  # built by this package from numbers and escaped labels, never from raw user text
    if page.png:
        data = base64.b64encode(page.png).decode("ascii")
        parts.append(f'<img alt="{html.escape(page.png_alt, quote=True)}" src="data:image/png;base64,{data}">')
    parts += [f'<p class="note">{html.escape(line)}</p>' for line in page.notes]
    for label, record in page.records.items():
        text = json.dumps(record, indent=2, sort_keys=True, default=str)
        parts.append(f"<details><summary>{html.escape(label)}</summary><pre>{html.escape(text)}</pre></details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
            f"<title>{html.escape(page.title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")
