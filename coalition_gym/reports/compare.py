"""``cgym compare``: one table across leaderboard runs (a pool under several protocols, several pools).

Each run folder is one ``cgym eval`` output (its ``summary.json``); any other folder (``cgym gain``,
``cgym robustness``, ``cgym train``, ``cgym sweep``, ``cgym demo``) is refused, saying what it is and what to
do instead, before anything is written. The long table has a row per (run, model) with solo strength and every
estimator all runs share, with CIs; the wide table puts one estimate of each model side by side across runs: the
runs' shared ranking estimator (each run's own, named in its column, when they share none). Runs that differ
in items, seeds, task or ranking estimator are still shown, with a note saying what differs: their numbers do
not measure the same thing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError
from ..result_files import Bundle, write_bundle
from ..valuation.estimators import primary_estimator
from . import html
from .interaction_files import heatmap_html
from .table import Column, Table, estimate
from .tables import FIELDS, HEADERS, estimate_column

#: file a folder holds -> what wrote it, and what to do with it instead of comparing it here
OTHER_KINDS = {
    "gain.json": ("`cgym gain`", "a gain report already compares its protocols with cost-matched baselines; "
                  "run `cgym gain` once with every protocol to put them in one table"),
    "robustness.json": ("`cgym robustness`", "a robustness report already compares its protocols under attack; "
                        "run `cgym robustness` once with every protocol to put them in one table"),
    "sweep_summary.json": ("`cgym sweep`", "compare the `cgym eval` folders inside it"),
    "compare.json": ("`cgym compare`", "compare the run folders it compared"),
    "report.json": ("`cgym train`", "`cgym train` prints every method's table under its --out; to compare "
                    "trained models as collaborators, `cgym eval` a pool holding them"),
    "config.json": ("`cgym train` (not finished: no report.json yet)", "wait for it to finish"),
}


def folder_kind(folder: str | Path) -> str:
    """What wrote ``folder``: ``eval`` (a leaderboard's summary.json), ``demo``, one of :data:`OTHER_KINDS`'
    files, or ``unknown``."""
    folder = Path(folder)
    summary = folder / "summary.json"
    if summary.is_file():
        try:
            data = json.loads(summary.read_text())
        except ValueError:
            return "eval"  # load_run says it is unreadable
        return "demo" if isinstance(data, dict) and "protocols" in data and "models" not in data else "eval"
    found = next((name for name in OTHER_KINDS if (folder / name).is_file()), None)
    if found is None and folder.is_dir() and any(folder.glob("*/report.json")):
        found = "report.json"  # a `cgym train --out` root: one folder per method
    return found or "unknown"


def refusal(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be compared (None when it is a `cgym eval` folder)."""
    kind = folder_kind(folder)
    if kind == "eval":
        return None
    if kind == "demo":
        return (f"{folder} is a `cgym demo` folder; compare the `cgym eval` folders inside it "
                f"(one per protocol: {Path(folder) / 'debate'} ...)")
    if kind == "unknown":
        what = "is not a folder" if not Path(folder).is_dir() else "holds no summary.json"
        return f"{folder} {what}; give folders written by `cgym eval --out`"
    writer, instead = OTHER_KINDS[kind]
    return f"{folder} is a {writer} folder ({kind}); cgym compare compares `cgym eval` folders: {instead}"


def load_run(folder: str | Path) -> dict[str, Any]:
    why = refusal(folder)
    if why is not None:
        raise ConfigError(why)
    path = Path(folder) / "summary.json"
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict) or "models" not in data:
        raise ConfigError(f"{path}: not a leaderboard summary (no 'models'); give `cgym eval` output folders")
    data["folder"] = str(folder)
    return data


def _labels(runs: list[dict[str, Any]]) -> list[str]:
    labels = [f"{r['protocol']} / {r['task']} / {r.get('pool_name', '?')}" for r in runs]
    if len(set(labels)) < len(labels):  # same setting twice (e.g. two seeds): the folder tells them apart
        labels = [f"{label} ({Path(r['folder']).name})" for label, r in zip(labels, runs)]
    return labels


def member_weights(run: dict[str, Any]) -> dict[str, str]:
    """Member name -> sha256 of its weights, from the run record (members without one are left out)."""
    members = ((run.get("run") or {}).get("pool") or {}).get("members") or {}
    return {name: d["weights"]["sha256"] for name, d in members.items()
            if isinstance(d, dict) and isinstance(d.get("weights"), dict) and d["weights"].get("sha256")}


