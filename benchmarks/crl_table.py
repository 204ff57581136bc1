"""The paper's Table 1 at laptop scale: C-RL against every baseline over a grid of protocol x task cells,
pre-registered. Each cell trains a shipped zoo policy inside a protocol with simulated collaborators;
six methods per cell (Base, prompt nudge, C-RL, GRPO-indiv, DAPO-indiv, Collaborative RAFT) on the
same seeds; reported per cell: system score (collaborative mode) and solo score (individual mode) with
95% CIs, the paired difference to Base, rescue/drag; then the headline counts, a heatmap, rescue/drag
per protocol and the paper's claims, each held or not, with the diagnosis where not.

    .venv/bin/python benchmarks/crl_table.py --plan        # the cell rule's probes only (train items; ~10 min)
    .venv/bin/python benchmarks/crl_table.py --jobs 2      # the whole table (resumes; see the estimate below)
    .venv/bin/python benchmarks/crl_table.py --report      # tables, heatmap and claims from finished runs
    .venv/bin/python benchmarks/crl_table.py --report --docs     # and the docs' status line from them
    .venv/bin/python benchmarks/crl_table.py --quick       # 4 cells (one per protocol), 1 seed, 30 steps
    .venv/bin/python benchmarks/crl_table.py --device cuda --policy /path/to/hf/model   # real models, a GPU

THE RULE (written and committed before any of this script's runs read a test item; the git history of
this file shows it). Everything below is fixed here or computed by the script from train/dev data only.
- Cells: PROTOCOLS x TASKS = 4 x 3 = 12. The paper's three protocols as its C-RL runs configure them
  (LLM-Blender ranking listwise with one fixed ranker and fuser, the simulated ``judge``/``fuser``
  helpers; debate with two rounds, the paper's training rounds; SLM-MUX with 3 samples per member) plus
  majority vote (crl_demo's pivotal form: seat-order ties, temperature 1.0); the three zoo tasks.
- Each cell's policy and collaborators: C-RL's pre-training probe (PROBE: 32 train groups x G=8, seed
  1000, untrained policy, the cell's protocol) of every candidate pair, shipped zoo policy (POLICIES) x
  simulated pool (COLLABORATORS); the pair with the highest informative-group share is the cell's, ties
  to higher pivotality, then candidate order. A cell whose best pair has no informative group is ruled
  out for C-RL: it stays in the table as "no learning signal" with its probe numbers (C-RL is not
  trained there; the other methods run as everywhere).
- Methods: every trained method with one budget (BUDGET): 100 optimiser steps of 8 train items x G=8,
  dev evaluation on 200 dev items every 10 steps in the method's own selection mode, the best dev
  checkpoint kept (no early stop), the test split (500 items) read once per method at the end; C-RL with
  DAPO's dynamic sampling (at most 3 refills), which crl_demo's dev-only selection chose in all its
  settings; DAPO-indiv with the same refill cap; GRPO-indiv and RAFT as published. Nudge picks its system
  prompt on dev. Every method runs its own probe (16 groups) first; a run whose probe finds no
  informative group is not trained and is reported as "no learning signal" with that probe.
- Learning rate, one for every trained method and cell (:func:`lr_rule`): of crl_demo's dev-only
  selection grid (results/crl_demo_selection.json: 3e-4, 1e-4, 3e-5 over its 4 candidates x 3 variants),
  the rate with the highest mean dev gain over step 0. (It is 3e-5.)
- Seeds 0, 1, 2; seeds 0 and 1 run for every cell before seed 2 starts, so an overrun costs only the third.
- A method without signal in a (cell, seed) leaves the policy untrained: its scores are Base's of that
  seed (the same weights, prompt and evaluation seed), a paired difference of exactly 0.
- Counts, over cells finished with all six methods on at least 2 common seeds: strongest = the highest
  mean system score of the six (ties count for each) and above Base's mean (amended before any cell
  finished, after the mechanics test showed every untrained method "strongest" in a cell where nothing
  moved: a tie with Base is no method's win); above Base = the paired system difference's 95% CI above 0;
  below Base = its CI below 0. Claims are tested as CLAIMS says.
- Sizing (measured here, one core, on train/dev only, polymath on zoo:arith): seconds per C-RL step
  without refills (majority vote 0.27, LLM-Blender 0.14, debate 2.3, SLM-MUX 0.52), RAFT on debate 5.3,
  solo methods 0.15; a 200-item dev pass 0.5-4 s. With 4x rollouts for dynamic sampling, about 2,900
  core-seconds per (task, seed) over the 4 protocols x 6 methods (debate ~1,800 of them): 3 seeds x 3 tasks
  ~7.3 core-hours, ~3.7 hours with --jobs 2 (2 seeds: ~2.5 hours), plus ~10 minutes of probes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import time
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine_info, write_json
from crl_demo import method_config, pooled_ci, run_method, seated

# -- the pre-registered rule -------------------------------------------------------------------------------
PROTOCOLS: dict[str, dict[str, Any]] = {
    "majority_vote": {"tie_break": "first", "temperature": 1.0},
    "llm_blender": {"ranking": "listwise"},
    "debate": {"rounds": 2, "tie_break": "first"},
    "slm_mux": {"samples": 3, "tie_break": "random"},
}
TASKS = ("zoo:arith", "zoo:sum", "zoo:reverse")
POLICIES = ("zoo:default/abacus", "zoo:default/quill", "zoo:default/polymath", "zoo:default/sprout")
COLLABORATORS = ("sim:split", "sim:calculators")
METHODS = ("base", "nudge", "crl", "grpo-indiv", "dapo-indiv", "raft")
TRAINED = ("crl", "grpo-indiv", "dapo-indiv", "raft")
SEEDS = (0, 1, 2)
MIN_SEEDS = 2
BUDGET: dict[str, Any] = {"steps": 100, "items_per_step": 8, "group_size": 8, "eval_every": 10, "eval_items": 200,
                          "patience": 100, "test_items": 500, "probe_groups": 16, "task_kwargs": {"size": 2000}}
VARIANTS: dict[str, dict[str, Any]] = {"crl": {"dynamic_sampling": True, "max_refills": 3},
                                       "dapo-indiv": {"max_refills": 3}}
PROBE = {"groups": 32, "seed": 1000}
REAL_MODEL_TOKENS = 256  # --policy with an HF model folder: its generation cap (the zoo's preset has 16)
LR_GRID = Path("benchmarks/results/crl_demo_selection.json")
#: The paper's claims and how each is tested here (the paper: 3 protocols x 8 tasks = 24 cells).
CLAIMS = {
    "strongest": "C-RL is the strongest collaborator in most cells (paper: 21 of 24)",
    "above": "C-RL improves on Base in every cell (paper: 24 of 24)",
    "gain": "C-RL's mean system gain over Base is at least +4.0 pts in {protocol} (paper: +4.0 to +5.4 per protocol)",
    "vs_indiv": "C-RL improves on Base in at least as many cells as {method} (paper: 24 vs {paper})",
    "dissociation": "solo-reward RL can lift solo correctness while costing the system (a cell where GRPO-indiv "
                    "or DAPO-indiv has solo CI above Base and system mean below Base)",
}
PAPER_INDIV = {"grpo-indiv": 19, "dapo-indiv": 21}


def cell_grid(protocols: dict[str, dict[str, Any]] = PROTOCOLS, tasks: tuple[str, ...] = TASKS
              ) -> dict[str, dict[str, Any]]:
    """name ("protocol/task") -> the cell's protocol, its settings and the task."""
    return {f"{p}/{t}": {"protocol": p, "protocol_settings": dict(s), "task": t}
            for t in tasks for p, s in protocols.items()}


