"""Evaluate a pool under a protocol on a task and write the leaderboard files.

Files written by :func:`write_report` into the output folder: ``results.jsonl`` (one line per item
and coalition), ``summary.json``, ``run.json`` (the run record), ``leaderboard.md``, ``leaderboard.csv``,
``leaderboard.html`` (self-contained, sortable) and ``solo_vs_compositional.png``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, did_you_mean
from ..records import RunRecord, describe_pool, describe_task
from ..result_files import Bundle, write_bundle
from ..settings_check import check_settings, setting
from ..valuation.estimators import (
    ESTIMATORS,
    EXACT_LIMIT,
    ValuationResult,
    exact_limit_options,
    fit_to_pool,
    primary_estimator,
    valued_estimators,
)
from ..valuation.game import CoalitionGame
from ..valuation.interactions import Interactions
from ..valuation.sampling import default_budget
from ..valuation.stats import N_BOOT, Correlation, pearson, rescue_drag, spearman
from ..valuation.teams import best_team, best_team_sentence
from . import html
from .interaction_files import heatmap_html, heatmap_png, interaction_summary
from .table import Table
from .tables import FIELDS, correlation_sentence, leaderboard_rows, leaderboard_table, p_phrase


def capped_requests(backends: Any) -> int:
    """Requests whose new tokens a backend capped to fit its context (HF, vLLM), each model counted once."""
    seen: dict[int, int] = {}
    for gen in backends:
        while hasattr(gen, "inner"):  # WithSampling, CachedGenerator
            gen = gen.inner
        seen[id(gen)] = int(getattr(gen, "capped_requests", 0))
    return sum(seen.values())


def parse_estimators(spec: str) -> list[str]:
    """``--estimator``: a registered estimator (``register_estimator``), ``auto``, a comma-separated list of
    them, or ``all`` (every registered one that ``all`` includes)."""
    names = list(FIELDS) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in FIELDS and n != "auto"]
    if bad or not names:
        name = bad[0] if bad else spec
        raise ConfigError(f"unknown estimator {name!r}.{did_you_mean(name, [*FIELDS, 'auto', 'all'])} Use "
                          f"{', '.join(FIELDS)}, auto, a comma-separated list of them, or all")
    return names


def choose_shapley_estimator(game: CoalitionGame, budget_generations: int | None = None,
                             budget: int | None = None, probe: int | None = None, seed: int = 0,
                             exact_limit: int = EXACT_LIMIT) -> dict[str, Any]:
    """``auto``: exact Shapley when all 2^n coalitions are cheap in generations, else the sampling
    estimator. The full coalition and the singletons (which every report needs) are run first, then a
    probe of random other coalitions measures what one more coalition costs given what is cached
    (one-shot protocols: nothing, once every member has answered). Cheap means: within the generation
    budget when one is given; else within the coalition budget; else free, or no more coalitions than
    the sampling estimator's usual reach (10n)."""
    n = len(game.players)
    if n > exact_limit:
        return {"chose": "mc", "why": f"n={n} > {exact_limit} (the exact limit): exact enumeration is refused"}
    players = frozenset(game.players)
    game.evaluate([players] + [frozenset({p}) for p in game.players])
    rng = np.random.default_rng(seed)
    others = [m for m in range(1, 2 ** n - 1) if bin(m).count("1") > 1]
    picked = rng.choice(len(others), size=min(probe or n, len(others)), replace=False)
    coalitions = [frozenset(game.players[k] for k in range(n) if others[int(i)] >> k & 1) for i in picked]
    before = game.generations
    game.evaluate(coalitions)
    per = (game.generations - before) / max(1, len(coalitions))
    remaining = 2 ** n - 1 - game.coalitions_evaluated
    predicted = per * remaining
    facts = {"generations_so_far": game.generations, "generations_per_new_coalition": per,
             "predicted_generations_for_exact": predicted, "coalitions_left": remaining}
    need = f"exact needs about {predicted:.0f} more generations ({per:.2f} per coalition for {remaining} coalitions)"
    if budget_generations is not None:
        left = max(0, budget_generations - game.generations)
        cheap, why = predicted <= left, f"{need}; the generation budget leaves {left}"
    elif budget is not None:
        cheap, why = remaining <= budget, f"{need}; the coalition budget is {budget}"
    else:
        cheap = per == 0 or remaining <= 10 * n
        why = f"{need}; sampling would usually evaluate about {10 * n} coalitions"
    return {"chose": "shapley" if cheap else "mc", "why": why, **facts}


