"""What serving an environment costs, and when it pays: in-process vs one `cgym serve` server vs two.

For each pool (``sim:demo``: nearly free members, so the numbers are the wire's own cost; ``zoo:default``: the
shipped tiny transformers, a real model's forward passes), debate with 2 rounds on ``zoo:arith`` (the seat is
asked twice: two steps per episode), with a fixed reply in the seat (no policy cost), one run measures:

1. **in-process**: ``CollaborationEnv``, one episode after another; ms per step = wall / steps;
2. **one server, one client**: the same episodes (same seeds) over OpenEnv's WebSocket, one after another:
   *overhead per step* = its ms per step minus in-process's (serialisation, the socket, the server's thread hop);
3. **wire only**: the same, with the server in a thread of the benchmark's own process (no second process to
   schedule): the socket and serialisation alone;
4. **one server, C clients** and **two servers, C clients**: C sessions at once (spread round-robin over the
   servers): episodes per second, the scale-out.

Every mode is timed ``--repeats`` times, interleaved, after one untimed pass of every episode in every process;
the table shows each mode's median pass (the development machine is shared: its load drifts, and a zoo episode's
time varies several-fold from pass to pass; every pass is in the JSON). One torch thread per process. Servers are
child processes (``cgym serve``) on 127.0.0.1; the same seeds give the same episodes in every mode (checked: the
summed rewards agree). Ratios are measured in the same run; absolute numbers vary by machine (the
development machine has 2 cores, shared).

    .venv/bin/python benchmarks/served_envs.py [--episodes-sim 200] [--episodes-zoo 12] [--clients 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import elapsed_seconds, machine_info, write_json

from coalition_gym.envs.gym_env import CollaborationEnv
from coalition_gym.envs.system import SystemSpec
from coalition_gym.integrations.openenv_client import ServedEnv
from coalition_gym.integrations.processes import ServerProcess, ThreadServer
from coalition_gym.integrations.serve_options import ServeOptions

TASK, ROUNDS, REPLY = "zoo:arith", 2, "I think it is 4.\nAnswer: 4"
RESULTS = Path(__file__).resolve().parent / "results"
#: one torch thread in every process (this one and the servers): on a small shared machine more threads fight
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def spec_of(pool: str) -> SystemSpec:
    return SystemSpec("debate", task=TASK, collaborators=pool, task_kwargs={"size": 200, "seed": 0},
                      protocol_settings={"rounds": ROUNDS})


def server_args(pool: str) -> list[str]:
    return ["--pool", pool, "--task", TASK, "--size", "200", "--set", f"rounds={ROUNDS}", "--max-sessions", "256"]


def play_local(env: CollaborationEnv, seeds: list[int]) -> dict[str, Any]:
    steps, total = 0, 0.0
    start = time.perf_counter()
    for seed in seeds:
        env.reset(seed=seed)
        done = False
        while not done:
            _, reward, done, _, _ = env.step(REPLY)
            steps += 1
        total += reward
    wall = time.perf_counter() - start
    return {"episodes": len(seeds), "steps": steps, "wall_s": wall, "reward_sum": total}


def served(urls: list[str], seeds: list[int], clients: int) -> dict[str, Any]:
    sessions = [ServedEnv(urls[k % len(urls)]) for k in range(clients)]
    for session in sessions:  # connect and warm each session
        session.reset(seed=10**6)
    shards = [seeds[k::clients] for k in range(clients)]

    def play(k: int) -> tuple[int, float]:
        steps, total = 0, 0.0
        for seed in shards[k]:
            result = sessions[k].reset(seed=seed)
            while not result.done:
                result = sessions[k].step(REPLY)
                steps += 1
            total += float(result.reward)
        return steps, total

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        results = list(pool.map(play, range(clients)))
    wall = time.perf_counter() - start
    for session in sessions:
        session.close()
    return {"episodes": len(seeds), "steps": sum(s for s, _ in results), "wall_s": wall,
            "reward_sum": sum(t for _, t in results), "clients": clients, "servers": len(urls)}


def rates(run: dict[str, Any]) -> dict[str, Any]:
    return {**run, "episodes_per_s": run["episodes"] / run["wall_s"],
            "ms_per_step": 1000 * run["wall_s"] / run["steps"]}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The repetition with the median wall time (its own counts and rates kept together)."""
    return rates(sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2])


