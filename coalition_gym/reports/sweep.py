"""Several pools x protocols x tasks in one run, and the cross-setting summary.

A *setting* is a (pool, protocol) pair, as in the paper's (pool, method-family) analysis; its
observations are every (model, task) pair, so the solo-vs-compositional correlation of a setting
pools its tasks. Settings are then corrected together with Benjamini-Hochberg.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..agents.cache import GenerationCache
from ..agents.pools import check_pool_name, load_pool
from ..envs.protocols import make_protocol
from ..envs.system import System
from ..errors import ConfigError
from ..failures import FailureSummary
from ..records import RunRecord
from ..result_files import write_json, write_text
from ..settings_check import check_settings, setting
from ..tasks import make as make_task
from ..valuation.game import CoalitionGame
from ..valuation.stats import format_p, summarise_settings
from .leaderboard import FIELDS, EvalOptions, EvalReport, correlate, evaluate, write_report


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


@dataclass(frozen=True)
class SweepGrid:
    """What a sweep crosses: every pool x protocol x task, each evaluated with ``estimators`` on the first
    ``n_items`` test items."""

    pools: Sequence[str]
    protocols: Sequence[str]
    tasks: Sequence[str]
    estimators: Sequence[str]
    n_items: int


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs: ``seed`` (every evaluation's), ``cache_dir`` (one generation cache file per pool),
    ``alpha`` (the Benjamini-Hochberg level), ``progress`` bars and ``record_text`` (reply texts in the
    results files)."""

    seed: int = setting(0, doc="episode, bootstrap and permutation seed")
    cache_dir: Path | None = None
    alpha: float = setting(0.05, gt=0, le=0.5, doc="Benjamini-Hochberg false discovery rate")
    progress: bool = False
    record_text: bool = True
    gain_unit: str | None = None  # also each protocol's gain over cost-matched baselines, cost in this unit


    def __post_init__(self) -> None:
        check_settings(self, "sweep options")

def _gain_reports(pool: Any, grid: SweepGrid, cache: GenerationCache, out: Path, options: SweepOptions,
                  record: RunRecord) -> list[Any]:
    """Per task of ``grid``: every protocol against its cost-matched baselines (:mod:`.gain`), files under
    ``out/<pool>/gain/<task>``."""
    from . import gain_files
    from .gain import GainOptions, gain

    reports = []
    for task_name in grid.tasks:
        task = make_task(task_name, size=grid.n_items)
        systems = [System(make_protocol(p), task, pool, items=task.items("test")[:grid.n_items], cache=cache)
                   for p in grid.protocols]
        report = gain(systems, GainOptions(unit=options.gain_unit or "tokens", seed=options.seed,
                                           progress=options.progress, record_text=options.record_text))
        gain_files.write(report, out / _slug(pool.name) / "gain" / _slug(task_name), record.data)
        reports.append(report)
    return reports


