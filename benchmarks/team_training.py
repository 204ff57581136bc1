"""Does training a *team* of seats together beat training them apart, and how does team C-RL's credit
compare with CoMLRL's MAGRPO? Two settings, shipped zoo weights as every seat's starting point (the same
weights on every machine), 5 seeds.

    .venv/bin/python benchmarks/team_training.py            # 2 settings x 7 methods x 5 seeds (~2 h, estimated)
    .venv/bin/python benchmarks/team_training.py --quick    # 1 seed, 8 steps of 4 items x G=4, 100 test items
    .venv/bin/python benchmarks/team_training.py --settings specialisation --methods base,team-loo,magrpo
    pip install -e '.[bench]'                                # comlrl 1.4.3, for the magrpo column

Settings (fixed in this docstring before any test score was seen; nothing below was tuned on test):

- **specialisation**: majority vote (ties drawn at random, temperature 1.0 for everyone) of two trainable
  zoo seats, ``abacus`` (shipped: 0.92 dev accuracy on sums, 0 on words) and ``quill`` (1.0 on words, 0 on
  sums), and one simulated collaborator, ``ana`` (sim:split, careless: skill 0.3, scattered guesses), on an
  even mix of ``zoo:arith`` and ``zoo:reverse``. Each seat covers a different category; on the other it
  casts a confident wrong vote that splits the tie three ways. The team's optimum needs the seats to differ:
  each should keep answering its own category and stop casting a parseable vote on the other's (then a
  disagreement with ana is a two-way tie, not three-way). One seat trained alone can fix only its half.
- **credit**: majority vote (random ties, temperature 1.0) of four trainable seats (``polymath``, ``abacus``,
  ``sprout``, ``quill``: every shipped default-zoo model) and two simulated collaborators (sim:split: ana 0.3,
  ben 0.8) on ``zoo:arith``. Six voters: any one seat is rarely pivotal, so the system outcome broadcast to
  every seat (credit=system, MAGRPO's joint reward) is mostly noise from the others' draws.

Methods, each from the shipped weights, with the same items per step (8), G (8), learning rate (1e-4, the
middle of crl_demo's selection grid; its 3e-4 preset degraded abacus under every method), token budget (16 new
tokens), temperature (1.0) and steps (150) -- ``--quick``: 8 steps of 4 items x G=4:

- ``base``: the shipped weights, untrained;
- ``grpo-indiv``: every seat trained on its own, by GRPO on its solo correctness (``cgym train --method
  grpo-indiv``), then seated together;
- ``crl-one``: the first seat (abacus; polymath in *credit*) trained by single-seat C-RL with every other seat
  frozen at its shipped weights (a pool file makes them collaborators);
- ``team-system``, ``team-loo``, ``team-shapley``: team C-RL (``cgym train --policy A --policy B ... --set
  credit=...``), every seat trained together with that credit mode;
- ``magrpo``: CoMLRL's ``MAGRPOTrainer`` (benchmarks/magrpo_adapter.py) on the same seats, models, train
  split, items per step, G, lr, token budget, temperature and reward (the system score of the joint
  completions seated in the same protocol with the same frozen collaborators, shared within a group).
  Differences that remain are MAGRPO's own (comlrl 1.4.3's code, read): no ratio clipping, no gradient-norm
  clip, AdamW weight decay 0.01 (ours 0), the loss on each completion's summed log-probability (ours: the
  token mean) over the whole generated length (padding after EOS included), HF ``generate`` one item at a
  time, and its own draws of train items.

Every method's *last* weights after the same number of steps are evaluated the same way (MAGRPO has no dev
selection, so none does here): on the first ``test_items`` test items, one execution per item with the
run's evaluation seed (paired across methods of a seed), every seat sampling at the protocol's temperature.
Reported per method, pooled over seeds: the system score with a 95% CI (two-level bootstrap over seeds and
items) and its paired difference to Base; per seat its solo score (the seat answering alone) and its exact
Shapley value over the seats (frozen collaborators always present; 2^K coalitions from shared generations),
before (= Base) and after; seconds per optimiser step, rollout / credit / update apart (MAGRPO: generation /
reward calls / update); counterfactual generations (what credit cost beyond the real executions). "Team C-RL
(credit chosen on dev)" is the credit mode whose run has the highest final team dev score (the trainer's
own dev evaluation; test never chooses).

Wall time: the quick run took 1.4 min on the 2-core development machine. The recorded full runs (one per
setting, every method but GRPO-indiv) took 24 min (specialisation) and 27 min (credit) with 2 jobs; GRPO-indiv
ran afterwards with Base on the same seeds (``--methods base,grpo-indiv``: 7 min each; the Base rows equal the
first runs', so the columns are paired). Run
folders go to benchmarks/results/team_training/ and team_training_quick/ (not kept in git).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import shutil
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from _common import elapsed_seconds, machine_info, write_json

RESULTS = Path(__file__).parent / "results"
_MAJORITY = {"protocol": "majority_vote", "protocol_settings": {"tie_break": "random", "temperature": 1.0}}
SETTINGS: dict[str, dict[str, Any]] = {
    "specialisation": {**_MAJORITY, "task": "mix:zoo:arith,zoo:reverse", "collaborators": "sim:split",
                       "members": ["ana"], "seats": {"abacus": "zoo:default/abacus", "quill": "zoo:default/quill"},
                       "why": "each seat covers a different category of an even mix; the team's optimum needs "
                              "them to differ"},
    "credit": {**_MAJORITY, "task": "zoo:arith", "collaborators": "sim:split", "members": ["ana", "ben"],
               "seats": {"polymath": "zoo:default/polymath", "abacus": "zoo:default/abacus",
                         "sprout": "zoo:default/sprout", "quill": "zoo:default/quill"},
               "why": "six voters: each seat rarely pivotal, broadcast credit mostly noise"},
}
METHODS = ["base", "grpo-indiv", "crl-one", "team-system", "team-loo", "team-shapley", "magrpo"]
SEEDS = [0, 1, 2, 3, 4]
COMMON = {"steps": 150, "items_per_step": 8, "group_size": 8, "lr": 1e-4, "max_new_tokens": 16,
          "temperature": 1.0, "eval_items": 200, "test_items": 500, "task_kwargs": {"size": 2000}}
QUICK = {"steps": 8, "items_per_step": 4, "group_size": 4, "eval_items": 50, "test_items": 100}


# -- the system every method is evaluated in ----------------------------------------------------------------

def setting_system(s: dict[str, Any], common: dict[str, Any], split: str = "train") -> Any:
    """The setting's System: frozen collaborators from their pool, the seats in the coalition after them."""
    from coalition_gym.envs.system import System, SystemSpec

    spec = SystemSpec(s["protocol"], s["task"], s["collaborators"], s["members"], split, common["task_kwargs"],
                      {**s["protocol_settings"], "max_new_tokens": common["max_new_tokens"]})
    return System.build(spec, {seat: "compact" for seat in s["seats"]})


