"""Leaderboard rows and their table (rendered to the terminal, Markdown, CSV and HTML by :mod:`.table`): solo
and every computed estimator, each with its 95% CI; tied values share a rank."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from ..valuation.estimators import ESTIMATORS
from ..valuation.stats import format_p, shared_ranks
from .table import Column, Table, estimate


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

#: a field whose number is not the value its name suggests -> what the column says it is
HEADERS = {"interaction": "mean pairwise interaction"}


def estimate_column(field: str) -> Column:
    """An estimator's column: its field, a header saying what the number is, with its 95% CI."""
    return Column(field, f"{HEADERS.get(field, field)} [95% CI]", "ci")


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


def leaderboard_table(rows: list[dict[str, Any]], primary: str) -> Table:
    """The leaderboard rows as one table: rank, model, solo and every computed estimator with its 95% CI, the
    estimator ranked by and the rank change (the same columns in the terminal, Markdown, CSV and HTML)."""
    fields = list(rows[0]["estimates"]) if rows else []
    columns = ([Column("rank", kind="int"), Column("model"), Column("solo", "solo [95% CI]", "ci")]
               + [estimate_column(f) for f in fields]
               + [Column("ranked_by", "ranked by"), Column("rank_change", "rank change", "signed")])
    body = [{"rank": r["rank"], "model": r["model"], "solo": estimate(r["solo"], r["solo_ci"]),
             **{f: r["estimates"][f] for f in fields}, "ranked_by": FIELDS[primary], "rank_change": r["rank_change"]}
            for r in rows]
    return Table(columns, body, id="leaderboard")


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
