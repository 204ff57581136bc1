"""Is collaboration worth its tokens? Each protocol against cost-matched single-model baselines.

Every protocol of the package (the ten in ``PROTOCOLS``, each at its defaults: the learned ones, trained_router
and heterogeneous_swarms, with their untrained default state) on four pools x two tasks, 200 test items per
setting, through :func:`coalition_gym.reports.gain.gain` (what `cgym gain` runs): per protocol, its score and
mean cost per item in generated tokens, against the best single member (chosen on the task's dev split), that
member's self-consistency@k with k matched to the
protocol's mean token cost (k <= 16), and the pool's majority vote when it costs no more. Gain = protocol score
minus the best admissible baseline's, 95% paired item-bootstrap CI (2000 resamples, seed 0); a protocol *wins*
a setting when the CI is above 0, *loses* it when below.

Pools (the three simulated ones count one token per whitespace word of a reply; the zoo counts token ids):

- ``sim:demo``, correlated errors: atlas 0.72, borealis 0.68, cirrus 0.64 share their blind spots and wrong
  answers (correlation 0.9); delta 0.5 knows what they do not;
- ``sim:independent``, independent errors: four agents of skill 0.6;
- ``one_strong`` (defined below), one strong member: ace 0.85 and three independent members of skill 0.5;
- ``zoo:default``, the shipped tiny transformers models (CPU, offline).

Tasks: ``rg/basic_arithmetic`` and ``rg/gsm_symbolic`` for the simulated pools; ``zoo:arith`` and
``zoo:reverse`` (the tasks the zoo's models were trained on) for the zoo.

Settings were fixed before any result was seen and are not tuned on them.

    .venv/bin/python benchmarks/collaboration_gain.py           # 9.2 min on 2 cores (shared with another job)
    .venv/bin/python benchmarks/collaboration_gain.py --quick   # 30 items (collaboration_gain.quick.*, not kept)

Writes benchmarks/results/collaboration_gain.json, .md and .png (gain with CI per setting and protocol).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import elapsed_seconds, machine_info, write_json

from coalition_gym import PROTOCOLS as ALL_PROTOCOLS
from coalition_gym.agents.pools import load_pool
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.reports.gain import GainOptions, GainReport, gain, gain_share
from coalition_gym.reports.pareto import pareto_front, points
from coalition_gym.result_files import write_text
from coalition_gym.tasks import make as make_task

RESULTS = Path(__file__).parent / "results"
PROTOCOLS = list(ALL_PROTOCOLS)  # every protocol (cgym gain's default --protocols are the first four's)
ONE_STRONG = {"name": "one_strong", "members": [
    {"name": "ace", "backend": "sim", "profile": {"skill": 0.85}},
    *({"name": f"b{i}", "backend": "sim", "profile": {"skill": 0.5}} for i in (1, 2, 3))]}
SIM_TASKS = ["rg/basic_arithmetic", "rg/gsm_symbolic"]
#: (label, what it shows, pool spec, tasks)
SETTINGS: list[tuple[str, str, Any, list[str]]] = [
    ("sim:demo", "correlated errors", "sim:demo", SIM_TASKS),
    ("sim:independent", "independent errors", "sim:independent", SIM_TASKS),
    ("one_strong", "one strong member", ONE_STRONG, SIM_TASKS),
    ("zoo:default", "shipped zoo", "zoo:default", ["zoo:arith", "zoo:reverse"]),
]
OPTIONS = GainOptions(unit="tokens", max_k=16, seed=0, n_boot=2000)


def fmt(e: dict[str, Any]) -> str:
    return f"{e['value']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]"


def run_setting(pool_spec: Any, task_name: str, items: int) -> tuple[GainReport, float]:
    start = time.perf_counter()
    pool, task = load_pool(pool_spec), make_task(task_name, size=items)
    systems = [System.build(SystemSpec(name, task, pool, split="test", n_items=items)) for name in PROTOCOLS]
    return gain(systems, OPTIONS), time.perf_counter() - start


def summarise(report: GainReport, label: str, kind: str, seconds: float) -> dict[str, Any]:
    return {"pool": label, "errors": kind, "task": report.task, "n_items": report.n_items,
            "best_member": report.best_member, "dev": report.dev, "seconds": round(seconds, 2),
            "baselines": {name: {"label": a.label, "mean_score": float(a.scores.mean()), "mean_cost": a.mean_cost}
                          for name, a in report.baselines.items()},
            "protocols": {r.protocol: {"score": r.score, "cost": r.cost, "k": r.match.k,
                                       "cost_ratio": r.match.ratio, "best_baseline": r.best_baseline,
                                       "best_baseline_score": next(b["score"] for b in r.baselines
                                                                   if b["name"] == r.best_baseline),
                                       "gain": r.gain, "verdict": r.verdict} for r in report.rows},
            "pareto_front": [p["label"] for p in pareto_front(points(report))]}


def gain_matrix(settings: list[dict[str, Any]], share: dict[str, Any]) -> list[str]:
    """Rows: settings; columns: protocols; cells: gain [95% CI] with the verdict's sign; then the shares."""
    lines = ["| pool (errors) | task | " + " | ".join(PROTOCOLS) + " |", "|---|---|" + "---|" * len(PROTOCOLS)]
    mark = {"protocol": " **+**", "baseline": " **-**", "no difference": ""}
    for s in settings:
        cells = [fmt(s["protocols"][p]["gain"]) + mark[s["protocols"][p]["verdict"]] for p in PROTOCOLS]
        lines.append(f"| {s['pool']} ({s['errors']}) | {s['task']} | " + " | ".join(cells) + " |")
    per = share["per_protocol"]
    lines.append("| **won at equal cost** | | " + " | ".join(
        f"{per[p]['beats']}/{per[p]['settings']} ({per[p]['share']:.0%}); lost {per[p]['beaten']}" for p in PROTOCOLS)
        + " |")
    return lines


