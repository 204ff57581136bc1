"""Throughput of every protocol on the simulated pool: batched runner, unbatched runner, Gym env.

For each protocol in PROTOCOLS with episodes, with pool ``sim:demo`` on ``rg/basic_arithmetic``, one run measures:

1. the runner: all episodes at once through ``run_episodes`` (one batched call per backend per wave);
2. the same episodes one at a time through ``run_episodes`` (the unbatched baseline);
3. ``CollaborationEnv`` with a SimulatedAgent in the policy seat, one episode after another.

Simulated agents are nearly free, so these numbers are the *framework's* cost. Ratios (speed-up,
overhead / backend time) are the point; absolute times vary from machine to machine.

    .venv/bin/python benchmarks/env_throughput.py [--episodes 512] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from statistics import median

from _common import machine_info, write_json

from coalition_gym import (
    AgentProfile,
    CollaborationEnv,
    SimulatedAgent,
    System,
    SystemSpec,
    load_pool,
    make_task,
    run_episodes,
)
from coalition_gym.envs import PROTOCOLS, RunStats, make_protocol

#: Protocols with episodes (Sparta and multi-agent finetuning train their members first: collab_training.py)
EPISODIC = list(PROTOCOLS)  # coalition training (sparta, ...) is a training recipe, not a protocol

POOL, TASK = "sim:demo", "rg/basic_arithmetic"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "env_throughput.json"
QUICK_OUT = DEFAULT_OUT.with_name("env_throughput.quick.json")  # a smoke run never overwrites real results


def overhead(wall: float, backend: float) -> float:
    """Time spent outside the backends, per second spent inside them."""
    return (wall - backend) / backend if backend > 0 else float("nan")


def bench_runner(name, task, items, pool):
    """Batched and unbatched runs of the same episodes (same seeds, so the same results)."""
    protocol, coalition, backends = make_protocol(name), pool.member_names, pool.backends()
    spec = SystemSpec(protocol, task, backends, coalition, split=None)  # the backends as they are, no pool file

    gc.collect()  # start each timing without the previous one's garbage
    stats = RunStats()
    start = time.perf_counter()
    batched = run_episodes(System.build(spec), items, stats=stats)
    wall = time.perf_counter() - start  # end to end, including protocol.start() and scoring

    gc.collect()
    one_stats = RunStats()
    start = time.perf_counter()
    single = [r for it in items for r in run_episodes(System.build(spec), [it],
                                                      stats=one_stats)]
    one_wall = time.perf_counter() - start

    n = len(items)
    return {
        "runner_eps": n / wall, "unbatched_eps": n / one_wall, "speedup": one_wall / wall,
        "asks_per_call": stats.batching_factor, "waves": stats.waves, "backend_calls": stats.backend_calls,
        "asks": stats.asks, "wall_s": wall, "run_wall_s": stats.wall_seconds, "backend_s": stats.backend_seconds,
        # The runner's own overhead, as RunStats sees it (run_programs only; scoring is outside).
        "runner_overhead": overhead(stats.wall_seconds, stats.backend_seconds),
        "unbatched_wall_s": one_wall, "unbatched_backend_s": one_stats.backend_seconds,
        "unbatched_asks_per_call": one_stats.batching_factor,
        "unbatched_overhead": overhead(one_stats.wall_seconds, one_stats.backend_seconds),
        # Batching must not change any result: a cheap determinism check for free.
        "same_results": [(r.answer, r.score) for r in batched] == [(r.answer, r.score) for r in single],
        "failed": sum(r.error is not None for r in batched),
    }


def bench_env(name, task, items, pool, policy):
    """Drive CollaborationEnv with a simulated policy; time the policy's own replies separately."""
    env = CollaborationEnv(protocol=name, collaborators=pool, task=task, split="test")  # the items below
    env.reset(seed=0)  # seeds env.np_random once; the episodes below pick their items explicitly
    env.stats = RunStats()  # count only the timed episodes
    policy_s, policy_asks, reward = 0.0, 0, 0.0
    gc.collect()
    start = time.perf_counter()
    for it in items:
        env.reset(options={"item_id": it.id})
        done = False
        while not done:
            # A simulated policy needs the structured Ask (role, item, peers' answers), not the text.
            ask = env.pending_ask
            t0 = time.perf_counter()
            action = policy.reply(ask) if ask is not None else ""
            policy_s += time.perf_counter() - t0
            policy_asks += ask is not None
            _, r, done, truncated, _ = env.step(action)
            done = done or truncated
        reward += r
    wall = time.perf_counter() - start
    backend = env.stats.backend_seconds + policy_s  # collaborators (timed by dispatch) + policy
    return {"env_eps": len(items) / wall, "env_overhead": overhead(wall, backend), "env_wall_s": wall,
            "env_backend_s": env.stats.backend_seconds, "env_policy_s": policy_s, "env_policy_asks": policy_asks,
            "env_backend_calls": env.stats.backend_calls, "env_asks_per_call": env.stats.batching_factor,
            "env_mean_reward": reward / len(items)}


