"""Vectorized environments and the Ray executor, measured in one run.

1. Episodes per second of ``gym.make_vec(id, num_envs=n)`` for n = 1, 8, 64, with the simulated pool
   and with a tiny zoo pool (real transformers models), against n = 1: the batching gain. The policy
   replies with a fixed text, so the time is the environments' and the collaborators'.
2. Wall time of the same valuation job (exact Shapley + LOO, what ``cgym eval`` runs) with the local
   executor and with Ray on 2 local workers, for a simulated and a zoo pool (values must be identical).

    .venv/bin/python benchmarks/vector_and_ray.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
from _common import elapsed_seconds, machine_info, write_json

import coalition_gym  # noqa: F401  (registers the ids)
from coalition_gym.agents import load_pool
from coalition_gym.envs.executors import LocalExecutor, RayExecutor
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.tasks import make as make_task
from coalition_gym.valuation import CoalitionGame, exact_shapley, leave_one_out


def episodes_per_second(env_id: str, n: int, episodes: int, **kwargs) -> tuple[float, float]:
    """Finished episodes per second and asks per backend call, with autoreset running continuously."""
    env = gym.make_vec(env_id, num_envs=n, **kwargs)
    obs, _ = env.reset(seed=0)
    done = 0
    reply = tuple("Let me see.\nAnswer: 4" for _ in range(n))
    start = time.perf_counter()
    while done < episodes:
        obs, _, term, _, _ = env.step(reply)
        done += int(term.sum())
    seconds = time.perf_counter() - start
    factor = env.unwrapped.stats.batching_factor
    env.close()
    return done / seconds, factor


def eval_job(executor, pool_spec: str, protocol: str, items: int) -> tuple[float, list[float], int]:
    pool, task = load_pool(pool_spec), make_task("rg/basic_arithmetic", size=items)
    start = time.perf_counter()
    game = CoalitionGame(System.build(SystemSpec(make_protocol(protocol), task, pool,
                                                 split="test")), seed=0, executor=executor)
    values = exact_shapley(game, n_boot=100).values.tolist() + leave_one_out(game, n_boot=100).values.tolist()
    return time.perf_counter() - start, values, game.coalitions_evaluated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="benchmarks/results/vector_and_ray.json")
    args = parser.parse_args()
    sizes = (1, 8) if args.quick else (1, 8, 64)
    setups = [("sim:demo", "coalition_gym/Debate-v0", {"task_kwargs": {"size": 200}}, 64 if args.quick else 512),
              ("zoo:tiny", "coalition_gym/MajorityVote-v0",
               {"task": "rg/basic_arithmetic", "task_kwargs": {"size": 200}, "policy_style": "compact"},
               16 if args.quick else 128)]
    rows, vector = [], []
    for pool, env_id, kwargs, episodes in setups:
        base = None
        for n in sizes:
            eps, factor = episodes_per_second(env_id, n, max(episodes, n), collaborators=pool, **kwargs)
            base = base or eps
            vector.append({"pool": pool, "env_id": env_id, "num_envs": n, "episodes_per_s": eps,
                           "asks_per_backend_call": factor, "speedup_vs_1": eps / base})
            rows.append(f"| {pool} | {env_id} | {n} | {eps:,.1f} | {factor:.1f} | {eps / base:.2f}x |")
    print("| pool | env | sub-envs | episodes/s | asks per backend call | vs 1 sub-env |\n|---|---|---|---|---|---|")
    print("\n".join(rows))

    jobs = [("sim:random-6", "debate", 20 if args.quick else 60), ("zoo:tiny", "majority_vote", 10 if args.quick else 40)]
    ray_exec = RayExecutor(num_cpus=2)
    ray_rows = []
    print("\n| job | coalitions x items | local s | ray (2 local workers) s | ray / local | identical values |"
          "\n|---|---|---|---|---|---|")
    for pool_spec, protocol, items in jobs:
        local_s, local_values, coalitions = eval_job(LocalExecutor(), pool_spec, protocol, items)
        ray_s, ray_values, _ = eval_job(ray_exec, pool_spec, protocol, items)
        same = local_values == ray_values
        ray_rows.append({"pool": pool_spec, "protocol": protocol, "coalitions": coalitions, "items": items,
                         "local_seconds": local_s, "ray_seconds": ray_s, "ratio": ray_s / local_s, "identical": same})
        print(f"| {protocol}, {pool_spec}, exact Shapley + LOO | {coalitions} x {items} | {local_s:.2f} | "
              f"{ray_s:.2f} | {ray_s / local_s:.2f}x | {same} |")
    ray_exec.close()
    print("(Ray times include shipping work to the workers, not starting Ray)")
    result = {"benchmark": "vector_and_ray", "vector": vector, "ray": ray_rows,
              "machine": machine_info(), "total_seconds": elapsed_seconds()}
    out = Path(args.out if not args.quick else args.out.replace(".json", ".quick.json"))
    write_json(out, result)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