def shapley_per_item(values: dict[frozenset, np.ndarray], seats: list[str]) -> dict[str, np.ndarray]:
    """Exact Shapley value of every seat, item by item (values: per-item v(S) for every S of the seats)."""
    k = len(seats)
    out = {}
    for i in seats:
        others = [s for s in seats if s != i]
        total = np.zeros_like(values[frozenset()])
        for size in range(k):
            weight = math.factorial(size) * math.factorial(k - size - 1) / math.factorial(k)
            for sub in combinations(others, size):
                total = total + weight * (values[frozenset(sub) | {i}] - values[frozenset(sub)])
        out[i] = total
    return out


def evaluate(s: dict[str, Any], common: dict[str, Any], seed: int, models: dict[str, tuple[Any, Any]],
             tag: str) -> dict[str, Any]:
    """The team of ``models`` (seat -> (model, tokenizer)) on the test items: system score per item, each seat's
    solo score, Shapley and leave-one-out value over the seats (frozen collaborators always present)."""
    from coalition_gym.agents.hf import HFGenerator
    from coalition_gym.agents.options import HFOptions
    from coalition_gym.agents.pools import Pool
    from coalition_gym.envs.system import System, SystemSpec
    from coalition_gym.training.evaluation import eval_seed
    from coalition_gym.valuation.game import CoalitionGame

    base = setting_system(s, common, split="test")
    seats = list(s["seats"])
    gens = {seat: HFGenerator(m, t, HFOptions(max_new_tokens=common["max_new_tokens"]), identity=f"{tag}:{seat}")
            for seat, (m, t) in models.items()}
    for m, _ in models.values():
        m.eval()
    frozen = list(base.frozen)
    pool = Pool(members={**{n: base.pool.members[n] for n in frozen}, **gens}, helpers=dict(base.pool.helpers),
                styles={**base.pool.styles, **{seat: "compact" for seat in seats}}, name=f"{tag}-eval")
    spec = SystemSpec(base.protocol, base.task, pool, [*frozen, *seats], split="test", n_items=common["test_items"])
    system = System.build(spec, dev_scores={})
    items = system.items
    game = CoalitionGame(system, seed=eval_seed(seed))
    subsets = [frozenset(c) for r in range(len(seats) + 1) for c in combinations(seats, r)]
    values = {sub: (game.per_item(set(frozen) | sub) if (frozen or sub) else np.zeros(len(items))) for sub in subsets}
    full = frozenset(seats)
    solo_game = game.plain_solo_game()
    return {"system": values[full].tolist(), "without_seats": values[frozenset()].tolist(),
            "solo": {seat: solo_game.per_item({seat}).tolist() for seat in seats},
            "shapley": {seat: v.tolist() for seat, v in shapley_per_item(values, seats).items()},
            "loo": {seat: (values[full] - values[full - {seat}]).tolist() for seat in seats},
            "generations": game.generations}


