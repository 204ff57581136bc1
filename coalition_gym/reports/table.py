"""One table model for every report: the columns once, the rows once, rendered to Markdown, CSV, a terminal
table and a sortable HTML table from the same column set.

A :class:`Column` has a ``name`` (the CSV field and the row key), a ``header`` (what Markdown, the terminal and
HTML show) and a ``kind`` saying how a value reads:

- ``text``: ``str(value)``; HTML sorts it as text;
- ``int``: a whole number (right-aligned in the terminal); ``signed``: the same with its sign (``+2``);
- ``number``: a float shown with the column's ``fmt`` (``".4g"``), a value that rounds to zero as zero (never
  ``-0.000``); CSV keeps the full value;
- ``ci``: an estimate ``{"value": v, "ci": [low, high]}`` shown as ``v [low, high]``; CSV gives it three fields
  (``name``, ``name_ci_low``, ``name_ci_high``); HTML sorts it by ``v``;
- ``at``: an estimate at a cost ``{"score": estimate, "cost": estimate, "note": ""}`` shown as
  ``v [low, high] @ cost`` (+ the note); CSV gives it four fields (``name``, ``_ci_low``, ``_ci_high``,
  ``name_cost``); HTML sorts it by the score.

A missing value (None) reads ``-`` (an empty CSV field). HTML adds sorting, never columns.
"""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..valuation.stats import fmt_number

KINDS = ("text", "int", "signed", "number", "ci", "at")


def fmt_ci(value: float, ci: Sequence[float], fmt: str = ".3f") -> str:
    """``v [low, high]`` in ``fmt``, a bound that rounds to zero printed as zero (see ``fmt_number``)."""
    return f"{fmt_number(value, fmt)} [{fmt_number(ci[0], fmt)}, {fmt_number(ci[1], fmt)}]"


@dataclass(frozen=True)
class Column:
    name: str
    header: str = ""  # default: the name
    kind: str = "text"
    fmt: str = ".3f"  # ``number`` and ``ci`` columns' format

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: kind {self.kind!r} is none of {', '.join(KINDS)}")

    @property
    def title(self) -> str:
        return self.header or self.name

    def text(self, value: Any) -> str:
        """The cell as Markdown, the terminal and HTML show it."""
        if value is None:
            return "-"
        if self.kind == "signed":
            return f"{value:+d}"
        if self.kind == "number":
            return fmt_number(value, self.fmt)
        if self.kind == "ci":
            return fmt_ci(value["value"], value["ci"], self.fmt)
        if self.kind == "at":
            score, cost = value["score"], value["cost"]
            return f"{fmt_ci(score['value'], score['ci'])} @ {cost['value']:.4g}{value.get('note', '')}"
        return str(value)

    def csv_names(self) -> list[str]:
        if self.kind == "ci":
            return [self.name, f"{self.name}_ci_low", f"{self.name}_ci_high"]
        if self.kind == "at":
            return [self.name, f"{self.name}_ci_low", f"{self.name}_ci_high", f"{self.name}_cost"]
        return [self.name]

    def csv_values(self, value: Any) -> list[Any]:
        width = len(self.csv_names())
        if value is None:
            return [""] * width
        if self.kind == "ci":
            return [value["value"], *value["ci"]]
        if self.kind == "at":
            return [value["score"]["value"], *value["score"]["ci"], value["cost"]["value"]]
        return [value]

    def sort_key(self, value: Any) -> float | str | None:
        """What HTML sorts the cell by: the number, else the text."""
        if value is None:
            return None
        if self.kind in ("int", "signed", "number"):
            return value
        if self.kind == "ci":
            return value["value"]
        if self.kind == "at":
            return value["score"]["value"]
        return self.text(value)


@dataclass
class Table:
    """``rows``: one mapping per row, column name -> value (built once, by the report)."""

    columns: list[Column]
    rows: Sequence[Mapping[str, Any]] = field(default_factory=list)
    caption: str = ""
    id: str = "table"  # the HTML table's id

    def cells(self) -> list[list[str]]:
        return [[c.text(row.get(c.name)) for c in self.columns] for row in self.rows]

    def headers(self) -> list[str]:
        return [c.title for c in self.columns]

    def to_markdown(self) -> list[str]:
        """The table's lines (header, rule, one line per row); a ``|`` inside a cell or header is escaped, so every
        line has the header's number of columns."""
        headers = self.headers()
        return (["| " + " | ".join(map(_md_cell, headers)) + " |", "|" + "---|" * len(headers)]
                + ["| " + " | ".join(map(_md_cell, line)) + " |" for line in self.cells()])

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([name for c in self.columns for name in c.csv_names()])
        for row in self.rows:
            writer.writerow([v for c in self.columns for v in c.csv_values(row.get(c.name))])
        return out.getvalue()

    def to_text(self) -> str:
        """Aligned columns for a terminal (whole numbers to the right)."""
        lines = [self.headers()] + self.cells()
        widths = [max(len(line[i]) for line in lines) for i in range(len(self.columns))]
        return "\n".join("  ".join(cell.rjust(w) if c.kind == "int" else cell.ljust(w)
                                   for c, cell, w in zip(self.columns, line, widths)).rstrip() for line in lines)

    def to_html(self) -> str:
        """A ``table.sortable`` (the page's script sorts a column by each cell's ``data-sort``)."""
        head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in self.headers())
        body = "\n".join("<tr>" + "".join(_html_cell(c, row.get(c.name)) for c in self.columns) + "</tr>"
                         for row in self.rows)
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<table class="sortable" id="{html.escape(self.id, quote=True)}">{caption}'
                f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _html_cell(column: Column, value: Any) -> str:
    text = column.text(value)
    sort = column.sort_key(value)
    sort = text if sort is None else sort
    numeric = isinstance(sort, (int, float)) and not isinstance(sort, bool)
    attrs = f' data-sort="{html.escape(str(sort), quote=True)}"' + (' class="num"' if numeric else "")
    return f"<td{attrs}>{html.escape(text)}</td>"


def estimate(value: float, ci: Sequence[float]) -> dict[str, Any]:
    """A ``ci`` cell: ``{"value", "ci"}`` of plain floats."""
    return {"value": float(value), "ci": [float(ci[0]), float(ci[1])]}


__all__ = ["Column", "KINDS", "Table", "estimate", "fmt_ci"]
