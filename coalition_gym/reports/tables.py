"""Leaderboard rows and their text forms (terminal, Markdown, CSV): solo and every computed estimator,
each with its 95% CI; tied values share a rank."""

from __future__ import annotations

import csv
import io
from typing import Any, Iterator, Mapping, Sequence

from ..valuation.estimators import ESTIMATORS
from ..valuation.stats import format_p, shared_ranks


class _Fields(Mapping[str, str]):
    """Estimator name -> field name in summary.json and column label, in display order: a live view of
    the estimator registry (``register_estimator``), so a registered estimator has its column too."""

    def __getitem__(self, name: str) -> str:
        if name not in ESTIMATORS or not ESTIMATORS[name].in_all:
            raise KeyError(name)
        return ESTIMATORS[name].field

    def __iter__(self) -> Iterator[str]:
        return (name for name, e in ESTIMATORS.items() if e.in_all)

    def __len__(self) -> int:
        return sum(1 for _ in self)


FIELDS: Mapping[str, str] = _Fields()


def leaderboard_rows(players: Sequence[str], solo: Any, results: Mapping[str, Any],
                     primary: str) -> list[dict[str, Any]]:
    """One row per player, best ``primary`` estimate first. ``rank`` and ``solo_rank`` are competition
    ranks (ties share the best rank); ``rank_change`` = solo rank - compositional rank."""
    main = results[primary]
    comp_rank = dict(zip(players, shared_ranks([float(main[p]) for p in players])))
    solo_rank = dict(zip(players, shared_ranks([float(solo[p]) for p in players])))
    rows = []
    for p in sorted(players, key=lambda p: (comp_rank[p], players.index(p))):
        k = players.index(p)
        estimates = {FIELDS[name]: {"value": float(res.values[k]), "ci": [float(res.ci_low[k]), float(res.ci_high[k])]}
                     for name, res in results.items()}
        primary_estimate = estimates[FIELDS[primary]]
        rows.append({"rank": comp_rank[p], "model": p, "solo": float(solo.values[k]),
                     "solo_ci": [float(solo.ci_low[k]), float(solo.ci_high[k])], "estimates": estimates,
                     "strength": primary_estimate["value"], "strength_ci": primary_estimate["ci"],
                     "solo_rank": solo_rank[p], "rank_change": solo_rank[p] - comp_rank[p]})
    return rows


def fmt_ci(value: float, ci: Sequence[float]) -> str:
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    return list(rows[0]["estimates"]) if rows else []


def _cells(row: dict[str, Any], columns: list[str]) -> list[str]:
    return ([str(row["rank"]), row["model"], fmt_ci(row["solo"], row["solo_ci"])]
            + [fmt_ci(row["estimates"][c]["value"], row["estimates"][c]["ci"]) for c in columns]
            + [f"{row['rank_change']:+d}"])


def terminal_table(rows: list[dict[str, Any]]) -> str:
    columns = _columns(rows)
    header = ["rank", "model", "solo [95% CI]"] + [f"{c} [95% CI]" for c in columns] + ["rank change"]
    body = [_cells(r, columns) for r in rows]
    widths = [max(len(line[i]) for line in [header] + body) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) if i == 0 else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(line, widths))).rstrip() for line in [header] + body)


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    columns = _columns(rows)
    header = ["rank", "model", "solo"] + columns + ["rank change"]
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(_cells(r, columns)) + " |" for r in rows])


def csv_table(rows: list[dict[str, Any]], primary: str) -> str:
    columns = _columns(rows)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["rank", "model", "solo", "solo_ci_low", "solo_ci_high"]
                    + [f"{c}{suffix}" for c in columns for suffix in ("", "_ci_low", "_ci_high")]
                    + ["ranked_by", "rank_change"])
    for r in rows:
        writer.writerow([r["rank"], r["model"], r["solo"], *r["solo_ci"]]
                        + [v for c in columns for v in (r["estimates"][c]["value"], *r["estimates"][c]["ci"])]
                        + [FIELDS[primary], r["rank_change"]])
    return out.getvalue()


def correlation_sentence(corr: Mapping[str, Any], label: str) -> str:
    """Solo vs compositional correlation, or why it is undefined."""
    if corr.get("spearman") is None:
        return f"Solo vs {label}: correlation {corr.get('method', 'undefined')} (n={corr.get('n')})."
    return (f"Solo vs {label}: Spearman {corr['spearman']:.2f} (p {p_phrase(corr['spearman_p'])}), Pearson "
            f"{corr['pearson']:.2f} (p {p_phrase(corr['pearson_p'])}), {corr['method']} p-values, n={corr['n']}.")


def p_phrase(p: float | None) -> str:
    """'= 0.042' or '< 1e-4': a p-value as it reads after 'p'."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"
