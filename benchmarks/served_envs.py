"""Served environments at trainer scale: episodes/s of one `cgym serve` server against the sessions open on it,
next to in-process ``make_vec`` with as many sub-environments; and one TRL step over served sessions against the
same step in process.

Majority vote on ``zoo:arith`` (the seat answers once, with a fixed reply: no policy cost), for four pools:
``sim:demo`` (nearly free members: the wire's own cost), ``zoo:tiny`` and ``zoo:default`` (the shipped tiny
transformers: real forward passes; tiny's cost about what the wire costs) and ``mock-openai``: three members behind
an OpenAI-compatible mock server written here (in a child process of its own) that answers each batch of requests
arriving together after a fixed latency (``--latency``: 0.25 s and 1 s, a remote model's answer times; one mock
pool each), three models of that server (three backends; three names of one model would share one client) with
``max_concurrency`` 64 each.

For each pool and each number of sessions n (1, 8, 32, 64), one run measures:

1. **served**: one server (a child process, one torch thread; its local models in that process, as ``cgym serve``
   runs them by default), n sessions of OpenEnv's own async client in one client
   process (this one), opened before the clock starts (a trainer keeps its sessions), each playing its share of the
   same seeded episodes; episodes/s; CPU per episode of the server (with its model process, if any), and of the
   clients;
2. **make_vec**: ``gym.make_vec(id, num_envs=n)`` in process, stepped until as many episodes finished; episodes/s.

Every mode is timed ``--repeats`` times, interleaved, after an untimed warm-up; the table shows the median and the
range. The served episodes' rewards are compared with their in-process replays (the same seed, a
``CollaborationEnv``): equal at every n. The server's own ``Served.load()`` counters (Asks per backend call, its
mean batch size) are read after each served pass through ``/metrics`` when that route is there.

**TRL step**: ``ServedRollout`` (n = G x B rows over one server) against ``ProtocolRollout`` in process on the same
prompts, step and rows: wall time of the rollout call (zoo:tiny/pico policy, ``sim:demo`` members), and the rows'
rewards (equal: the same row loop, seeds and policy).

    .venv/bin/python benchmarks/served_envs.py [--repeats 5] [--latency 0.25] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import elapsed_seconds, machine_info, write_json

ENV_ID, TASK, SIZE, REPLY = "coalition_gym/MajorityVote-v0", "zoo:arith", 200, "I think it is 4.\nAnswer: 4"
RESULTS = Path(__file__).resolve().parent / "results"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SESSIONS = (1, 8, 32, 64)
DEFAULT_POOLS = "sim:demo,zoo:tiny,zoo:default,mock-openai"
#: episodes per pass (a multiple of every n): sized so one pass takes a few seconds on 2 cores; behind the mock,
#: where an episode waits out the latency, 8 per session (16 for one: a rate, not a count, is what is compared)
EPISODES = {"sim:demo": 384, "zoo:tiny": 384, "zoo:default": 256}


def episodes_for(pool: str, n: int, scale: int) -> int:
    return max(n, (EPISODES[pool] if pool in EPISODES else max(16, 8 * n)) // scale)


# -- the mock OpenAI-compatible server -------------------------------------------------------------------------

def mock_app(latency: float) -> Any:
    """``/v1/chat/completions`` answering every batch of requests that arrive together after ``latency`` seconds
    (the first request of a batch opens it; all that arrive before it closes are answered at once); ``/stats``
    counts requests and batches."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    counts = {"requests": 0, "batches": 0}
    window: list[asyncio.Future] = []

    async def chat(request: Any) -> JSONResponse:
        body = await request.json()
        counts["requests"] += 1
        if not window or window[0].done():
            loop = asyncio.get_running_loop()
            window[:] = [loop.create_future()]
            counts["batches"] += 1
            loop.call_later(latency, window[0].set_result, None)
        await asyncio.shield(window[0])
        answer = sum(map(ord, body["messages"][-1]["content"])) % 10  # deterministic in the prompt, as greedy is
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": f"Answer: {answer}"},
                                          "finish_reason": "stop"}], "usage": {"completion_tokens": 2}})

    async def stats(request: Any) -> JSONResponse:
        return JSONResponse(counts)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/stats", stats)])


