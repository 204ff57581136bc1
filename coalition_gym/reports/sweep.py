"""Several pools x protocols x tasks in one run, and the cross-setting summary.

A *setting* is a (pool, protocol) pair, as in the paper's (pool, method-family) analysis; its
observations are every (model, task) pair, so the solo-vs-compositional correlation of a setting
pools its tasks. Settings are then corrected together with Benjamini-Hochberg.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..agents.cache import GenerationCache
from ..agents.pools import check_pool_name, load_pool
from ..envs.protocols import make_protocol
from ..envs.system import System, SystemSpec
from ..errors import ConfigError
from ..failures import FailureSummary
from ..records import RunRecord
from ..result_files import Bundle, write_bundle
from ..settings_check import check_settings, setting
from ..tasks import make as make_task
from ..valuation.game import CoalitionGame
from ..valuation.stats import format_p, smallest_p, summarise_settings
from .leaderboard import FIELDS, EvalOptions, EvalReport, correlate, evaluate, write_report
from .table import Column, Table


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

    seed: int = setting(0, ge=0, doc="episode, bootstrap and permutation seed")
    cache_dir: Path | None = None
    alpha: float = setting(0.05, gt=0, le=0.5, doc="Benjamini-Hochberg false discovery rate")
    progress: bool = False
    record_text: bool = True
    gain_unit: str | None = None  # also each protocol's gain over cost-matched baselines, cost in this unit

    def __post_init__(self) -> None:
        check_settings(self, "sweep options")


@dataclass
class SweepSetting:
    """One (pool, protocol) setting: its observations (one per model and task: solo and compositional strength),
    their correlation and the estimator the strengths come from."""

    pool: str
    protocol: str
    observations: list[dict[str, Any]]
    correlation: dict[str, Any]
    estimator: str

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "protocol": self.protocol, "observations": self.observations,
                "correlation": self.correlation, "estimator": self.estimator}


@dataclass
class SweepReport:
    """A sweep's outcome: every setting (``"<pool> / <protocol>"`` -> :class:`SweepSetting`), the cross-setting
    ``summary`` (Benjamini-Hochberg over the settings' Spearman p-values; with ``gain``, each protocol's share of
    settings beating its cost-matched baselines), the failures and the run record. The per-setting leaderboards
    and gain reports are written as they finish (:func:`run_sweep`)."""

    grid: SweepGrid
    seed: int
    alpha: float
    settings: dict[str, SweepSetting]
    summary: dict[str, Any]
    failures: FailureSummary
    record: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """What sweep_summary.json holds."""
        return {"pools": list(self.grid.pools), "protocols": list(self.grid.protocols), "tasks": list(self.grid.tasks),
                "n_items": self.grid.n_items, "seed": self.seed, "alpha": self.alpha,
                "settings": {k: s.to_dict() for k, s in self.settings.items()}, "summary": self.summary,
                "failures": self.failures.to_dict(), "run": self.record}

    def table(self) -> Table:
        """One row per setting: observations, Spearman, its p-value, significant after Benjamini-Hochberg."""
        per_setting = self.summary.get("settings", {})
        rows = []
        for key, s in self.settings.items():
            c = s.correlation
            sig = per_setting.get(key, {}).get("significant")
            too_few = key in self.summary.get("too_few", {})
            rows.append({"setting": key, "n": c["n"],
                         "spearman": "undefined" if c["spearman"] is None else f"{c['spearman']:.3f}",
                         "p": format_p(c["spearman_p"]),
                         "significant": "too few to test" if too_few else "n/a" if sig is None
                         else ("yes" if sig else "no")})
        return Table([Column("setting"), Column("n", kind="int"), Column("spearman", "Spearman"), Column("p"),
                      Column("significant", "significant after BH")], rows, id="sweep")

    def gain_table(self) -> Table | None:
        """Per protocol: in how many settings it beats its best cost-matched baseline (None without ``gain``)."""
        if "gain" not in self.summary:
            return None
        return Table([Column("protocol"), Column("settings", kind="int"),
                      Column("beats", "beats best cost-matched baseline (CI > 0)", "int"),
                      Column("share", "share", "number", ".0%"), Column("beaten", "beaten (CI < 0)", "int")],
                     [{"protocol": name, **e} for name, e in self.summary["gain"]["per_protocol"].items()], id="gain")

    def markdown(self) -> str:
        """sweep.md: the settings table, the summary sentence, the gain table and the failures."""
        lines = self.table().to_markdown()
        if self.summary.get("sentence"):
            lines += ["", self.summary["sentence"]]
        gains = self.gain_table()
        if gains is not None:
            lines += [""] + gains.to_markdown()
            lines += ["", f"Gain (cost in {self.summary['gain']['unit']}): {self.summary['gain']['sentence']}"]
        lines += self.failures.markdown()
        return "\n".join(lines) + "\n"


def _gain_reports(pool: Any, grid: SweepGrid, cache: GenerationCache,
                  options: SweepOptions) -> Iterator[tuple[str, Any]]:
    """Per task of ``grid``: the task's name and every protocol against its cost-matched baselines (:mod:`.gain`)."""
    from .gain import GainOptions, gain

    for task_name in grid.tasks:
        task = make_task(task_name, size=grid.n_items)
        systems = [System.build(SystemSpec(p, task, pool, split="test", n_items=grid.n_items), cache=cache)
                   for p in grid.protocols]
        yield task_name, gain(systems, GainOptions(unit=options.gain_unit or "tokens", seed=options.seed,
                                                   progress=options.progress, record_text=options.record_text))


