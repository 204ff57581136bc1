"""Does C-RL train a better collaborator? Base, C-RL and GRPO-indiv on zoo policies shipped with the
package (the same weights on every machine) with simulated collaborators, in three settings; 5 seeds
each. Every method of a seed gets the same budget; checkpoints are selected on the dev split only; the
test split is disjoint from train and dev (reasoning-gym seeds, see tasks/reasoning_gym.py) and is read
once per method at the end. Reported per method, pooled over seeds: system and solo test scores with
95% CIs (bootstrap over seeds and items), the paired difference to Base, rescue/drag vs Base, the
policy's leave-one-out effect on the system, the learning-signal diagnostics of its training steps,
and the claims below, each marked held or not, whatever the outcome.

    .venv/bin/python benchmarks/crl_demo.py --select      # the dev-only selection run (seed 100; ~25 min)
    .venv/bin/python benchmarks/crl_demo.py               # 3 settings x 5 seeds x 3 methods (67 min on 2 cores)
    .venv/bin/python benchmarks/crl_demo.py --quick       # pivotal setting, 1 seed, 300 steps (<10 min)
    .venv/bin/python benchmarks/crl_demo.py --seed 11     # one given seed
    .venv/bin/python benchmarks/crl_demo.py --methods base,crl,grpo-indiv,dapo-indiv,raft,nudge
    .venv/bin/python benchmarks/crl_demo.py --device cuda --policy /path/to/hf/model   # on a GPU

How the settings and configurations were fixed, before any test score of this zoo was seen:
- Probe (training items only, cgym's pre-training probe, 32 groups x G=8, untrained policy): with the
  shipped zoo, polymath on zoo:reverse in the old pivotal setting has *no* informative C-RL group
  (0.00; its sampled answers at temperature 1.0 are almost never exactly right, and a majority needs an
  exact match), at any temperature tried (1.0, 0.7, 0.5, 0.3: 0.00-0.03). Among all shipped models x
  zoo tasks in that protocol, the highest C-RL informative share is abacus on zoo:arith (0.28, then
  polymath on zoo:arith 0.19). Pivotal therefore became a choice between those two, made on dev below:
  the candidate whose selected C-RL configuration gains most on dev over its step 0 (polymath, +0.019,
  against abacus's +0.008; both within dev noise, so pivotal is *not* a setting chosen for a C-RL win).
- Dissociation keeps its protocol; its policies are polymath (as before) and quill, the shipped model
  with the strongest C-RL probe signal there (informative 0.25, pivotality 0.34; GRPO-indiv has none
  for quill: it is always right on words and never on sums, 0.00 informative).
- Selection (``--select``, results in results/crl_demo_selection.json/.md): per setting, C-RL plain,
  C-RL with dynamic sampling and GRPO-indiv at lr 3e-4 (the tiny preset), 1e-4 and 3e-5, 150 steps,
  seed 100 (not a benchmark seed), dev scores only (200 dev items every 25 steps, each method in its own
  selection mode). Each method keeps the (variant, lr) with the highest mean dev score over steps
  75-150. The preset's 3e-4 degrades abacus under *every* method (Adam's first steps move every weight
  by about lr, which a model this small and this well trained does not survive); hence per-method lr.
  Dynamic sampling won C-RL's selection in all three settings (it costs up to 4x the rollouts of a step;
  GRPO-indiv, without it, is the published baseline). Every setting then trains 300 steps (patience 12
  evaluations, i.e. no early stop before step 300): twice the selection runs' length, within budget.
SETTINGS holds the outcome; ``--select`` re-runs it (finished selection runs are resumed, not retrained)
and the main run warns when they disagree.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine_info, write_json

PIVOTAL_WHY = ("Majority vote of the policy and two simulated agents with independent errors (sim:split): ana, "
               "careless (skill 0.3), and ben, careful (0.8); both scatter their guesses when they do not know. "
               "They disagree on most items; three different answers go to the first seat (ana). So wherever ana "
               "is wrong and ben right the system is right exactly when the policy sides with ben, i.e. is right; "
               "elsewhere the policy rarely matters. Temperature 1.0 for everyone (the rollout temperature RL "
               "libraries default to).")
DISSOCIATION_WHY = ("SLM-MUX (3 samples per member at temperature 0.3; the most self-consistent member answers; "
                    "ties at random) with two simulated calculators (sim:calculators) that are reliable on "
                    "arithmetic and blind elsewhere, where they scatter. Task: an even mix of zoo:arith and "
                    "zoo:reverse. The system needs the policy to be right *and* self-consistent on the words, and "
                    "*not* self-consistent on sums it gets wrong (a confident wrong answer outvotes the calculators "
                    "half the time). Solo reward pays for neither distinction.")
_PIVOTAL = {"protocol": "majority_vote", "protocol_settings": {"tie_break": "first", "temperature": 1.0},
            "collaborators": "sim:split", "steps": 300}
_DISSOCIATION = {"protocol": "slm_mux", "protocol_settings": {"tie_break": "random"},
                 "task": "mix:zoo:arith,zoo:reverse", "collaborators": "sim:calculators", "steps": 300}
#: Candidate settings of the selection run (dev only); SETTINGS below are the ones kept.
CANDIDATES: dict[str, dict[str, Any]] = {
    "pivotal/abacus": {**_PIVOTAL, "task": "zoo:arith", "policies": ["zoo:default/abacus"]},
    "pivotal/polymath": {**_PIVOTAL, "task": "zoo:arith", "policies": ["zoo:default/polymath"]},
    "dissociation/polymath": {**_DISSOCIATION, "policies": ["zoo:default/polymath"]},
    "dissociation/quill": {**_DISSOCIATION, "policies": ["zoo:default/quill"]},
}
SELECT_VARIANTS: dict[str, dict[str, Any]] = {
    "crl": {"method": "crl"}, "crl-dyn": {"method": "crl", "dynamic_sampling": True, "max_refills": 3},
    "grpo-indiv": {"method": "grpo-indiv"}}
SELECT_LRS = (3e-4, 1e-4, 3e-5)
SELECT = {"seed": 100, "steps": 150, "from_step": 75, "patience": 100}  # patience: never stops early

#: Each setting: its candidate, why it is built as it is, and each trained method's selected configuration.
_CRL_DYN = {"method": "crl", "dynamic_sampling": True, "max_refills": 3}
SETTINGS: dict[str, dict[str, Any]] = {
    "pivotal": {"candidate": "pivotal/polymath", "why": PIVOTAL_WHY,
                "methods": {"crl": {**_CRL_DYN, "lr": 3e-4}, "grpo-indiv": {"method": "grpo-indiv", "lr": 3e-4}}},
    "dissociation": {"candidate": "dissociation/polymath", "why": DISSOCIATION_WHY,
                     "methods": {"crl": {**_CRL_DYN, "lr": 3e-5}, "grpo-indiv": {"method": "grpo-indiv", "lr": 3e-4}}},
    "dissociation-quill": {"candidate": "dissociation/quill", "why": DISSOCIATION_WHY,
                           "methods": {"crl": {**_CRL_DYN, "lr": 3e-4},
                                       "grpo-indiv": {"method": "grpo-indiv", "lr": 3e-4}}},
}
for _s in SETTINGS.values():
    _s["train"] = CANDIDATES[_s["candidate"]]
METHODS = ["base", "crl", "grpo-indiv"]
SEEDS = [0, 1, 2, 3, 4]
#: Shared by every run; the preset is "tiny" (16 new tokens); selection on 200 dev items every 25 steps,
#: stopping after 12 evaluations (300 steps) without a new best.
COMMON = {"items_per_step": 8, "group_size": 8, "eval_every": 25, "eval_items": 200, "patience": 12,
          "test_items": 1000, "task_kwargs": {"size": 2000}}


def seated(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config in today's names: results written before a policy was a team of one seat (issue 50) name
    its ``policy`` and ``policy_name``; today's name ``policies`` and ``seats`` and say ``credit`` and
    ``shared_base`` (the only values a single policy had), so such a result is not run again."""
    if "policy" not in config or "policies" in config:
        return config
    rest = {k: v for k, v in config.items() if k not in ("policy", "policy_name")}
    return {**rest, "policies": [config["policy"]], "seats": [config["policy_name"]], "credit": "system",
            "shared_base": False}


