"""Does C-RL train a better collaborator? Base, C-RL, GRPO-indiv, DAPO-indiv, Collaborative RAFT and
prompt nudge on a zoo policy (``zoo:default/polymath``) with simulated collaborators, in two settings
fixed before any test score was seen (see SETTINGS for why each is built as it is). Every method of
a seed gets the same budget; checkpoints are selected on the dev split only; the test split is
disjoint from train and dev (reasoning-gym seeds, see tasks/reasoning_gym.py) and is read once per
method at the end. Reported per method, pooled over seeds: system and solo test scores with 95% CIs
(bootstrap over seeds and items), the paired difference to Base, rescue/drag vs Base, the policy's
leave-one-out effect on the system, and the learning-signal diagnostics of its training steps.

    .venv/bin/python benchmarks/crl_demo.py               # both settings, 3 seeds (42 min on 2 cores)
    .venv/bin/python benchmarks/crl_demo.py --extra       # and C-RL with dynamic sampling (+20 min)
    .venv/bin/python benchmarks/crl_demo.py --quick       # pivotal setting, 1 seed, fewer steps (<10 min)
    .venv/bin/python benchmarks/crl_demo.py --seed 1      # one given seed
    .venv/bin/python benchmarks/crl_demo.py --device cuda --policy /path/to/hf/model   # on a GPU

Writes ``benchmarks/results/crl_demo.json`` (``settings[].methods[<name>] = {system: {mean, ci},
solo: {mean, ci}, rescue, drag, ...}``), a markdown table beside it and ``crl_demo.png`` (dev score and
training reward per step). Run folders (metrics.jsonl, report.json, checkpoints) go to
``benchmarks/results/crl_demo/``. Whatever comes out is reported as it is.
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

#: Each setting: the protocol and its collaborators, why collaboration matters there, and its budget.
SETTINGS: dict[str, dict[str, Any]] = {
    "pivotal": {
        "why": ("Majority vote of the policy and two simulated agents with independent errors (sim:split): "
                "ana, careless (skill 0.3), and ben, careful (0.8); both scatter their guesses when they do "
                "not know. They disagree on most items; three different answers go to the first seat (ana). "
                "So wherever ana is wrong and ben right (about half the items) the system is right exactly "
                "when the policy sides with ben, i.e. is right; elsewhere the policy rarely matters. "
                "Temperature 1.0 for everyone (the rollout temperature RL libraries default to). Task "
                "zoo:reverse (spell a 3-5 letter word backward; partial credit per letter): its word list "
                "is large enough that test words are new words (6% overlap with train)."),
        "train": {"protocol": "majority_vote", "protocol_settings": {"tie_break": "first", "temperature": 1.0},
                  "task": "zoo:reverse", "collaborators": "sim:split", "steps": 800},
        "variants": {"crl-fresh": {"method": "crl", "collaborator_draws": "fresh"}},
    },
    "dissociation": {
        "why": ("SLM-MUX (3 samples per member at temperature 0.3; the most self-consistent member answers; "
                "ties at random) with two simulated calculators (sim:calculators) that are reliable on "
                "arithmetic and blind elsewhere, where they scatter. Task: an even mix of zoo:arith and "
                "zoo:reverse. The system needs the policy to be right *and* self-consistent on the words, "
                "and *not* self-consistent on sums it gets wrong (a confident wrong answer outvotes the "
                "calculators half the time). Solo reward pays for neither distinction: it pays for being "
                "right, everywhere, however confidently wrong the rest is."),
        "train": {"protocol": "slm_mux", "protocol_settings": {"tie_break": "random"},
                  "task": "mix:zoo:arith,zoo:reverse", "collaborators": "sim:calculators", "steps": 600},
        "variants": {},
        # Added after the main run (seed 0's test score had been seen): C-RL with DAPO's dynamic
        # sampling, the fix its diagnostics point to (23-25% informative groups). Opt-in (--extra),
        # so the pre-registered run stays as it was and within its 60-minute budget.
        "extra": {"crl-dynamic": {"method": "crl", "dynamic_sampling": True, "max_refills": 3}},
    },
}
METHODS = ["base", "crl", "grpo-indiv", "dapo-indiv", "raft", "nudge"]
#: Shared by every run; the preset is "tiny" (lr 3e-4, 16 new tokens); selection on 200 dev items every
#: 25 steps, stopping after 12 evaluations (300 steps) without a new best.
COMMON = {"policy": "zoo:default/polymath", "items_per_step": 8, "group_size": 8, "eval_every": 25,
          "eval_items": 200, "patience": 12, "test_items": 1000, "task_kwargs": {"size": 2000}}


def run_one(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every method of one (setting, seed), Base first (rescue/drag are relative to it)."""
    import torch

    torch.set_num_threads(1)  # one job per core
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    root = Path(job["root"]) / job["setting"]
    base_file = root / f"base-seed{job['seed']}" / "per_item.json"
    reports = []
    for name in job["methods"]:
        variant = dict(job["variants"].get(name, {"method": name}))
        method = variant.pop("method")
        settings = {**COMMON, **job["train"], **job["overrides"], **variant, "seed": job["seed"]}
        config = make_config(method, preset="tiny", strict=False, **settings)
        out = root / f"{name}-seed{job['seed']}"
        done = out / "report.json"
        if done.is_file() and json.loads(done.read_text())["config"] == config.to_dict():
            reports.append({**json.loads(done.read_text()), "name": name, "setting": job["setting"]})
            continue  # finished work is kept: a rerun picks up where a killed one stopped
        trainer = Trainer(config, out=out, log=lambda *_: None)
        start = time.perf_counter()
        trainer.fit(progress=False)
        base = json.loads(base_file.read_text()) if method != "base" and base_file.is_file() else None
        report = trainer.report(base)
        report["train_seconds"] = time.perf_counter() - start
        done.write_text(json.dumps(report, indent=2))
        reports.append({**report, "name": name, "setting": job["setting"]})
        print(f"[{job['setting']} seed {job['seed']}] {name}: system {report['collab']['mean']:.3f} "
              f"solo {report['solo']['mean']:.3f} (best step {report['best_step']}, "
              f"{report['train_seconds']:.0f} s)", flush=True)
    return reports


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
    from coalition_gym.training.config import make_config
    from coalition_gym.training.rollouts import RecordingPolicy, collect
    from coalition_gym.training.trainer import Trainer

    config = make_config("base", preset="tiny", strict=False,
                         **{**COMMON, **SETTINGS[setting]["train"], **overrides, "eval_items": n_items})
    trainer = Trainer(config, out=Path("/dev/null"), log=lambda *_: None)
    items = trainer.dev_items()
    coalition = trainer.members + [config.policy_name]
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
        hf = trainer.backend().backend
        policy = RecordingPolicy(_Rewrite(hf, behaviour) if callable(behaviour) else hf,
                                 temperature=0.0 if behaviour == "greedy" else None)
        rollouts = collect(trainer.collab_protocol, trainer.task, items, coalition, trainer.pool.backends(), policy,
                           config.policy_name, 1, 777, trainer.styles, trainer.pool.dev_scores)
        scores = np.asarray([r.reward for r in rollouts])
        solo = np.asarray([r.solo_score for r in rollouts])
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