class MockOpenAI:
    """The mock in a child process of its own (its work does not share the clients' interpreter lock)."""

    def __init__(self, latency: float):
        from coalition_gym.integrations.processes import free_port

        self.latency, self.port = latency, free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "MockOpenAI":
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-mock", str(self.port), "--latency",
                                         str(self.latency)])
        while True:
            try:
                self.stats()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("the mock OpenAI server exited") from None
                time.sleep(0.1)

    def stats(self) -> dict[str, int]:
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=2) as reply:
            return json.loads(reply.read())

    def __exit__(self, *exc: Any) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)


def mock_pool_file(folder: Path, url: str) -> Path:
    members = "\n".join(f"  - {{name: m{k}, backend: openai, model: mock-{k}, base_url: '{url}', max_concurrency: 64, "
                        f"style: compact}}" for k in range(3))
    path = folder / "mock-openai.yaml"
    path.write_text(f"name: mock-openai\nmembers:\n{members}\n")
    return path


# -- the modes ------------------------------------------------------------------------------------------------

async def _served_pass(url: str, seeds: list[int], sessions: int) -> tuple[float, float, list[float]]:
    """The sessions open first (a trainer keeps its sessions across steps; make_vec's envs exist before its pass
    too), then the timed episodes."""
    from contextlib import AsyncExitStack

    from openenv.core.generic_client import GenericEnvClient

    shards = [seeds[k::sessions] for k in range(sessions)]
    rewards: dict[int, float] = {}

    async def play(env: Any, shard: list[int]) -> None:
        for seed in shard:
            result = await env.reset(seed=seed)
            while not result.done:
                result = await env.step({"text": REPLY})
            rewards[seed] = float(result.reward)

    async with AsyncExitStack() as stack:
        envs = [await stack.enter_async_context(GenericEnvClient(base_url=url, message_timeout_s=600))
                for _ in shards]
        start = time.perf_counter()
        await asyncio.gather(*(play(env, shard) for env, shard in zip(envs, shards)))
        wall = time.perf_counter() - start
    return wall, len(seeds) / wall, [rewards[s] for s in seeds]


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process and its live children (the server's model process) have used."""
    import psutil

    process = psutil.Process(pid)
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def served_pass(url: str, seeds: list[int], sessions: int, server_pid: int) -> dict[str, Any]:
    """One pass over the server; CPU ms per episode of the server process and of this (the clients') process."""
    server0, client0 = process_cpu_s(server_pid), time.process_time()
    wall, rate, rewards = asyncio.run(_served_pass(url, seeds, sessions))
    server, client = process_cpu_s(server_pid) - server0, time.process_time() - client0
    return {"wall_s": wall, "episodes_per_s": rate, "rewards": rewards,
            "server_cpu_ms_per_episode": 1000 * server / len(seeds),
            "client_cpu_ms_per_episode": 1000 * client / len(seeds)}


def vec_pass(env: Any, episodes: int, n: int) -> dict[str, Any]:
    start, cpu = time.perf_counter(), time.process_time()  # the reset runs the first episodes' members: timed
    env.reset(seed=0)
    done, total = 0, 0.0
    while done < episodes:
        _, reward, terminated, _, _ = env.step([REPLY] * n)
        done += int(terminated.sum())
        total += float(reward.sum())
    wall = time.perf_counter() - start
    return {"wall_s": wall, "episodes_per_s": done / wall, "reward_mean": total / done,
            "cpu_ms_per_episode": 1000 * (time.process_time() - cpu) / done}


def in_process_rewards(spec: Any, seeds: list[int], threads: int = 1) -> list[float]:
    """Each seed's episode in a ``CollaborationEnv`` of its own; ``threads`` of them at once (behind a remote
    server, where an episode waits out its latency), one env per thread."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from coalition_gym.envs.gym_env import CollaborationEnv

    local = threading.local()

    def play(seed: int) -> float:
        if not hasattr(local, "env"):
            local.env = CollaborationEnv(spec, policy_style="compact")
        local.env.reset(seed=seed)
        done, reward = False, 0.0
        while not done:
            _, reward, done, _, _ = local.env.step(REPLY)
        return float(reward)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(play, seeds))


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    rates = [r["episodes_per_s"] for r in runs]
    cpu = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key.endswith("cpu_ms_per_episode")}
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates), **cpu}


def bench_pool(pool: str, pool_arg: str, repeats: int, scale: int) -> dict[str, Any]:
    import gymnasium as gym

    from coalition_gym.envs.system import SystemSpec
    from coalition_gym.integrations.processes import ServerProcess

    spec = SystemSpec("majority_vote", task=TASK, collaborators=pool_arg, split="train", task_kwargs={"size": SIZE})
    counts = {n: episodes_for(pool, n, scale) for n in SESSIONS}
    seeds = list(range(max(counts.values())))
    server = ServerProcess(ENV_ID, ["--pool", pool_arg, "--task", TASK, "--size", str(SIZE), "--policy-style",
                                    "compact", "--max-sessions", "256"], env=ONE_THREAD).start()
    vecs = {n: gym.make_vec(ENV_ID, num_envs=n, task=TASK, collaborators=pool_arg, task_kwargs={"size": SIZE},
                            policy_style="compact") for n in SESSIONS}
    runs: dict[str, list[dict[str, Any]]] = {f"{mode}/{n}": [] for n in SESSIONS for mode in ("served", "vec")}
    try:
        pid = server.process.pid  # type: ignore[union-attr]
        served_pass(server.url, seeds[:max(SESSIONS)], max(SESSIONS), pid)  # warm-up: every process, every path
        for n in SESSIONS:
            vec_pass(vecs[n], n, n)
        for _ in range(repeats):
            for n in SESSIONS:
                runs[f"served/{n}"].append(served_pass(server.url, seeds[:counts[n]], n, pid))
                runs[f"vec/{n}"].append(vec_pass(vecs[n], counts[n], n))
        load = server_load(server.url)
    finally:
        server.stop()
        for env in vecs.values():
            env.close()
    replay = in_process_rewards(spec, seeds, threads=64 if pool.startswith("mock") else 1)
    same = all(r["rewards"] == replay[:len(r["rewards"])] for key, rs in runs.items() if key.startswith("served")
               for r in rs)
    for rs in runs.values():
        for r in rs:
            r.pop("rewards", None)
    rows = {n: {"served": summary(runs[f"served/{n}"]), "vec": summary(runs[f"vec/{n}"])} for n in SESSIONS}
    one = rows[1]["served"]["median"]
    for n, row in rows.items():
        row["served_vs_vec"] = row["served"]["median"] / row["vec"]["median"]
        row["served_vs_one_session"] = row["served"]["median"] / one
    return {"pool": pool, "episodes": counts, "repeats": repeats, "rows": rows, "runs": runs,
            "served_rewards_equal_in_process": same, "reward_mean": sum(replay) / len(replay), "server_load": load}


def server_load(url: str) -> str | None:
    """The server's /metrics text (its batch sizes), when it serves that route."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as reply:
            return reply.read().decode()
    except OSError:
        return None


# -- a TRL step -------------------------------------------------------------------------------------------------

def trl_step(repeats: int, prompts_per_step: int = 8, group: int = 8) -> dict[str, Any]:
    """ServedRollout over one server against ProtocolRollout in process: the same prompts, step and rows."""
    from types import SimpleNamespace

    from coalition_gym.integrations.openenv_rollout import ServedRollout
    from coalition_gym.integrations.processes import ServerProcess
    from coalition_gym.training.policy_model import load_policy
    from coalition_gym.training.trl_rollouts import ProtocolRollout

    model, tokenizer = load_policy("zoo:tiny/pico", "cpu", "float32")
    args = SimpleNamespace(max_completion_length=8, temperature=1.0, top_p=1.0)
    trainer = SimpleNamespace(model=model, processing_class=tokenizer, args=args, state=SimpleNamespace(global_step=0),
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m, process_index=0))
    members = ["atlas", "delta"]
    local = ProtocolRollout("majority_vote", task=TASK, task_kwargs={"size": SIZE}, collaborators="sim:demo",
                            members=members, policy_style="compact")
    server = ServerProcess(ENV_ID, ["--pool", "sim:demo", "--members", ",".join(members), "--task", TASK, "--size",
                                    str(SIZE), "--policy-style", "compact", "--max-sessions", "256"],
                           env=ONE_THREAD).start()
    wire = ServedRollout([server.url], task=TASK, task_kwargs={"size": SIZE}, policy_style="compact")
    prompts = [p for p in list(local.dataset("train", limit=prompts_per_step)["prompt"]) for _ in range(group)]
    wire.dataset_rows("train", limit=prompts_per_step)
    times: dict[str, list[float]] = {"in_process": [], "served": []}
    rewards: dict[str, list] = {}
    try:
        for mode, rollout in (("in_process", local), ("served", wire)):  # warm-up
            rollout(prompts, trainer)
        for _ in range(repeats):
            for mode, rollout in (("in_process", local), ("served", wire)):
                start = time.perf_counter()
                out = rollout(prompts, trainer)
                times[mode].append(time.perf_counter() - start)
                rewards[mode] = out["system_score"]
    finally:
        wire.close()
        server.stop()
    med = {mode: statistics.median(ts) for mode, ts in times.items()}
    return {"rows": len(prompts), "prompts": prompts_per_step, "group": group, "seconds": times,
            "median_s": med, "served_vs_in_process": med["served"] / med["in_process"],
            "same_rewards": rewards["in_process"] == rewards["served"]}