def bench_pool(pool: str, episodes: int, clients: int, repeats: int) -> dict[str, Any]:
    """Each mode ``repeats`` times, interleaved (a shared machine's load drifts: every mode sees the same drift),
    after one untimed pass of every episode in-process and on each server."""
    seeds = list(range(episodes))
    env = CollaborationEnv(spec_of(pool))
    servers = [ServerProcess("coalition_gym/Debate-v0", server_args(pool), env=ONE_THREAD).launch() for _ in range(2)]
    runs: dict[str, list[dict[str, Any]]] = {"in_process": [], "one_server_one_client": [], "thread_server": [],
                                             "one_server": [], "two_servers": []}
    thread = ThreadServer(spec_of(pool), ServeOptions(port=0)).start()
    try:
        urls = [s.wait_ready().url for s in servers]
        play_local(env, seeds)  # the untimed pass: every process has seen every episode once
        with ThreadPoolExecutor(max_workers=3) as warm:
            list(warm.map(lambda url: served([url], seeds, 1), [*urls, thread.url]))
        for _ in range(repeats):
            runs["in_process"].append(play_local(env, seeds))
            runs["one_server_one_client"].append(served(urls[:1], seeds, 1))
            runs["thread_server"].append(served([thread.url], seeds, 1))
            runs["one_server"].append(served(urls[:1], seeds, clients))
            runs["two_servers"].append(served(urls, seeds, clients))
    finally:
        thread.stop()
        for s in servers:
            s.stop()
    sums = {round(r["reward_sum"], 6) for mode in runs.values() for r in mode}
    local, one_seq, in_thread, one, two = (median_run(runs[k]) for k in runs)
    overhead = one_seq["ms_per_step"] - local["ms_per_step"]
    wire = in_thread["ms_per_step"] - local["ms_per_step"]
    return {"pool": pool, "episodes": episodes, "clients": clients, "repeats": repeats,
            "same_rewards_everywhere": len(sums) == 1,
            "in_process": local, "one_server_one_client": one_seq, "thread_server": in_thread, "one_server": one,
            "two_servers": two, "all_runs": runs, "overhead_ms_per_step": overhead,
            "wire_ms_per_step": wire, "wire_share_of_in_process_step": wire / local["ms_per_step"],
            "overhead_share_of_in_process_step": overhead / local["ms_per_step"],
            "two_servers_vs_in_process": two["episodes_per_s"] / local["episodes_per_s"],
            "two_servers_vs_one_server": two["episodes_per_s"] / one["episodes_per_s"]}


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| pool | in-process ep/s | ms/step in-process | ms/step served (1 client) | overhead ms/step | "
            "overhead share | wire only ms/step (share) | 1 server ep/s (C clients) | 2 servers ep/s (C clients) | "
            "2 servers / in-process |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        local = r["in_process"]
        lines.append(f"| {r['pool']} | {local['episodes_per_s']:.1f} | {local['ms_per_step']:.2f} | "
                     f"{r['one_server_one_client']['ms_per_step']:.2f} | {r['overhead_ms_per_step']:.2f} | "
                     f"{100 * r['overhead_share_of_in_process_step']:.0f}% | {r['wire_ms_per_step']:.2f} "
                     f"({100 * r['wire_share_of_in_process_step']:.0f}%) | {r['one_server']['episodes_per_s']:.1f} | "
                     f"{r['two_servers']['episodes_per_s']:.1f} | {r['two_servers_vs_in_process']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--episodes-sim", type=int, default=200)
    p.add_argument("--episodes-zoo", type=int, default=12)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5, help="timed passes per mode, interleaved; the median is shown")
    p.add_argument("--quick", action="store_true", help="a smoke run (few episodes; results not overwritten)")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.quick:
        args.episodes_sim, args.episodes_zoo, args.repeats = 20, 4, 1
    rows = [bench_pool("sim:demo", args.episodes_sim, args.clients, args.repeats),
            bench_pool("zoo:default", args.episodes_zoo, args.clients, args.repeats)]
    text = table(rows)
    print(text)
    name = "served_envs.quick" if args.quick else "served_envs"
    result = {"machine": machine_info(), "protocol": "debate", "rounds": ROUNDS, "task": TASK, "rows": rows,
              "total_seconds": elapsed_seconds()}
    print(f"wrote {write_json(RESULTS / f'{name}.json', result)}")
    (RESULTS / f"{name}.md").write_text(f"# Served environments (debate, {ROUNDS} rounds, {TASK}; C = "
                                        f"{args.clients} clients; median of {args.repeats} interleaved passes)"
                                        f"\n\n{text}\n")


if __name__ == "__main__":
    main()