def _check_grid(grid: SweepGrid, options: SweepOptions) -> None:
    """Every name checked before the first setting runs."""
    for pool_name in grid.pools:
        check_pool_name(pool_name)
    for protocol_name in grid.protocols:
        make_protocol(protocol_name)
    for task_name in grid.tasks:
        make_task(task_name, size=grid.n_items)
    if options.gain_unit is not None:
        from .baselines import check_unit
        from .gain import MIN_ITEMS

        check_unit(options.gain_unit)
        if grid.n_items < MIN_ITEMS:
            raise ConfigError(f"the gain needs at least {MIN_ITEMS} items per task for a paired bootstrap CI; "
                              f"got {grid.n_items}")


#: receives each finished part of a sweep: its folder (relative to the sweep's) and its report (an EvalReport,
#: or a GainReport under ``<pool>/gain/<task>``)
OnPart = Callable[[str, Any], None]


def sweep(grid: SweepGrid, options: SweepOptions = SweepOptions(), *, log: Callable[[str], None] = print,
          failures: FailureSummary | None = None, record: RunRecord | None = None,
          on_part: OnPart | None = None) -> SweepReport:
    """Evaluate every setting of ``grid``, then correlate solo and compositional strength per (pool, protocol)
    setting and correct the settings together. Computes only: ``on_part(folder, report)`` receives each
    leaderboard and gain report as it finishes (:func:`run_sweep` writes them)."""
    _check_grid(grid, options)
    record = record or RunRecord()
    settings: dict[str, SweepSetting] = {}
    gains: list[Any] = []
    failures = failures if failures is not None else FailureSummary()
    for pool_name in grid.pools:
        pool = load_pool(pool_name)
        cache = GenerationCache(options.cache_dir / f"{_slug(pool_name)}.sqlite" if options.cache_dir else None)
        for protocol_name in grid.protocols:
            key = f"{pool_name} / {protocol_name}"
            obs: list[dict[str, Any]] = []
            for task_name in grid.tasks:
                task = make_task(task_name, size=grid.n_items)
                system = System.build(SystemSpec(protocol_name, task, pool, split="test", n_items=grid.n_items),
                                      cache=cache)
                game = CoalitionGame(system, seed=options.seed, progress=options.progress,
                                     record_text=options.record_text)
                report: EvalReport = evaluate(game, grid.estimators, EvalOptions(split="test"))
                if on_part is not None:
                    on_part(f"{_slug(pool_name)}/{protocol_name}/{_slug(task_name)}", report)
                failures.merge(report.game.failure_summary())
                main = report.results[report.primary]
                obs += [{"model": p, "task": task_name, "solo": float(report.solo[p]), "strength": float(main[p])}
                        for p in report.game.players]
                log(f"{key} | {task_name}: v(N)={report.game.value(report.game.players):.3f}")
            corr = correlate([o["solo"] for o in obs], [o["strength"] for o in obs], seed=options.seed)
            settings[key] = SweepSetting(pool_name, protocol_name, obs, corr, FIELDS[report.primary])
        if options.gain_unit is not None:
            for task_name, g in _gain_reports(pool, grid, cache, options):
                if on_part is not None:
                    on_part(f"{_slug(pool.name)}/gain/{_slug(task_name)}", g)
                gains.append(g)
                failures.merge(g.failures())
                log(f"{pool_name} | {g.task}: gain over cost-matched baselines computed")
        cache.close()
    return SweepReport(grid, options.seed, options.alpha, settings, _summary(settings, gains, options), failures,
                       record.finish(seeds={"seed": options.seed}))