# -- the methods ---------------------------------------------------------------------------------------------

def load_models(s: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    from coalition_gym.training.policy_model import load_policy

    return {seat: load_policy(spec, "cpu") for seat, spec in s["seats"].items()}


def single_config(method: str, s: dict[str, Any], common: dict[str, Any], seed: int, seat: str,
                  collaborators: str, members: list[str] | None) -> Any:
    from coalition_gym.training.config import make_config

    return make_config(method, preset="tiny", strict=False, protocol=s["protocol"],
                       protocol_settings=dict(s["protocol_settings"]), task=s["task"],
                       task_kwargs=dict(common["task_kwargs"]), policies=[s["seats"][seat]], seats=[seat],
                       policy_style="compact", collaborators=collaborators, members=members, steps=common["steps"],
                       items_per_step=common["items_per_step"], group_size=common["group_size"], lr=common["lr"],
                       max_new_tokens=common["max_new_tokens"], eval_every=common["steps"], eval_items=8,
                       patience=10**6, test_items=common["test_items"], seed=seed, probe_groups=0, device="cpu")


def run_single(config: Any, out: Path) -> tuple[Any, dict[str, float], float]:
    """A single-seat run (resumed where a killed one stopped); its last model and per-step seconds."""
    from coalition_gym.training.trainer import Trainer

    trainer = Trainer(config, out=out, log=lambda *_: None)
    start = time.perf_counter()
    trainer.fit(progress=False, force=True)
    rows = [r for r in trainer.metrics.rows() if "rollout_seconds" in r]
    timing = {k: float(np.mean([r[k] for r in rows])) if rows else 0.0 for k in ("rollout_seconds", "update_seconds")}
    return trainer, timing, time.perf_counter() - start


def frozen_pool_file(s: dict[str, Any], trained: str, folder: Path) -> str:
    """A pool file of the setting's frozen collaborators plus every seat but ``trained`` at its shipped weights."""
    members = [{"name": m, "backend": "sim", "model": f"{s['collaborators']}/{m}"} for m in s["members"]]
    members += [{"name": seat, "backend": "hf", "model": spec, "style": "compact"}
                for seat, spec in s["seats"].items() if seat != trained]
    path = folder / f"pool-without-{trained}.json"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": f"frozen-without-{trained}", "members": members}, indent=1))
    return str(path)


def team_run(s: dict[str, Any], common: dict[str, Any], seed: int, credit: str, out: Path) -> dict[str, Any]:
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    config = make_config("team-crl", "tiny", protocol=s["protocol"], protocol_settings=dict(s["protocol_settings"]),
                         task=s["task"], task_kwargs=dict(common["task_kwargs"]),
                         policies=list(s["seats"].values()),
                         seats=list(s["seats"]), policy_style="compact", collaborators=s["collaborators"],
                         members=list(s["members"]), credit=credit, steps=common["steps"],
                         items_per_step=common["items_per_step"], group_size=common["group_size"], lr=common["lr"],
                         max_new_tokens=common["max_new_tokens"], eval_every=common["steps"],
                         eval_items=common["eval_items"], patience=10**6,
                         test_items=8,  # its own test report is not used: every method is evaluated below
                         seed=seed, device="cpu")
    trainer = Trainer(config, out=out, log=lambda *_: None)
    start = time.perf_counter()
    trainer.fit(progress=False)
    seconds = time.perf_counter() - start
    rows = [r for r in trainer.metrics.rows() if "rollout_seconds" in r]
    dev = [r["dev_score"] for r in trainer.metrics.rows() if "dev_score" in r]

    def mean(key: str) -> float | None:
        xs = [r[key] for r in rows if r.get(key) is not None]
        return float(np.mean(xs)) if xs else None

    return {"models": team_models(trainer), "seconds": seconds,
            "timing": {"rollout_seconds": mean("rollout_seconds"), "credit_seconds": mean("credit_seconds"),
                       "update_seconds": mean("update_seconds")},
            "counterfactual_generations": float(sum(r.get("counterfactual_generations", 0) or 0 for r in rows)),
            "counterfactual_replayed": float(sum(r.get("counterfactual_replayed", 0) or 0 for r in rows)),
            "final_dev": dev[-1] if dev else None}


def team_models(trainer: Any) -> dict[str, tuple[Any, Any]]:
    """Each seat's current (last) model and tokenizer from a team's Trainer."""
    return {seat: (trainer.models[seat], trainer.tokenizers[seat]) for seat in trainer.seats}


def run_method(job: dict[str, Any]) -> dict[str, Any]:
    """One (setting, seed, method): train from the shipped weights, then evaluate the last weights."""
    import torch

    torch.set_num_threads(1)  # one job per core
    name, seed, method, common = job["setting"], job["seed"], job["method"], job["common"]
    s = SETTINGS[name]
    root = Path(job["root"]) / name
    seats = list(s["seats"])
    steps = common["steps"]
    record: dict[str, Any] = {"setting": name, "seed": seed, "method": method}
    start = time.perf_counter()
    if method == "base":
        models = load_models(s)
        record["timing"] = {}
    elif method == "grpo-indiv":
        models, timing = {}, {"rollout_seconds": 0.0, "update_seconds": 0.0}
        for seat in seats:  # K runs: per-step seconds add up
            config = single_config("grpo-indiv", s, common, seed, seat, s["collaborators"], list(s["members"]))
            trainer, t, _ = run_single(config, root / f"grpo-indiv-{seat}-seed{seed}")
            models[seat] = (trainer.model, trainer.tokenizer)
            for k in timing:
                timing[k] += t[k]
        record["timing"] = timing
    elif method == "crl-one":
        trained = seats[0]
        pool = frozen_pool_file(s, trained, root)
        config = single_config("crl", s, common, seed, trained, pool, None)
        trainer, timing, _ = run_single(config, root / f"crl-one-{trained}-seed{seed}")
        models = load_models(s)
        models[trained] = (trainer.model, trainer.tokenizer)
        record["timing"], record["trained_seat"] = timing, trained
    elif method.startswith("team-"):
        credit = method[len("team-"):]
        out = team_run(s, common, seed, credit, root / f"{method}-seed{seed}")
        models = out.pop("models")
        record.update(out)
    elif method == "magrpo":
        from magrpo_adapter import train_magrpo

        models = load_models(s)
        system = setting_system(s, common)
        pool = list(system.task.items("train"))
        rng = random.Random(seed)
        items = [pool[rng.randrange(len(pool))] for _ in range(steps * common["items_per_step"])]
        torch.manual_seed(seed)
        out = train_magrpo(system, seats, models, items, {**common, "seed": seed})
        n = max(1, out["optimiser_steps"])
        record["timing"] = {"rollout_seconds": out["generate_seconds"] / n, "credit_seconds": out["reward_seconds"] / n,
                            "update_seconds": out["update_seconds"] / n}
        record["magrpo"] = out
    else:
        raise SystemExit(f"unknown method {method!r}; use {', '.join(METHODS)}")
    record["train_seconds"] = time.perf_counter() - start  # dev evaluations included
    parts = [v for v in record["timing"].values() if v is not None]
    record["seconds_per_step"] = float(sum(parts)) if parts else None  # rollout + credit + update, no evaluation
    t0 = time.perf_counter()
    record["eval"] = evaluate(s, common, seed, models, f"{name}:{method}:seed{seed}")
    record["eval_seconds"] = time.perf_counter() - t0
    print(f"[{name} seed {seed}] {method}: system {np.mean(record['eval']['system']):.3f} "
          f"({record['train_seconds']:.0f} s)", flush=True)
    return record


# -- summaries -----------------------------------------------------------------------------------------------

def pooled_ci(matrix: np.ndarray, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Mean of a seeds x items matrix and a 95% CI from resampling seeds and items (two-level bootstrap)."""
    rng = np.random.default_rng(seed)
    n_seeds, n_items = matrix.shape
    means = np.empty(n_boot)
    for b in range(n_boot):
        means[b] = matrix[np.ix_(rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_items, n_items))].mean()
    return {"mean": float(matrix.mean()), "ci": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))],
            "per_seed": [float(r.mean()) for r in matrix]}


def summarise(records: list[dict[str, Any]], name: str, methods: list[str], seeds: list[int]) -> dict[str, Any]:
    by = {(r["method"], r["seed"]): r for r in records if r["setting"] == name}
    seats = list(SETTINGS[name]["seats"])
    base = np.asarray([by[("base", sd)]["eval"]["system"] for sd in seeds], dtype=float)
    out: dict[str, Any] = {}
    for m in methods:
        rs = [by[(m, sd)] for sd in seeds if (m, sd) in by]
        if len(rs) != len(seeds):
            continue
        system = np.asarray([r["eval"]["system"] for r in rs], dtype=float)
        entry: dict[str, Any] = {"system": pooled_ci(system), "system_minus_base": pooled_ci(system - base)}
        for key in ("solo", "shapley", "loo"):
            entry[key] = {seat: pooled_ci(np.asarray([r["eval"][key][seat] for r in rs], dtype=float))
                          for seat in seats}
        timings = [r.get("timing") or {} for r in rs]
        entry["timing"] = {k: (float(np.mean([t[k] for t in timings if t.get(k) is not None]))
                               if any(t.get(k) is not None for t in timings) else None)
                           for k in ("rollout_seconds", "credit_seconds", "update_seconds")}
        sps = [r["seconds_per_step"] for r in rs if r.get("seconds_per_step") is not None]
        entry["seconds_per_step"] = float(np.mean(sps)) if sps else None
        cf = [r.get("counterfactual_generations") for r in rs if r.get("counterfactual_generations") is not None]
        entry["counterfactual_generations"] = float(np.mean(cf)) if cf else None
        replayed = [r.get("counterfactual_replayed") for r in rs if r.get("counterfactual_replayed") is not None]
        entry["counterfactual_replayed"] = float(np.mean(replayed)) if replayed else None
        dev = [r.get("final_dev") for r in rs if r.get("final_dev") is not None]
        entry["final_dev"] = float(np.mean(dev)) if dev else None
        entry["train_seconds"] = float(np.sum([r["train_seconds"] for r in rs]))
        out[m] = entry
    teams = {m: e for m, e in out.items() if m.startswith("team-") and e["final_dev"] is not None}
    chosen = max(teams, key=lambda m: teams[m]["final_dev"]) if teams else None
    return {"methods": out, "team_chosen_on_dev": chosen}


def fmt(x: dict[str, Any], signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x['mean'])} [{f.format(x['ci'][0])}, {f.format(x['ci'][1])}]"


def table(name: str, summary: dict[str, Any]) -> str:
    seats = list(SETTINGS[name]["seats"])
    methods = summary["methods"]
    chosen = summary["team_chosen_on_dev"]
    lines = [f"**{name}** ({SETTINGS[name]['why']}; seats {', '.join(seats)})", "",
             "| method | system [95% CI] | system - Base | solo per seat | Shapley per seat | "
             "s/step (rollout / credit / update) | counterfactual generations |",
             "|---|---|---|---|---|---|---|"]
    for m, e in methods.items():
        t = e["timing"]
        parts = "/".join("-" if t.get(k) is None else f"{t[k]:.2f}"
                         for k in ("rollout_seconds", "credit_seconds", "update_seconds"))
        sps = "-" if e["seconds_per_step"] is None else f"{e['seconds_per_step']:.2f} ({parts})"
        solo = ", ".join(f"{e['solo'][s]['mean']:.2f}" for s in seats)
        shap = ", ".join(f"{e['shapley'][s]['mean']:+.2f}" for s in seats)
        cf = "-" if e["counterfactual_generations"] is None else (
            f"{e['counterfactual_generations']:.0f} ({e['counterfactual_replayed'] or 0:.0f} asks replayed)")
        label = f"{m} (chosen on dev)" if m == chosen else m
        lines.append(f"| {label} | {fmt(e['system'])} | {fmt(e['system_minus_base'], True)} | {solo} | {shap} | "
                     f"{sps} | {cf} |")
    return "\n".join(lines)


def claims(summaries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's claims, each with its evidence and whether it held ("CIs apart": the 95% CIs do not overlap)."""
    out = []
    for name, summary in summaries.items():
        m, chosen = summary["methods"], summary["team_chosen_on_dev"]
        if chosen is None:
            continue
        team = m[chosen]
        if "magrpo" in m:
            mg = m["magrpo"]
            out.append({"setting": name, "claim": f"team C-RL ({chosen}) at least as good as MAGRPO on system score",
                        "held": team["system"]["mean"] >= mg["system"]["mean"],
                        "evidence": f"{chosen} {fmt(team['system'])} vs MAGRPO {fmt(mg['system'])}"})
            if team["seconds_per_step"] is not None and mg["seconds_per_step"] is not None:
                out.append({"setting": name, "claim": "team C-RL no slower per step than MAGRPO",
                            "held": team["seconds_per_step"] <= mg["seconds_per_step"],
                            "evidence": f"{team['seconds_per_step']:.2f} s vs {mg['seconds_per_step']:.2f} s per step"})
        if name == "specialisation":
            for other in ("crl-one", "base"):
                if other in m:
                    out.append({"setting": name, "claim": f"team C-RL ({chosen}) above {other} (CIs apart)",
                                "held": team["system"]["ci"][0] > m[other]["system"]["ci"][1],
                                "evidence": f"{fmt(team['system'])} vs {fmt(m[other]['system'])}"})
    return out


def full_run_estimate(records: list[dict[str, Any]], common: dict[str, Any], jobs: int = 2) -> dict[str, Any]:
    """The full run's wall time from a quick run's records (a rough estimate): each job's seconds per step scaled
    by the full settings' steps and executions per step, the rest of its training time (loading, the trainer's dev
    evaluations) by the dev items, its test evaluation by the test items; times 5 seeds, over ``jobs`` jobs."""
    steps = COMMON["steps"] / common["steps"]
    width = (COMMON["items_per_step"] * COMMON["group_size"]) / (common["items_per_step"] * common["group_size"])
    dev = COMMON["eval_items"] / common["eval_items"]
    items = COMMON["test_items"] / common["test_items"]
    per_seed = 0.0
    for r in records:
        stepping = (r.get("seconds_per_step") or 0.0) * common["steps"]
        per_seed += stepping * steps * width + max(0.0, r["train_seconds"] - stepping) * dev + r["eval_seconds"] * items
    total = per_seed * len(SEEDS) / jobs
    return {"seconds": total, "hours": total / 3600, "scale": {"steps": steps, "executions_per_step": width,
                                                               "dev_items": dev, "test_items": items,
                                                               "seeds": len(SEEDS), "jobs": jobs}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 seed, 8 steps of 4 items x G=4, 100 test items")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", default=None, help="comma-separated (default: 0-4; --quick: 0)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="parallel (setting, seed, method) jobs")
    parser.add_argument("--out", default=str(RESULTS / "team_training.json"))
    args = parser.parse_args()

    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [s for s in settings if s not in SETTINGS] + [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown setting or method {bad[0]!r}; settings {list(SETTINGS)}, methods {METHODS}")
    if "base" not in methods:
        methods = ["base"] + methods  # differences and "before" are relative to Base
    common = dict(COMMON)
    seeds = list(SEEDS)
    out = Path(args.out)
    if args.quick:
        common.update(QUICK)
        seeds = seeds[:1]
        if args.out == parser.get_default("out"):
            out = out.with_suffix(".quick.json")
    if args.seeds:
        seeds = [int(x) for x in args.seeds.split(",")]
    notes = []
    if "magrpo" in methods:
        try:
            import comlrl  # noqa: F401
        except ImportError:
            methods.remove("magrpo")
            notes.append("comlrl is not installed (pip install -e '.[bench]'): no MAGRPO column")
    team_missing = False
    try:
        import coalition_gym.training.team.trainer  # noqa: F401
    except ImportError as exc:
        team_missing = True
        notes.append(f"the team trainer could not be imported ({exc}): no team C-RL rows")
    if team_missing:
        methods = [m for m in methods if not m.startswith("team-")]
    root = out.parent / out.name.removesuffix(".json").replace(".quick", "_quick")  # the run folders
    if args.quick and root.is_dir():
        shutil.rmtree(root)  # a smoke run starts afresh (its timings feed the full run's estimate)
    jobs = [{"setting": s, "seed": sd, "method": m, "common": common, "root": str(root)}
            for s in settings for sd in seeds for m in methods]
    start = time.perf_counter()
    if args.jobs > 1 and len(jobs) > 1:
        with mp.get_context("spawn").Pool(min(args.jobs, len(jobs))) as pool:
            records = pool.map(run_method, jobs, chunksize=1)
    else:
        records = [run_method(job) for job in jobs]
    wall = time.perf_counter() - start
    summaries = {s: summarise(records, s, methods, seeds) for s in settings}
    tested = claims(summaries)
    estimate = full_run_estimate(records, common) if args.quick else None
    if estimate is not None:
        notes.append(f"the full run (5 seeds, {COMMON['steps']} steps of {COMMON['items_per_step']} x "
                     f"G={COMMON['group_size']}, {COMMON['test_items']} test items) is estimated from this quick "
                     f"run at {estimate['hours']:.1f} h on this machine with 2 parallel jobs (the default)")
    for r in records:  # per item: the system score only (the summaries above hold the rest)
        r["eval"] = {k: (v if k == "system" else {seat: float(np.mean(x)) for seat, x in v.items()}
                         if isinstance(v, dict) else v) for k, v in r["eval"].items()}
    header = (f"team_training{' --quick (a smoke run: not the result)' if args.quick else ''}: seeds {seeds}, "
              f"{common['steps']} steps of {common['items_per_step']} items x G={common['group_size']}, "
              f"lr {common['lr']:g}, "
              f"{common['test_items']} test items; {wall / 60:.1f} min on {os.cpu_count()} cores ({args.jobs} jobs)")
    claim_lines = ["| setting | claim | held | evidence |", "|---|---|---|---|"] + [
        f"| {c['setting']} | {c['claim']} | {'yes' if c['held'] else '**no**'} | {c['evidence']} |" for c in tested]
    text = "\n\n".join([header] + [table(s, summaries[s]) for s in settings]
                       + ["claims (reported whatever the outcome)\n\n" + "\n".join(claim_lines)]
                       + [f"Note: {n}." for n in notes])
    print("\n" + text)
    write_json(out, {"benchmark": "team_training", "quick": args.quick, "seeds": seeds, "common": common,
                     "settings": {s: {k: v for k, v in SETTINGS[s].items()} for s in settings}, "methods": methods,
                     "total_seconds": elapsed_seconds(), "wall_seconds": wall, "machine": machine_info(),
                     "summaries": summaries, "claims": tested, "full_run_estimate": estimate, "notes": notes,
                     "records": records, "table": text})
    out.with_suffix(".md").write_text(text + "\n")
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