# -- the table --------------------------------------------------------------------------------------------------

def table(pools: list[dict[str, Any]]) -> str:
    lines = ["| pool | sessions n | served ep/s median [min, max] | make_vec(n) ep/s median [min, max] | served / "
             "make_vec | served / 1 session | CPU ms/episode: server + clients (make_vec) |",
             "|---|---|---|---|---|---|---|"]
    for pool in pools:
        for n, row in pool["rows"].items():
            s, v = row["served"], row["vec"]
            lines.append(f"| {pool['pool']} | {n} | {s['median']:.1f} [{s['min']:.1f}, {s['max']:.1f}] | "
                         f"{v['median']:.1f} [{v['min']:.1f}, {v['max']:.1f}] | {row['served_vs_vec']:.2f}x | "
                         f"{row['served_vs_one_session']:.1f}x | {s['server_cpu_ms_per_episode']:.1f} + "
                         f"{s['client_cpu_ms_per_episode']:.1f} ({v['cpu_ms_per_episode']:.1f}) |")
    return "\n".join(lines)


def headline(pools: list[dict[str, Any]], n: int = max(SESSIONS)) -> str:
    """The README's table: each pool at ``n`` sessions, served against make_vec(n) (median, and the range between
    the passes' extremes: slowest served over fastest make_vec, fastest over slowest) and against one session."""
    lines = [f"| pool ({n} sessions) | served ep/s | served / make_vec({n}) [range] | served / 1 session |",
             "|---|---|---|---|"]
    for pool in pools:
        row = pool["rows"].get(n, pool["rows"].get(str(n)))
        s, v = row["served"], row["vec"]
        lines.append(f"| {pool['pool']} | {s['median']:.1f} | {row['served_vs_vec']:.2f}x [{s['min'] / v['max']:.2f}, "
                     f"{s['max'] / v['min']:.2f}] | {row['served_vs_one_session']:.1f}x |")
    return "\n".join(lines)