def _summary(settings: dict[str, SweepSetting], gains: list[Any], options: SweepOptions) -> dict[str, Any]:
    undefined = [k for k, s in settings.items() if s.correlation["spearman_p"] is None]
    too_few = {k: smallest_p(s.correlation["n"]) for k, s in settings.items()
               if k not in undefined and smallest_p(s.correlation["n"]) > options.alpha}
    testable = {k: s.correlation["spearman_p"] for k, s in settings.items() if k not in undefined and k not in too_few}
    overall = summarise_settings(testable, alpha=options.alpha) if testable else {}
    notes = [overall.get("sentence")]
    if too_few:  # never significant whatever the data: not a finding, left out of the count, and said so
        notes.append(f"{_settings(len(too_few))} left out, too few observations for a test at alpha="
                     f"{options.alpha:g}: " + "; ".join(f"{k} (n={settings[k].correlation['n']}: the smallest "
                                                        f"possible p is {format_p(p)})" for k, p in too_few.items()))
    if undefined:  # neither significant nor not: left out of the count, and said so
        notes.append(f"{_settings(len(undefined))} left out, correlation undefined: "
                     + "; ".join(f"{k} ({settings[k].correlation['method']})" for k in undefined))
    if too_few or undefined:
        overall = {**overall, "undefined": undefined, "too_few": too_few, "sentence": "; ".join(n for n in notes if n)}
    if options.gain_unit is not None:
        from .gain import gain_share

        overall = {**overall, "gain": gain_share(gains)}
    return overall


def _settings(k: int) -> str:
    return f"{k} setting{'s' if k != 1 else ''}"


def write_sweep(report: SweepReport, out: Path) -> dict[str, Path]:
    """sweep_summary.json, sweep.md and run.json in ``out``: one bundle."""
    return write_bundle(out, Bundle("sweep", record=report.record, summary=report.to_dict(),
                                    markdown=report.markdown(), names={"json": "sweep_summary.json"}))


def run_sweep(grid: SweepGrid, out: Path, options: SweepOptions = SweepOptions(), *,
              log: Callable[[str], None] = print, failures: FailureSummary | None = None,
              record: RunRecord | None = None) -> SweepReport:
    """:func:`sweep` into ``out``: a leaderboard folder per pool/protocol/task and a gain folder per pool/task,
    written as each finishes, then the sweep's own files (:func:`write_sweep`)."""
    record = record or RunRecord()

    def write_part(folder: str, part: Any) -> None:
        if isinstance(part, EvalReport):
            write_report(part, out / folder)
        else:
            from . import gain_files

            gain_files.write(part, out / folder, record.data)

    report = sweep(grid, options, log=log, failures=failures, record=record, on_part=write_part)
    write_sweep(report, out)
    return report