@dataclass
class EvalReport:
    game: CoalitionGame
    solo: ValuationResult
    results: dict[str, ValuationResult]
    requested: str
    wall_seconds: float
    correlation: dict[str, float | None] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)  # the run record (see coalition_gym.records)
    auto: dict[str, Any] | None = None  # what --estimator auto chose, and why
    best_team: dict[str, Any] | None = None  # --best-team K (see coalition_gym.valuation.teams)

    @property
    def primary(self) -> str:
        return primary_estimator(self.results)

    @property
    def interactions(self) -> Interactions | None:
        """The pairwise interactions, when ``interactions`` was among the estimators."""
        found = self.results["interactions"].extras.get("interactions") if "interactions" in self.results else None
        return found if isinstance(found, Interactions) else None

    def shapley_values(self) -> ValuationResult:
        """The best Shapley estimate computed: exact, sampled, the interactions' own, else the primary one."""
        for name in ("shapley", "mc"):
            if name in self.results:
                return self.results[name]
        found = self.interactions
        return found.values if found is not None else self.results[self.primary]


def correlate(x: Sequence[float], y: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """Spearman and Pearson with exact/permutation p-values (permutations drawn with the run's
    ``seed``); None, with the reason in ``method``, where they are undefined: fewer than 3 models, or a
    constant column (every model equally strong alone or in the system)."""
    undefined = {"spearman": None, "spearman_p": None, "pearson": None, "pearson_p": None, "n": len(x)}
    if len(x) < 3:
        return {**undefined, "method": "undefined for fewer than 3 models"}
    s: Correlation = spearman(x, y, seed=seed)
    p: Correlation = pearson(x, y, seed=seed)
    if not (math.isfinite(s.statistic) and math.isfinite(p.statistic)):
        which = "solo scores" if len(set(x)) == 1 else "compositional strengths"
        return {**undefined, "method": f"undefined: the {which} are all equal"}
    return {"spearman": s.statistic, "spearman_p": s.p_value, "pearson": p.statistic, "pearson_p": p.p_value,
            "n": len(x), "method": s.method}


@dataclass(frozen=True)
class EvalOptions:
    """How :func:`evaluate` runs the estimators: ``n_boot`` bootstrap resamples for the CIs; ``mc`` the
    sampling estimator's settings (tolerance, budget, budget_generations, sampler); ``budget_generations``
    what ``auto`` may spend; ``requested`` the estimator spec as the user gave it (for the report);
    ``split`` where the game's items came from (for the run record)."""

    n_boot: int = setting(N_BOOT, ge=2, doc="bootstrap resamples over items")
    mc: Mapping[str, Any] | None = None
    budget_generations: int | None = setting(None, ge=1, doc="generations the auto estimator may spend")
    requested: str | None = None
    split: str | None = None
    best_team: int | None = setting(None, ge=1, doc="K: report the best coalition of K members next to the top K "
                                    "by Shapley")
    exact_limit: int = setting(EXACT_LIMIT, ge=1, doc="the most members exact estimators enumerate 2^n coalitions for")


    def __post_init__(self) -> None:
        check_settings(self, "eval options")

def evaluate(game: CoalitionGame, estimators: Sequence[str], options: EvalOptions = EvalOptions(),
             record: RunRecord | None = None) -> EvalReport:
    """Value the players of ``game`` with every estimator asked for (``"auto"``: exact Shapley or the
    sampling estimator, whichever is cheap, see :func:`choose_shapley_estimator`), and their solo strength.
    The game is built by the caller: ``CoalitionGame(system, seed=...)``, or the game of a method that
    trains its coalitions (``TrainedCoalitionGame``). Its seed seeds the estimators and bootstraps too.
    ``record`` (started by the caller; one is started here if None) becomes the report's run record. The
    game is closed when done."""
    record = record or RunRecord()
    start = time.perf_counter()
    seed, n_boot, mc = game.seed, options.n_boot, dict(options.mc or {})
    auto = None
    try:  # before any generation: what cannot take this many players is refused or (in "all") left out
        estimators, _ = fit_to_pool(estimators, len(game.players), set(valued_estimators()) <= set(estimators),
                                    options.exact_limit)
    except ConfigError:
        game.close()
        raise
    if len(game.players) < 2 and "interactions" in estimators:  # a lone member has no pair
        if not set(FIELDS) <= set(estimators):  # asked for by name, not as part of "all"
            game.close()
            raise ConfigError(f"pairwise interactions need at least 2 members; the coalition is {list(game.players)}")
        estimators = [e for e in estimators if e != "interactions"]
    try:
        if "auto" in estimators:
            auto = choose_shapley_estimator(game, options.budget_generations or mc.get("budget_generations"),
                                            budget=mc.get("budget"), seed=seed, exact_limit=options.exact_limit)
            estimators = list(dict.fromkeys(auto["chose"] if e == "auto" else e for e in estimators))
        known = _known_coalitions(game, estimators, options.exact_limit)
        if isinstance(game, CoalitionGame):  # a fixed total: a true share and an ETA
            game.plan(_planned(game, estimators, known, mc, options.exact_limit))
        game.evaluate(known)  # one batch
        results = {}
        for name in estimators:
            kwargs = dict(mc) if name in ("mc", "interactions") else {}  # the same stop rules and budgets
            kwargs.update(exact_limit_options(name, options.exact_limit))
            results[name] = ESTIMATORS[name](game, n_boot=n_boot, seed=seed, **kwargs)
        solo = ESTIMATORS["solo"](game, n_boot=n_boot, seed=seed)
        results = _with_interaction_shapley(results)
    finally:
        game.close()
    report = EvalReport(game, solo, results, options.requested or ",".join(estimators), time.perf_counter() - start)
    report.correlation = correlate(list(solo.values), list(results[report.primary].values), seed=seed)
    report.auto = auto
    if options.best_team is not None:
        found = report.interactions
        report.best_team = best_team(game, options.best_team, report.shapley_values(),
                                     found.shapley if found is not None else None)
        report.best_team["sentence"] = best_team_sentence(report.best_team)
    report.record = record.finish(pool=describe_pool(game.pool, game.players),
                                  task=describe_task(game.task, options.split),
                                  protocol={"name": game.protocol_name, "settings": game.protocol_settings()},
                                  seeds={"seed": seed, "bootstrap": n_boot},
                                  items=[it.id for it in game.items], dev_scores=game.dev.record())
    return report


def _with_interaction_shapley(results: dict[str, ValuationResult]) -> dict[str, ValuationResult]:
    """The interactions come with the players' Shapley values from the same coalitions (exact, or sampled):
    when no Shapley estimator was asked for, they join the results as ``shapley`` (exact) or ``mc`` (sampled),
    so the leaderboard ranks by them and shows the column a best-team line or a comparison refers to. The
    results in display order."""
    found = results["interactions"].extras.get("interactions") if "interactions" in results else None
    if isinstance(found, Interactions) and not {"shapley", "mc"} & set(results):
        name = "shapley" if found.exact else "mc"
        results = {**results, name: dataclasses.replace(found.values, estimator=FIELDS[name],
                                                        extras={**found.values.extras, "from": "interactions"})}
    return {name: results[name] for name in sorted(results, key=list(ESTIMATORS).index)}


def _known_coalitions(game: CoalitionGame, estimators: Sequence[str], exact_limit: int = EXACT_LIMIT
                      ) -> list[frozenset]:
    """The coalitions the exact estimators will ask for (Monte Carlo's depend on its draws)."""
    players = frozenset(game.players)
    if {"shapley", "banzhaf", "interactions"} & set(estimators) and len(players) <= exact_limit:  # above it they refuse
        return [frozenset(c) for k in range(1, len(players) + 1) for c in itertools.combinations(game.players, k)]
    wanted = [players] + ([players - {p} for p in players] if "loo" in estimators else [])
    if game.solo_game() is game:
        wanted += [frozenset({p}) for p in players]
    return wanted


def _planned(game: CoalitionGame, estimators: Sequence[str], known: Sequence[frozenset],
             mc: Mapping[str, Any], exact_limit: int = EXACT_LIMIT) -> int:
    """How many coalitions the estimators will run at most: the known ones plus a sampling estimator's budget
    (given or default), never more than every coalition (the bound when sampling has no budget: up to
    the exact limit its tolerance usually stops it sooner, so the bar's ETA is then an upper bound)."""
    n = len(game.players)
    sampled = "mc" in estimators or ("interactions" in estimators and n > exact_limit)
    budget, _ = default_budget(n, mc.get("budget"), mc.get("budget_generations"))
    extra = (2 ** n if budget is None else budget) if sampled else 0
    return min(len(set(known)) + extra, 2 ** n - 1)


def leaderboard(report: EvalReport) -> list[dict[str, Any]]:
    """Rows ranked by the primary compositional estimate, with every computed estimator (see tables)."""
    return leaderboard_rows(report.game.players, report.solo, report.results, report.primary)


def table(report: EvalReport) -> Table:
    """The leaderboard table, built once: the terminal, leaderboard.md, .csv and .html render it."""
    return leaderboard_table(leaderboard(report), report.primary)


def summary(report: EvalReport) -> dict[str, Any]:
    game = report.game
    training = game.training_summary()
    full = game.per_item(game.players)
    models = []
    for k, p in enumerate(game.players):
        # rescue: the full system right where the model alone was wrong; drag: the reverse
        moves = rescue_drag(report.solo.per_item[k], full)
        row: dict[str, Any] = {"name": p, "solo": float(report.solo.values[k]),
                               "solo_ci": [float(report.solo.ci_low[k]), float(report.solo.ci_high[k])],
                               "rescue": moves.rescue, "drag": moves.drag}
        for name, res in report.results.items():
            row[FIELDS[name]] = float(res.values[k])
            row[f"{FIELDS[name]}_ci"] = [float(res.ci_low[k]), float(res.ci_high[k])]
            row[f"{FIELDS[name]}_stderr"] = float(res.stderr[k])
        models.append(row)
    return {
        "protocol": game.protocol_name, "protocol_settings": game.protocol_settings(), "task": game.task.name,
        "pool": list(game.players), "pool_name": game.pool.name, "estimator": report.requested,
        "primary_estimator": FIELDS[report.primary], "n_items": game.n_items, "seed": game.seed,
        "full_coalition_score": game.value(game.players), "models": models,
        "correlation": report.correlation,
        "cost": {"coalitions_evaluated": game.coalitions_evaluated
                 + (game.solo_game().coalitions_evaluated if game.solo_game() is not game else 0),
                 "generations": game.generations, "cache_hits": game.cache_hits,
                 "dev_generations": game.dev.generated,
                 "capped_new_tokens": capped_requests(game.pool.backends().values()),
                 "backend_calls": game.stats.backend_calls,
                 **({k: v for k, v in training.items() if not isinstance(v, list)} if training else {})},
        "training": training,
        "dev_scores": game.dev.record(),
        "cache": game.cache.status, "executor": game.executor.name, "failed_episodes": game.failures,
        "failures": game.failure_summary().to_dict(),
        "wall_seconds": report.wall_seconds,
        "mc": report.results["mc"].extras if "mc" in report.results else None,
        "auto": report.auto,
        "interactions": interaction_summary(report.interactions) if report.interactions is not None else None,
        "best_team": report.best_team,
        "run": report.record,
    }


def leaderboard_markdown(report: EvalReport, rows: Table) -> str:
    game = report.game
    label = FIELDS[report.primary]
    lines = [f"# {game.protocol_name} on {game.task.name}, pool {game.pool.name} ({game.n_items} items)", "",
             f"Full coalition: {game.value(game.players):.3f}. Ranked by {label} (ties share a rank); "
             "95% bootstrap CIs over items.", ""]
    training = game.training_summary()
    if training:
        lines += [training_sentence(training), ""]
    lines += rows.to_markdown()
    lines += ["", correlation_sentence(report.correlation, label)]
    lines += interaction_lines(report)
    lines += game.failure_summary().markdown()
    return "\n".join(lines) + "\n"


def interaction_lines(report: EvalReport) -> list[str]:
    """The interactions sentence and the best-team sentence, each after a blank line (none when absent)."""
    lines = []
    if report.interactions is not None:
        lines += ["", interaction_summary(report.interactions)["sentence"] + " Heatmap: interactions.png."]
    if report.best_team is not None:
        lines += ["", report.best_team["sentence"]]
    return lines


def plot(report: EvalReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = report.results[report.primary]
    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=120)
    ax.errorbar(report.solo.values, main.values,
                xerr=[report.solo.values - report.solo.ci_low, report.solo.ci_high - report.solo.values],
                yerr=[main.values - main.ci_low, main.ci_high - main.values], fmt="o", capsize=3)
    for k, p in enumerate(report.game.players):
        ax.annotate(p, (report.solo.values[k], main.values[k]), textcoords="offset points", xytext=(5, 5))
    ax.axhline(0.0, color="grey", lw=0.5)
    corr = report.correlation
    title = f"{report.game.protocol_name} on {report.game.task.name}"
    if corr.get("spearman") is not None:
        title += f"\nSpearman {corr['spearman']:.2f} (p {p_phrase(corr['spearman_p'])})"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("solo strength v({i})")
    ax.set_ylabel(f"compositional strength ({FIELDS[report.primary]})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(report: EvalReport, out: Path) -> dict[str, Path]:
    """The leaderboard's files in ``out`` (see the module doc), one bundle: part -> path."""
    rows = table(report)
    games = [report.game] + ([report.game.solo_game()] if report.game.solo_game() is not report.game else [])
    figures = {}
    if report.interactions is not None:
        found = interaction_summary(report.interactions)
        figures["interactions.png"] = lambda path: heatmap_png(
            found, path, f"{report.game.protocol_name} on {report.game.task.name}:\npairwise Shapley interactions")
    return write_bundle(out, Bundle(
        "leaderboard", record=report.record, summary=summary(report), markdown=leaderboard_markdown(report, rows),
        csv=rows, png=lambda path: plot(report, path), html=lambda png: leaderboard_html(report, rows, png),
        results=({"protocol": game.protocol_name, **record} for game in games
                 for records in game.records.values() for record in records),
        figures=figures, names={"json": "summary.json", "png": "solo_vs_compositional.png"}))


def training_sentence(training: dict[str, Any]) -> str:
    untrained = len(training["valued_without_training"])
    return (f"Training inside the game: {training['trainings']} coalitions trained "
            f"({training['reused_trainings']} more read back from the checkpoint store), "
            f"{training['training_seconds']:.0f} s, {training['training_generations']} generations while training; "
            f"{untrained} coalitions worth 0 without training (too small to train, or nothing trainable).")


def leaderboard_html(report: EvalReport, rows: Table, png: bytes | None = None) -> str:
    """The leaderboard as one self-contained page: sortable table, plot, notes, run record."""
    game = report.game
    label = FIELDS[report.primary]
    failures = game.failure_summary()
    page = html.Page(
        title=f"{game.protocol_name} on {game.task.name}, pool {game.pool.name} ({game.n_items} items)",
        intro=[f"Full coalition: {game.value(game.players):.3f}. Ranked by {label} (ties share a rank); 95% "
               "bootstrap CIs over items. Click a column header to sort."],
        tables=[rows], png=png,
        figures=[heatmap_html(interaction_summary(report.interactions))] if report.interactions is not None else [],
        notes=[correlation_sentence(report.correlation, label)]
        + ([report.best_team["sentence"]] if report.best_team is not None else [])
        + (["Failed episodes: " + "; ".join(line.strip() for line in failures.lines())] if failures.failed else []),
        records={"Run record": report.record})
    return html.render(page)


def format_leaderboard(report: EvalReport) -> str:
    """The leaderboard as a terminal table (a string; the caller prints it)."""
    return table(report).to_text()
