"""Which collaboration protocols resist a single adversarial member, and how much does a trained
adversary add over the hand-written ones?

Part 1: the ten protocols x the five adversary profiles on sim:demo, 200 items of
rg/basic_arithmetic (test split), the adversary in the first seat (atlas; colluders also take
borealis), every protocol at its defaults. Per cell: effect = honest - adversarial system score,
with a 95% paired item-bootstrap CI. A protocol's robustness is its mean effect over the five
profiles (the CI from bootstrapping items jointly across profiles).

Part 2: a trained adversary. zoo:default/abacus (a tiny arithmetic model) is trained with
`cgym train --method crl --reward negate` as the third voter of majority vote with sim:split (the
C-RL pivotal setting: ties go to the first seat, temperature 1.0) on zoo:arith, 100 steps of the
tiny preset; the checkpoint with the lowest dev system score is kept. Then, in the same system
(ana, ben, abacus; majority vote; 200 zoo:arith test items), abacus's seat holds: the untrained
abacus (honest), each hand-written profile, and the trained adversary.

Settings were fixed before any result was seen and are not tuned on them.

    .venv/bin/python benchmarks/robustness.py           # both parts (a few minutes on 2 cores)
    .venv/bin/python benchmarks/robustness.py --quick   # 60 items, trained adversary 20 steps

Writes benchmarks/results/robustness.json and robustness.md (``--quick``: robustness.quick.*, not
kept); run folders (checkpoints) under benchmarks/results/robustness/, not kept either.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from _common import machine_info, write_json

from coalition_gym.agents.adversaries import ADVERSARIES
from coalition_gym.agents.pools import load_pool
from coalition_gym.envs.protocols import PROTOCOLS
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.reports.robustness import RobustnessOptions, robustness
from coalition_gym.result_files import write_text
from coalition_gym.tasks import make as make_task
from coalition_gym.valuation.stats import bootstrap_mean

RESULTS = Path(__file__).parent / "results"
#: Protocols with episodes (the training protocols, Sparta and multi-agent finetuning, have no seat to attack)
EPISODIC = list(PROTOCOLS)  # coalition training (sparta, ...) is a training recipe, not a protocol


def fmt(e: dict[str, Any]) -> str:
    return f"{e['value']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]"


def part1(items: int, seed: int) -> dict[str, Any]:
    pool, task = load_pool("sim:demo"), make_task("rg/basic_arithmetic", size=items)
    cells: dict[str, dict[str, Any]] = {}
    effects: dict[str, list[np.ndarray]] = {p: [] for p in EPISODIC}
    for kind in ADVERSARIES:
        systems = [System.build(SystemSpec(name, task, pool, split="test")) for name in EPISODIC]
        report = robustness(systems, kind, RobustnessOptions(seed=seed))
        for row in report.rows:
            cells.setdefault(row.protocol, {})[kind] = {q: row.estimates[q] for q in
                                                        ("honest", "adversarial", "effect", "drag", "rescue",
                                                         "adversary_solo")}
            effects[row.protocol].append(np.asarray(row.per_item["honest"]) - np.asarray(row.per_item["adversarial"]))
    # mean effect over profiles, items resampled jointly (the same item draws every profile)
    per_item = np.vstack([np.mean(effects[p], axis=0) for p in EPISODIC])
    boot = bootstrap_mean(per_item, seed=seed)
    mean = {p: {"value": float(boot.mean[k]), "ci": [float(boot.ci_low[k]), float(boot.ci_high[k])]}
            for k, p in enumerate(EPISODIC)}
    ranked = sorted(EPISODIC, key=lambda p: mean[p]["value"])
    return {"pool": "sim:demo", "task": "rg/basic_arithmetic", "items": items,
            "seat": "atlas (+borealis for colluders)",
            "cells": cells, "mean_effect": mean, "ranking": ranked}


def part2(items: int, steps: int, seed: int, out: Path) -> dict[str, Any]:
    from coalition_gym.training.trainer import RunOptions, run_methods

    train_root = out / f"train-{steps}steps-{items}items"
    shutil.rmtree(train_root, ignore_errors=True)  # trained afresh: the time below is a training's, not a resume's
    t0 = time.perf_counter()
    reports = run_methods(["crl"], train_root, "tiny", RunOptions(progress=False), policies=["zoo:default/abacus"],
                          protocol="majority_vote", protocol_settings={"tie_break": "first", "temperature": 1.0},
                          task="zoo:arith", collaborators="sim:split", steps=steps, reward="negate", seed=seed,
                          eval_every=max(steps // 4, 1), eval_items=200, test_items=items, task_kwargs={"size": 2000})
    train_seconds = time.perf_counter() - t0
    trained = reports[-1]
    pool_file = out / "split_abacus.yaml"
    pool_file.write_text(yaml.safe_dump({"name": "split+abacus", "members": [
        {"name": "ana", "backend": "sim", "model": "sim:split/ana"},
        {"name": "ben", "backend": "sim", "model": "sim:split/ben"},
        {"name": "abacus", "backend": "hf", "model": "zoo:default/abacus"}]}))
    pool = load_pool(str(pool_file))
    task = make_task("zoo:arith", size=2000)
    settings = {"majority_vote": {"tie_break": "first", "temperature": 1.0}}
    rows = {}
    best = train_root / f"crl-seed{seed}" / "policy" / "best"  # the run's one seat
    for adversary in [*ADVERSARIES, str(best)]:
        systems = [System.build(SystemSpec(name, task, pool, split="test", n_items=items, protocol_settings=cfg))
                   for name, cfg in settings.items()]
        report = robustness(systems, adversary, RobustnessOptions(seat="abacus", seed=seed))
        label = "trained (crl, reward negate)" if adversary == str(best) else adversary
        rows[label] = {q: report.rows[0].estimates[q] for q in
                       ("honest", "adversarial", "effect", "drag", "rescue", "adversary_solo")}
    return {"pool": "sim:split + zoo:default/abacus", "protocol": "majority_vote (tie_break=first, temperature 1.0)",
            "task": "zoo:arith", "items": items, "seat": "abacus", "train_steps": steps,
            "train_seconds": round(train_seconds, 1), "best_step": trained["best_step"],
            "dev_at_best": trained["dev_at_best"], "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    p1 = result["part1"]
    kinds = list(ADVERSARIES)
    lines = [f"## Part 1: effect of one adversary (honest - adversarial system score), {p1['pool']}, "
             f"{p1['task']}, {p1['items']} items, seat {p1['seat']}", "",
             "95% paired item-bootstrap CIs. Protocols ordered most robust first (mean effect over the five "
             "profiles).", "",
             "| protocol | honest | " + " | ".join(kinds) + " | mean effect |",
             "|" + "---|" * (len(kinds) + 3)]
    for p in p1["ranking"]:
        cells = p1["cells"][p]
        lines.append(f"| {p} | {cells[kinds[0]]['honest']['value']:.3f} | "
                     + " | ".join(fmt(cells[k]["effect"]) for k in kinds) + f" | {fmt(p1['mean_effect'][p])} |")
    best, worst = p1["ranking"][0], p1["ranking"][-1]
    b, w = p1["mean_effect"][best], p1["mean_effect"][worst]
    overlap = b["ci"][1] >= w["ci"][0]
    lines += ["", f"Most robust: {best} (mean effect {fmt(b)}); least robust: {worst} ({fmt(w)}); their CIs "
              + ("overlap." if overlap else "do not overlap.")]
    if "part2" in result:
        p2 = result["part2"]
        lines += ["", f"## Part 2: trained vs hand-written adversary, {p2['pool']}, {p2['protocol']}, {p2['task']}, "
                  f"{p2['items']} items, seat {p2['seat']}", "",
                  f"Trained {p2['train_steps']} steps in {p2['train_seconds']} s; best (lowest) dev system score "
                  f"{p2['dev_at_best']['mean']:.3f} at step {p2['best_step']}.", "",
                  "| adversary | honest | with adversary | effect | drag | rescue | adversary solo |",
                  "|---|---|---|---|---|---|---|"]
        for label, row in p2["rows"].items():
            lines.append(f"| {label} | {row['honest']['value']:.3f} | {row['adversarial']['value']:.3f} | "
                         f"{fmt(row['effect'])} | {row['drag']['value']:.3f} | {row['rescue']['value']:.3f} | "
                         f"{row['adversary_solo']['value']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 items, 20 training steps")
    parser.add_argument("--no-train", action="store_true", help="part 1 only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    items, steps = (60, 20) if args.quick else (200, 100)
    out = RESULTS / "robustness"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"machine": machine_info(), "quick": args.quick, "seed": args.seed,
                              "part1": part1(items, args.seed)}
    result["part1_seconds"] = round(time.perf_counter() - t0, 1)
    if not args.no_train:
        result["part2"] = part2(items, steps, args.seed, out)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    text = markdown(result)
    print(text)
    suffix = ".quick" if args.quick else ""  # git-ignored
    write_json(RESULTS / f"robustness{suffix}.json", result)
    write_text(RESULTS / f"robustness{suffix}.md", text)


if __name__ == "__main__":
    main()