def method_config(name: str, method_settings: dict[str, Any], train: dict[str, Any], seed: int,
                  **extra: Any) -> Any:
    """The TrainConfig of one method of a setting: the shared settings, the setting's, then the method's
    selected configuration (``{"method": ..., "lr": ..., ...}``; untrained methods need none)."""
    from coalition_gym.training.config import make_config

    variant = dict(method_settings.get(name, {"method": name}))
    method = variant.pop("method")
    return make_config(method, preset="tiny", strict=False, **{**COMMON, **train, **variant, **extra, "seed": seed})


def run_one(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every method of one (setting, seed), Base first (rescue/drag are relative to it)."""
    return [run_method(job, name) for name in job["methods"]]


def run_method(job: dict[str, Any], name: str) -> dict[str, Any]:
    """One method of one (setting, seed) into ``root/setting/name-seed<k>``: a finished run is read back, a
    killed one resumed. ``job["force"]`` (default True) trains past a probe without signal; False lets the
    probe's :class:`NoSignalError` through (benchmarks/crl_table.py reports such a run as such)."""
    import torch

    torch.set_num_threads(1)  # one job per core
    from coalition_gym.training.trainer import Trainer, policy_weights

    root = Path(job["root"]) / job["setting"]
    base_file = root / f"base-seed{job['seed']}" / "per_item.json"
    config = method_config(name, job["method_settings"], {**job["train"], **job["overrides"]}, job["seed"])
    out = root / f"{name}-seed{job['seed']}"
    done = out / "report.json"
    trained_seconds = None
    if done.is_file():
        old = json.loads(done.read_text())
        weights = policy_weights(config.policies[0])
        if seated(old["config"]) == config.to_dict() and old.get("policy_weights") == weights:
            if "eval_seed" in old:
                return {**old, "name": name, "setting": job["setting"]}  # finished work is kept
            # trained before evaluations took the runner's episode seeds: the same checkpoints,
            # evaluated again (fit resumes the finished run); the training time is the original's
            trained_seconds = old.get("train_seconds")
        # same config but other starting weights (e.g. a zoo built elsewhere): not the same run
    trainer = Trainer(config, out=out, log=lambda *_: None)
    start = time.perf_counter()
    trainer.fit(progress=False, force=job.get("force", True))  # a run without signal is a result too
    base = json.loads(base_file.read_text()) if name != "base" and base_file.is_file() else None
    report = trainer.report(base)
    report["train_seconds"] = trained_seconds if trained_seconds is not None else time.perf_counter() - start
    if trained_seconds is not None:
        report["reevaluated"] = True
    done.write_text(json.dumps(report, indent=2))
    print(f"[{job['setting']} seed {job['seed']}] {name}: system {report['collab']['mean']:.3f} "
          f"solo {report['solo']['mean']:.3f} (best step {report['best_step']}, "
          f"{report['train_seconds']:.0f} s)", flush=True)
    return {**report, "name": name, "setting": job["setting"]}


class _Rewrite:
    """Wraps the policy's backend and replaces its replies (token ids and log-probs pass through):
    a counterfactual policy that behaves as ``rewrite(ask, text)`` says."""

    def __init__(self, backend: Any, rewrite: Any):
        self.backend, self.rewrite, self.identity = backend, rewrite, backend.identity + ":counterfactual"

    def encode_prompt(self, ask: Any) -> list[int]:
        return self.backend.encode_prompt(ask)

    def generate(self, asks: Any) -> list[Any]:
        import dataclasses

        return [dataclasses.replace(s, text=self.rewrite(a, s.text)) for a, s in zip(asks, self.backend.generate(asks))]


def counterfactuals(setting: str, overrides: dict[str, Any], n_items: int = 1000) -> dict[str, Any]:
    """The system score on dev items (never test) if the untrained policy behaved differently: greedy,
    always right (oracle), never answering (abstain), and each of these on one item category only.
    How much a behaviour could add to the system, which training can then be checked against."""
    import torch

    torch.set_num_threads(1)
    from coalition_gym.training.rollouts import RecordingPolicy, RolloutPlan, collect
    from coalition_gym.training.trainer import Trainer

    config = method_config("base", {}, {**SETTINGS[setting]["train"], **overrides}, 0, eval_items=n_items)
    trainer = Trainer(config, out=Path("/dev/null"), log=lambda *_: None)
    items = trainer.dev_items()
    categories = sorted({it.category for it in items})
    oracle = lambda ask, text: f"Answer: {ask.item.gold}"  # noqa: E731
    abstain = lambda ask, text: "I cannot work this one out, so I will not give an answer."  # noqa: E731
    behaviours: dict[str, Any] = {"untrained (sampled)": None, "greedy": "greedy", "oracle": oracle,
                                  "abstain": abstain}
    if len(categories) > 1:
        for cat in categories:
            behaviours[f"oracle on {cat}"] = (lambda c: lambda a, t: oracle(a, t) if a.item.category == c else t)(cat)
            behaviours[f"abstain on {cat}"] = (lambda c: lambda a, t: abstain(a, t) if a.item.category == c else t)(cat)
    out = {}
    for name, behaviour in behaviours.items():
        hf = trainer.recording(trainer.seats[0]).backend
        policy = RecordingPolicy(_Rewrite(hf, behaviour) if callable(behaviour) else hf,
                                 temperature=0.0 if behaviour == "greedy" else None)
        system = trainer.system.replace(dev_scores=trainer.pool.dev_scores)  # the frozen members, then the policy
        rollouts = collect(system, items, policy, RolloutPlan(group_size=1, seed=777))
        scores = np.asarray([r.reward for r in rollouts])
        solo = np.asarray([r.own_score for r in rollouts])
        out[name] = {"system": float(scores.mean()), "policy_answer_score": float(solo.mean()),
                     **{f"system on {c}": float(scores[[it.category == c for it in items]].mean()) for c in categories}}
    return out


def counterfactual_table(setting: str, rows: dict[str, Any]) -> str:
    cols = [k for k in next(iter(rows.values())) if k.startswith("system on")]
    lines = [f"counterfactual policies, {setting} (the untrained policy's replies rewritten; dev items, "
             "not test)", "", "| behaviour | system | " + " | ".join(cols) + " | policy's own answer |",
             "|---" * (len(cols) + 3) + "|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['system']:.3f} | " + " | ".join(f"{r[c]:.3f}" for c in cols)
                     + f" | {r['policy_answer_score']:.3f} |")
    return "\n".join(lines)


def pooled_ci(matrix: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, list[float]]:
    """Mean of a seeds x items matrix and a 95% CI from resampling seeds and items (two-level
    bootstrap): training randomness and item sampling both count."""
    rng = np.random.default_rng(seed)
    n_seeds, n_items = matrix.shape
    means = np.empty(n_boot)
    for b in range(n_boot):
        rows = rng.integers(0, n_seeds, n_seeds)
        cols = rng.integers(0, n_items, n_items)
        means[b] = matrix[np.ix_(rows, cols)].mean()
    return float(matrix.mean()), [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def per_item(root: Path, setting: str, name: str, seed: int) -> dict[str, list[float]]:
    return json.loads((root / setting / f"{name}-seed{seed}" / "per_item.json").read_text())


def summarise(root: Path, setting: str, names: list[str], seeds: list[int], reports: list[dict[str, Any]]
              ) -> dict[str, Any]:
    methods: dict[str, Any] = {}
    base = {s: per_item(root, setting, "base", s) for s in seeds}
    for name in names:
        mine = [r for r in reports if r["name"] == name and r["setting"] == setting]
        items = {s: per_item(root, setting, name, s) for s in seeds}
        entry: dict[str, Any] = {}
        for mode, key in (("collab", "system"), ("solo", "solo")):
            matrix = np.asarray([items[s][mode] for s in seeds], dtype=float)
            mean, ci = pooled_ci(matrix)
            entry[key] = {"mean": mean, "ci": ci, "per_seed": [float(row.mean()) for row in matrix]}
            diff = matrix - np.asarray([base[s][mode] for s in seeds], dtype=float)
            d_mean, d_ci = pooled_ci(diff)
            entry[f"{key}_minus_base"] = {"mean": d_mean, "ci": d_ci}
        vs = [r.get("vs_base_collab") or {} for r in mine]
        entry["rescue"] = float(np.mean([v.get("rescue", 0.0) for v in vs]))
        entry["drag"] = float(np.mean([v.get("drag", 0.0) for v in vs]))
        loo = [r["vs_without_policy"] for r in mine if "vs_without_policy" in r]
        if loo:
            entry["vs_without_policy"] = {k: float(np.mean([x[k] for x in loo])) for k in ("loo", "rescue", "drag")}
        entry["system_last"] = float(np.mean([r["last"]["collab"]["mean"] for r in mine])) if name != "base" else None
        entry["solo_last"] = float(np.mean([r["last"]["solo"]["mean"] for r in mine])) if name != "base" else None
        entry["best_step"] = [r["best_step"] for r in mine]
        entry["dev_at_best"] = [r["dev_at_best"] for r in mine]
        entry["signal"] = [r.get("signal") for r in mine]
        entry["train_seconds"] = float(np.sum([r.get("train_seconds", 0.0) for r in mine]))
        methods[name] = entry
    return methods


def table(setting: str, methods: dict[str, Any]) -> str:
    def cell(x: dict[str, Any]) -> str:
        return f"{x['mean']:.3f} [{x['ci'][0]:.3f}, {x['ci'][1]:.3f}]"

    def signed(x: dict[str, Any]) -> str:
        return f"{x['mean']:+.3f} [{x['ci'][0]:+.3f}, {x['ci'][1]:+.3f}]"

    rows = [f"**{setting}**", "",
            "| method | system [95% CI] | system - Base | solo [95% CI] | solo - Base | rescue | drag | "
            "LOO of policy | system (last ckpt) | best steps |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in methods.items():
        loo = m.get("vs_without_policy", {}).get("loo")
        last = "-" if m["system_last"] is None else f"{m['system_last']:.3f}"
        rows.append(f"| {name} | {cell(m['system'])} | {signed(m['system_minus_base'])} | {cell(m['solo'])} | "
                    f"{signed(m['solo_minus_base'])} | {m['rescue']:.3f} | {m['drag']:.3f} | "
                    f"{'-' if loo is None else f'{loo:+.3f}'} | {last} | {m['best_step']} |")
    return "\n".join(rows)


#: signal keys renamed since results were recorded (issue 50: the seat's own score is ``policy_score`` everywhere)
OLD_SIGNAL_KEYS = {"reward_policy_score_corr": "reward_solo_corr", "policy_score_mean": "solo_score_mean"}


def signal_value(part: dict[str, Any], key: str) -> Any:
    """``part[key]``, or its value under the old name in a report recorded before the rename."""
    return part.get(key, part.get(OLD_SIGNAL_KEYS.get(key, key)))


def signal_table(setting: str, methods: dict[str, Any]) -> str:
    keys = ("informative_groups", "pivotality", "reward_policy_score_corr", "grad_token_share", "reward_mean")
    rows = [f"learning signal, {setting} (first -> last fifth of training, mean over seeds)", "",
            "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, m in methods.items():
        sig = [s for s in m["signal"] if s]
        if not sig:
            continue
        cells = []
        for k in keys:
            first = [v for s in sig if (v := signal_value(s["first"], k)) is not None]
            last = [v for s in sig if (v := signal_value(s["last"], k)) is not None]
            cells.append(f"{np.mean(first):.2f} -> {np.mean(last):.2f}" if first and last else "-")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(root: Path, settings: list[str], names: dict[str, list[str]], seeds: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(settings), figsize=(6 * len(settings), 7), squeeze=False)
    for col, setting in enumerate(settings):
        for name in names[setting]:
            if name in ("base", "nudge"):
                continue
            dev, reward = {}, {}
            for s in seeds:
                path_m = root / setting / f"{name}-seed{s}" / "metrics.jsonl"
                if not path_m.is_file():
                    continue
                for row in map(json.loads, path_m.read_text().splitlines()):
                    if "dev_score" in row:
                        dev.setdefault(row["step"], []).append(row["dev_score"])
                    if "reward_mean" in row:
                        reward.setdefault(row["step"], []).append(row["reward_mean"])
            if dev:
                steps = sorted(dev)
                axes[0][col].plot(steps, [np.mean(dev[k]) for k in steps], label=name)
            if reward:
                steps = sorted(reward)
                values = np.asarray([np.mean(reward[k]) for k in steps])
                width = max(1, len(values) // 40)
                smooth = np.convolve(values, np.ones(width) / width, mode="valid")
                axes[1][col].plot(steps[width - 1:], smooth, label=name)
        axes[0][col].set_title(f"{setting}: dev score (selection mode of each method)")
        axes[1][col].set_title(f"{setting}: training reward (moving mean)")
        axes[1][col].set_xlabel("step")
        for ax in axes[:, col]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def select_one(job: tuple[str, str, float]) -> dict[str, Any]:
    """One dev-only selection run: a candidate setting, a method variant, a learning rate."""
    import torch

    torch.set_num_threads(1)
    from coalition_gym.training.trainer import Trainer

    candidate, variant, lr = job
    config = method_config(variant, {variant: {**SELECT_VARIANTS[variant], "lr": lr}}, CANDIDATES[candidate],
                           SELECT["seed"], steps=SELECT["steps"], patience=SELECT["patience"])
    out = Path("benchmarks/results/crl_demo_select") / f"{candidate.replace('/', '-')}-{variant}-{lr:g}"
    trainer = Trainer(config, out=out, log=lambda *_: None)
    trainer.fit(progress=False, force=True)  # a finished run folder is resumed, not retrained
    rows = trainer.metrics.rows()
    dev = {int(r["step"]): float(r["dev_score"]) for r in rows if "dev_score" in r}
    late = [d for step, d in dev.items() if step >= SELECT["from_step"]]
    steps = [r for r in rows if "informative_groups" in r]
    return {"candidate": candidate, "variant": variant, "lr": lr, "dev": dev, "late_mean": float(np.mean(late)),
            "gain_over_step0": float(np.mean(late)) - dev[0], "probe": trainer.state.probe,
            "informative_groups": float(np.mean([r["informative_groups"] for r in steps]))}


def selection(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per candidate and method: the (variant, lr) with the highest mean late dev score."""
    chosen: dict[str, dict[str, Any]] = {}
    for row in rows:
        method = SELECT_VARIANTS[row["variant"]]["method"]
        best = chosen.setdefault(row["candidate"], {}).get(method)
        if best is None or row["late_mean"] > best["late_mean"]:
            chosen[row["candidate"]][method] = row
    return chosen


def run_selection(jobs: int) -> None:
    todo = [(c, v, lr) for c in CANDIDATES for v in SELECT_VARIANTS for lr in SELECT_LRS]
    with mp.get_context("spawn").Pool(jobs) as pool:
        rows = pool.map(select_one, todo, chunksize=1)
    chosen = selection(rows)
    lines = ["crl_demo selection (dev only; seed %d, %d steps; mean dev score over steps >= %d)" % (
        SELECT["seed"], SELECT["steps"], SELECT["from_step"]), "",
        "| candidate | variant | lr | dev at step 0 | mean late dev | gain | informative groups | chosen |",
        "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pick = chosen[r["candidate"]][SELECT_VARIANTS[r["variant"]]["method"]] is r
        lines.append(f"| {r['candidate']} | {r['variant']} | {r['lr']:g} | {r['dev'][0]:.3f} | {r['late_mean']:.3f} | "
                     f"{r['gain_over_step0']:+.3f} | {r['informative_groups']:.2f} | {'yes' if pick else ''} |")
    text = "\n".join(lines)
    print(text)
    out = Path("benchmarks/results/crl_demo_selection.json")
    write_json(out, {"benchmark": "crl_demo selection", "select": SELECT, "lrs": SELECT_LRS, "rows": rows,
                     "chosen": {c: {m: {"variant": r["variant"], "lr": r["lr"]} for m, r in ms.items()}
                                for c, ms in chosen.items()}, "machine": machine_info(), "table": text})
    out.with_suffix(".md").write_text(text + "\n")


def selection_disagreements() -> list[str]:
    """Where SETTINGS differ from the last selection run's choice (empty when they agree)."""
    path = Path("benchmarks/results/crl_demo_selection.json")
    if not path.is_file():
        return ["no selection run found (benchmarks/results/crl_demo_selection.json): run --select"]
    chosen = json.loads(path.read_text())["chosen"]
    notes = []
    for name, setting in SETTINGS.items():
        for method, cfg in setting["methods"].items():
            pick = chosen.get(setting["candidate"], {}).get(method)
            want = None if pick is None else {**SELECT_VARIANTS[pick["variant"]], "lr": pick["lr"]}
            if want != cfg:
                notes.append(f"{name}/{method}: SETTINGS has {cfg}, the selection run chose {want}")
    return notes


def claims(settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims the benchmark tests, each with its evidence and whether it held. "Above, CIs apart":
    the two methods' 95% CIs do not overlap (the paired difference's CI is shown too)."""
    out = []

    def apart(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return a["ci"][0] > b["ci"][1]

    for s in settings:
        m = s["methods"]
        if "crl" not in m or "base" not in m:
            continue
        diff = m["crl"]["system_minus_base"]
        out.append({"setting": s["name"], "claim": "C-RL above Base on system (CIs apart)",
                    "held": apart(m["crl"]["system"], m["base"]["system"]),
                    "evidence": f"C-RL {fmt(m['crl']['system'])} vs Base {fmt(m['base']['system'])}; "
                                f"paired difference {fmt(diff, signed=True)}"})
        if s["name"].startswith("dissociation") and "grpo-indiv" in m:
            g = m["grpo-indiv"]
            out.append({"setting": s["name"], "claim": "C-RL above GRPO-indiv on system (CIs apart)",
                        "held": apart(m["crl"]["system"], g["system"]),
                        "evidence": f"C-RL {fmt(m['crl']['system'])} vs GRPO-indiv {fmt(g['system'])}"})
            out.append({"setting": s["name"], "claim": "GRPO-indiv at least as good as C-RL solo",
                        "held": g["solo"]["mean"] >= m["crl"]["solo"]["mean"],
                        "evidence": f"solo: GRPO-indiv {fmt(g['solo'])} vs C-RL {fmt(m['crl']['solo'])}"})
    return out


def fmt(x: dict[str, Any], signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x['mean'])} [{f.format(x['ci'][0])}, {f.format(x['ci'][1])}]"


def claims_table(rows: list[dict[str, Any]], seeds: list[int]) -> str:
    lines = [f"claims (each tested on the test split, seeds {seeds} pooled; reported whatever the outcome)", "",
             "| setting | claim | held | evidence |", "|---|---|---|---|"]
    lines += [f"| {r['setting']} | {r['claim']} | {'yes' if r['held'] else '**no**'} | {r['evidence']} |" for r in rows]
    return "\n".join(lines)


def weight_notes(reports: list[dict[str, Any]]) -> list[str]:
    """A note per policy spec that started from different weights in different runs of this result."""
    seen: dict[str, set[str]] = {}
    for r in reports:
        sha = (r.get("policy_weights") or {}).get("sha256") or "unknown"
        seen.setdefault(r["config"]["policies"][0], set()).add(sha)
    return [f"{policy} started from different weights in different runs: {', '.join(sorted(shas))}"
            for policy, shas in seen.items() if len(shas) > 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="run this one seed (default: seeds 0-4)")
    parser.add_argument("--quick", action="store_true", help="pivotal setting only, 1 seed, 300 steps, 300 test items")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="methods to run (others than base, crl, grpo-indiv run with the tiny preset's lr: "
                             "not selected)")
    parser.add_argument("--select", action="store_true", help="run the dev-only selection instead (no test item)")
    parser.add_argument("--policy", default=None, help="HF model folder or zoo:<recipe>/<member> for every setting")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel (setting, seed) jobs")
    parser.add_argument("--out", default="benchmarks/results/crl_demo.json", help="JSON result file")
    args = parser.parse_args()

    from coalition_gym.errors import ConfigError

    if args.select:
        run_selection(args.jobs)
        return
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting {unknown[0]!r}; use {', '.join(SETTINGS)}")
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    if "base" not in names:
        names = ["base"] + names  # rescue/drag and the claims are relative to Base
    seeds = [args.seed] if args.seed is not None else list(SEEDS)
    overrides: dict[str, Any] = {"device": args.device}
    if args.policy:
        overrides["policies"] = [args.policy]
    out = Path(args.out)
    root = out.with_suffix("")  # benchmarks/results/crl_demo/
    if args.quick:
        settings, seeds = settings[:1], seeds[:1]
        overrides.update(steps=300, test_items=300)
        if args.out == parser.get_default("out"):
            out = out.with_suffix(".quick.json")
        root = Path(str(out).replace(".quick.json", "_quick").replace(".json", ""))
    notes = selection_disagreements()
    for note in notes:
        print(f"crl_demo: warning: {note}")
    for s in settings:  # every configuration checked before the first rollout
        for name in names:
            try:
                method_config(name, SETTINGS[s]["methods"], {**SETTINGS[s]["train"], **overrides}, 0)
            except ConfigError as exc:
                raise SystemExit(f"crl_demo: {s}/{name}: {exc}") from exc

    jobs = [{"setting": s, "seed": seed, "methods": names, "train": SETTINGS[s]["train"],
             "method_settings": SETTINGS[s]["methods"], "overrides": overrides, "root": str(root)}
            for seed in seeds for s in settings]
    start = time.perf_counter()
    if args.jobs > 1 and len(jobs) > 1:
        with mp.get_context("spawn").Pool(min(args.jobs, len(jobs))) as pool:
            results = pool.map(run_one, jobs, chunksize=1)
    else:
        results = [run_one(job) for job in jobs]
    total = time.perf_counter() - start
    reports = [r for part in results for r in part]
    previous = out  # the result file this run replaces
    reevaluation = None
    if any(r.get("reevaluated") for r in reports) and previous.is_file():
        # checkpoints trained earlier, only evaluated now: the run's time is the training run's
        reevaluation, total = total, json.loads(previous.read_text()).get("total_seconds", total)

    summary, texts = [], []
    for s in settings:
        methods = summarise(root, s, names, seeds, reports)
        what_if = counterfactuals(s, overrides, n_items=300 if args.quick else 1000)
        summary.append({"name": s, "why": SETTINGS[s]["why"], "train": SETTINGS[s]["train"],
                        "method_settings": SETTINGS[s]["methods"], "methods": methods, "counterfactuals": what_if})
        texts += [table(s, methods), "", signal_table(s, methods), "", counterfactual_table(s, what_if), ""]
    tested = claims(summary)
    notes += weight_notes(reports)
    text = "\n".join([claims_table(tested, seeds), ""] + texts + [f"Note: {n}." for n in notes])
    png = out.with_suffix(".png")
    plot(root, settings, {s: names for s in settings}, seeds, png)
    trained = sum(m["train_seconds"] for s in summary for m in s["methods"].values())
    policies = sorted({SETTINGS[s]["train"]["policies"][0] for s in settings} if not args.policy else {args.policy})
    header = (f"crl_demo: policies {', '.join(policies)} (shipped zoo), seeds {seeds}, "
              f"{total / 60:.1f} min on {os.cpu_count()} cores for this invocation (finished runs are reused); "
              f"all runs together trained for {trained / 60:.1f} core-minutes")
    print(f"\n{header}\n\n{text}")
    weights = {r["config"]["policies"][0]: r.get("policy_weights") for r in reports}
    write_json(out, {"benchmark": "crl_demo", "seeds": seeds, "common": {**COMMON, **overrides},
                     "total_seconds": total, "machine": machine_info(), "policy_weights": weights,
                     **({"reevaluation_seconds": reevaluation} if reevaluation is not None else {}),
                     "claims": tested, "notes": notes, "settings": summary, "table": text})
    out.with_suffix(".md").write_text(f"{header}\n\n{text}\n")
    print(f"\nwrote {out}, {out.with_suffix('.md')} and {png}")


if __name__ == "__main__":
    main()
