"""What each ``cgym`` subcommand does, once its options are parsed and checked (see parser.py)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..errors import ConfigError
from ..failures import FailureSummary, verdict
from ..records import describe_pool, describe_task
from ..result_files import write_run_record

_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are read as YAML scalars (2 -> int, none -> None, true -> bool), and
    ``1e-4`` is a number (YAML 1.1 reads it as text)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        value = yaml.safe_load(raw)
        out[key] = float(value) if isinstance(value, str) and _EXPONENT.fullmatch(value) else value
    return out


def cmd_envs(args: argparse.Namespace) -> int:
    from ..envs.registration import describe_envs

    width = max(len(i) for i, _ in describe_envs())
    for env_id, text in describe_envs():
        print(f"{env_id:<{width}}  {text}")
    return 0


def cmd_protocols(args: argparse.Namespace) -> int:
    import dataclasses

    from ..envs.protocols import PROTOCOLS
    from ..envs.registration import ENV_IDS
    from ..settings_check import describe_setting

    env_of = {protocol: env_id for env_id, protocol in ENV_IDS.items()}
    for name, cls in PROTOCOLS.items():
        print(f"{name}  ({env_of.get(name, 'no env id')})\n  {cls.description}")
        defaults = cls().settings()
        settings = ", ".join(describe_setting(f, defaults[f.name]) for f in dataclasses.fields(cls)
                             if f.name in defaults)
        print(f"  settings: {settings}")
        if cls.helper_fields:
            print(f"  fixed helpers (never members): {', '.join(cls.helper_fields)}")
        if cls.min_members > 1:
            print(f"  needs at least {cls.min_members} members")
    _print_coalition_training()
    print("Set any of them with --set KEY=VALUE (cgym run/eval), protocol.KEY=VALUE (cgym train) or as "
          "keywords of gym.make.")
    return 0


def _print_coalition_training() -> None:
    """The coalition-training recipes: no protocols (no episodes, no env id), valued by `cgym eval`."""
    import dataclasses

    from ..settings_check import describe_setting
    from ..training.collaborative.settings import make_coalition_settings
    from ..training.recipes import RECIPES

    coalition = [r for r in RECIPES.values() if r.kind == "coalition"]
    if not coalition:
        return
    print("\ncoalition training (trains copies of its members first: valued by `cgym eval --protocol NAME`, "
          "training inside; no environment)")
    for recipe in coalition:
        settings = make_coalition_settings(recipe.name)
        values = settings.settings()
        fields = [*dataclasses.fields(settings.evaluation), *dataclasses.fields(settings)]
        print(f"{recipe.name}  (no env id)\n  {recipe.description}")
        print(f"  settings: {', '.join(describe_setting(f, values[f.name]) for f in fields if f.name in values)}")
        print(f"  needs at least {settings.min_members} members")


def cmd_pools(args: argparse.Namespace) -> int:
    from ..agents.adversaries import REGISTERED_ADVERSARIES
    from ..agents.pools import BACKENDS, POOL_PRESETS

    for name, preset in POOL_PRESETS.items():
        print(f"{name}\n  {preset.description}")
        if preset.summary is not None:
            print(f"  {preset.summary(name)}")
    print("Or a YAML/JSON pool file mixing backends (see docs/evaluate/models.md); each member's backend is one of:")
    for kind, backend in BACKENDS.items():
        needs = " (needs model)" if backend.needs_model else ""
        print(f"  {kind}{needs}: options {backend.describe_options() or 'none'}")
    print("Adversaries (cgym robustness --adversary NAME; the simulated ones also as `profile: NAME` in pool files):")
    for name, (_, about) in REGISTERED_ADVERSARIES.items():
        print(f"  {name}: {about}")
    return 0


def cmd_estimators(args: argparse.Namespace) -> int:
    from ..valuation.estimators import ESTIMATORS
    from ..valuation.sampling import AUTO_RULE, SAMPLER_CLASSES

    print("Estimators (cgym eval --estimator NAME[,NAME...] | auto | all); the leaderboard is ranked by the "
          "first computed of: " + ", ".join(sorted((n for n, e in ESTIMATORS.items() if e.in_all),
                                                   key=lambda n: ESTIMATORS[n].rank)))
    for name, estimator in ESTIMATORS.items():
        field = "" if estimator.field == name else f" (column {estimator.field})"
        print(f"  {name}{field}{'' if estimator.in_all else ' (always computed)'}: {estimator.description}")
    print(f"Samplers of mc (cgym eval --sampler NAME; auto: {AUTO_RULE}):")
    for name, cls in SAMPLER_CLASSES.items():
        print(f"  {name}{': ' + cls.description if cls.description else ''}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ..envs.registration import protocol_of
    from ..envs.system import SystemSpec
    from ..reports.episodes import EpisodeRunOptions, run_env
    from ..training.recipes import refuse_not_episodic

    refuse_not_episodic(args.env_id)  # a coalition-training recipe: say what it is
    spec = SystemSpec(protocol_of(args.env_id), args.task, args.pool, args.members.split(",") if args.members else None,
                      args.split, {"size": args.episodes if args.size is None else args.size, "seed": args.task_seed},
                      _settings(args.set))
    run = run_env(spec, EpisodeRunOptions(episodes=args.episodes, seed=args.seed, n_boot=args.bootstrap,
                                          progress=True, record_text=not args.no_text))
    print(run.sentence(args.env_id))
    summary = {"env_id": args.env_id, **run.summary()}
    summary["run"] = args.record.finish(**run.run_record(args.split),
                                        seeds={"seed": args.seed, "task_seed": args.task_seed})
    if args.out:
        print(f"wrote {', '.join(str(p) for p in run.write(Path(args.out), summary))}")
    return verdict(run.failures(), args.max_failures, _say)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..envs.system import SystemSpec
    from ..integrations.serve_checks import check_served_names, listen_socket
    from ..integrations.serve_options import ServeOptions

    task_kwargs = {"seed": args.task_seed, **({"size": args.size} if args.size is not None else {})}
    members, settings = args.members.split(",") if args.members else None, _settings(args.set)
    protocol = check_served_names(args.env_id, args.pool, args.task, task_kwargs, members, settings)  # before imports
    spec = SystemSpec(protocol, args.task, args.pool, members, args.split, task_kwargs, settings)
    options = ServeOptions(host=args.host, port=args.port, token=args.token, max_sessions=args.max_sessions,
                           idle_timeout_s=args.idle_timeout, policy_style=args.policy_style, env_id=args.env_id,
                           report_every_s=args.report_every, batch_wait_ms=args.batch_wait_ms,
                           model_process=args.model_process)
    if args.openenv_files:
        from ..integrations.openenv_files import write_openenv_files

        written = write_openenv_files(args.openenv_files, spec, options, overwrite=args.overwrite)
        print(f"wrote {', '.join(str(p) for p in written)}")
        return 0
    sock = listen_socket(options.host, options.port)  # a busy port or a bad host: refused before the System is built
    from ..integrations.openenv_server import serve

    serve(spec, options, ready=lambda url: print(f"serving {args.env_id} (OpenEnv) at {url}: /health, /schema, "
                                                 f"/metrics, /ws{'; bearer token required' if options.token else ''}",
                                                 flush=True), sock=sock)
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _wrote(paths: dict[str, Path]) -> None:
    print(f"wrote {', '.join(str(p) for p in paths.values())}")


def _open_cache(folder: str | None, pool_name: str):
    from ..agents.cache import GenerationCache

    if folder is None:
        return GenerationCache(None)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in pool_name)
    return GenerationCache(Path(folder) / f"{slug}.sqlite")


def cmd_eval(args: argparse.Namespace) -> int:
    from ..agents.pools import load_pool
    from ..envs.executors import make_executor
    from ..envs.system import SystemSpec
    from ..reports.games import GameOptions, coalition_game, trains_coalitions
    from ..reports.leaderboard import (
        EvalOptions,
        evaluate,
        format_leaderboard,
        interaction_lines,
        parse_estimators,
        training_sentence,
        write_report,
    )
    from ..reports.tables import FIELDS, correlation_sentence
    from ..training.collaborative import TrainedCoalitionGame
    from ..training.recipes import recipe_names
    from ..valuation.estimators import EXACT_LIMIT, exact_limit_options, fit_to_pool, stop_sentence
    from ..valuation.exact import enumeration_cost
    from ..valuation.sampling import check_sampler

    estimators = parse_estimators(args.estimator)
    check_sampler(args.sampler)
    if args.save_trained and not trains_coalitions(args.protocol):
        raise ConfigError(f"--save-trained keeps members trained by a coalition-training recipe "
                          f"({', '.join(recipe_names('coalition'))}); {args.protocol!r} trains nothing")
    pool = load_pool(args.pool)
    members = args.members.split(",") if args.members else pool.member_names
    if args.best_team is not None and args.best_team > len(members):
        raise ConfigError(f"--best-team {args.best_team}: a team has at most {len(members)} members (the pool's "
                          f"{', '.join(members)})")
    spec = SystemSpec(args.protocol, args.task, pool, members, args.split, {"size": args.items, "seed": args.task_seed},
                      _settings(args.set), n_items=args.items)
    estimators, fitted = fit_to_pool(estimators, len(members), args.estimator == "all", args.exact_limit)
    if fitted:  # refused or left out before any work
        print(fitted)
    if len(members) > EXACT_LIMIT and any(exact_limit_options(e, args.exact_limit) for e in estimators):
        print(f"exact enumeration of {len(members)} members: {enumeration_cost(len(members))} x {args.items} items")
    cache = _open_cache(args.cache, pool.name)
    mc = {"tolerance": args.mc_tolerance, "budget": args.mc_budget, "budget_generations": args.mc_budget_generations,
          "sampler": args.sampler}
    executor = make_executor(args.executor, address=args.address, num_cpus=args.num_cpus)
    try:
        game = coalition_game(spec, GameOptions(seed=args.seed, progress=True, record_text=not args.no_text,
                                                train_dir=Path(args.cache) / "trained" if args.cache else None),
                              cache=cache, executor=executor)
        report = evaluate(game, estimators, EvalOptions(n_boot=args.bootstrap, mc=mc, requested=args.estimator,
                                                        split=args.split, best_team=args.best_team,
                                                        exact_limit=args.exact_limit),
                          record=args.record)
        if args.save_trained:
            assert isinstance(game, TrainedCoalitionGame)  # checked above: a coalition-training recipe
            print(f"saved the trained coalition as a pool: {game.export(game.players, Path(args.save_trained))}")
    finally:
        cache.close()
        executor.close()
    task = game.task
    print(f"{game.protocol_name} on {task.name} ({game.n_items} items), pool {pool.name}: full coalition "
          f"{game.value(game.players):.3f}; {game.coalitions_evaluated} coalitions, {game.generations} generations, "
          f"{game.cache_hits} cache hits")
    training = game.training_summary()
    if training:
        print(training_sentence(training))
    print(format_leaderboard(report))
    if "mc" in report.results:
        print(f"mc: {stop_sentence(report.results['mc'].extras)}")
    print(correlation_sentence(report.correlation, FIELDS[report.primary]))
    for line in filter(None, interaction_lines(report)):  # the interactions sentence, the best team
        print(line)
    paths = write_report(report, Path(args.out))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return verdict(game.failure_summary(), args.max_failures, _say)


def cmd_robustness(args: argparse.Namespace) -> int:
    from ..agents.pools import load_pool
    from ..envs.protocols import settings_per_protocol
    from ..envs.system import System, SystemSpec
    from ..reports import robustness_files as robustness_report
    from ..reports.robustness import RobustnessOptions, adversary_seats, check_adversary, check_protocols, robustness
    from ..tasks import make as make_task

    protocols = check_protocols([p.strip() for p in args.protocols.split(",") if p.strip()])
    check_adversary(args.adversary)
    per_protocol = settings_per_protocol(protocols, _settings(args.set))
    pool = load_pool(args.pool)
    coalition = pool.select(args.members.split(",")) if args.members else pool.member_names
    seats = adversary_seats(coalition, args.adversary, args.seat)  # refuses a seat outside the coalition
    task = make_task(args.task, size=args.items, seed=args.task_seed)
    records: list[dict] = []
    cache = _open_cache(args.cache, pool.name)
    try:
        systems = [System.build(SystemSpec(name, task, pool, coalition, args.split, protocol_settings=cfg,
                                           n_items=args.items), cache=cache) for name, cfg in per_protocol.items()]
        options = RobustnessOptions(seat=args.seat, seed=args.seed, n_boot=args.bootstrap, progress=True,
                                    record_text=not args.no_text)
        report = robustness(systems, args.adversary, options, on_records=lambda proto, label, rows: records.extend(
            {"protocol": proto, "system": label, **r} for r in rows))
    finally:
        cache.close()
    print(robustness_report.markdown(report), end="")
    record = args.record.finish(pool=describe_pool(pool, coalition), task=describe_task(task, args.split),
                                robustness={"protocols": protocols, "adversary": args.adversary, "seats": seats,
                                            "settings": per_protocol},
                                seeds={"seed": args.seed, "task_seed": args.task_seed})
    _wrote(robustness_report.write(report, Path(args.out), record, results=records))
    return verdict(report.failures(), args.max_failures, _say)


def cmd_gain(args: argparse.Namespace) -> int:
    """Each protocol against cost-matched baselines; see :mod:`coalition_gym.reports.gain`. A separate
    command, not ``cgym eval --baselines``: eval values one protocol's members over many coalitions, gain
    compares whole systems (several protocols) with single-model spend, in files of its own."""
    from ..agents.pools import load_pool
    from ..envs.protocols import settings_per_protocol
    from ..envs.system import System, SystemSpec
    from ..reports import gain_files
    from ..reports.gain import MIN_ITEMS, GainOptions, gain
    from ..reports.robustness import check_protocols
    from ..tasks import make as make_task

    protocols = check_protocols([p.strip() for p in args.protocols.split(",") if p.strip()])
    per_protocol = settings_per_protocol(protocols, _settings(args.set))
    pool = load_pool(args.pool)
    coalition = pool.select(args.members.split(",")) if args.members else pool.member_names
    task = make_task(args.task, size=args.items, seed=args.task_seed)
    items = task.items(args.split)[:args.items]
    if len(items) < MIN_ITEMS:
        raise ConfigError(f"task {task.name!r} has {len(items)} items in split {args.split!r}; gain needs at least "
                          f"{MIN_ITEMS} for a paired bootstrap CI")
    records: list[dict] = []
    cache = _open_cache(args.cache, pool.name)
    try:
        systems = [System.build(SystemSpec(name, task, pool, coalition, args.split, protocol_settings=cfg,
                                           n_items=args.items), cache=cache) for name, cfg in per_protocol.items()]
        options = GainOptions(unit=args.unit, max_k=args.max_k, seed=args.seed, n_boot=args.bootstrap, progress=True,
                              record_text=not args.no_text)
        report = gain(systems, options, on_records=lambda arm, rows: records.extend({"system": arm, **r} for r in rows))
    finally:
        cache.close()
    print(gain_files.markdown(report), end="")
    record = args.record.finish(pool=describe_pool(pool, coalition), task=describe_task(task, args.split),
                                gain={"protocols": protocols, "settings": per_protocol, "unit": args.unit,
                                      "max_k": args.max_k, "best_member": report.best_member},
                                seeds={"seed": args.seed, "task_seed": args.task_seed})
    _wrote(gain_files.write(report, Path(args.out), record, results=records))
    return verdict(report.failures(), args.max_failures, _say)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..reports.leaderboard import parse_estimators
    from ..reports.sweep import SweepGrid, SweepOptions, run_sweep

    failures = FailureSummary()
    grid = SweepGrid([s.strip() for s in args.pools.split(",")], [s.strip() for s in args.protocols.split(",")],
                     [s.strip() for s in args.tasks.split(",")], parse_estimators(args.estimator), args.items)
    options = SweepOptions(seed=args.seed, cache_dir=Path(args.cache) if args.cache else None, alpha=args.alpha,
                           progress=True, record_text=not args.no_text, gain_unit=args.gain)
    report = run_sweep(grid, Path(args.out), options, failures=failures, record=args.record)
    if report.summary.get("sentence"):
        print(report.summary["sentence"])
    if "gain" in report.summary:
        print(f"Gain (cost in {report.summary['gain']['unit']}): {report.summary['gain']['sentence']}")
    print(f"wrote {Path(args.out) / 'sweep_summary.json'} and {Path(args.out) / 'sweep.md'}")
    return verdict(failures, args.max_failures, _say)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..reports import compare

    result = compare.compare(args.runs)
    text = compare.markdown(result)
    print(text, end="")
    if args.out:
        _wrote(compare.write(result, Path(args.out), args.record.finish()))
    return 0


def _given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """A training run's settings from its options and ``--set`` (``protocol.KEY`` keys go to the protocol's
    settings); the library lays them over its default run."""
    flags = {"protocol": args.protocol, "task": args.task, "collaborators": args.collaborators, "steps": args.steps,
             "seed": args.seed, "reward": args.reward,
             "report_to": None if args.report_to == "none" else args.report_to}
    given = {k: v for k, v in flags.items() if v is not None}
    overrides = _settings(args.set)
    if args.members:
        given["members"] = args.members.split(",")
    protocol_settings = {k[len("protocol."):]: v for k, v in overrides.items() if k.startswith("protocol.")}
    given.update({k: v for k, v in overrides.items() if not k.startswith("protocol.")})
    if protocol_settings:
        given["protocol_settings"] = protocol_settings
    return given


def cmd_train(args: argparse.Namespace) -> int:
    """``cgym train``: one or several ``--policy`` through the library's one function
    (``training.runs.train_runs``: one policy with each method beside Base, several as one team)."""
    from ..envs.executors import make_executor
    from ..training.reporting import run_summary
    from ..training.runs import train_runs
    from ..training.trainer import RunOptions

    root = Path(args.out)
    executor = make_executor(args.executor, address=args.address) if args.executor == "ray" else None
    failures = FailureSummary()
    try:
        options = RunOptions(executor=executor, failures=failures, force=args.force, overwrite=args.overwrite)
        runs = train_runs(args.policy or [], args.method.split(","), root, args.preset, options,
                          **_given_settings(args))
    finally:
        if executor is not None:
            executor.close()
    write_run_record(root, args.record.finish(training=runs.settings, policy_weights=runs.policy_weights))
    team = runs.team_report
    if team is not None:  # one team: its before/after and every seat's line
        _show_team(root / f"{team['method']}-seed{team['seed']}", team, args.export)
    else:
        print(run_summary(root))  # every report's test scores with CIs, the verdicts, the curves
        _show_trained(root, [r for r in runs.reports if r["method"] != "base"], args.export)
    return verdict(failures, args.max_failures, _say)


def _show_team(folder: Path, report: dict[str, Any], export: str | None) -> None:
    """The team's test score before and after with CIs, each seat's before -> after, its pool line and, with
    ``export``, the team's pool.yaml and the ``cgym eval`` command that replays the trainer's test."""
    from ..training.verdict import verdict_line

    def cell(score: dict[str, Any] | None) -> str:
        return "-" if not score else f"{score['mean']:.3f} [{score['ci'][0]:.3f}, {score['ci'][1]:.3f}]"

    system = report["system"]
    print(f"{report['method']} (credit={report['credit']}), best step {report['best_step']}: system score on test "
          f"{cell(system['before'])} before -> {cell(system['after'])} after")
    for seat in report["seats"]:
        parts = report["per_seat"][seat]
        before, after = parts["before"] or {}, parts["after"] or {}
        shown = ", ".join(f"{kind} {cell(before.get(kind))} -> {cell(after.get(kind))}"
                          for kind in ("solo", "loo", "shapley"))
        print(f"  {seat} ({report['policies'][seat]}): {shown}")
    if report.get("verdict"):
        print(verdict_line(report["method"], report["verdict"], "the untrained team"))
    print(f"curves (dev score, reward and each seat's informative groups per step): {report['curves']}")
    print(f"wrote {folder / 'report.json'} and one folder per seat")
    _show_trained(folder.parent, [report], export)


def _show_trained(root: Path, reports: list[dict[str, Any]], export: str | None) -> None:
    """For each trained seat of each run: the pool-file line that makes it a member; with ``--export``, a ready
    pool.yaml of the run's seats beside their collaborators and the ``cgym eval`` command that replays the
    trainer's test."""
    from ..agents.member_settings import has_weights
    from ..training.export import export_run, pool_line

    for report in reports:
        folder = root / f"{report['method']}-seed{report['seed']}"
        trained = {seat: Path(f) for seat, f in report["seat_folders"].items() if has_weights(Path(f) / "best")}
        for seat, seat_folder in trained.items():  # one seat: named by its method (several methods may train)
            label = seat if len(report["seat_folders"]) > 1 else report["method"]
            print(f"{label} as a pool member: {pool_line(seat_folder)}")
        if export and trained:
            target = Path(export) if len(reports) == 1 else Path(export) / folder.name
            done = export_run(folder, target)
            print(f"wrote {done['pool']}; its leaderboard replays the trainer's test scores:\n  {done['eval_command']}"
                  + (f"\n  ({done['note']})" if done["note"] else ""))