def detail_table(settings: list[dict[str, Any]]) -> list[str]:
    lines = ["| pool | task | protocol | score @ tokens/item | k (cost ratio) | best baseline | its score | "
             "gain [95% CI] | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for s in settings:
        for p in PROTOCOLS:
            r = s["protocols"][p]
            lines.append(f"| {s['pool']} | {s['task']} | {p} | {r['score']['value']:.3f} @ {r['cost']['value']:.4g} | "
                         f"{r['k']} ({r['cost_ratio']:.2f}) | {r['best_baseline']} | "
                         f"{r['best_baseline_score']['value']:.3f} | {fmt(r['gain'])} | {r['verdict']} |")
    return lines


def plot(settings: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.6, 0.9 * len(settings) + 1.6), dpi=120)
    colours = plt.get_cmap("tab10")
    step = 0.8 / len(PROTOCOLS)  # each protocol's row offset inside its setting's band
    for j, p in enumerate(PROTOCOLS):
        ys = [k + (j - (len(PROTOCOLS) - 1) / 2) * step for k in range(len(settings))]
        g = [s["protocols"][p]["gain"] for s in settings]
        ax.errorbar([e["value"] for e in g], ys, xerr=[[e["value"] - e["ci"][0] for e in g],
                                                       [e["ci"][1] - e["value"] for e in g]],
                    fmt="o", color=colours(j % 10), capsize=2, markersize=3, label=p)
    ax.axvline(0, color="gray", linewidth=0.8)
    ax.set_yticks(range(len(settings)))
    ax.set_yticklabels([f"{s['pool']} ({s['errors']})\n{s['task']}" for s in settings], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("gain over the best cost-matched baseline (score, 95% paired bootstrap CI)")
    ax.set_title("Is collaboration worth its tokens? right of 0: the protocol wins at equal cost", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200, help="test items per setting (default 200)")
    parser.add_argument("--quick", action="store_true", help="30 items; writes collaboration_gain.quick.*")
    args = parser.parse_args()
    items = 30 if args.quick else args.items
    stem = "collaboration_gain.quick" if args.quick else "collaboration_gain"
    settings, reports = [], []
    for label, kind, spec, tasks in SETTINGS:
        for task in tasks:
            report, seconds = run_setting(spec, task, items)
            reports.append(report)
            settings.append(summarise(report, label, kind, seconds))
            print(f"{label} / {task}: {seconds:.1f} s, best member {report.best_member}", flush=True)
    share = gain_share(reports)
    matrix = gain_matrix(settings, share)
    print("\n".join(matrix))
    result = {"protocols": PROTOCOLS, "items": items, "unit": OPTIONS.unit, "max_k": OPTIONS.max_k,
              "seed": OPTIONS.seed, "n_boot": OPTIONS.n_boot, "one_strong_pool": ONE_STRONG,
              "settings": settings,
              "share": {p: {k: e[k] for k in ("settings", "beats", "beaten", "share")}
                        for p, e in share["per_protocol"].items()},
              "sentence": share["sentence"], "machine": machine_info(), "total_seconds": elapsed_seconds()}
    write_json(RESULTS / f"{stem}.json", result)
    md = ([f"# Is collaboration worth its tokens? ({items} items per setting, cost in generated tokens)", "",
           "Gain = protocol score minus the best baseline's at no more cost (best single member chosen on dev, "
           "its self-consistency@k at matched mean cost, the pool vote when it costs no more); 95% paired "
           "item-bootstrap CI. **+**: the protocol wins (CI above 0), **-**: a baseline wins (CI below 0).", ""]
          + matrix + ["", "## Every setting", ""] + detail_table(settings)
          + ["", share["sentence"], "", f"Run time: {result['total_seconds']:.0f} s."])
    write_text(RESULTS / f"{stem}.md", "\n".join(md) + "\n")
    plot(settings, RESULTS / f"{stem}.png")
    print(f"total {result['total_seconds']:.0f} s; wrote {RESULTS / stem}.json, .md, .png")


if __name__ == "__main__":
    main()
