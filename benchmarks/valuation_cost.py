"""What each valuation costs in backend generations, and how much sharing them across coalitions saves.

For pools ``sim:random-3`` ... ``sim:random-8`` and the protocols in PROTOCOLS (default settings, so
debate runs 3 rounds), on ``--items`` items of ``rg/basic_arithmetic``, one run measures, each on a
fresh CoalitionGame (so no cache carries over from one measurement to the next):

1. exact Shapley, generations shared across coalitions (CoalitionGame's default);
2. leave-one-out (LOO), shared;
3. naive LOO: ``share_generations=False``, every Ask of the n + 1 coalitions is a generation;
4. exact Shapley, not shared (all 2^n - 1 coalitions run from scratch);
5. Monte Carlo Shapley, shared, with a budget of 4 (n + 1) coalitions and no tolerance stop.

Targets (from the issue): shared exact Shapley costs no more generations than naive LOO for the
one-shot protocols (majority_vote, slm_mux) and at most 3x naive LOO for debate; llm_blender is
reported without a target. Simulated agents are nearly free, so generation counts are the point;
wall times show what the framework itself spends and vary from machine to machine.

    .venv/bin/python benchmarks/valuation_cost.py [--items 30] [--max-unshared-n 8] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np
from _common import machine_info, write_json

from coalition_gym import load_pool, make_task
from coalition_gym.envs import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.valuation import CoalitionGame, exact_shapley, leave_one_out, sampled_shapley_values

TASK = "rg/basic_arithmetic"
PROTOCOLS = ("majority_vote", "slm_mux", "debate", "llm_blender")
# Target on shapley_shared / naive_loo generations; None = reported without a target.
TARGETS = {"majority_vote": 1.0, "slm_mux": 1.0, "debate": 3.0, "llm_blender": None}
N_BOOT = 100  # the bootstrap is the same for every measurement of one n; keep it from diluting the ratios
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "valuation_cost.json"
QUICK_OUT = DEFAULT_OUT.with_name("valuation_cost.quick.json")  # a smoke run never overwrites real results


def measure(estimator, protocol, pool, task, items, share: bool, repeats: int, **kwargs) -> tuple[dict, np.ndarray]:
    """Run ``estimator`` on a fresh game ``repeats`` times; counts come from the first, time is the median."""
    runs = []
    for _ in range(repeats):
        system = System.build(SystemSpec(protocol, task, pool, split="test", n_items=len(items)))
        game = CoalitionGame(system, share_generations=share)
        gc.collect()  # start each timing without the previous one's garbage
        start = time.perf_counter()
        result = estimator(game, n_boot=N_BOOT, **kwargs)
        wall = time.perf_counter() - start
        runs.append({"generations": game.generations, "cache_hits": game.cache_hits, "asks": game.stats.asks,
                     "coalitions": game.coalitions_evaluated, "wall_s": wall,
                     "run_s": game.stats.wall_seconds, "backend_s": game.stats.backend_seconds,
                     "failures": game.failures, "per_item": result.per_item})
    # Generation counts are deterministic: a difference between repeats would be a bug worth seeing.
    if any(r["generations"] != runs[0]["generations"] for r in runs):
        print(f"WARNING {protocol}: generation counts differ between repeats", file=sys.stderr)
    out = {k: v for k, v in runs[0].items() if k != "per_item"}
    out["wall_s"] = median(r["wall_s"] for r in runs)
    out["wall_s_repeats"] = [r["wall_s"] for r in runs]
    return out, runs[0]["per_item"]


def debate_structural(n: int, rounds: int) -> int:
    """Debate generations per item for shared exact Shapley if every later-round prompt were distinct:
    round 0 is shared (n), each later round asks every member of every coalition of >= 2 members."""
    return n + (rounds - 1) * (n * 2 ** (n - 1) - n)


def ratio(a, b):
    return a / b if a is not None and b else None


def bench_row(protocol: str, n: int, task, items, args) -> dict:
    pool = load_pool(f"sim:random-{n}")  # simulated agents are stateless; the caches live in each game
    row: dict = {"protocol": protocol, "n": n, "items": len(items)}
    row["shapley_shared"], shapley_vals = measure(exact_shapley, protocol, pool, task, items, True, args.repeats)
    row["loo_shared"], loo_vals = measure(leave_one_out, protocol, pool, task, items, True, args.repeats)
    row["naive_loo"], naive_vals = measure(leave_one_out, protocol, pool, task, items, False, args.repeats)
    # Sharing may change what is computed, never the result: check it where both were run.
    row["same_values"] = bool(np.array_equal(loo_vals, naive_vals))
    row["shapley_unshared"] = None
    if n <= args.max_unshared_n:
        row["shapley_unshared"], unshared_vals = measure(exact_shapley, protocol, pool, task, items, False,
                                                         args.repeats)
        row["same_values"] &= bool(np.array_equal(shapley_vals, unshared_vals))
    row["mc_shared"] = None
    if not args.no_mc:
        row["mc_budget"] = 4 * (n + 1)
        row["mc_shared"], _ = measure(sampled_shapley_values, protocol, pool, task, items, True, 1,
                                      tolerance=0.0, budget=row["mc_budget"], sampler="permutation")
    gens = {k: (row[k] or {}).get("generations") for k in ("shapley_shared", "naive_loo", "shapley_unshared")}
    walls = {k: (row[k] or {}).get("wall_s") for k in ("shapley_shared", "naive_loo", "shapley_unshared")}
    row["ratios"] = {
        "gen_shapley_shared_over_naive_loo": ratio(gens["shapley_shared"], gens["naive_loo"]),
        "gen_shapley_shared_over_unshared": ratio(gens["shapley_shared"], gens["shapley_unshared"]),
        "wall_shapley_shared_over_naive_loo": ratio(walls["shapley_shared"], walls["naive_loo"]),
        "wall_shapley_shared_over_unshared": ratio(walls["shapley_shared"], walls["shapley_unshared"]),
    }
    target = TARGETS[protocol]
    row["target"] = target
    row["meets_target"] = None if target is None else gens["shapley_shared"] <= target * gens["naive_loo"]
    if protocol == "debate":
        rounds = make_protocol("debate").rounds
        row["debate_structural_per_item"] = debate_structural(n, rounds)
        row["debate_structural_over_naive_loo"] = debate_structural(n, rounds) / (rounds * n * n)
    return row


def fmt_ratio(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def fmt_gens(cell) -> str:
    return "—" if cell is None else f"{cell['generations']:,}"


def table(rows: list[dict]) -> str:
    head = ["protocol", "n", "Shapley shared gens", "LOO shared gens", "naive LOO gens", "Shapley unshared gens",
            "MC shared gens (coalitions/budget)", "gens: shared / naive LOO", "gens: shared / unshared",
            "wall: shared / naive LOO", "wall: shared / unshared", "target (gens vs naive LOO)", "meets target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mc = "—" if r["mc_shared"] is None else \
            f"{r['mc_shared']['generations']:,} ({r['mc_shared']['coalitions']}/{r['mc_budget']})"
        target = "none" if r["target"] is None else f"≤ {r['target']:g}x"
        meets = "n/a" if r["meets_target"] is None else ("yes" if r["meets_target"] else "**NO**")
        q = r["ratios"]
        lines.append("| " + " | ".join([
            r["protocol"], str(r["n"]), fmt_gens(r["shapley_shared"]), fmt_gens(r["loo_shared"]),
            fmt_gens(r["naive_loo"]), fmt_gens(r["shapley_unshared"]), mc,
            fmt_ratio(q["gen_shapley_shared_over_naive_loo"]), fmt_ratio(q["gen_shapley_shared_over_unshared"]),
            fmt_ratio(q["wall_shapley_shared_over_naive_loo"]), fmt_ratio(q["wall_shapley_shared_over_unshared"]),
            target, meets]) + " |")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> str:
    """One line per protocol with a target: where it holds and where it does not."""
    lines = []
    for protocol in PROTOCOLS:
        mine = [r for r in rows if r["protocol"] == protocol]
        if TARGETS[protocol] is None:
            spread = ", ".join(f"n={r['n']}: {fmt_ratio(r['ratios']['gen_shapley_shared_over_naive_loo'])}x"
                               for r in mine)
            lines.append(f"- {protocol}: no target; shared Shapley / naive LOO generations = {spread}")
            continue
        held = [r["n"] for r in mine if r["meets_target"]]
        missed = [r["n"] for r in mine if not r["meets_target"]]
        line = (f"- {protocol} (shared Shapley ≤ {TARGETS[protocol]:g}x naive LOO generations): "
                f"holds for n = {held or 'none'}; misses for n = {missed or 'none'}")
        if protocol == "debate":
            line += ("; if every later-round prompt were distinct (real models' free text) the ratio would be "
                     + ", ".join(f"n={r['n']}: {r['debate_structural_over_naive_loo']:.2f}x" for r in mine))
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=30, help="items of the task in every game")
    parser.add_argument("--min-n", type=int, default=3)
    parser.add_argument("--max-n", type=int, default=8)
    parser.add_argument("--max-unshared-n", type=int, default=8,
                        help="run exact Shapley without sharing only up to this n (2^n - 1 coalitions from scratch)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per measurement; wall time is the median")
    parser.add_argument("--no-mc", action="store_true", help="skip Monte Carlo Shapley")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"JSON results (default: {DEFAULT_OUT}; --quick: {QUICK_OUT.name} beside it)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (n = 3..4, 6 items) to check it works")
    args = parser.parse_args()
    if args.quick:
        args.items, args.min_n, args.max_n = 6, 3, 4
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    if args.items < 1 or args.repeats < 1 or not 1 <= args.min_n <= args.max_n <= 12:
        parser.error("need --items >= 1, --repeats >= 1 and 1 <= --min-n <= --max-n <= 12")

    # Build the task once, outside every timing: dataset generation is not what we measure.
    task = make_task(TASK, size=args.items)
    items = list(task.items("test"))

    rows = []
    total = time.perf_counter()
    for n in range(args.min_n, args.max_n + 1):
        for protocol in PROTOCOLS:
            rows.append(bench_row(protocol, n, task, items, args))
        print(f"n={n} done ({time.perf_counter() - total:.1f}s)", file=sys.stderr)

    print(f"{len(items)} items of {TASK}, pool sim:random-n; generations summed over all items "
          f"(exact Shapley without sharing: n ≤ {args.max_unshared_n}, else —)\n")
    print(table(rows))
    print("\nTargets:\n" + verdicts(rows))
    for r in rows:  # a cost benchmark of wrong results would be meaningless
        failed = sum((r[k] or {}).get("failures", 0) for k in ("shapley_shared", "naive_loo", "shapley_unshared"))
        if not r["same_values"] or failed:
            print(f"WARNING {r['protocol']} n={r['n']}: shared and unshared values differ or episodes failed",
                  file=sys.stderr)

    report = {
        "benchmark": "valuation_cost",
        "settings": {"items": len(items), "task": TASK, "split": "test", "pools": [f"sim:random-{n}" for n in
                     range(args.min_n, args.max_n + 1)], "protocols": {p: make_protocol(p).settings() for p in PROTOCOLS},
                     "targets": TARGETS, "max_unshared_n": args.max_unshared_n, "repeats": args.repeats,
                     "n_boot": N_BOOT, "mc": None if args.no_mc else {"budget": "4*(n+1) coalitions",
                                                                       "tolerance": 0.0}},
        "machine": machine_info(),
        "total_seconds": time.perf_counter() - total,
        "rows": rows,
    }
    write_json(args.out, report)
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
