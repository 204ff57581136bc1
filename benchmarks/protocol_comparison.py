"""All ten collaboration methods side by side: what the full coalition gains over its best member, what
it costs, and whether solo strength predicts compositional strength.

For every protocol in PROTOCOLS with episodes (default settings), pool ``sim:demo``, and each task (default
``rg/basic_arithmetic`` and ``rg/gsm_symbolic``, ``--items`` test items), one run measures:

- full coalition: v(N), the mean system score of the whole pool;
- best solo: the best v({i}) (the member alone under the same protocol), and who it is;
- gain: full coalition - best solo;
- generations per episode: mean ``details["cost"]["calls"]`` of the full coalition's episodes, and that
  as a ratio to majority vote's (measured in this run);
- valuation generations: backend generations (cache misses) of the coalitions needed for solo and
  leave-one-out (n + 1 + n coalitions, generations shared between them), plus what the method spent
  before the episodes ("prep": the graph search of Heterogeneous Swarms, the trained router's dev
  answers);
- Spearman(solo, LOO) over the pool's members, with its exact permutation p-value.

Heterogeneous Swarms runs with a graph optimised on the task's dev split (``optimise_swarm``, the
method's PSO defaults; the graph is saved next to the JSON results), the trained router is fitted on
the dev split before the episodes (``TrainedRouter.fit``); every other method needs no preparation.

    .venv/bin/python benchmarks/protocol_comparison.py [--items 200] [--tasks TASK,TASK] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from coalition_gym import System, SystemSpec, load_pool, make_task, run_episodes
from coalition_gym import __version__ as package_version
from coalition_gym.envs import PROTOCOLS
from coalition_gym.training.swarm_search import optimise_swarm, swarm_system
from coalition_gym.valuation import CoalitionGame, leave_one_out, solo
from coalition_gym.valuation.stats import spearman

POOL = "sim:demo"
TASKS = "rg/basic_arithmetic,rg/gsm_symbolic"
N_BOOT = 200  # the bootstrap CIs are not reported here; keep them cheap
RESULTS = Path(__file__).resolve().parent / "results"
#: The collaboration methods with episodes: the training protocols (Sparta, multi-agent finetuning) train
#: their members first and are compared in collab_training.py.
EPISODIC = list(PROTOCOLS)  # coalition training (sparta, ...) is a training recipe, not a protocol
DEFAULT_OUT = RESULTS / "protocol_comparison.json"
QUICK_OUT = DEFAULT_OUT.with_name("protocol_comparison.quick.json")  # a smoke run never overwrites real results


def prepare(name: str, pool, task, items, graph_path: Path, seed: int):
    """The system as the benchmark runs it, and the generations spent preparing it."""
    if name == "heterogeneous_swarms":
        search = optimise_swarm(swarm_system(pool, task), seed=seed, out=graph_path)
        graph_path = Path(os.path.relpath(graph_path))  # results name it as the README does
        spec = SystemSpec(name, task, pool, split="test", n_items=len(items),
                          protocol_settings={"graph": str(graph_path)})
        return System.build(spec), search.generations, {
            "dev_score": search.dev_score, "dev_items": search.dev_items, "end": search.graph.meta["end"],
            "edges": search.graph.meta["decoded_edges"], "pso_history": search.pso.history, "graph": str(graph_path)}
    system = System.build(SystemSpec(name, task, pool, split="test", n_items=len(items)))
    if name == "trained_router":
        known = system.protocol.fit(system.learned, task, pool.backends(), pool.member_names, pool.styles)
        return system, sum(len(v) for v in known.values()), {
            "dev_accuracy": {m: float(v.mean()) for m, v in known.items()}}
    return system, 0, {}


def measure(name: str, pool, task, items, graph_path: Path, seed: int) -> dict:
    start = time.perf_counter()
    system, prep_gens, prep = prepare(name, pool, task, items, graph_path, seed)
    protocol = system.protocol
    game = CoalitionGame(system, seed=seed)
    loo = leave_one_out(game, n_boot=N_BOOT, seed=seed)
    alone = solo(game, n_boot=N_BOOT, seed=seed)
    valuation_gens = game.generations
    players = list(game.players)
    full = game.value(players)
    best = max(players, key=lambda p: alone[p])
    # The full coalition once more, outside the game, to read each episode's cost (same seeds).
    replay = System.build(SystemSpec(protocol, task, pool, players, split=None), dev_scores=pool.dev_scores,
                          learned=system.learned)
    episodes = run_episodes(replay, items, seed=seed)
    costs = [r.outcome.details["cost"] for r in episodes if r.outcome is not None]
    corr = spearman(alone.values, loo.values)
    return {
        "protocol": name, "settings": protocol.settings(), "full": full, "best_solo": alone[best], "best_member": best,
        "gain": full - alone[best], "solo": alone.as_dict(), "loo": loo.as_dict(),
        "calls_per_episode": float(np.mean([c["calls"] for c in costs])),
        "tokens_per_episode": float(np.mean([c["tokens"] for c in costs])),
        "valuation_generations": valuation_gens, "prep_generations": prep_gens,
        "coalitions": game.coalitions_evaluated + (alone.coalitions_evaluated if game.solo_game() is not game else 0),
        "spearman": None if math.isnan(corr.statistic) else corr.statistic, "spearman_p": corr.p_value,
        "spearman_method": corr.method, "failures": game.failures,
        "same_as_game": bool(np.isclose(np.mean([r.score for r in episodes]), full)),
        "prep": prep, "wall_s": time.perf_counter() - start,
    }


def fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def table(rows: list[dict]) -> str:
    lines = ["| task | method | full coalition | best solo | gain | gens/episode | vs majority vote | "
             "valuation gens (+prep) | Spearman(solo, LOO) | p |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        prep = f" (+{r['prep_generations']:,})" if r["prep_generations"] else ""
        lines.append(f"| {r['task']} | {r['protocol']} | {r['full']:.3f} | {r['best_solo']:.3f} ({r['best_member']}) | "
                     f"{r['gain']:+.3f} | {r['calls_per_episode']:.1f} | {r['calls_ratio_mv']:.2f}x | "
                     f"{r['valuation_generations']:,}{prep} | {fmt(r['spearman'], '+.2f')} | {r['spearman_p']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200, help="test items per task (also the dev split size)")
    parser.add_argument("--tasks", default=TASKS, help="comma-separated task names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"JSON results (default: {DEFAULT_OUT}; --quick: {QUICK_OUT.name} beside it)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (24 items) to check it works")
    args = parser.parse_args()
    if args.quick:
        args.items = 24
    if args.items < 4:
        parser.error("--items must be >= 4 (the swarm search needs dev items)")
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)

    pool = load_pool(POOL)
    rows = []
    start = time.perf_counter()
    for task_name in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        task = make_task(task_name, size=args.items)
        items = list(task.items("test"))
        slug = task_name.replace("/", "_")
        suffix = ".quick" if args.quick else ""
        graph_path = args.out.parent / f"protocol_comparison_swarm_graph_{slug}{suffix}.json"
        per_task = [dict(measure(name, pool, task, items, graph_path, args.seed), task=task_name)
                    for name in EPISODIC]
        baseline = next(r for r in per_task if r["protocol"] == "majority_vote")["calls_per_episode"]
        for r in per_task:
            r["calls_ratio_mv"] = r["calls_per_episode"] / baseline
        rows += per_task
    text = table(rows)
    print(f"Pool {POOL} ({', '.join(pool.member_names)}), {args.items} test items per task, seed {args.seed}\n")
    print(text)
    result = {
        "pool": POOL, "members": pool.member_names, "items": args.items, "seed": args.seed, "rows": rows,
        "table": text, "wall_s": time.perf_counter() - start,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "implementation": platform.python_implementation(), "cpu_count": os.cpu_count(),
                    "package": package_version},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=float))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