def lr_rule(path: Path = LR_GRID) -> float:
    """The one learning rate: of crl_demo's dev-only selection grid, the rate with the highest mean dev gain
    over step 0, pooled over its candidates and variants."""
    if not path.is_file():
        raise SystemExit(f"crl_table: {path} is missing (crl_demo.py --select writes it); the lr rule reads it")
    gains: dict[float, list[float]] = {}
    for row in json.loads(path.read_text())["rows"]:
        gains.setdefault(float(row["lr"]), []).append(float(row["gain_over_step0"]))
    return max(gains, key=lambda lr: (float(np.mean(gains[lr])), -lr))


@dataclass
class Spec:
    """One table: cells, candidates, methods, seeds, budget, and where its files go (``results``: one small JSON
    per (cell, method, seed), committed; ``runs``: the trainers' folders with checkpoints, not committed)."""

    cells: dict[str, dict[str, Any]] = field(default_factory=cell_grid)
    policies: tuple[str, ...] = POLICIES
    collaborators: tuple[str, ...] = COLLABORATORS
    methods: tuple[str, ...] = METHODS
    seeds: tuple[int, ...] = SEEDS
    budget: dict[str, Any] = field(default_factory=lambda: dict(BUDGET))
    probe: dict[str, int] = field(default_factory=lambda: dict(PROBE))
    lr: float | None = None  # None: lr_rule()
    results: Path = Path("benchmarks/results/crl_table")
    runs: Path = Path("runs/crl_table")
    out: Path = Path("benchmarks/results/crl_table.json")
    device: str = "auto"

    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else lr_rule()

    def method_settings(self) -> dict[str, dict[str, Any]]:
        lr = self.learning_rate()
        return {m: {"method": m, **VARIANTS.get(m, {}), "lr": lr} for m in TRAINED}

    def train(self, cell: dict[str, Any], policy: str, collaborators: str) -> dict[str, Any]:
        """A run's settings besides the method's: the budget, the cell's system and the chosen pair."""
        return {**self.budget, **cell.get("settings", {}), "protocol": cell["protocol"],
                "protocol_settings": cell["protocol_settings"], "task": cell["task"], "policies": [policy],
                "collaborators": collaborators, "device": self.device}

    def config(self, cell: dict[str, Any], chosen: dict[str, Any], name: str, seed: int) -> Any:
        return method_config(name, self.method_settings(), self.train(cell, chosen["policy"],
                                                                      chosen["collaborators"]), seed)


