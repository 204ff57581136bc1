"""Seconds per optimiser step: this project's C-RL trainer next to TRL's ``GRPOTrainer`` with
``SystemOutcomeReward``, the same policy, protocol, batch and optimiser; full fine-tuning and LoRA.

    .venv/bin/python benchmarks/trainer_speed.py            # 4 trainers x 3 rounds x (3 warm-up + 16 steps)
    .venv/bin/python benchmarks/trainer_speed.py --quick    # 1 round of 1 + 3 steps, no profile (.quick.json/.md)

Settings (both trainers): policy ``zoo:default/0`` (abacus, the shipped default zoo's first model: GPT-2
shaped, 3 layers, width 96), protocol ``majority_vote`` (one-shot, so TRL can run it) with the ``sim:split``
collaborators (ana 0.3, ben 0.8), ties to the first seat, temperature 1.0: crl_demo's *pivotal* setting, where
about a third of the groups carry signal (with sim:demo almost none do, and our update then has nothing to
do); task ``zoo:arith`` (200 items per split, train split), 8 prompts x G=8 = 64 executions per optimiser
step, at most 16 new tokens, AdamW lr 3e-4 (the ``tiny`` preset's), gradient-norm clip 1.0, no KL term, one
optimiser step per batch, CPU, float32, one torch thread per trainer (the 2-core development machine is
shared; two threads made the timings swing several-fold from step to step). TRL gets the prompts as chat
messages, so it applies the zoo's chat template (which opens with the BOS token) and the policy reads the
token ids our trainer gives it; as plain text the BOS is missing and abacus answers mostly wrong.
Ours: ``make_config("crl", preset="tiny", ...)`` with the probe off,
stepped by ``Trainer.train_step`` and then what ``Trainer.fit`` does after each step (metrics row, state
checkpoint), without dev evaluations. TRL 1.x: ``GRPOConfig(per_device_train_batch_size=64,
num_generations=8, max_completion_length=16, temperature=1.0, learning_rate=3e-4)``, one process, no
saving; its loss is its default (``dapo``), ours token-mean (the same arithmetic for one batch).
LoRA: r 8, alpha 16, dropout 0, on GPT-2's ``c_attn``, ``c_proj`` and ``c_fc`` (TRL: ``peft.LoraConfig``;
ours: the ``lora_*`` TrainConfig fields; the LoRA rows are left out when this tree's TrainConfig has none).

What is timed, per optimiser step (``time.perf_counter``):
- ours: *rollout* = ``train_step``'s ``rollout_seconds`` (the policy's generations, the collaborators,
  scoring), of which *generate* = time inside ``HFGenerator.sample_after`` (the policy's sampling); *update* =
  ``update_seconds`` (advantages, forward, backward, optimiser step); *other* = the metrics row and ``save_state`` (the
  per-step checkpoint ``fit`` writes); *step* = their sum.
- TRL: *rollout* = ``_generate_and_score_completions`` (generation, reward calls, advantages), of which
  *generate* = ``_generate``; *reward* = the reward function's calls; *step* = ``on_step_begin`` to
  ``on_step_end`` of a callback; *update* = step - rollout (loss forward, backward, optimiser step, logging).
- both: *CPU* = the process's CPU seconds over the step (``time.process_time``: less moved by other jobs on a
  shared machine than wall time); per step also the share of informative groups (rewards not all equal), the
  policy's generated tokens and the asks the simulated collaborators answered.

Each trainer runs in a fresh process, one at a time; the four alternate within each round so that slow drift
of a shared machine touches them alike. Per trainer: median and interquartile range over the measured steps
of all rounds (warm-up steps dropped); ratio ours / TRL of the median step time with a 95% bootstrap CI
(steps resampled within each trainer, 2000 draws). Then a profile (cProfile, ``--profile-steps`` steps after
warm-up) of both trainers in each LoRA mode where ours is the slower per step (none: full fine-tuning), and
the .md says in sentences where the time goes (``findings``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing as mp
import pstats
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import elapsed_seconds, machine_info, write_json

RESULTS = Path(__file__).parent / "results"
SETTINGS: dict[str, Any] = {
    "policy": "zoo:default/0", "protocol": "majority_vote", "protocol_settings": {"tie_break": "first",
                                                                                  "temperature": 1.0},
    "task": "zoo:arith", "task_size": 200, "collaborators": "sim:split", "items_per_step": 8, "group_size": 8,
    "max_new_tokens": 16, "temperature": 1.0, "lr": 3e-4, "max_grad_norm": 1.0, "seed": 0, "threads": 1,
    "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target": ["c_attn", "c_proj", "c_fc"]},
}
PARTS = ("step", "rollout", "generate", "reward", "update", "other", "cpu")
# per step: share of groups with unequal rewards; policy tokens generated; asks the collaborators answered
WORK = ("informative", "tokens", "collab_asks")


def count_collaborator_asks() -> list[int]:
    """[asks] answered by simulated collaborators from now on in this process (a class-level counter)."""
    from coalition_gym.agents.simulated import SimulatedAgent

    counter = [0]
    original = SimulatedAgent.generate

    def counted(self: Any, asks: Any) -> Any:
        counter[0] += len(asks)
        return original(self, asks)

    SimulatedAgent.generate = counted  # type: ignore[method-assign]
    return counter


# -- ours ---------------------------------------------------------------------------------------------

def ours_has_lora() -> bool:
    from coalition_gym.training.config import field_names

    return "lora_r" in field_names("crl")


def ours_trainer(s: dict[str, Any], lora: bool, out: Path) -> Any:
    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer

    extra: dict[str, Any] = {}
    if lora:
        extra = {"lora_r": s["lora"]["r"], "lora_alpha": s["lora"]["alpha"], "lora_dropout": s["lora"]["dropout"],
                 "lora_target": ",".join(s["lora"]["target"])}
    config = make_config("crl", preset="tiny", policies=[s["policy"]], protocol=s["protocol"],
                         protocol_settings=dict(s["protocol_settings"]), task=s["task"],
                         task_kwargs={"size": s["task_size"]}, collaborators=s["collaborators"],
                         items_per_step=s["items_per_step"], group_size=s["group_size"],
                         max_new_tokens=s["max_new_tokens"], rollout_temperature=s["temperature"], lr=s["lr"],
                         max_grad_norm=s["max_grad_norm"], seed=s["seed"], probe_groups=0, device="cpu",
                         dtype="float32", steps=10**6, out=str(out), **extra)
    return Trainer(config, out=out, log=lambda _msg: None)


def run_ours(s: dict[str, Any], lora: bool, steps: int, out: Path, profile: cProfile.Profile | None = None,
             skip: int = 0) -> dict[str, list[float]]:
    from coalition_gym.agents import hf

    gen_seconds = [0.0]
    original = hf.HFGenerator.sample_after  # the policy's sampling, its prompts already tokenised

    def timed_sampling(self: Any, asks: Any, prompts: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(self, asks, prompts)
        finally:
            gen_seconds[0] += time.perf_counter() - t

    hf.HFGenerator.sample_after = timed_sampling  # type: ignore[method-assign]
    asks = count_collaborator_asks()
    trainer = ours_trainer(s, lora, out)
    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {p: [] for p in (*PARTS, *WORK)}
    for step in range(steps):
        if profile is not None and step == skip:
            profile.enable()
        gen_seconds[0] = asks[0] = 0
        c0 = time.process_time()
        row = trainer.train_step(trainer.state.step)
        t1 = time.perf_counter()
        trainer.state.step += 1
        row["step"] = trainer.state.step
        trainer.state.history.append({k: row[k] for k in ("step", "reward_mean") if k in row})
        trainer.metrics.write(row)
        trainer.save_state()
        other = time.perf_counter() - t1
        cpu = time.process_time() - c0
        for part, value in (("rollout", row["rollout_seconds"]), ("generate", gen_seconds[0]), ("reward", float("nan")),
                            ("update", row["update_seconds"]), ("other", other),
                            ("step", row["rollout_seconds"] + row["update_seconds"] + other), ("cpu", cpu),
                            ("informative", row["informative_groups"]), ("tokens", row["policy_tokens"]),
                            ("collab_asks", asks[0])):
            times[part].append(value)
    if profile is not None:
        profile.disable()
    hf.HFGenerator.sample_after = original  # type: ignore[method-assign]
    return times


# -- TRL ----------------------------------------------------------------------------------------------

def run_trl(s: dict[str, Any], lora: bool, steps: int, out: Path, profile: cProfile.Profile | None = None,
            skip: int = 0) -> dict[str, list[float]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOConfig, GRPOTrainer

    from coalition_gym.training.policy_model import resolve_policy
    from coalition_gym.training.trl_adapter import SystemOutcomeReward

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    reward = SystemOutcomeReward(s["protocol"], task=s["task"], task_kwargs={"size": s["task_size"]},
                                 collaborators=s["collaborators"], policy_style="compact", seed=s["seed"],
                                 **s["protocol_settings"])
    clock = {"rollout": 0.0, "generate": 0.0, "reward": 0.0, "informative": 0.0, "tokens": 0.0}
    G = s["group_size"]

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                clock[name] += time.perf_counter() - t
        return wrapper

    def reward_fn(*a: Any, **kw: Any) -> Any:
        rewards = timed("reward", reward)(*a, **kw)
        groups = [rewards[k:k + G] for k in range(0, len(rewards), G)]
        clock["informative"] = sum(max(g) != min(g) for g in groups) / max(1, len(groups))
        clock["tokens"] = sum(len(ids) for ids in kw.get("completion_ids") or [])
        return rewards

    reward_fn.__name__ = reward.__name__  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {p: [] for p in (*PARTS, *WORK)}
    asks = count_collaborator_asks()

    class StepClock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if profile is not None and state.global_step == skip:
                profile.enable()
            for k in clock:
                clock[k] = 0.0
            asks[0] = 0
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
            for part, value in (("step", step), ("rollout", clock["rollout"]), ("generate", clock["generate"]),
                                ("reward", clock["reward"]), ("update", step - clock["rollout"]),
                                ("other", 0.0), ("cpu", cpu), ("informative", clock["informative"]),
                                ("tokens", clock["tokens"]), ("collab_asks", asks[0])):
                times[part].append(value)

    path = resolve_policy(s["policy"])
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=s["lora"]["r"], lora_alpha=s["lora"]["alpha"], lora_dropout=s["lora"]["dropout"],
                                 target_modules=list(s["lora"]["target"]), task_type="CAUSAL_LM")
    batch = s["items_per_step"] * s["group_size"]
    args = GRPOConfig(output_dir=str(out), per_device_train_batch_size=batch, num_generations=s["group_size"],
                      max_completion_length=s["max_new_tokens"], temperature=s["temperature"], learning_rate=s["lr"],
                      max_grad_norm=s["max_grad_norm"], max_steps=steps, seed=s["seed"], use_cpu=True, bf16=False,
                      report_to="none", logging_steps=1, save_strategy="no", disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward_fn, args=args,
                          train_dataset=reward.dataset("train", conversational=True),  # the zoo's chat template: BOS
                          peft_config=peft_config, callbacks=[StepClock()])
    trainer._generate_and_score_completions = timed("rollout", trainer._generate_and_score_completions)
    trainer._generate = timed("generate", trainer._generate)
    trainer.train()
    if profile is not None:
        profile.disable()
    return times


# -- processes, statistics, tables ----------------------------------------------------------------------

RUNNERS = {"ours": run_ours, "trl": run_trl}


def worker(kind: str, lora: bool, s: dict[str, Any], steps: int, queue: Any) -> None:
    import torch

    torch.set_num_threads(s["threads"])
    torch.manual_seed(s["seed"])
    tmp = Path(tempfile.mkdtemp(prefix=f"trainer_speed_{kind}_"))
    try:
        queue.put(RUNNERS[kind](s, lora, steps, tmp / "run"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def profile_worker(kind: str, lora: bool, s: dict[str, Any], warmup: int, steps: int, queue: Any) -> None:
    import torch

    torch.set_num_threads(s["threads"])
    tmp = Path(tempfile.mkdtemp(prefix=f"trainer_speed_prof_{kind}_"))
    prof = cProfile.Profile()
    try:
        RUNNERS[kind](s, lora, warmup + steps, tmp / "run", profile=prof, skip=warmup)
        queue.put(profile_summary(prof, steps))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# where the time goes: cumulative seconds (and calls) in these functions (file suffix, function name), per step
PROFILE_SPOTS = {
    "model forward, all calls": ("torch/nn/modules/module.py", "_call_impl"),
    "backward": ("torch/_tensor.py", "backward"),
    "optimizer step": ("torch/optim/optimizer.py", "wrapper"),
    "task scoring (score_batch)": ("tasks/base.py", "score_batch"),
    "ours: rollouts (collect)": ("training/rollouts.py", "collect"),
    "ours: . protocol runner (run_programs)": ("envs/runner.py", "run_programs"),
    "ours: . . policy sampling (HFGenerator.sample_after)": ("agents/hf.py", "sample_after"),
    "ours: . . . prefill": ("agents/hf_fast.py", "prefill"),
    "ours: . . . model calls (_forward: prefill and decode)": ("agents/hf.py", "_forward"),
    "simulated collaborators (SimulatedAgent.generate)": ("agents/simulated.py", "generate"),
    "ours: . prompt tokenisation (encode_prompts)": ("agents/hf.py", "encode_prompts"),
    "ours: update (policy_gradient)": ("training/policy_updates.py", "policy_gradient"),
    "ours: . log-prob forward (sequence_logprobs)": ("agents/hf.py", "sequence_logprobs"),
    "ours: per-step checkpoint (save_state)": ("training/trainer.py", "save_state"),
    "TRL: rollout (_generate_and_score_completions)": ("trainer/grpo_trainer.py", "_generate_and_score_completions"),
    "TRL: . generation (_generate)": ("trainer/grpo_trainer.py", "_generate"),
    "TRL: . . transformers generate": ("generation/utils.py", "generate"),
    "TRL: . reward function": ("training/trl_adapter.py", "__call__"),
    "TRL: update: log-prob forward": ("trainer/grpo_trainer.py", "_get_per_token_logps_and_entropies"),
}


def profile_summary(prof: cProfile.Profile, steps: int) -> dict[str, Any]:
    stats = pstats.Stats(prof)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in raw.values())
    spots = {}
    for label, (suffix, name) in PROFILE_SPOTS.items():
        hits = [v for (file, _line, fn), v in raw.items() if fn == name and file.endswith(suffix)]
        if hits:
            spots[label] = [round(sum(v[3] for v in hits) / steps, 4), round(sum(v[1] for v in hits) / steps, 1)]
    top = sorted(((v[2], f"{Path(file).parent.name}/{Path(file).name}:{fn}") for (file, _l, fn), v in raw.items()),
                 reverse=True)[:10]
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
    return {"steps": steps, "seconds_per_step": round(total / steps, 4), "cumulative_per_step": spots,
            "top_self_time_per_step": [[name, round(tt / steps, 4)] for tt, name in top],
            "cumulative_listing": buf.getvalue()[-8000:]}


def in_process(target: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    while True:
        try:
            result = queue.get(timeout=5)
            break
        except Exception:  # queue.Empty: still running, or died without a result
            if not proc.is_alive():
                raise RuntimeError(f"{target.__name__}{args[:2]} exited with code {proc.exitcode}") from None
    proc.join()
    return result


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan"), float("nan"), float("nan")
    if len(xs) < 4:
        return statistics.median(xs), xs[0], xs[-1]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q2, q1, q3


def ratio_ci(a: list[float], b: list[float], draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    rng = random.Random(seed)
    point = statistics.median(a) / statistics.median(b)
    boot = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                  for _ in range(draws))
    return point, boot[int(0.025 * draws)], boot[int(0.975 * draws) - 1]


def fmt(q: tuple[float, float, float]) -> str:
    if q[0] != q[0]:
        return "-"
    return f"{q[0]:.3f} [{q[1]:.3f}, {q[2]:.3f}]"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| trainer | LoRA | s/step | rollout | of which generate | TRL reward calls | update | other | "
            "CPU s/step | informative groups | policy tokens | collaborator asks | ours / TRL (step) |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        q = r["quartiles"]
        ratio = r.get("ratio")
        lines.append(f"| {r['trainer']} | {'r=8' if r['lora'] else 'off'} | {fmt(q['step'])} | {fmt(q['rollout'])} | "
                     f"{fmt(q['generate'])} | {fmt(q['reward'])} | {fmt(q['update'])} | {fmt(q['other'])} | "
                     f"{fmt(q['cpu'])} | "
                     f"{r['informative_groups']:.2f} | {r['policy_tokens']:.0f} | {r['collaborator_asks']:.0f} | "
                     f"{f'{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]' if ratio else ''} |")
    return "\n".join(lines)


def profile_md(profiles: dict[str, Any]) -> str:
    labels = [label for label in PROFILE_SPOTS if any(label in p["cumulative_per_step"] for p in profiles.values())]
    out = ["| where: cumulative s per step under cProfile (calls per step) | " + " | ".join(profiles) + " |",
           "|---|" + "---|" * len(profiles)]
    whole = " | ".join(f"{p['seconds_per_step']:.3f}" for p in profiles.values())
    out.append(f"| whole profiled step | {whole} |")
    for label in labels:
        cells = []
        for p in profiles.values():
            spot = p["cumulative_per_step"].get(label)
            cells.append(f"{spot[0]:.3f} ({spot[1]:g})" if spot else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    for name, p in profiles.items():
        out += ["", f"Top self time per step, {name}: " + ", ".join(f"`{fn}` {tt:.3f} s"
                                                                    for fn, tt in p["top_self_time_per_step"])]
    return "\n".join(out)


def findings(rows: list[dict[str, Any]], profiles: dict[str, Any]) -> list[str]:
    """The table and the profile in sentences (numbers from this run only)."""
    out = []
    for r in rows:
        if r["trainer"] != "ours":
            continue
        trl = next(t for t in rows if t["trainer"] == "trl" and t["lora"] == r["lora"])
        step, parts = r["ratio"], r["ratio_parts"]
        faster = "faster" if step[2] < 1 else "slower" if step[1] > 1 else "not apart (CI spans 1)"
        out.append(f"LoRA {'on' if r['lora'] else 'off'}: ours takes {step[0]:.2f}x TRL's time per step "
                   f"[{step[1]:.2f}, {step[2]:.2f}] ({faster}); rollout {parts['rollout'][0]:.2f}x, update "
                   f"{parts['update'][0]:.2f}x. Ours forwards and back-propagates only the calls whose advantage is "
                   f"non-zero ({r['informative_groups']:.0%} of groups informative here), TRL all "
                   f"{trl['policy_tokens']:.0f} completion tokens of the step; ours adds a per-step checkpoint "
                   f"({r['quartiles']['other'][0]:.3f} s, TRL saves nothing with save_strategy='no').")
    if profiles:
        ours = next((p for n, p in profiles.items() if n.startswith("ours")), None)
        trl = next((p for n, p in profiles.items() if n.startswith("trl")), None)
        if ours and trl:
            o, t = ours["cumulative_per_step"], trl["cumulative_per_step"]

            def g(d: dict[str, Any], key: str) -> list[float]:
                return d.get(key, [0.0, 0.0])
            sim_o = g(o, "simulated collaborators (SimulatedAgent.generate)")
            sim_t = g(t, "simulated collaborators (SimulatedAgent.generate)")
            asks = {r["trainer"]: r["collaborator_asks"] for r in rows if not r["lora"]}
            collab = (f"the collaborators: ours asks them for every execution of a group, {asks.get('ours', 0):.0f} "
                      f"asks per step against TRL's {asks.get('trl', 0):.0f} (its adapter's generation cache answers "
                      f"an item's once): {sim_o[0]:.3f} s against {sim_t[0]:.3f} s with simulated collaborators, G x "
                      "the collaborators' generation with model collaborators; "
                      if asks.get("ours", 0) > asks.get("trl", 0) else
                      f"the collaborators: both ask them {asks.get('ours', 0):.0f} times per step (shared draws: a "
                      f"group's identical asks are answered once), {sim_o[0]:.3f} s against {sim_t[0]:.3f} s; ")
            tokenise = g(o, "ours: . prompt tokenisation (encode_prompts)")
            save = g(o, "ours: per-step checkpoint (save_state)")
            out.append(
                f"The rollout (profile, s per step): ours {g(o, 'ours: rollouts (collect)')[0]:.3f}, TRL "
                f"{g(t, 'TRL: rollout (_generate_and_score_completions)')[0]:.3f}; of which the policy's generation "
                f"ours {g(o, 'ours: . . policy sampling (HFGenerator.sample_after)')[0]:.3f}, TRL "
                f"{g(t, 'TRL: . generation (_generate)')[0]:.3f}. Beyond generation: {collab}the policy's prompts "
                f"are tokenised in {tokenise[1]:g} encode_prompts call(s) per step, {tokenise[0]:.3f} s. Outside "
                f"the rollout, the per-step "
                f"checkpoint (save_state) takes {save[0]:.3f} s "
                f"({save[0] / max(ours['seconds_per_step'], 1e-9):.0%} of our profiled step).")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 warm-up + 3 steps, no profile")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=16, help="measured steps per trainer per round")
    parser.add_argument("--profile-steps", type=int, default=8, help="0: no profile")
    parser.add_argument("--no-lora", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.warmup, args.steps, args.profile_steps = 1, 1, 3, 0
    stem = "trainer_speed.quick" if args.quick else "trainer_speed"
    out = Path(args.out) if args.out else RESULTS / f"{stem}.json"

    lora_modes = [False]
    notes = []
    if not args.no_lora:
        if ours_has_lora():
            lora_modes.append(True)
        else:
            notes.append("LoRA rows left out: this tree's TrainConfig has no lora_r field yet.")
    runs = [(kind, lora) for lora in lora_modes for kind in ("ours", "trl")]
    samples: dict[tuple[str, bool], dict[str, list[float]]] = {r: {p: [] for p in (*PARTS, *WORK)} for r in runs}
    for rnd in range(args.rounds):
        for kind, lora in runs:
            t = time.perf_counter()
            times = in_process(worker, kind, lora, SETTINGS, args.warmup + args.steps)
            for part in (*PARTS, *WORK):
                samples[(kind, lora)][part] += times[part][args.warmup:]
            print(f"round {rnd + 1}/{args.rounds} {kind} lora={lora}: {time.perf_counter() - t:.1f}s, median step "
                  f"{statistics.median(times['step'][args.warmup:]):.3f}s", flush=True)

    rows = []
    for kind, lora in runs:
        data = samples[(kind, lora)]
        row: dict[str, Any] = {"trainer": kind, "lora": lora, "steps": data,
                               "quartiles": {p: quartiles(data[p]) for p in PARTS},
                               "informative_groups": statistics.mean(data["informative"]),
                               "policy_tokens": statistics.mean(data["tokens"]),
                               "collaborator_asks": statistics.mean(data["collab_asks"])}
        if kind == "ours":
            row["ratio"] = ratio_ci(data["step"], samples[("trl", lora)]["step"])
            row["ratio_parts"] = {p: ratio_ci(data[p], samples[("trl", lora)][p])
                                  for p in ("rollout", "generate", "update", "cpu")}
        rows.append(row)
    print(table(rows))

    profiles: dict[str, Any] = {}
    if args.profile_steps:  # the LoRA modes in which ours is the slower (none: full fine-tuning, for reference)
        slower = [r["lora"] for r in rows if r["trainer"] == "ours" and r["ratio"][0] > 1.0] or [False]
        for lora in slower:
            for kind in ("ours", "trl"):
                name = f"{kind}, LoRA {'on' if lora else 'off'}"
                profiles[name] = in_process(profile_worker, kind, lora, SETTINGS, args.warmup, args.profile_steps)
        print(profile_md(profiles))

    result = {"settings": SETTINGS, "rounds": args.rounds, "warmup": args.warmup, "steps_per_round": args.steps,
              "rows": rows, "profiles": profiles, "notes": notes, "machine": machine_info(),
              "total_seconds": elapsed_seconds()}
    write_json(out, result)
    md = out.with_suffix(".md")
    md.write_text(render_md(result) + "\n")
    print(f"\nwrote {out} and {md}")


def render_md(result: dict[str, Any]) -> str:
    rows, s = result["rows"], result["settings"]
    lines = [
        "# Trainer speed: ours (C-RL) vs TRL GRPOTrainer + SystemOutcomeReward",
        "",
        f"Policy {s['policy']}, {s['protocol']} with {s['collaborators']} on {s['task']}, "
        f"{s['items_per_step']} prompts x G={s['group_size']} per step, {s['max_new_tokens']} new tokens, "
        f"temperature {s['temperature']}, lr {s['lr']}, "
        f"CPU ({result['machine']['cpu_count']} cores). Seconds per optimiser step: median [interquartile range] over "
        f"{result['rounds']} rounds x {result['steps_per_round']} steps after {result['warmup']} warm-up steps; ratio: "
        "ours / TRL median step time [95% bootstrap CI]. Settings and what each column times: the script's docstring.",
        "",
        table(rows),
        "",
    ]
    for r in rows:
        if r.get("ratio_parts"):
            parts = ", ".join(f"{p} {v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]" for p, v in r["ratio_parts"].items())
            lines.append(f"- ours / TRL by part, LoRA {'on' if r['lora'] else 'off'}: {parts}")
    lines += [f"- {n}" for n in result["notes"]]
    lines += ["", "## Findings", ""] + [f"- {f}" for f in findings(rows, result["profiles"])]
    if result["profiles"]:
        lines += ["", "## Where the time goes (cProfile)", "", profile_md(result["profiles"])]
    lines += ["", f"Total run time {result['total_seconds'] / 60:.1f} min."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