COLUMNS = [("protocol", None), ("runner ep/s", "runner_eps"), ("unbatched ep/s", "unbatched_eps"),
           ("batched speed-up", "speedup"), ("asks per backend call", "asks_per_call"),
           ("runner overhead / backend time", "runner_overhead"), ("gym env ep/s", "env_eps"),
           ("gym overhead / backend time", "env_overhead")]


def fmt(key: str, value: float) -> str:
    if key.endswith("_eps"):
        return f"{value:,.0f}"
    return f"{value:.1f}x" if key == "speedup" else f"{value:.2f}"


def table(summary: dict) -> str:
    lines = ["| " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, row in summary.items():
        lines.append("| " + " | ".join([name] + [fmt(k, row[k]) for _, k in COLUMNS[1:]]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=512, help="episodes per protocol and measurement")
    parser.add_argument("--repeats", type=int, default=3, help="repeats; timings are the median")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"JSON results (default: {DEFAULT_OUT}; --quick: {QUICK_OUT.name} beside it)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (16 episodes, 1 repeat) to check it works")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.repeats = 16, 1
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    if args.episodes < 1 or args.repeats < 1:
        parser.error("--episodes and --repeats must be >= 1")

    # Build the task and pool once, outside every timing: dataset generation is not what we measure.
    task = make_task(TASK, size=args.episodes)
    items = list(task.items("test"))
    pool = load_pool(POOL)
    policy = SimulatedAgent(AgentProfile("policy", skill=0.6))

    runs: dict[str, list[dict]] = {name: [] for name in EPISODIC}
    total = time.perf_counter()
    for rep in range(args.repeats):
        for name in EPISODIC:  # interleave protocols so slow drift hits all of them alike
            runs[name].append({**bench_runner(name, task, items, pool), **bench_env(name, task, items, pool, policy)})
        print(f"repeat {rep + 1}/{args.repeats} done ({time.perf_counter() - total:.1f}s)", file=sys.stderr)

    # Median of each number over the repeats (ratios too, each taken within one repeat).
    summary = {name: {k: median(r[k] for r in reps) for k in reps[0] if not isinstance(reps[0][k], bool)}
               for name, reps in runs.items()}
    for name, reps in runs.items():
        summary[name]["same_results"] = all(r["same_results"] for r in reps)

    print(table(summary))
    for name, row in summary.items():  # a benchmark of wrong results would be meaningless
        if not row["same_results"] or row["failed"]:
            print(f"WARNING {name}: batched and unbatched results differ or episodes failed", file=sys.stderr)
    report = {
        "benchmark": "env_throughput",
        "settings": {"episodes": args.episodes, "repeats": args.repeats, "pool": POOL, "task": TASK,
                     "split": "test", "protocols": EPISODIC, "policy_profile": repr(policy.profile),
                     # The env seats the policy after the frozen members: 5 members against the runner's 4.
                     "runner_coalition": pool.member_names, "env_coalition": pool.member_names + ["policy"]},
        "machine": machine_info(),
        "total_seconds": time.perf_counter() - total,
        "summary": summary,
        "repeats": runs,
    }
    write_json(args.out, report)
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