def weight_notes(runs: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """One note per member name that ran with different weights in different runs (e.g. a zoo model
    rebuilt on another machine, or a checkpoint overwritten): their numbers are not one model's."""
    seen: dict[str, dict[str, list[str]]] = {}
    for label, run in zip(labels, runs):
        for name, sha in member_weights(run).items():
            seen.setdefault(name, {}).setdefault(sha, []).append(label)
    return [f"{name} ran with different weights: " + "; ".join(f"sha256 {sha[:12]} in {', '.join(where)}"
                                                                for sha, where in by_sha.items())
            for name, by_sha in seen.items() if len(by_sha) > 1]


def comparability_notes(runs: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """What differs between the runs besides the setting being compared."""
    notes = weight_notes(runs, labels)
    checks = {"items": lambda r: (r.get("run") or {}).get("items"), "seed": lambda r: r.get("seed"),
              "task": lambda r: r.get("task"), "ranking estimator": lambda r: r.get("primary_estimator"),
              "number of items": lambda r: r.get("n_items")}
    for what, get in checks.items():
        values = [get(r) for r in runs]
        known = [v for v in values if v is not None]
        if len({json.dumps(v, sort_keys=True) for v in known}) > 1:
            groups: dict[str, list[str]] = {}  # value -> the runs that have it
            for label, v in zip(labels, values):
                groups.setdefault(json.dumps(v, sort_keys=True), []).append(label)
            names = {key: (f"item set {k + 1}" if what == "items" else key[:60]) for k, key in enumerate(groups)}
            notes.append(f"not comparable on {what}: "
                         + "; ".join(f"{names[key]}: {', '.join(runs_)}" for key, runs_ in groups.items()))
        elif len(known) < len(values) and what == "items":
            notes.append("some runs have no item list in their run record (written before run records): "
                         "cannot check that they used the same items")
    return notes


def compare(folders: Sequence[str | Path]) -> dict[str, Any]:
    """The comparison of the runs in ``folders``: rows, wide table, notes."""
    if len(folders) < 2:
        raise ConfigError("compare needs at least two run folders")
    problems = [why for why in map(refusal, folders) if why is not None]
    if problems:  # every folder checked before anything is read or written
        raise ConfigError("; ".join(problems))
    runs = [load_run(f) for f in folders]
    labels = _labels(runs)
    estimators = shared_estimators(runs)
    rows = []
    for label, run in zip(labels, runs):
        for m in run["models"]:
            rows.append({"run": label, "model": m["name"], "solo": m["solo"], "solo_ci": m["solo_ci"],
                         "estimates": {e: {"value": m[e], "ci": m[f"{e}_ci"]} for e in estimators}})
    models = list(dict.fromkeys(m["name"] for r in runs for m in r["models"]))
    side = side_by_side_estimator(runs, estimators)
    wide = {m: {label: next(({"value": x[side or r["primary_estimator"]],
                              "ci": x[f"{side or r['primary_estimator']}_ci"]}
                             for x in r["models"] if x["name"] == m), None) for label, r in zip(labels, runs)}
            for m in models}
    return {"runs": [{"label": label, "folder": r["folder"], "protocol": r["protocol"], "task": r["task"],
                      "pool": r.get("pool_name"), "primary_estimator": r["primary_estimator"],
                      "full_coalition_score": r["full_coalition_score"], "n_items": r["n_items"]}
                     for label, r in zip(labels, runs)],
            "estimators": estimators, "side_by_side": side, "rows": rows, "wide": wide,
            "notes": comparability_notes(runs, labels),
            "interactions": {label: r["interactions"] for label, r in zip(labels, runs) if r.get("interactions")},
            "records": {label: r.get("run") for label, r in zip(labels, runs)}}


def shared_estimators(runs: list[dict[str, Any]]) -> list[str]:
    """The estimator fields every model of every run has, in the registry's display order."""
    return [f for f in FIELDS.values() if all(f in m for r in runs for m in r["models"])]


def side_by_side_estimator(runs: list[dict[str, Any]], shared: list[str]) -> str | None:
    """The estimate the wide table puts side by side: the runs' common ranking estimator, else the shared one
    that would rank a leaderboard (Shapley before Banzhaf before leave-one-out ...); None when the runs share
    none (then each run's own ranking estimate, its column saying which)."""
    primaries = {r["primary_estimator"] for r in runs}
    if len(primaries) == 1 and primaries <= set(shared):
        return primaries.pop()
    by_field = {field: name for name, field in FIELDS.items()}
    return FIELDS[primary_estimator([by_field[f] for f in shared])] if shared else None


def tables(result: dict[str, Any]) -> list[Table]:
    """The comparison's tables, built once: every model of every run (solo and the shared estimators), each run's
    ranking estimate side by side, and the runs' pairwise Shapley interactions side by side (when any has them)."""
    est = result["estimators"]
    labels = [run["label"] for run in result["runs"]]
    long = Table([Column("run"), Column("model"), Column("solo", "solo [95% CI]", "ci")]
                 + [estimate_column(e) for e in est],
                 [{"run": r["run"], "model": r["model"], "solo": estimate(r["solo"], r["solo_ci"]), **r["estimates"]}
                  for r in result["rows"]], "Every model of every run", id="leaderboard")
    side = result.get("side_by_side")
    ranked = {run["label"]: run["primary_estimator"] for run in result["runs"]}
    heads = {label: label if side else f"{label}: {HEADERS.get(ranked[label], ranked[label])}" for label in labels}
    wide = Table([Column("model")] + [Column(label, heads[label], kind="ci") for label in labels],
                 [{"model": model, **cells} for model, cells in result["wide"].items()],
                 wide_caption(result), id="wide")
    found = result.get("interactions") or {}
    if not found:
        return [long, wide]
    pairs = Table([Column("pair")] + [Column(label, kind="ci") for label in found],
                  [{"pair": pair, **cells} for pair, cells in interaction_pairs(found).items()],
                  "Pairwise Shapley interactions, side by side", id="interactions-compare")
    return [long, wide, pairs]


def markdown(result: dict[str, Any], parts: list[Table] | None = None) -> str:
    long, wide, *pairs = parts or tables(result)
    lines = ["# Comparison", ""] + long.to_markdown()
    lines += ["", f"{wide.caption}:", ""] + wide.to_markdown()
    found = result.get("interactions") or {}
    if pairs:
        lines += ["", "Pairwise Shapley interactions side by side (+ complementary, - redundant):", ""]
        lines += pairs[0].to_markdown()
        lines += [""] + [f"{label}: {summary['sentence']}" for label, summary in found.items()]
    lines += [""] + [f"Note: {n}." for n in result["notes"]]
    return "\n".join(lines) + "\n"


def wide_caption(result: dict[str, Any]) -> str:
    side = result.get("side_by_side")
    if side is None:
        return "Each run's ranking estimate, side by side (the runs share no estimator: each column names its own)"
    return f"Each model's {HEADERS.get(side, side)}, side by side"


def interaction_pairs(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Pair "a + b" -> run label -> its Shapley interaction (value, ci), None where the run lacks the pair:
    the runs' interaction matrices side by side."""
    out: dict[str, dict[str, dict[str, Any] | None]] = {}
    for label, summary in found.items():
        for pair in summary["pairs"]:
            key = " + ".join(sorted((pair["a"], pair["b"])))
            out.setdefault(key, {k: None for k in found})[label] = {"value": pair["shapley"], "ci": pair["shapley_ci"]}
    return out


def page(result: dict[str, Any], parts: list[Table] | None = None) -> str:
    labels = [run["label"] for run in result["runs"]]
    return html.render(html.Page(
        title=f"Comparison of {len(labels)} runs",
        intro=["95% bootstrap CIs over items, as each run computed them. Click a column header to sort."],
        tables=parts or tables(result),
        figures=_heatmaps(result.get("interactions") or {}),
        notes=[f"Note: {n}." for n in result["notes"]],
        records={f"Run record: {label}": record for label, record in result["records"].items() if record}))


def write(result: dict[str, Any], out: Path, record: dict[str, Any]) -> dict[str, Path]:
    """compare.md, compare.html, compare.json (the comparison with the run record) and run.json in ``out``: one
    bundle."""
    parts = tables(result)
    return write_bundle(out, Bundle("compare", record=record, summary={**result, "run": record},
                                    markdown=markdown(result, parts), html=page(result, parts)))


def _heatmaps(found: dict[str, dict[str, Any]]) -> list[str]:
    if not found:
        return []
    maps = "".join(f'<div>{heatmap_html(summary, table_id=f"interactions-{k + 1}", caption=label)}</div>'
                   for k, (label, summary) in enumerate(found.items()))
    return [f'<div class="side-by-side" style="display:flex;gap:2em;flex-wrap:wrap">{maps}</div>']