def signal_table(setting: str, methods: dict[str, Any]) -> str:
    keys = ("informative_groups", "pivotality", "reward_solo_corr", "grad_token_share", "reward_mean")
    rows = [f"learning signal, {setting} (first -> last fifth of training, mean over seeds)", "",
            "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, m in methods.items():
        sig = [s for s in m["signal"] if s]
        if not sig:
            continue
        cells = []
        for k in keys:
            first = [s["first"][k] for s in sig if s["first"].get(k) is not None]
            last = [s["last"][k] for s in sig if s["last"].get(k) is not None]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="run this one seed (default: seeds 0, 1, 2)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="pivotal setting only, 1 seed, 300 steps, 300 test items")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--extra", action="store_true",
                        help="also the variants added after the main run (dissociation: crl-dynamic, ~13 min a seed)")
    parser.add_argument("--policy", default=None, help="HF model folder or zoo:<recipe>/<member> (default polymath)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel (setting, seed) jobs")
    parser.add_argument("--out", default="benchmarks/results/crl_demo.json", help="JSON result file")
    args = parser.parse_args()

    from coalition_gym.errors import ConfigError
    from coalition_gym.training.config import make_config

    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting {unknown[0]!r}; use {', '.join(SETTINGS)}")
    seeds = [args.seed] if args.seed is not None else list(range(args.seeds))
    overrides: dict[str, Any] = {"device": args.device}
    if args.policy:
        overrides["policy"] = args.policy
    out = Path(args.out)
    root = out.with_suffix("")  # benchmarks/results/crl_demo/
    if args.quick:
        settings, seeds = settings[:1], seeds[:1]
        overrides.update(steps=300, test_items=300)
        if args.out == parser.get_default("out"):
            out = out.with_suffix(".quick.json")
        root = Path(str(out).replace(".quick.json", "_quick").replace(".json", ""))

    variants = {s: {**SETTINGS[s]["variants"], **(SETTINGS[s].get("extra", {}) if args.extra else {})}
                for s in settings}
    names = {s: METHODS + list(variants[s]) for s in settings}
    for s in settings:  # every configuration checked before the first rollout
        for name in names[s]:
            variant = dict(variants[s].get(name, {"method": name}))
            try:
                make_config(variant.pop("method"), preset="tiny", strict=False,
                            **{**COMMON, **SETTINGS[s]["train"], **overrides, **variant})
            except ConfigError as exc:
                raise SystemExit(f"crl_demo: {s}/{name}: {exc}") from exc

    jobs = [{"setting": s, "seed": seed, "methods": names[s], "train": SETTINGS[s]["train"],
             "variants": variants[s], "overrides": overrides, "root": str(root)}
            for seed in seeds for s in settings]
    start = time.perf_counter()
    if args.jobs > 1 and len(jobs) > 1:
        with mp.get_context("spawn").Pool(min(args.jobs, len(jobs))) as pool:
            results = pool.map(run_one, jobs, chunksize=1)
    else:
        results = [run_one(job) for job in jobs]
    total = time.perf_counter() - start
    reports = [r for part in results for r in part]

    summary, texts = [], []
    for s in settings:
        methods = summarise(root, s, names[s], seeds, reports)
        what_if = counterfactuals(s, overrides, n_items=300 if args.quick else 1000)
        summary.append({"name": s, "why": SETTINGS[s]["why"], "train": SETTINGS[s]["train"], "methods": methods,
                        "counterfactuals": what_if})
        texts += [table(s, methods), "", signal_table(s, methods), "", counterfactual_table(s, what_if), ""]
    text = "\n".join(texts)
    png = out.with_suffix(".png")
    plot(root, settings, names, seeds, png)
    trained = sum(m["train_seconds"] for s in summary for m in s["methods"].values())
    header = (f"crl_demo: policy {overrides.get('policy', COMMON['policy'])}, seeds {seeds}, "
              f"{total / 60:.1f} min on {os.cpu_count()} cores for this invocation (finished runs are reused); "
              f"all runs together trained for {trained / 60:.1f} core-minutes")
    print(f"\n{header}\n\n{text}")
    write_json(out, {"benchmark": "crl_demo", "seeds": seeds, "common": {**COMMON, **overrides},
                     "total_seconds": total, "machine": machine_info(), "settings": summary, "table": text})
    out.with_suffix(".md").write_text(f"{header}\n\n{text}\n")
    print(f"\nwrote {out}, {out.with_suffix('.md')} and {png}")


if __name__ == "__main__":
    main()