def slug(cell: str) -> str:
    """A cell name as a folder name."""
    return cell.replace("/", "--").replace(":", "_")


def plain(data: Any) -> Any:
    """``data`` as it reads back from JSON (tuples as lists), so saved and fresh configs compare equal."""
    return json.loads(json.dumps(data, default=str))



# -- the cell rule: probes on train items ------------------------------------------------------------------
def probe_pair(spec: Spec, cell: dict[str, Any], policy: str, collaborators: str) -> dict[str, Any]:
    """C-RL's probe of one candidate pair: the untrained policy, train items only."""
    import torch

    torch.set_num_threads(1)
    from coalition_gym.training.probe import run_probe
    from coalition_gym.training.trainer import Trainer

    config = method_config("crl", spec.method_settings(), spec.train(cell, policy, collaborators),
                           spec.probe["seed"], probe_groups=spec.probe["groups"])
    trainer = Trainer(config, out=spec.runs / "probe", log=lambda *_: None)
    return run_probe(trainer, spec.probe["groups"])[trainer.seats[0]].to_dict()


def choose(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule: the highest informative share, then pivotality, then candidate order."""
    return max(probes, key=lambda p: (p["informative_groups"], p["pivotality"] or 0.0, -p["order"]))


def plan(spec: Spec, log: Any = print) -> dict[str, dict[str, Any]]:
    """cell -> its policy, collaborators, whether C-RL has a signal, and every candidate's probe. Kept in
    ``results/plan.json`` as each cell is probed; a cell probed with the same candidates is not probed again."""
    path = spec.results / "plan.json"
    done = json.loads(path.read_text()) if path.is_file() else {}
    pairs = [list(p) for p in product(spec.policies, spec.collaborators)]
    for name, cell in spec.cells.items():
        if name in done and done[name]["candidates"] == pairs and done[name]["probe"] == spec.probe:
            continue
        probes = [{**probe_pair(spec, cell, p, c), "policy": p, "collaborators": c, "order": k}
                  for k, (p, c) in enumerate(pairs)]
        best = choose(probes)
        done[name] = {"policy": best["policy"], "collaborators": best["collaborators"],
                      "signal": best["informative_groups"] > 0, "chosen_probe": best, "probes": probes,
                      "candidates": pairs, "probe": dict(spec.probe)}
        write_json(path, done)
        log(f"plan {name}: {best['policy']} with {best['collaborators']} (informative "
            f"{best['informative_groups']:.2f}, pivotality {best['pivotality'] or 0:.2f})"
            + ("" if done[name]["signal"] else ": no learning signal"))
    return {name: done[name] for name in spec.cells}


# -- runs: one small result file per (cell, method, seed) -------------------------------------------------
def result_path(results: Path, cell: str, name: str, seed: int) -> Path:
    return Path(results) / slug(cell) / f"{name}-seed{seed}.json"


def job_order(spec: Spec) -> list[tuple[str, int]]:
    """(cell, seed) pairs: the first MIN_SEEDS seeds cell by cell (a cell is complete as soon as it can be),
    then each later seed over every cell."""
    first, later = spec.seeds[:MIN_SEEDS], spec.seeds[MIN_SEEDS:]
    return [(c, s) for c in spec.cells for s in first] + [(c, s) for s in later for c in spec.cells]


def jobs(spec: Spec, chosen: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One job per (cell, seed), in :func:`job_order`."""
    out = []
    for cell, seed in job_order(spec):
        pick = chosen[cell]
        out.append({"cell": cell, "setting": slug(cell), "seed": seed, "methods": list(spec.methods),
                    "train": spec.train(spec.cells[cell], pick["policy"], pick["collaborators"]),
                    "method_settings": spec.method_settings(), "overrides": {}, "root": str(spec.runs),
                    "results": str(spec.results), "force": False, "signal": pick["signal"],
                    "plan_probe": pick["chosen_probe"]})
    return out


def no_signal(job: dict[str, Any], name: str, config: dict[str, Any], probe: Any, why: str) -> dict[str, Any]:
    return {"cell": job["cell"], "method": name, "seed": job["seed"], "no_signal": True, "probe": probe,
            "why": why, "config": config}


def logged_probe(job: dict[str, Any], name: str) -> Any:
    """The probe a refused run wrote into its metrics before refusing."""
    path = Path(job["root"]) / job["setting"] / f"{name}-seed{job['seed']}" / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    return next((r["probe"] for r in rows if "probe" in r), None)


def step_signal(folder: Path) -> dict[str, Any] | None:
    """Each step's informative share *before* dynamic sampling's refills (after them it is 1 by design) and the
    refills, averaged over the first and the last fifth of training; None without such rows."""
    path = folder / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    rows = [r for r in rows if "first_informative_groups" in r]
    if not rows:
        return None
    fifth = max(1, len(rows) // 5)
    return {part: {k: float(np.mean([r[k] for r in chunk])) for k in ("first_informative_groups", "refills")}
            for part, chunk in (("first", rows[:fifth]), ("last", rows[-fifth:]))}


KEEP = ("collab", "solo", "last", "best_step", "dev_at_best", "steps_run", "system_prompt", "signal", "probe",
        "vs_base_collab", "vs_base_solo", "verdict", "train_seconds", "policy_weights", "eval_seed")


def run_result(job: dict[str, Any], name: str, config: dict[str, Any]) -> dict[str, Any]:
    """One (cell, method, seed): trained and reported, or its refusal."""
    from coalition_gym.training.probe import NoSignalError

    if name == "crl" and not job["signal"]:
        return no_signal(job, name, config, job["plan_probe"], "the cell rule's probe found no informative group")
    try:
        report = run_method(job, name)
    except NoSignalError as exc:
        return no_signal(job, name, config, logged_probe(job, name), str(exc))
    folder = Path(job["root"]) / job["setting"] / f"{name}-seed{job['seed']}"
    per_item = json.loads((folder / "per_item.json").read_text())
    without = (report.get("vs_without_policy") or {}).get("loo")
    return {"cell": job["cell"], "method": name, "seed": job["seed"], "config": config,
            **{k: report.get(k) for k in KEEP}, "loo_of_policy": without, "step_signal": step_signal(folder),
            "per_item": {m: per_item[m] for m in ("collab", "solo")}}


def run_job(job: dict[str, Any]) -> list[str]:
    """Every method of one (cell, seed), Base first; a result already written for this config is kept."""
    import torch

    torch.set_num_threads(1)
    written = []
    for name in job["methods"]:
        path = result_path(job["results"], job["cell"], name, job["seed"])
        config = plain(method_config(name, job["method_settings"], job["train"], job["seed"]).to_dict())
        if path.is_file() and seated(json.loads(path.read_text()).get("config", {})) == config:
            continue
        start = time.perf_counter()
        result = run_result(job, name, config)
        result["wall_seconds"] = time.perf_counter() - start
        write_json(path, result)
        written.append(str(path))
        shown = "no learning signal" if result.get("no_signal") else (
            f"system {result['collab']['mean']:.3f} solo {result['solo']['mean']:.3f}")
        print(f"[{job['cell']} seed {job['seed']}] {name}: {shown} ({result['wall_seconds']:.0f} s)", flush=True)
    return written


def run_table(spec: Spec, n_jobs: int = 1, log: Any = print) -> dict[str, Any]:
    """Plan, run every (cell, seed) not finished, and write the report (after every finished job too)."""
    chosen = plan(spec, log)
    todo = jobs(spec, chosen)
    if n_jobs > 1 and len(todo) > 1:
        with mp.get_context("spawn").Pool(min(n_jobs, len(todo))) as pool:
            for _ in pool.imap_unordered(run_job, todo, chunksize=1):
                report(spec, chosen)
    else:
        for job in todo:
            run_job(job)
            report(spec, chosen)
    return report(spec, chosen, log)


# -- the report --------------------------------------------------------------------------------------------
def load_results(spec: Spec) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for cell, name, seed in product(spec.cells, spec.methods, spec.seeds):
        path = result_path(spec.results, cell, name, seed)
        if path.is_file():
            out[(cell, name, seed)] = result = json.loads(path.read_text())
            folder = spec.runs / slug(cell) / f"{name}-seed{seed}"
            if "step_signal" not in result and not result.get("no_signal") and folder.is_dir():
                result["step_signal"] = step_signal(folder)  # results written before it was kept
                write_json(path, result)
    return out


def scores(results: dict[tuple[str, str, int], Any], cell: str, name: str, seed: int, mode: str) -> list[float]:
    """Per-item test scores of a run; a run without signal has Base's (it is the untrained policy)."""
    r = results[(cell, name, seed)]
    return results[(cell, "base", seed)]["per_item"][mode] if r.get("no_signal") else r["per_item"][mode]


def common_seeds(spec: Spec, results: dict[tuple[str, str, int], Any], cell: str) -> list[int]:
    return [s for s in spec.seeds if all((cell, m, s) in results for m in spec.methods)]


def method_summary(results: dict[tuple[str, str, int], Any], cell: str, name: str, seeds: list[int]
                   ) -> dict[str, Any]:
    """System and solo scores pooled over seeds, paired differences to Base, rescue/drag, signal."""
    runs = [results[(cell, name, s)] for s in seeds]
    entry: dict[str, Any] = {"no_signal_seeds": [s for s, r in zip(seeds, runs) if r.get("no_signal")]}
    for mode, key in (("collab", "system"), ("solo", "solo")):
        mine = np.asarray([scores(results, cell, name, s, mode) for s in seeds], dtype=float)
        base = np.asarray([scores(results, cell, "base", s, mode) for s in seeds], dtype=float)
        mean, ci = pooled_ci(mine)
        entry[key] = {"mean": mean, "ci": ci, "per_seed": [float(row.mean()) for row in mine]}
        d_mean, d_ci = pooled_ci(mine - base)
        entry[f"{key}_minus_base"] = {"mean": d_mean, "ci": d_ci}
    moves = [r.get("vs_base_collab") or {} for r in runs]
    entry["rescue"] = float(np.mean([m.get("rescue", 0.0) for m in moves]))
    entry["drag"] = float(np.mean([m.get("drag", 0.0) for m in moves]))
    entry["best_step"] = [r.get("best_step") for r in runs]
    entry["probe"] = [r.get("probe") for r in runs]
    entry["signal"] = [r.get("signal") for r in runs]
    entry["step_signal"] = [r.get("step_signal") for r in runs]
    entry["why_no_signal"] = sorted({r["why"] for r in runs if r.get("no_signal")})
    entry["train_seconds"] = float(sum(r.get("wall_seconds") or 0.0 for r in runs))
    return entry


def cell_summaries(spec: Spec, chosen: dict[str, Any], results: dict[tuple[str, str, int], Any]
                   ) -> dict[str, dict[str, Any]]:
    """Per cell: the plan's choice and, once every method has a seed, each method's summary on common seeds."""
    out = {}
    for cell in spec.cells:
        seeds = common_seeds(spec, results, cell)
        entry = {**{k: chosen[cell][k] for k in ("policy", "collaborators", "signal", "chosen_probe")},
                 "seeds": seeds, "complete": len(seeds) >= min(MIN_SEEDS, len(spec.seeds)), "methods": {}}
        if seeds:
            entry["methods"] = {m: method_summary(results, cell, m, seeds) for m in spec.methods}
        out[cell] = entry
    return out


def headline(cells: dict[str, dict[str, Any]], methods: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per method, over complete cells: strongest in K, above Base in M, never below Base in L, of N."""
    done = {c: e for c, e in cells.items() if e["complete"]}
    out = {}
    for name in methods:
        if name == "base":
            continue
        strongest, above, not_below = [], [], []
        for cell, e in done.items():
            top = max(m["system"]["mean"] for m in e["methods"].values())
            d = e["methods"][name]["system_minus_base"]
            if e["methods"][name]["system"]["mean"] >= top - 1e-12 and d["mean"] > 1e-12:  # a tie with Base: none
                strongest.append(cell)
            if d["ci"][0] > 0:
                above.append(cell)
            if not d["ci"][1] < 0:
                not_below.append(cell)
        out[name] = {"n": len(done), "strongest": strongest, "above": above, "not_below": not_below}
    return out


def by_protocol(cells: dict[str, dict[str, Any]], spec: Spec) -> dict[str, dict[str, Any]]:
    """Per protocol and method, over its complete cells: mean system gain over Base, rescue and drag."""
    out: dict[str, dict[str, Any]] = {}
    for cell, e in cells.items():
        if not e["complete"]:
            continue
        proto = spec.cells[cell]["protocol"]
        for name, m in e["methods"].items():
            row = out.setdefault(proto, {}).setdefault(name, {"gain": [], "rescue": [], "drag": []})
            row["gain"].append(m["system_minus_base"]["mean"])
            row["rescue"].append(m["rescue"])
            row["drag"].append(m["drag"])
    return {p: {n: {k: float(np.mean(v)) for k, v in row.items()} | {"cells": len(row["gain"])}
                for n, row in ms.items()} for p, ms in out.items()}


def claims(counts: dict[str, Any], protocols: dict[str, Any], cells: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of the paper's claims, held or not, with its evidence."""
    if "crl" not in counts or not counts["crl"]["n"]:
        return []
    crl, n = counts["crl"], counts["crl"]["n"]
    out = [{"claim": CLAIMS["strongest"], "held": len(crl["strongest"]) > n / 2,
            "evidence": f"strongest in {len(crl['strongest'])} of {n}"},
           {"claim": CLAIMS["above"], "held": len(crl["above"]) == n,
            "evidence": f"above Base (paired CI) in {len(crl['above'])} of {n}"}]
    for proto, ms in protocols.items():
        gain = ms["crl"]["gain"]
        out.append({"claim": CLAIMS["gain"].format(protocol=proto), "held": gain >= 0.040,
                    "evidence": f"{gain * 100:+.1f} pts over {ms['crl']['cells']} cells"})
    for name, paper in PAPER_INDIV.items():
        if name in counts:
            out.append({"claim": CLAIMS["vs_indiv"].format(method=name, paper=paper),
                        "held": len(crl["above"]) >= len(counts[name]["above"]),
                        "evidence": f"C-RL {len(crl['above'])}, {name} {len(counts[name]['above'])} of {n}"})
    hits = [f"{c} ({m}: solo {e['methods'][m]['solo_minus_base']['mean']:+.3f}, system "
            f"{e['methods'][m]['system_minus_base']['mean']:+.3f})"
            for c, e in cells.items() if e["complete"] for m in PAPER_INDIV if m in e["methods"]
            and e["methods"][m]["solo_minus_base"]["ci"][0] > 0 and e["methods"][m]["system_minus_base"]["mean"] < 0]
    out.append({"claim": CLAIMS["dissociation"], "held": bool(hits), "evidence": "; ".join(hits) or "no such cell"})
    return out


def diagnosis(cell: str, e: dict[str, Any]) -> str:
    """Why C-RL did not beat Base in a cell: the probes, the dissociation, where selection stopped."""
    m = e["methods"]["crl"]
    probe = e["chosen_probe"]
    trained = [b for b in m["best_step"] if b is not None]
    steps = ", ".join(f"{s['first']['first_informative_groups']:.2f} -> {s['last']['first_informative_groups']:.2f}"
                      for s in m.get("step_signal", []) if s)
    steps = f"informative share of a step's first batch, first -> last fifth of training: {steps}" if steps else ""
    own = probe.get("policy_score", probe.get("solo_score", 0.0))  # solo_score: a probe recorded before issue 50
    parts = [f"cell probe: informative {probe['informative_groups']:.2f}, pivotality "
             f"{probe['pivotality'] or 0:.2f}, policy's own score {own:.3f}",
             f"system {m['system_minus_base']['mean']:+.3f} vs solo {m['solo_minus_base']['mean']:+.3f} over Base",
             f"best dev steps {m['best_step']}" + (" (dev never improved on the untrained policy)"
                                                   if trained and all(b == 0 for b in trained) else "")]
    if m["no_signal_seeds"]:
        causes = [w.split("Likely cause: ", 1)[-1].split(" Pass --force", 1)[0].rstrip(".") for w in m["why_no_signal"]]
        parts.append(f"no learning signal in seeds {m['no_signal_seeds']}: {' / '.join(dict.fromkeys(causes))}")
    if steps:
        parts.append(steps)
    return f"- **{cell}**: " + "; ".join(parts)


def fmt(x: dict[str, Any], signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x['mean'])} [{f.format(x['ci'][0])}, {f.format(x['ci'][1])}]"


def cell_table(cells: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| cell | policy, collaborators | method | system [95% CI] | system - Base | solo [95% CI] | "
             "solo - Base | rescue | drag | best steps |", "|---" * 10 + "|"]
    for cell, e in cells.items():
        who = f"{e['policy'].split('/')[-1]}, {e['collaborators']}"
        if not e["methods"]:
            lines.append(f"| {cell} | {who} | (not finished) |" + " |" * 7)
            continue
        if not e["complete"]:
            cell = f"{cell} (partial: seeds {e['seeds']})"
        for name, m in e["methods"].items():
            ns = " (no learning signal)" if len(m["no_signal_seeds"]) == len(e["seeds"]) else (
                f" (no signal in seeds {m['no_signal_seeds']})" if m["no_signal_seeds"] else "")
            lines.append(f"| {cell} | {who} | {name}{ns} | {fmt(m['system'])} | {fmt(m['system_minus_base'], True)} | "
                         f"{fmt(m['solo'])} | {fmt(m['solo_minus_base'], True)} | {m['rescue']:.3f} | "
                         f"{m['drag']:.3f} | {m['best_step']} |")
    return lines


NAMES = {"nudge": "Nudge", "crl": "C-RL", "grpo-indiv": "GRPO-indiv", "dapo-indiv": "DAPO-indiv", "raft": "RAFT"}


def headline_sentence(data: dict[str, Any]) -> str:
    """The counts in one sentence (the README quotes it; its test compares it with the JSON)."""
    cells, counts = data["cells"], data["headline"]
    done = sum(e["complete"] for e in cells.values())
    status = "all" if done == len(cells) else f"partial: {done} of {len(cells)}"
    if not done:
        return f"Headline ({status} cells finished): no cell has finished yet."
    parts = [f"{NAMES.get(m, m)} strongest in {len(c['strongest'])} of {c['n']} cells, above Base in "
             f"{len(c['above'])} of {c['n']} (paired CI above 0), never below Base in {len(c['not_below'])} of "
             f"{c['n']}" for m, c in counts.items()]
    return f"Headline ({status} cells finished): " + "; ".join(parts) + "."


def markdown(data: dict[str, Any]) -> str:
    cells, counts = data["cells"], data["headline"]
    done = sum(e["complete"] for e in cells.values())
    status = ("complete" if done == len(cells) else f"**partial: {done} of {len(cells)} cells finished** "
              "(counts are over finished cells only; not the final result)")
    lines = [f"crl_table: {status}; {data['runs_finished']} of {data['runs_planned']} (cell, method, seed) runs; "
             f"lr {data['lr']:g} (lr rule); {data['core_hours']:.2f} core-hours of runs so far", "",
             headline_sentence(data), "",
             "| method | strongest | above Base (paired CI > 0) | never below Base |", "|---|---|---|---|"]
    for name, c in counts.items():
        lines.append(f"| {name} | {len(c['strongest'])} of {c['n']} | {len(c['above'])} of {c['n']} | "
                     f"{len(c['not_below'])} of {c['n']} |")
    lines += ["", "claims (tested on the test split, seeds pooled; reported whatever the outcome)", "",
              "| claim | held | evidence |", "|---|---|---|"]
    lines += [f"| {c['claim']} | {'yes' if c['held'] else '**no**'} | {c['evidence']} |" for c in data["claims"]]
    lines += ["", "system gain over Base, rescue and drag vs Base, per protocol (mean over finished cells)", "",
              "| protocol | method | cells | system gain | rescue | drag |", "|---|---|---|---|---|---|"]
    for proto, ms in data["by_protocol"].items():
        lines += [f"| {proto} | {n} | {m['cells']} | {m['gain']:+.3f} | {m['rescue']:.3f} | {m['drag']:.3f} |"
                  for n, m in ms.items() if n != "base"]
    lines += ["", "per cell (seeds pooled; a method without signal is the untrained policy: Base's scores)", ""]
    lines += cell_table(cells)
    t = data["timing"]
    lines += ["", "measured core-seconds per (cell, seed), the six methods' mean runs summed, by protocol: " + (
        ", ".join(f"{p} {v:.0f}" for p, v in t["core_seconds_per_cell_seed"].items()) or "none yet")
        + f"; the whole table projected from them: {t['projected_core_hours']:.1f} core-hours (a run resumed "
        "after a kill counts its time since the resume only; a method not yet run in a protocol counts as its "
        "slowest measured one)"]
    lines += ["", "where C-RL is not above Base: diagnosis", ""]
    lines += [diagnosis(c, e) for c, e in cells.items() if e["complete"] and c not in counts.get("crl", {}).get(
        "above", [])] or ["- none"]
    return "\n".join(lines)


def heatmap(cells: dict[str, dict[str, Any]], methods: tuple[str, ...], path: Path) -> None:
    """Cells x methods, system gain over Base; "ns" marks a method without signal in every seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [c for c, e in cells.items() if e["methods"]]
    cols = [m for m in methods if m != "base"]
    if not rows:
        return
    gain = np.asarray([[cells[c]["methods"][m]["system_minus_base"]["mean"] for m in cols] for c in rows])
    limit = max(float(np.abs(gain).max()), 1e-3)
    fig, ax = plt.subplots(figsize=(1.3 * len(cols) + 3, 0.45 * len(rows) + 1.5))
    image = ax.imshow(gain, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    for i, c in enumerate(rows):
        for j, m in enumerate(cols):
            e = cells[c]["methods"][m]
            silent = len(e["no_signal_seeds"]) == len(cells[c]["seeds"])
            ax.text(j, i, "ns" if silent else f"{gain[i, j]:+.3f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(gain[i, j]) > 0.6 * limit else "black")  # legible on dark cells
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), [c + ("" if cells[c]["complete"] else " (partial)") for c in rows])
    ax.set_title("system score gain over Base (test, seeds pooled)")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timing(spec: Spec, results: dict[tuple[str, str, int], Any]) -> dict[str, Any]:
    """Measured core-seconds per run by protocol and method, and the whole table projected from them (a
    protocol and method with no finished run yet counts as that method's slowest measured protocol)."""
    per: dict[tuple[str, str], list[float]] = {}
    for (cell, name, _), r in results.items():
        per.setdefault((spec.cells[cell]["protocol"], name), []).append(r.get("wall_seconds") or 0.0)
    mean = {k: float(np.mean(v)) for k, v in per.items()}
    total = 0.0
    for cell, name in product(spec.cells.values(), spec.methods):
        measured = [v for (p, m), v in mean.items() if m == name]
        total += mean.get((cell["protocol"], name), max(measured, default=0.0)) * len(spec.seeds)
    by_protocol = {p: sum(v for (q, _), v in mean.items() if q == p) for p, _ in mean}
    return {"core_seconds_per_run": {f"{p}/{m}": v for (p, m), v in mean.items()},
            "core_seconds_per_cell_seed": by_protocol, "projected_core_hours": total / 3600}


def report(spec: Spec, chosen: dict[str, Any], log: Any = None) -> dict[str, Any]:
    """Summaries, counts, claims, markdown and heatmap from the result files there are (partial or not)."""
    results = load_results(spec)
    cells = cell_summaries(spec, chosen, results)
    counts = headline(cells, spec.methods)
    protocols = by_protocol(cells, spec)
    seconds = sum(r.get("wall_seconds") or 0.0 for r in results.values())
    data = {"benchmark": "crl_table", "lr": spec.learning_rate(), "budget": spec.budget, "variants": VARIANTS,
            "seeds": list(spec.seeds), "methods": list(spec.methods), "probe": spec.probe,
            "policies": list(spec.policies), "collaborators": list(spec.collaborators),
            "runs_planned": len(spec.cells) * len(spec.methods) * len(spec.seeds), "runs_finished": len(results),
            "core_hours": seconds / 3600, "cells": cells, "headline": counts, "by_protocol": protocols,
            "claims": claims(counts, protocols, cells), "timing": timing(spec, results), "machine": machine_info()}
    data["table"] = markdown(data)
    write_json(spec.out, data)
    spec.out.with_suffix(".md").write_text(data["table"] + "\n")
    heatmap(cells, spec.methods, spec.out.with_suffix(".png"))
    if log:
        log(data["table"])
    return data


#: the pages that quote the headline: the README and the C-RL results page of the site
STATUS_PAGES = (Path("README.md"), Path("docs/train/crl-results.md"))


def readme_status(data: dict[str, Any], pages: tuple[Path, ...] = STATUS_PAGES) -> str:
    """Rewrite each page's status line (``**Status: ...** Headline (...)...``) from the result: the pages' counts
    are the JSON's by construction (tests/test_benchmark_crl_table.py checks them)."""
    done = sum(e["complete"] for e in data["cells"].values())
    line = (f"**Status: {'complete' if done == len(data['cells']) else 'running'}.** {headline_sentence(data)}")
    for page in pages:
        text, n = re.subn(r"\*\*Status: \w+\.\*\* Headline \([^\n]*", line, page.read_text())
        if n != 1:
            raise SystemExit(f"crl_table: {page} has {n} status lines ('**Status: ...** Headline (...'); expected 1")
        page.write_text(text)
    return line


# -- the command line ----------------------------------------------------------------------------------------
def quick_spec(spec: Spec) -> Spec:
    """One cell per protocol (zoo:arith), one seed, 30 steps, 100 dev and 200 test items (debate's cell, the
    slowest, ~15 core-minutes); files apart from the table's."""
    cells = {k: c for k, c in spec.cells.items() if c["task"] == spec.cells[next(iter(spec.cells))]["task"]}
    budget = {**spec.budget, "steps": 30, "eval_items": 100, "test_items": 200}
    return replace(spec, cells=cells, seeds=spec.seeds[:1], budget=budget,
                   results=Path("benchmarks/results/crl_table_quick"), runs=Path("runs/crl_table_quick"),
                   out=Path("benchmarks/results/crl_table.quick.json"))


def spec_from_args(args: argparse.Namespace) -> Spec:
    spec = Spec(device=args.device, policies=(args.policy,) if args.policy else POLICIES)
    if args.cells:
        wanted = [c.strip() for c in args.cells.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in spec.cells]
        if unknown:
            raise SystemExit(f"crl_table: unknown cell {unknown[0]!r}; use protocol/task, one of "
                             f"{', '.join(spec.cells)}")
        spec = replace(spec, cells={c: spec.cells[c] for c in wanted})
    if args.seeds:
        try:
            spec = replace(spec, seeds=tuple(int(s) for s in args.seeds.split(",")))
        except ValueError:
            raise SystemExit(f"crl_table: --seeds {args.seeds!r}: give integers separated by commas") from None
    if args.policy:  # another policy: its own files
        spec = replace(spec, results=Path(str(spec.results) + "_custom"), runs=Path(str(spec.runs) + "_custom"),
                       out=spec.out.with_name("crl_table_custom.json"))
    if args.policy and not args.policy.startswith("zoo:"):  # a real model: chat prompts and room to reason
        spec = replace(spec, budget={**spec.budget, "policy_style": "chat", "max_new_tokens": REAL_MODEL_TOKENS})
    return quick_spec(spec) if args.quick else spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plan", action="store_true", help="only the cell rule's probes (train items; no test item)")
    parser.add_argument("--report", action="store_true", help="only the report, from the finished runs")
    parser.add_argument("--docs", "--readme", dest="docs", action="store_true",
                        help=f"with --report: the status lines of {' and '.join(map(str, STATUS_PAGES))} too")
    parser.add_argument("--quick", action="store_true", help="one cell per protocol, 1 seed, 30 steps (<30 min)")
    parser.add_argument("--cells", default="", help="comma-separated protocol/task cells (default: all 12)")
    parser.add_argument("--seeds", default="", help="comma-separated seeds (default: 0,1,2)")
    parser.add_argument("--policy", default=None, help="HF model folder or zoo:<recipe>/<member> for every cell")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel (cell, seed) jobs")
    args = parser.parse_args()
    if args.jobs < 1:
        raise SystemExit(f"crl_table: --jobs {args.jobs}: give 1 or more")
    spec = spec_from_args(args)
    start = time.perf_counter()
    if args.plan:
        plan(spec)
    elif args.report:
        data = report(spec, plan(spec), print)
        if args.docs:
            print(readme_status(data))
    else:
        run_table(spec, args.jobs)
    wrote = spec.results / "plan.json" if args.plan else f"{spec.out} (.md, .png)"
    print(f"\ncrl_table: {time.perf_counter() - start:.0f} s; wrote {wrote}")


if __name__ == "__main__":
    main()
