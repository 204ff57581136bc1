"""C-RL and its baselines with a tiny zoo policy on CPU.

A zoo model is seated in a protocol (SLM-MUX by default) with frozen simulated collaborators on a
zoo task; Base, C-RL, GRPO-indiv, DAPO-indiv, Collaborative RAFT and prompt nudge are run with the
same budget for several seeds. For each the best dev checkpoint is scored on a held-out test split,
collaboratively and alone, with 95% bootstrap CIs, plus rescue/drag against Base. Prints a markdown
table and writes JSON. Whatever comes out is reported as it is.

    .venv/bin/python benchmarks/crl_tiny.py            # the full run (about half an hour on 2 cores)
    .venv/bin/python benchmarks/crl_tiny.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from statistics import fmean

from coalition_gym.training.trainer import run_methods

from _common import machine_info, write_json

METHODS = ["base", "crl", "grpo-indiv", "dapo-indiv", "raft", "nudge"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="zoo:default/sprout")
    parser.add_argument("--protocol", default="slm_mux")
    parser.add_argument("--task", default="zoo:arith")
    parser.add_argument("--collaborators", default="sim:demo")
    parser.add_argument("--members", default="borealis,delta")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--test-items", type=int, default=200)
    parser.add_argument("--out", default="benchmarks/results/crl_tiny")
    parser.add_argument("--json", default="benchmarks/results/crl_tiny.json")
    parser.add_argument("--quick", action="store_true", help="tiny zoo, 2 steps, 1 seed")
    args = parser.parse_args()
    if args.quick:
        args.policy, args.steps, args.seeds, args.test_items = "zoo:tiny/pico", 2, 1, 16
        args.out, args.json = args.out + "_quick", args.json.replace(".json", ".quick.json")

    settings = dict(policy=args.policy, protocol=args.protocol, task=args.task, task_kwargs={"size": 400},
                    collaborators=args.collaborators, members=args.members.split(","), steps=args.steps,
                    eval_every=3, eval_items=32, test_items=args.test_items)
    start = time.perf_counter()
    reports = []
    for seed in range(args.seeds):
        reports += run_methods(METHODS, Path(args.out), preset="tiny", progress=True, seed=seed, **settings)
    total = time.perf_counter() - start

    rows = ["| method | collab (mean over seeds) | per seed [95% CI] | solo (mean) | per seed [95% CI] | "
            "rescue vs Base | drag vs Base |", "|---|---|---|---|---|---|---|"]
    summary = {}
    for method in METHODS:
        mine = [r for r in reports if r["method"] == method]
        collab = fmean(r["collab"]["mean"] for r in mine)
        solo = fmean(r["solo"]["mean"] for r in mine)
        per_collab = "; ".join(f"{r['collab']['mean']:.3f} [{r['collab']['ci'][0]:.3f}, {r['collab']['ci'][1]:.3f}]"
                               for r in mine)
        per_solo = "; ".join(f"{r['solo']['mean']:.3f} [{r['solo']['ci'][0]:.3f}, {r['solo']['ci'][1]:.3f}]"
                             for r in mine)
        vs = [r["vs_base_collab"] for r in mine if "vs_base_collab" in r]
        rescue = f"{fmean(v['rescue'] for v in vs):.3f}" if vs else "-"
        drag = f"{fmean(v['drag'] for v in vs):.3f}" if vs else "-"
        rows.append(f"| {method} | {collab:.3f} | {per_collab} | {solo:.3f} | {per_solo} | {rescue} | {drag} |")
        summary[method] = {"collab": collab, "solo": solo, "runs": mine}
    table = "\n".join(rows)
    print(f"\n{args.protocol} on {args.task}, policy {args.policy}, collaborators {args.collaborators} "
          f"{settings['members']}; {args.steps} steps, {args.seeds} seeds, {args.test_items} test items, "
          f"{total / 60:.1f} min\n")
    print(table)
    write_json(args.json, {"benchmark": "crl_tiny", "settings": {**settings, "seeds": args.seeds},
                           "total_seconds": total, "machine": machine_info(), "table": table, "methods": summary})
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
