"""``cgym``: thin command line over the library (parse, call, print, write files)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any, Sequence

import yaml

from .errors import CoalitionGymError, ConfigError
from .failures import FailureLimit, FailureSummary, verdict
from .records import RunRecord, describe_pool, describe_task
from .redaction import JsonLines, redact, write_json, write_text


def _settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are read as YAML scalars (2 -> int, none -> None, true -> bool)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        out[key] = yaml.safe_load(raw)
    return out


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    se = pstdev(values) / math.sqrt(len(values) - 1) if len(values) > 1 else 0.0
    return fmean(values), se


def _number_at_least(low: float, kind: type = int, strict: bool = False) -> Any:
    """An argparse type: a ``kind`` number >= low (> low when ``strict``)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value < low or (strict and value == low) or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if strict else '>='} {low}")
        return value
    return parse


def _probability(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1 (a significance level)."""
    value = _number_at_least(0.0, float, strict=True)(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} must be < 1")
    return value


def cmd_envs(args: argparse.Namespace) -> int:
    from .envs.registration import describe_envs

    width = max(len(i) for i, _ in describe_envs())
    for env_id, text in describe_envs():
        print(f"{env_id:<{width}}  {text}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .agents.pools import load_pool
    from .envs.protocols import make_protocol
    from .envs.registration import protocol_of
    from .envs.runner import RunStats, episode_record, run_episodes
    from .tasks import make as make_task

    protocol = make_protocol(protocol_of(args.env_id), **_settings(args.set))
    task = make_task(args.task, size=max(args.episodes, 1) if args.size is None else args.size, seed=args.task_seed)
    pool = load_pool(args.pool)
    members = pool.select(args.members.split(",")) if args.members else pool.member_names
    missing = [h for h in protocol.helper_names() if h not in pool.backends()]
    if missing:
        raise ConfigError(f"pool {pool.name!r} has no helper {missing[0]!r} needed by {protocol.name!r}")
    items = list(task.items(args.split))
    stats = RunStats()
    results = []
    for cycle in range(math.ceil(args.episodes / len(items))):  # more episodes than items: new seeds
        chunk = items[: args.episodes - cycle * len(items)]
        results += run_episodes(protocol, task, chunk, members, pool.backends(), seed=args.seed + cycle,
                                styles=pool.styles, dev_scores=pool.dev_scores, stats=stats, progress=True,
                                description=protocol.name)
    mean, se = _mean_se([r.score for r in results])
    parsed = sum(r.parsed for r in results) / len(results)
    failures = FailureSummary().add_records(results)
    summary = {"env_id": args.env_id, "protocol": protocol.settings(), "task": task.name, "pool": pool.name,
               "members": members, "episodes": len(results), "seed": args.seed, "system_score": mean,
               "stderr": se, "parse_rate": parsed, "failures": failures.to_dict(),
               "batching_factor": stats.batching_factor, "backend_calls": stats.backend_calls}
    print(f"{args.env_id} on {task.name} with {pool.name} {members}: system score {mean:.3f} ± {se:.3f} "
          f"(n={len(results)}, parsed {parsed:.0%}, failures {failures.failed}, "
          f"{stats.batching_factor:.0f} asks per backend call)")
    summary["run"] = args.record.finish(pool=describe_pool(pool, members), task=describe_task(task, args.split),
                                        protocol={"name": protocol.name, "settings": protocol.settings()},
                                        seeds={"seed": args.seed, "task_seed": args.task_seed})
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        by_id = {it.id: it for it in items}
        with JsonLines(out / "episodes.jsonl", "w") as lines:
            for r in results:
                lines.write({**episode_record(r, by_id[r.item_id], not args.no_text),
                             "details": dict(r.outcome.details) if r.outcome is not None else None})
        write_json(out / "summary.json", summary)
        write_json(out / "run.json", summary["run"])
        print(f"wrote {out / 'episodes.jsonl'}, {out / 'summary.json'} and {out / 'run.json'}")
    return verdict(failures, args.max_failures, _say)


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _open_cache(folder: str | None, pool_name: str):
    from .agents.cache import GenerationCache

    if folder is None:
        return GenerationCache(None)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in pool_name)
    return GenerationCache(Path(folder) / f"{slug}.sqlite")


def cmd_eval(args: argparse.Namespace) -> int:
    from .agents.pools import load_pool
    from .envs.protocols import make_protocol
    from .tasks import make as make_task
    from .envs.executors import make_executor
    from .valuation.report import evaluate, parse_estimators, print_leaderboard, write_report
    from .valuation.tables import FIELDS, correlation_sentence

    estimators = parse_estimators(args.estimator)
    protocol = make_protocol(args.protocol, **_settings(args.set))
    task = make_task(args.task, size=args.items, seed=args.task_seed)
    pool = load_pool(args.pool)
    members = args.members.split(",") if args.members else None
    cache = _open_cache(args.cache, pool.name)
    mc = {"tolerance": args.mc_tolerance, "budget": args.mc_budget}
    executor = make_executor(args.executor, address=args.address, num_cpus=args.num_cpus)
    try:
        report = evaluate(protocol, pool, task, task.items(args.split), estimators, members=members,
                          seed=args.seed, cache=cache, progress=True, n_boot=args.bootstrap, mc=mc,
                          requested=args.estimator, executor=executor, record_text=not args.no_text,
                          split=args.split, record=args.record)
    finally:
        cache.close()
        executor.close()
    game = report.game
    print(f"{protocol.name} on {task.name} ({game.n_items} items), pool {pool.name}: full coalition "
          f"{game.value(game.players):.3f}; {game.coalitions_evaluated} coalitions, {game.generations} generations, "
          f"{game.cache_hits} cache hits")
    print(print_leaderboard(report))
    print(correlation_sentence(report.correlation, FIELDS[report.primary]))
    paths = write_report(report, Path(args.out))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return verdict(game.failure_summary(), args.max_failures, _say)


def cmd_sweep(args: argparse.Namespace) -> int:
    from .valuation.report import parse_estimators
    from .valuation.sweep import run_sweep

    failures = FailureSummary()
    result = run_sweep([s.strip() for s in args.pools.split(",")], [s.strip() for s in args.protocols.split(",")],
                       [s.strip() for s in args.tasks.split(",")], parse_estimators(args.estimator), args.items,
                       Path(args.out), seed=args.seed, cache_dir=Path(args.cache) if args.cache else None,
                       alpha=args.alpha, progress=True, failures=failures, record=args.record,
                       record_text=not args.no_text)
    if result["summary"]:
        print(result["summary"]["sentence"])
    print(f"wrote {Path(args.out) / 'sweep_summary.json'} and {Path(args.out) / 'sweep.md'}")
    return verdict(failures, args.max_failures, _say)


def cmd_compare(args: argparse.Namespace) -> int:
    from .valuation import compare

    result = compare.compare(args.runs)
    text = compare.markdown(result)
    print(text, end="")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "compare.md", text)
        write_text(out / "compare.html", compare.page(result))
        write_json(out / "compare.json", {**result, "run": args.record.finish()})
        print(f"wrote {out / 'compare.md'}, {out / 'compare.html'} and {out / 'compare.json'}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .envs.executors import make_executor
    from .training.trainer import run_methods, summary_table

    overrides = _settings(args.set)
    settings = {k: v for k, v in {"protocol": args.protocol, "task": args.task, "policy": args.policy,
                                  "collaborators": args.collaborators, "steps": args.steps, "seed": args.seed,
                                  "tensorboard": args.tensorboard or None}.items() if v is not None}
    if args.members:
        settings["members"] = args.members.split(",")
    protocol_settings = {k[len("protocol."):]: v for k, v in overrides.items() if k.startswith("protocol.")}
    settings.update({k: v for k, v in overrides.items() if not k.startswith("protocol.")})
    if protocol_settings:
        settings["protocol_settings"] = protocol_settings
    root = Path(args.out)
    executor = make_executor(args.executor, address=args.address) if args.executor == "ray" else None
    failures = FailureSummary()
    try:
        run_methods(args.method.split(","), root, preset=args.preset, executor=executor, failures=failures,
                    **settings)
    finally:
        if executor is not None:
            executor.close()
    write_json(root / "run.json", args.record.finish(training={"methods": args.method, "preset": args.preset,
                                                                **settings}))
    print(summary_table(root))  # every report's test scores with CIs, one row per method
    return verdict(failures, args.max_failures, _say)


def cmd_zoo(args: argparse.Namespace) -> int:
    from .agents.zoo import RECIPES, build_zoo, zoo_dir, zoo_home

    if args.zoo_command == "list":
        for name, recipe in RECIPES.items():
            folder = zoo_dir(recipe, args.out)
            state = "built" if (folder / "zoo.json").is_file() else "not built"
            print(f"{name:<8} {', '.join(m.name for m in recipe.models):<32} {state}: {folder}")
        return 0
    build = build_zoo(args.recipe, args.out, force=args.force, progress=True)
    if not build.built:
        print(f"zoo {args.recipe!r} already built (use --force to rebuild)")
    print(build.table())
    print(f"models in {build.path} (cache root {args.out or zoo_home()})")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from .tasks import describe_tasks

    rows = describe_tasks(group_rg=not args.all)
    width = max(len(r.name) for r in rows)
    print(f"{'task':<{width}}  {'category':<22}  {'test size':<10}  {'use':<8}  source")
    for r in rows:
        use = "held-out" if r.held_out else "train"
        print(f"{r.name:<{width}}  {r.category:<22}  {r.size:<10}  {use:<8}  {r.source}")
    print("Data sets not found: download them (see the source column) or pass path=/set $COALITION_GYM_DATA.")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    result = run_demo(pool_spec=args.pool, task_name=args.task, n_items=args.items, seed=args.seed, out=Path(args.out))
    write_json(Path(args.out) / "run.json", args.record.finish(demo={"pool": result["pool"], "task": result["task"],
                                                                     "n_items": result["n_items"], "seed": args.seed}))
    return 0


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.add_argument("--no-text", action="store_true",
                   help="keep extracted answers but not reply texts in the per-episode results file")


def _max_failures_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-failures", type=FailureLimit.parse, default=FailureLimit(), metavar="N|P%",
                   help="exit 3 when more episodes failed than this count or percentage (default: any "
                        "coalition whose every episode failed, or more than 10%%); failed episodes score 0")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cgym", description="Measure and train multi-LLM collaboration.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list environment ids")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("run", help="run a protocol's episodes with a pool and print the system score")
    p.add_argument("env_id", help="e.g. coalition_gym/Debate-v0 (see `cgym envs`)")
    p.add_argument("--episodes", type=_number_at_least(1), default=100)
    p.add_argument("--task", default="rg/basic_arithmetic")
    p.add_argument("--size", type=_number_at_least(1), default=None, help="items per split (default: --episodes)")
    p.add_argument("--task-seed", type=int, default=0)
    p.add_argument("--split", default="test")
    p.add_argument("--pool", default="sim:demo")
    p.add_argument("--members", default=None, help="comma-separated coalition (default: the whole pool)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="protocol setting")
    p.add_argument("--out", default=None, help="folder for episodes.jsonl, summary.json and run.json")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("eval", help="leaderboard: solo vs compositional strength of a pool's models")
    p.add_argument("--pool", default="sim:demo")
    p.add_argument("--protocol", default="debate")
    p.add_argument("--task", default="rg/basic_arithmetic")
    p.add_argument("--task-seed", type=int, default=0)
    p.add_argument("--split", default="test")
    p.add_argument("--estimator", default="all", help="loo, shapley, banzhaf, mc, a comma list, or all")
    p.add_argument("--items", type=_number_at_least(1), default=200)
    p.add_argument("--members", default=None, help="comma-separated subset of the pool")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="protocol setting")
    p.add_argument("--out", default="runs/eval")
    p.add_argument("--cache", default=None, help="folder for the persistent generation cache (resumable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bootstrap", type=_number_at_least(1), default=2000, help="bootstrap resamples over items")
    p.add_argument("--mc-tolerance", type=_number_at_least(0.0, float, strict=True), default=0.005, help="MC Shapley: stop at this permutation stderr")
    p.add_argument("--mc-budget", type=_number_at_least(1), default=None, help="MC Shapley: at most this many coalitions")
    p.add_argument("--executor", default="local", choices=["local", "ray"],
                   help="where coalition executions run (ray: pip install 'coalition-gym[ray]')")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: start a local Ray)")
    p.add_argument("--num-cpus", type=_number_at_least(1), default=None, help="CPUs of a locally started Ray")
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("sweep", help="pools x protocols x tasks, with the cross-setting significance summary")
    p.add_argument("--pools", default="sim:demo,sim:independent")
    p.add_argument("--protocols", default="debate,llm_blender,slm_mux,majority_vote")
    p.add_argument("--tasks", default="rg/basic_arithmetic,rg/gsm_symbolic")
    p.add_argument("--estimator", default="loo")
    p.add_argument("--items", type=_number_at_least(1), default=100)
    p.add_argument("--alpha", type=_probability, default=0.05)
    p.add_argument("--out", default="runs/sweep")
    p.add_argument("--cache", default=None)
    p.add_argument("--seed", type=int, default=0)
    _output_options(p)
    _max_failures_option(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("compare", help="one table (and HTML page) across `cgym eval` output folders")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="folders written by `cgym eval --out`")
    p.add_argument("--out", default=None, help="folder for compare.md, compare.html and compare.json")
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("train", help="train a policy to collaborate: C-RL and its baselines")
    p.add_argument("--method", default="crl", help="crl, grpo-indiv, dapo-indiv, raft, nudge, base (or a comma list)")
    p.add_argument("--protocol", default=None, help="protocol the policy collaborates in (default slm_mux)")
    p.add_argument("--task", default=None, help="training task, e.g. zoo:arith or rg/basic_arithmetic")
    p.add_argument("--policy", default=None, help="HF model folder or zoo:<recipe>/<member>")
    p.add_argument("--collaborators", default=None, help="pool of frozen collaborators (default sim:demo)")
    p.add_argument("--members", default=None, help="comma-separated subset of the collaborators' pool")
    p.add_argument("--steps", type=_number_at_least(1), default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--preset", default="paper", help="paper (lr 1e-6, 8x8 executions) or tiny (zoo models on CPU)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any TrainConfig field, or protocol.<setting>")
    p.add_argument("--tensorboard", action="store_true")
    p.add_argument("--executor", default="local", choices=["local", "ray"], help="where rollouts are collected")
    p.add_argument("--address", default=None, help="Ray head host:port or 'auto' (default: a local Ray)")
    p.add_argument("--out", default="runs/train")
    _max_failures_option(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("zoo", help="the tiny offline transformers zoo: build it, list recipes")
    zsub = p.add_subparsers(dest="zoo_command", required=True)
    z = zsub.add_parser("build", help="train and evaluate a zoo recipe (prints each model's accuracy)")
    z.add_argument("--recipe", default="default", help="default or tiny")
    z.add_argument("--out", default=None, help="cache root (default $COALITION_GYM_HOME/zoo or ~/.cache/coalition_gym/zoo)")
    z.add_argument("--force", action="store_true", help="rebuild even if a build exists")
    z.set_defaults(func=cmd_zoo)
    z = zsub.add_parser("list", help="recipes, their models and whether they are built")
    z.add_argument("--out", default=None, help="cache root")
    z.set_defaults(func=cmd_zoo)

    p = sub.add_parser("tasks", help="list tasks with category, size and where their data comes from")
    p.add_argument("--all", action="store_true", help="one line per reasoning-gym generator")
    p.set_defaults(func=cmd_tasks)

    p = sub.add_parser("demo", help="solo vs compositional strength on the demo pool, all protocols")
    p.add_argument("--pool", default="sim:demo")
    p.add_argument("--task", default="rg/basic_arithmetic")
    p.add_argument("--items", type=_number_at_least(1), default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--overwrite", action="store_true", help="replace the results in a non-empty --out")
    p.set_defaults(func=cmd_demo)
    return parser


def check_output_folder(path: str, option: str = "out") -> None:
    """Refuse, before any work, an output folder that cannot be written: a file in its place or on
    its way, or a first existing folder on its way this user cannot write to."""
    target = Path(path).expanduser()
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == target else f"lies under {probe}, which is a file"
        raise ConfigError(f"--{option} {path}: {where}; give a folder path")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--{option} {path}: {probe} is not writable by this user; choose another folder")


def check_fresh_output(args: argparse.Namespace) -> None:
    """Refuse to write results into a folder that already holds some, unless told to replace them
    (``--overwrite``) or to resume (``--cache``, where finished work is reused)."""
    if not hasattr(args, "overwrite") or args.overwrite or getattr(args, "cache", None) or not args.out:
        return
    folder = Path(args.out).expanduser()
    if folder.is_dir() and any(folder.iterdir()):
        resume = " or --cache DIR to resume a run" if hasattr(args, "cache") else ""
        raise ConfigError(f"--out {args.out} already holds results; pass --overwrite to replace them{resume}, "
                          "or choose another folder")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # numbers are range-checked by their argparse types; a bad one exits 2 with one line
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # returned, not raised: main() is also called as a function
        return int(stop.code or 0)
    args.record = RunRecord(argv)  # started now: the run record's start time and command line
    try:
        for option in ("out", "cache"):
            if getattr(args, option, None):
                check_output_folder(getattr(args, option), option)
        check_fresh_output(args)
        return args.func(args)
    except CoalitionGymError as exc:
        print(f"cgym: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `cgym envs | head`: the reader left; say nothing more, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
