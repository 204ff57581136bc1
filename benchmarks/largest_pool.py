"""The largest pool `cgym eval` values at its defaults: what it costs on this machine (issue 51, requirement 4).

Runs ``cgym eval --pool sim:random-N`` with nothing else set (debate, 200 items, every estimator that fits n:
leave-one-out, the sampled Shapley value at its default budget of 25n coalitions, sampled pairwise interactions)
as a child process, and records its wall and CPU time, its peak memory, the episodes and generations it ran and
what each estimator spent. A run made by hand can be recorded instead (``--from RUN_DIR --time-log FILE``, the
``/usr/bin/time -v`` log of that run; ``--paused-s``: seconds it was stopped with SIGSTOP, taken off the wall).

    python benchmarks/largest_pool.py [--members 64] [--out benchmarks/results/largest_pool.json]
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_json  # noqa: E402

RESULT = Path(__file__).resolve().parent / "results" / "largest_pool.json"


def from_time_log(text: str) -> dict:
    """CPU seconds and peak resident memory from ``/usr/bin/time -v``'s report."""
    def field(name: str) -> float:
        found = re.search(rf"{re.escape(name)}: ([\d.]+)", text)
        if found is None:
            raise SystemExit(f"the time log has no {name!r} line: is it /usr/bin/time -v output?")
        return float(found.group(1))
    return {"cpu_seconds": field("User time (seconds)") + field("System time (seconds)"),
            "peak_rss_mib": field("Maximum resident set size (kbytes)") / 1024}


def run_eval(members: int, out: Path) -> dict:
    command = [sys.executable, "-m", "coalition_gym.cli", "eval", "--pool", f"sim:random-{members}", "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command)
    if done.returncode != 0:
        raise SystemExit(f"`cgym eval` exited with {done.returncode}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_seconds": time.perf_counter() - start, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024}


def record(run_dir: Path, measured: dict) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    items = summary["n_items"]
    mc, interactions = summary.get("mc") or {}, summary.get("interactions") or {}
    return {"command": "cgym " + " ".join(run["argv"]), "git": run["git"], "pool": summary["pool_name"],
            "members": len(summary["models"]), "protocol": summary["protocol"], "items": items,
            "estimators": summary["estimator"], "episodes": summary["cost"]["coalitions_evaluated"] * items,
            **summary["cost"], "failed_episodes": summary["failed_episodes"],
            "mc": {k: mc.get(k) for k in ("sampler", "coalitions_used", "budget", "stop_reason", "rounds")},
            "interactions_exact": interactions.get("exact"), **measured,
            "hours": measured["wall_seconds"] / 3600, "cpu_hours": measured["cpu_seconds"] / 3600}


def table(r: dict) -> str:
    return ("| pool | protocol | items | coalitions | episodes | generations | wall | CPU | peak memory |\n"
            "|---|---|---|---|---|---|---|---|---|\n"
            f"| {r['pool']} | {r['protocol']} | {r['items']} | {r['coalitions_evaluated']} | {r['episodes']:,} | "
            f"{r['generations']:,} | {r['wall_seconds'] / 60:.0f} min | {r['cpu_seconds'] / 60:.0f} min | "
            f"{r['peak_rss_mib'] / 1024:.1f} GiB |")


def readme_sentence(r: dict) -> str:
    """The README's sentence on the largest pool valued at the defaults (tested against the result file)."""
    return (f"The largest pool valued here at `cgym eval`'s defaults: {r['members']} members "
            f"(`cgym eval --pool {r['pool']}`: {r['protocol']}, {r['items']} items, {r['coalitions_evaluated']:,} "
            f"coalitions, {r['episodes']:,} episodes, {r['generations']:,} generations) in "
            f"{r['wall_seconds'] / 60:.0f} min on this 2-core machine "
            f"({r['cpu_seconds'] / 60:.0f} min of CPU, {r['peak_rss_mib'] / 1024:.1f} GiB of memory at most; "
            "`benchmarks/largest_pool.py`).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--from", dest="run_dir", type=Path, help="record this finished run instead of running one")
    ap.add_argument("--time-log", type=Path, help="with --from: that run's /usr/bin/time -v output")
    ap.add_argument("--paused-s", type=float, default=0.0, help="with --from: seconds the run was stopped")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if args.run_dir is not None:
        if args.time_log is None:
            raise SystemExit("--from needs --time-log (the run's /usr/bin/time -v output)")
        run = json.loads((args.run_dir / "run.json").read_text())
        measured = {"wall_seconds": run["wall_seconds"] - args.paused_s, "paused_seconds": args.paused_s,
                    **from_time_log(args.time_log.read_text())}
        result = record(args.run_dir, measured)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = record(Path(tmp), run_eval(args.members, Path(tmp)))
    result["machine"] = machine_info()
    print(table(result))
    print(readme_sentence(result))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
