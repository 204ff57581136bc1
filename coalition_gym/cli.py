"""``cgym``: thin command line over the library (parse, call, print, write files)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any, Sequence

import yaml

from .errors import CoalitionGymError, ConfigError


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
    from .envs.runner import RunStats, run_episodes
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
    failures = sum(r.error is not None for r in results)
    summary = {"env_id": args.env_id, "protocol": protocol.settings(), "task": task.name, "pool": pool.name,
               "members": members, "episodes": len(results), "seed": args.seed, "system_score": mean,
               "stderr": se, "parse_rate": parsed, "failures": failures,
               "batching_factor": stats.batching_factor, "backend_calls": stats.backend_calls}
    print(f"{args.env_id} on {task.name} with {pool.name} {members}: system score {mean:.3f} ± {se:.3f} "
          f"(n={len(results)}, parsed {parsed:.0%}, failures {failures}, "
          f"{stats.batching_factor:.0f} asks per backend call)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "episodes.jsonl", "w") as fh:
            for r in results:
                fh.write(json.dumps(r.to_dict()) + "\n")
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        print(f"wrote {out / 'episodes.jsonl'} and {out / 'summary.json'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(pool_spec=args.pool, task_name=args.task, n_items=args.items, seed=args.seed, out=Path(args.out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cgym", description="Measure and train multi-LLM collaboration.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list environment ids")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("run", help="run a protocol's episodes with a pool and print the system score")
    p.add_argument("env_id", help="e.g. coalition_gym/Debate-v0 (see `cgym envs`)")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--task", default="rg/basic_arithmetic")
    p.add_argument("--size", type=int, default=None, help="items per split (default: --episodes)")
    p.add_argument("--task-seed", type=int, default=0)
    p.add_argument("--split", default="test")
    p.add_argument("--pool", default="sim:demo")
    p.add_argument("--members", default=None, help="comma-separated coalition (default: the whole pool)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="protocol setting")
    p.add_argument("--out", default=None, help="folder for episodes.jsonl and summary.json")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="solo vs compositional strength on the demo pool, all protocols")
    p.add_argument("--pool", default="sim:demo")
    p.add_argument("--task", default="rg/basic_arithmetic")
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "episodes", 1) is not None and getattr(args, "episodes", 1) < 1:
        print("cgym: error: --episodes must be >= 1", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except CoalitionGymError as exc:
        print(f"cgym: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