def cmd_zoo(args: argparse.Namespace) -> int:
    from ..agents.zoo import ZOO_RECIPES, build_zoo, estimate_build_seconds, shipped, zoo_dir, zoo_home

    if args.zoo_command == "list":
        for name, recipe in ZOO_RECIPES.items():
            folder = zoo_dir(recipe, args.out)
            local = "built" if (folder / "zoo.json").is_file() else "not built"
            ships = "shipped" if shipped.shipped_manifest(recipe) is not None else "not shipped"
            print(f"{name:<8} {', '.join(m.name for m in recipe.models):<32} {ships}; local build {local}: {folder}")
        return 0
    if args.zoo_command == "verify":
        if shipped.shipped_manifest(args.recipe) is None:
            raise ConfigError(f"the package ships no build of zoo recipe {args.recipe!r}; shipped: "
                              + ", ".join(r for r in ZOO_RECIPES if shipped.shipped_manifest(r) is not None))
        build = build_zoo(args.recipe, args.out or zoo_home(), force=args.rebuild, progress=True)
        rows = shipped.verify(args.recipe, build)
        print(shipped.verify_table(rows))
        same = sum(r["identical"] for r in rows)
        print(f"{same} of {len(rows)} models of {args.recipe!r} built here ({build.path}) are bit-identical to the "
              "shipped ones" + ("" if same == len(rows) else "; the others drift (zoo training is repeatable per "
                                "torch build and CPU only). Results use the shipped models unless a pool names "
                                "the local folders."))
        return 0
    if shipped.shipped_manifest(args.recipe) is None and not (zoo_dir(args.recipe, args.out) / "zoo.json").is_file():
        print(f"zoo {args.recipe!r}: a build takes about {estimate_build_seconds(args.recipe) / 60:.0f} min on this "
              "machine", flush=True)
    build = build_zoo(args.recipe, args.out, force=args.force, progress=True)
    if not build.built:
        print(f"zoo {args.recipe!r} already built (use --force to rebuild)")
    print(build.table())
    print(f"models in {build.path} (cache root {args.out or zoo_home()})")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from ..tasks import describe_tasks

    rows = describe_tasks(group_rg=not args.all)
    width = max(len(r.name) for r in rows)
    print(f"{'task':<{width}}  {'category':<22}  {'test size':<10}  {'use':<8}  source")
    for r in rows:
        use = "held-out" if r.held_out else "train"
        print(f"{r.name:<{width}}  {r.category:<22}  {r.size:<10}  {use:<8}  {r.source}")
    print("Data sets not found: download them (see the source column) or pass path=/set $COALITION_GYM_DATA.")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..reports.demo import DemoOptions, run_demo

    result = run_demo(DemoOptions(pool=args.pool, task=args.task, items=args.items, seed=args.seed, out=args.out))
    write_run_record(Path(args.out), args.record.finish(demo={"pool": result["pool"], "task": result["task"],
                                                             "n_items": result["n_items"], "seed": args.seed}))
    return 0