def kept_pools(path: Path, pools: list[dict[str, Any]], mock: dict[str, Any],
               order: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """This run's pools with the earlier result's other pools kept (a ``--pools`` rerun of some pools replaces
    only those), in the default order."""
    import json

    if not path.exists():
        return pools, mock
    earlier = json.loads(path.read_text())
    fresh = {p["pool"] for p in pools}
    merged = [p for p in earlier.get("pools", []) if p["pool"] not in fresh] + pools
    rank = {name: k for k, name in enumerate(order)}
    merged.sort(key=lambda p: rank.get(p["pool"].split(" ")[0], len(rank)))
    return merged, {**{k: v for k, v in earlier.get("mock_openai", {}).items() if k not in fresh}, **mock}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--repeats", type=int, default=5, help="timed passes per mode, interleaved; the median is shown")
    p.add_argument("--latency", default="0.25,1.0", help="the mock OpenAI server's answer times (s), comma-separated: "
                                                         "one mock pool each")
    p.add_argument("--pools", default=DEFAULT_POOLS, help="pools to run; the result file's other pools are kept")
    p.add_argument("--quick", action="store_true", help="a smoke run (few episodes; results not overwritten)")
    p.add_argument("--serve-mock", type=int, default=None, metavar="PORT", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_mock is not None:  # the mock's own process
        import uvicorn

        uvicorn.run(mock_app(float(args.latency)), host="127.0.0.1", port=args.serve_mock, log_level="error")
        return
    import tempfile

    import torch

    torch.set_num_threads(1)
    scale = 8 if args.quick else 1
    pools, mock_batches = [], {}
    names = args.pools.split(",")
    with tempfile.TemporaryDirectory() as folder:
        for pool in names:
            if pool != "mock-openai":
                pools.append(bench_pool(pool, pool, 1 if args.quick else args.repeats, scale))
                print(table(pools[-1:]), flush=True)
                continue
            for latency in (float(x) for x in args.latency.split(",")):
                with MockOpenAI(latency) as mock:
                    name = f"mock-openai {latency:g} s"
                    pools.append(bench_pool(name, str(mock_pool_file(Path(folder), mock.url)),
                                            1 if args.quick else args.repeats, scale))
                    mock_batches[name] = mock.stats()
                print(table(pools[-1:]), flush=True)
    step = trl_step(1 if args.quick else args.repeats)
    trl_line = (f"TRL step ({step['rows']} rows = {step['prompts']} prompts x G={step['group']}): in process "
                f"{step['median_s']['in_process']:.2f} s, over one server {step['median_s']['served']:.2f} s "
                f"({step['served_vs_in_process']:.2f}x); rewards equal: {step['same_rewards']}")
    name = "served_envs.quick" if args.quick else "served_envs"
    pools, mock_batches = kept_pools(RESULTS / f"{name}.json", pools, mock_batches, DEFAULT_POOLS.split(","))
    text = table(pools)
    print(text)
    print(trl_line)
    result = {"machine": machine_info(), "env_id": ENV_ID, "task": TASK, "latencies_s": args.latency,
              "pools": pools, "mock_openai": mock_batches, "trl_step": step, "total_seconds": elapsed_seconds()}
    print(f"wrote {write_json(RESULTS / f'{name}.json', result)}")
    (RESULTS / f"{name}.md").write_text(f"# Served environments ({ENV_ID}, {TASK}; one server; median [range] of "
                                        f"{args.repeats} interleaved passes)\n\n{text}\n\n{trl_line}\n")


if __name__ == "__main__":
    main()