def run_sweep(grid: SweepGrid, out: Path, options: SweepOptions = SweepOptions(), *,
              log: Callable[[str], None] = print, failures: FailureSummary | None = None,
              record: RunRecord | None = None) -> dict[str, Any]:
    """Evaluate every setting of ``grid`` into ``out`` (a folder per pool/protocol/task), then correlate
    solo and compositional strength per (pool, protocol) setting and correct the settings together."""
    pools, protocols, tasks, n_items = grid.pools, grid.protocols, grid.tasks, grid.n_items
    seed, cache_dir, alpha = options.seed, options.cache_dir, options.alpha
    record = record or RunRecord()
    for pool_name in pools:  # every name checked before the first setting runs
        check_pool_name(pool_name)
    for protocol_name in protocols:
        make_protocol(protocol_name)
    for task_name in tasks:
        make_task(task_name, size=n_items)
    if options.gain_unit is not None:
        from .baselines import check_unit
        from .gain import MIN_ITEMS

        check_unit(options.gain_unit)
        if n_items < MIN_ITEMS:
            raise ConfigError(f"the gain needs at least {MIN_ITEMS} items per task for a paired bootstrap CI; "
                              f"got {n_items}")
    gains: list[Any] = []
    out.mkdir(parents=True, exist_ok=True)
    settings: dict[str, dict[str, Any]] = {}
    failures = failures if failures is not None else FailureSummary()
    for pool_name in pools:
        pool = load_pool(pool_name)
        cache = GenerationCache(cache_dir / f"{_slug(pool_name)}.sqlite" if cache_dir else None)
        for protocol_name in protocols:
            key = f"{pool_name} / {protocol_name}"
            obs: list[dict[str, Any]] = []
            for task_name in tasks:
                task = make_task(task_name, size=n_items)
                system = System(make_protocol(protocol_name), task, pool, items=task.items("test")[:n_items],
                                cache=cache)
                game = CoalitionGame(system, seed=seed, progress=options.progress, record_text=options.record_text)
                report: EvalReport = evaluate(game, grid.estimators, EvalOptions(split="test"))
                write_report(report, out / _slug(pool_name) / protocol_name / _slug(task_name))
                failures.merge(report.game.failure_summary())
                main = report.results[report.primary]
                obs += [{"model": p, "task": task_name, "solo": float(report.solo[p]), "strength": float(main[p])}
                        for p in report.game.players]
                log(f"{key} | {task_name}: v(N)={report.game.value(report.game.players):.3f}")
            corr = correlate([o["solo"] for o in obs], [o["strength"] for o in obs], seed=seed)
            settings[key] = {"pool": pool_name, "protocol": protocol_name, "observations": obs, "correlation": corr,
                             "estimator": FIELDS[report.primary]}
        if options.gain_unit is not None:
            for g in _gain_reports(pool, grid, cache, out, options, record):
                gains.append(g)
                failures.merge(g.failures())
                log(f"{pool_name} | {g.task}: gain over cost-matched baselines computed")
        cache.close()
    testable = {k: s["correlation"]["spearman_p"] for k, s in settings.items()
                if s["correlation"]["spearman_p"] is not None}
    overall = summarise_settings(testable, alpha=alpha) if testable else {}
    undefined = [k for k in settings if k not in testable]
    if undefined:  # neither significant nor not: left out of the count, and said so
        note = (f"{len(undefined)} setting{'s' if len(undefined) != 1 else ''} left out, correlation undefined: "
                + "; ".join(f"{k} ({settings[k]['correlation']['method']})" for k in undefined))
        overall = {**overall, "undefined": undefined,
                   "sentence": "; ".join(s for s in (overall.get("sentence"), note) if s)}
    if options.gain_unit is not None:
        from .gain import gain_share

        overall = {**overall, "gain": gain_share(gains)}
    result = {"pools": list(pools), "protocols": list(protocols), "tasks": list(tasks), "n_items": n_items,
              "seed": seed, "alpha": alpha, "settings": settings, "summary": overall,
              "failures": failures.to_dict()}
    result["run"] = record.finish(seeds={"seed": seed})
    write_json(out / "sweep_summary.json", result)
    write_json(out / "run.json", result["run"])
    lines = ["| setting | n | Spearman | p | significant after BH |", "|---|---|---|---|---|"]
    per_setting = overall.get("settings", {}) if overall else {}
    for key, s in settings.items():
        c = s["correlation"]
        sig = per_setting.get(key, {}).get("significant")
        rho = "undefined" if c["spearman"] is None else f"{c['spearman']:.3f}"
        lines.append(f"| {key} | {c['n']} | {rho} | {format_p(c['spearman_p'])} | "
                     f"{'n/a' if sig is None else ('yes' if sig else 'no')} |")
    if overall.get("sentence"):
        lines += ["", overall["sentence"]]
    if "gain" in overall:
        lines += ["", "| protocol | settings | beats best cost-matched baseline (CI > 0) | share | beaten (CI < 0) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {name} | {e['settings']} | {e['beats']} | {e['share']:.0%} | {e['beaten']} |"
                  for name, e in overall["gain"]["per_protocol"].items()]
        lines += ["", f"Gain (cost in {overall['gain']['unit']}): {overall['gain']['sentence']}"]
    lines += failures.markdown()
    write_text(out / "sweep.md", "\n".join(lines) + "\n")
    return result
