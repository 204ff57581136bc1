"""The trainer shared by C-RL and its baselines.

One loop, methods differ in what they roll out and how they update:

| method | rollouts | reward | update |
|---|---|---|---|
| crl | the protocol, policy seated with frozen collaborators | system score | clipped PG, group advantages |
| grpo-indiv | the policy alone (majority vote of one) | its own score | clipped PG, seq-mean-token-mean |
| dapo-indiv | the policy alone | its own score + overlong penalty | clip-higher, dynamic sampling |
| raft | the protocol | system score | SFT on the policy's calls of executions at or above the threshold |
| nudge | none | - | none: picks the system prompt with the best collaborative dev score |
| base | none | - | none |

Checkpoint selection: every ``eval_every`` steps the policy is scored on ``eval_items`` dev items in
the mode its method optimises (collaborative for crl/raft, solo for the indiv methods); the best is
saved; training stops after ``patience`` evaluations without improvement. After every step the full
state (weights, optimiser, step, RNGs, history) is saved, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..agents.base import stable_hash
from ..agents.pools import load_pool
from ..envs.protocols import Protocol, make_protocol
from ..errors import ConfigError
from ..tasks import make as make_task
from ..types import Item
from ..valuation.stats import bootstrap_mean, rescue_drag
from .advantages import broadcast, group_advantages, informative_groups, overlong_penalty
from .config import TrainConfig
from .losses import clipped_policy_loss, sft_loss
from .rollouts import PolicyCall, RecordingPolicy, Rollout, collect, collect_distributed

STATE_FILE = "trainer_state.pt"


def resolve_policy(spec: str) -> str:
    """A model folder: ``zoo:<recipe>/<member>`` (built on first use) or a local path."""
    if spec.startswith("zoo:"):
        from ..agents.zoo import build_zoo

        recipe, _, name = spec[4:].partition("/")
        build = build_zoo(recipe or "default", progress=False)
        names = list(build.models)
        if name.isdigit() and int(name) < len(names):
            name = names[int(name)]
        return str(build.model_path(name or names[0]))
    if not Path(spec).is_dir():
        raise ConfigError(f"policy {spec!r} is neither a zoo model (zoo:<recipe>/<member>) nor a model folder")
    return spec


def load_policy(spec: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..agents.hf import resolve_device_dtype

    path = resolve_policy(spec)
    device, dtype = resolve_device_dtype(device, dtype)
    import torch

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.to(device), tokenizer


@dataclass
class EvalResult:
    mode: str  # "collab" or "solo"
    per_item: list[float]
    mean: float
    ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "mean": self.mean, "ci": list(self.ci), "n": len(self.per_item)}


@dataclass
class TrainState:
    step: int = 0
    best_score: float = float("-inf")
    best_step: int = -1
    evals_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""


class Trainer:
    def __init__(self, config: TrainConfig, out: str | Path | None = None,
                 log: Callable[[str], None] = print, executor: Any = None):
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # weight loading/saving bars would drown the training bar

        self.config, self.log = config, log
        self.out = Path(out or config.out)
        self.torch = torch
        self._seed_everything(config.seed)
        self.task = make_task(config.task, **config.task_kwargs)
        self.pool = load_pool(config.collaborators)
        self.members = self.pool.select(config.members) if config.members is not None else self.pool.member_names
        if config.policy_name in self.pool.backends():
            raise ConfigError(f"policy_name {config.policy_name!r} clashes with a name in pool {self.pool.name!r}")
        settings = dict(config.protocol_settings)
        self.collab_protocol = self._protocol(config.protocol, settings)
        self.solo_protocol = make_protocol("majority_vote", max_new_tokens=config.max_new_tokens,
                                           temperature=self.collab_protocol.temperature)
        self.model, self.tokenizer = load_policy(config.policy, config.device, config.dtype)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.state = TrainState()
        self.styles = {**self.pool.styles, config.policy_name: config.policy_style}
        self.rng = random.Random(config.seed)
        self.executor = executor  # a RayExecutor spreads rollout collection; None: this process
        self._tb = None

    # -- setup helpers --------------------------------------------------------------------------
    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        self.torch.manual_seed(seed)

    def _protocol(self, name: str, settings: dict[str, Any]) -> Protocol:
        proto = make_protocol(name, **settings)
        overrides: dict[str, Any] = {"max_new_tokens": self.config.max_new_tokens}
        if hasattr(proto, "rounds") and "rounds" not in settings:
            overrides["rounds"] = self.config.rounds
        return make_protocol(proto, **overrides)

    def backend(self, system_prompt: str | None = None) -> RecordingPolicy:
        from ..agents.hf import HFGenerator

        hf = HFGenerator(self.model, self.tokenizer, max_new_tokens=self.config.max_new_tokens,
                         identity=f"policy:{self.config.method}:step{self.state.step}")
        return RecordingPolicy(hf, self.state.system_prompt if system_prompt is None else system_prompt)

    @property
    def training_coalition(self) -> list[str]:
        return [self.config.policy_name] if self.config.solo else self.members + [self.config.policy_name]

    # -- rollouts -------------------------------------------------------------------------------------
    def rollouts(self, items: Sequence[Item], step_seed: int, first_group: int = 0) -> list[Rollout]:
        proto = self.solo_protocol if self.config.solo else self.collab_protocol
        gather = collect_distributed if getattr(self.executor, "name", "local") == "ray" else None
        args = (proto, self.task, items, self.training_coalition, self.pool.backends())
        if gather is not None:
            return gather(self.executor, self.backend(), *args, self.config.policy_name, self.config.group_size,
                          step_seed, self.styles, self.pool.dev_scores, first_group=first_group)
        return collect(*args, self.backend(), self.config.policy_name, self.config.group_size, step_seed,
                       self.styles, self.pool.dev_scores, first_group=first_group)

    def _draw_items(self, n: int) -> list[Item]:
        pool = list(self.task.items("train"))
        return [pool[self.rng.randrange(len(pool))] for _ in range(n)]

    def rewards(self, rollouts: Sequence[Rollout]) -> list[float]:
        cfg = self.config
        out = []
        for r in rollouts:
            reward = r.solo_score if cfg.solo else r.reward
            if cfg.overlong_max:  # DAPO: penalise the longest response of the rollout
                longest = max((len(c.completion_ids) for c in r.calls), default=0)
                reward += overlong_penalty(longest, cfg.overlong_max, cfg.overlong_cache)
            out.append(reward)
        return out

    def gather_batch(self, step: int) -> tuple[list[Rollout], list[float], dict[str, Any]]:
        """Rollouts for one step; DAPO's dynamic sampling drops all-equal groups and refills."""
        cfg = self.config
        rollouts = self.rollouts(self._draw_items(cfg.items_per_step), stable_hash("step", cfg.seed, step))
        rewards = self.rewards(rollouts)
        groups = [r.group for r in rollouts]
        zero_var = 1.0 - len(informative_groups(rewards, groups)) / max(len(set(groups)), 1)
        if cfg.dynamic_sampling:
            keep = informative_groups(rewards, groups)
            kept = [(r, w) for r, w in zip(rollouts, rewards) if r.group in keep]
            refills = 0
            while len({r.group for r, _ in kept}) < cfg.items_per_step and refills < cfg.max_refills:
                refills += 1
                more = self.rollouts(self._draw_items(cfg.items_per_step),
                                     stable_hash("refill", cfg.seed, step, refills), first_group=refills * 10_000)
                more_rewards = self.rewards(more)
                ok = informative_groups(more_rewards, [r.group for r in more])
                kept += [(r, w) for r, w in zip(more, more_rewards) if r.group in ok]
            rollouts, rewards = [r for r, _ in kept], [w for _, w in kept]
        return rollouts, rewards, {"zero_variance_groups": zero_var}

    # -- updates ----------------------------------------------------------------------------------
    def _token_batch(self, calls: Sequence[PolicyCall]) -> tuple[Any, Any, Any]:
        """New log-probs (with grad), old log-probs and the mask, padded to (calls x tokens)."""
        from ..agents.hf import sequence_logprobs

        torch = self.torch
        width = max(len(c.completion_ids) for c in calls)
        old = torch.zeros(len(calls), width)
        mask = torch.zeros(len(calls), width)
        by_temp: dict[float, list[int]] = {}
        for k, c in enumerate(calls):
            by_temp.setdefault(c.temperature if c.temperature > 0 else 1.0, []).append(k)
        rows: list[Any] = [None] * len(calls)
        for temp, idx in by_temp.items():
            lps = sequence_logprobs(self.model, [calls[k].prompt_ids for k in idx],
                                    [calls[k].completion_ids for k in idx], temp, self._pad_id, grad=True)
            for k, lp in zip(idx, lps):
                rows[k] = lp
        new = torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[0])) for r in rows])
        for k, c in enumerate(calls):
            n = len(c.completion_ids)
            old[k, :n] = torch.tensor(c.logprobs)
            mask[k, :n] = 1.0
        return new.cpu(), old, mask

    @property
    def _pad_id(self) -> int:
        tok = self.tokenizer
        return int(tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0))

    def update(self, calls: Sequence[PolicyCall], advantages: Sequence[float] | None) -> dict[str, float]:
        """One optimiser step per pass over ``calls`` (policy gradient, or SFT when advantages is None).
        Micro-batch losses are weighted by their share of tokens, so the sum is the batch's token mean."""
        cfg, torch = self.config, self.torch
        if not calls:
            return {"loss": 0.0, "tokens": 0, "clip_low": 0.0, "clip_high": 0.0}
        total_tokens = sum(len(c.completion_ids) for c in calls)
        metrics = {"loss": 0.0, "tokens": total_tokens, "clip_low": 0.0, "clip_high": 0.0}
        order = list(range(len(calls)))
        for _ in range(cfg.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum, low, high = 0.0, 0.0, 0.0
            for start in range(0, len(order), cfg.micro_batch):
                idx = order[start:start + cfg.micro_batch]
                chunk = [calls[k] for k in idx]
                new, old, mask = self._token_batch(chunk)
                share = float(mask.sum()) / total_tokens
                if advantages is None:
                    loss = sft_loss(new, mask)
                else:
                    adv = torch.tensor([advantages[k] for k in idx], dtype=torch.float32)
                    out = clipped_policy_loss(new, old, adv, mask, cfg.eps_low, cfg.eps_high, cfg.aggregation)
                    loss = out.loss
                    low += out.clip_fraction_low * share
                    high += out.clip_fraction_high * share
                (loss * share).backward()
                loss_sum += float(loss.detach()) * share
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            metrics.update(loss=loss_sum, clip_low=low, clip_high=high)
        return metrics

    def train_step(self, step: int) -> dict[str, Any]:
        cfg = self.config
        t0 = time.perf_counter()
        rollouts, rewards, extra = self.gather_batch(step)
        t1 = time.perf_counter()
        calls = [c for r in rollouts for c in r.calls if c.completion_ids]
        if cfg.method == "raft":
            winners = {r.index for r, w in zip(rollouts, rewards) if w >= cfg.raft_threshold}
            kept = [c for r in rollouts if r.index in winners for c in r.calls if c.completion_ids]
            metrics = self.update(kept, None)
            metrics["kept_executions"] = len(winners)
        else:
            adv = group_advantages(rewards, [r.group for r in rollouts])
            index_of = {r.index: k for k, r in enumerate(rollouts)}
            # every policy call gets its rollout's advantage (uniform credit); zero ones add nothing
            per_call = broadcast(adv, [index_of[c.rollout] for c in calls]) if calls else np.zeros(0)
            active = [k for k, a in enumerate(per_call) if a != 0.0]
            metrics = self.update([calls[k] for k in active], [float(per_call[k]) for k in active])
        t2 = time.perf_counter()
        arr = np.asarray(rewards, dtype=float)
        return {"step": step, "reward_mean": float(arr.mean()) if len(arr) else 0.0,
                "reward_std": float(arr.std()) if len(arr) else 0.0,
                "system_score_mean": float(np.mean([r.reward for r in rollouts])) if rollouts else 0.0,
                "solo_score_mean": float(np.mean([r.solo_score for r in rollouts])) if rollouts else 0.0,
                "rollouts": len(rollouts), "policy_calls": len(calls), **extra, **metrics,
                "rollout_seconds": t1 - t0, "update_seconds": t2 - t1}

    # -- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, items: Sequence[Item], mode: str, system_prompt: str | None = None,
                 seed: int = 12345) -> EvalResult:
        """One execution per item with fixed seeds (deterministic); ``collab`` inside the protocol with the
        frozen collaborators, ``solo`` alone."""
        coalition = self.members + [self.config.policy_name] if mode == "collab" else [self.config.policy_name]
        proto = self.collab_protocol if mode == "collab" else self.solo_protocol
        backend = self.backend(system_prompt)
        self.model.eval()
        try:
            rollouts = collect(proto, self.task, items, coalition, self.pool.backends(), backend,
                               self.config.policy_name, 1, seed, self.styles, self.pool.dev_scores)
        finally:
            self.model.train()
        scores = [r.reward if mode == "collab" else r.solo_score for r in rollouts]
        _, _, lo, hi = bootstrap_mean(np.asarray([scores]), n_boot=1000, seed=seed)
        return EvalResult(mode, scores, float(np.mean(scores)), (float(lo[0]), float(hi[0])))

    @property
    def selection_mode(self) -> str:
        return "solo" if self.config.solo else "collab"

    def dev_items(self) -> list[Item]:
        return list(self.task.items("dev"))[: self.config.eval_items]

    # -- checkpoints -------------------------------------------------------------------------------------
    def save_state(self) -> None:
        torch = self.torch
        last = self.out / "last"
        last.mkdir(parents=True, exist_ok=True)
        tmp = last / (STATE_FILE + ".tmp")
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "state": self.state.__dict__, "python_rng": random.getstate(),
                    "trainer_rng": self.rng.getstate(), "numpy_rng": np.random.get_state(),
                    "torch_rng": torch.get_rng_state(), "config": self.config.to_dict()}, tmp)
        tmp.replace(last / STATE_FILE)  # atomic: a kill never leaves a half-written state

    def try_resume(self) -> bool:
        path = self.out / "last" / STATE_FILE
        if not path.is_file():
            return False
        saved = self.torch.load(path, weights_only=False)
        if saved["config"] != self.config.to_dict():
            raise ConfigError(f"{path} was written with a different configuration; use a fresh --out folder "
                              "or delete it to start over")
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.state = TrainState(**saved["state"])
        random.setstate(saved["python_rng"])
        self.rng.setstate(saved["trainer_rng"])
        np.random.set_state(saved["numpy_rng"])
        self.torch.set_rng_state(saved["torch_rng"])
        self.log(f"resumed {self.config.method} from step {self.state.step}")
        return True

    def save_best(self) -> None:
        best = self.out / "best"
        self.model.save_pretrained(best)
        self.tokenizer.save_pretrained(best)
        (best / "system_prompt.txt").write_text(self.state.system_prompt)

    def load_best(self) -> None:
        best = self.out / "best"
        if (best / "config.json").is_file():
            from transformers import AutoModelForCausalLM

            loaded = AutoModelForCausalLM.from_pretrained(best, local_files_only=True)
            self.model.load_state_dict(loaded.state_dict())
            self.state.system_prompt = (best / "system_prompt.txt").read_text()

    def _log_metrics(self, row: dict[str, Any]) -> None:
        with open(self.out / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)):
                    self._tb.add_scalar(key, value, row.get("step", 0))

    # -- the whole run -----------------------------------------------------------------------------------
    def fit(self, progress: bool = True) -> TrainState:
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError("--tensorboard needs the tensorboard package: pip install tensorboard") from exc
            self._tb = SummaryWriter(str(self.out / "tensorboard"))
        resumed = self.try_resume()
        if cfg.method == "base":
            self.state.best_step = 0
            self.save_best()
            return self.state
        if cfg.method == "nudge":
            return self._nudge()
        if not resumed:
            score = self.evaluate(self.dev_items(), self.selection_mode).mean
            self.state.best_score, self.state.best_step = score, 0
            self.save_best()
            self._log_metrics({"step": 0, "dev_score": score, "best": True})
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.steps, initial=self.state.step, desc=cfg.method, unit="step", disable=not progress)
        while self.state.step < cfg.steps and self.state.evals_without_gain < cfg.patience:
            row = self.train_step(self.state.step)
            self.state.step += 1
            if self.state.step % cfg.eval_every == 0:
                score = self.evaluate(self.dev_items(), self.selection_mode).mean
                row["dev_score"] = score
                if score > self.state.best_score:
                    self.state.best_score, self.state.best_step = score, self.state.step
                    self.state.evals_without_gain = 0
                    self.save_best()
                    row["best"] = True
                else:
                    self.state.evals_without_gain += 1
            self.state.history.append({k: row[k] for k in ("step", "reward_mean") if k in row})
            self._log_metrics(row)
            self.save_state()
            bar.update(1)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", dev=f"{self.state.best_score:.3f}")
        bar.close()
        return self.state

    def _nudge(self) -> TrainState:
        """Prompt nudge: no weight update; the candidate system prompt with the best collaborative dev score."""
        best = None
        for k, prompt in enumerate(self.config.nudge_prompts):
            score = self.evaluate(self.dev_items(), "collab", system_prompt=prompt).mean
            self._log_metrics({"step": k, "candidate": prompt, "dev_score": score})
            if best is None or score > best[0]:
                best = (score, prompt)
        assert best is not None
        self.state.best_score, self.state.system_prompt, self.state.best_step = best[0], best[1], 0
        self.save_best()
        return self.state

    def report(self, base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
        """Score the best checkpoint on the test split in both modes; rescue/drag against Base's per-item
        scores (``{"collab": [...], "solo": [...]}``, as in Base's per_item.json) when given."""
        self.load_best()
        items = list(self.task.items("test"))[: self.config.test_items]
        collab, solo = self.evaluate(items, "collab"), self.evaluate(items, "solo")
        result: dict[str, Any] = {"method": self.config.method, "seed": self.config.seed,
                                  "best_step": self.state.best_step, "best_dev_score": self.state.best_score,
                                  "steps_run": self.state.step, "system_prompt": self.state.system_prompt,
                                  "collab": collab.to_dict(), "solo": solo.to_dict(),
                                  "config": self.config.to_dict()}
        for mine in (collab, solo):
            if base_per_item is not None and len(base_per_item.get(mine.mode, [])) == len(mine.per_item):
                moves = rescue_drag(base_per_item[mine.mode], mine.per_item)
                result[f"vs_base_{mine.mode}"] = {"rescue": moves.rescue, "drag": moves.drag}
        (self.out / "report.json").write_text(json.dumps(result, indent=2))
        (self.out / "per_item.json").write_text(json.dumps({"collab": collab.per_item, "solo": solo.per_item}))
        return result


def run_methods(methods: Sequence[str], root: str | Path, preset: str = "paper", progress: bool = True,
                executor: Any = None, **settings: Any) -> list[dict[str, Any]]:
    """Train (or just evaluate) each method into ``root/<method>-seed<seed>`` and report it against Base,
    which runs first when ``root`` has no Base for this seed yet."""
    from .config import make_config

    root = Path(root)
    methods = [m.strip() for m in methods if m.strip()]
    seed = settings.get("seed", 0)
    base_file = root / f"base-seed{seed}" / "per_item.json"
    if methods != ["base"] and not base_file.is_file():
        methods = ["base"] + [m for m in methods if m != "base"]  # rescue/drag need Base first
    reports = []
    for method in methods:
        config = make_config(method, preset=preset, **settings)
        trainer = Trainer(config, out=root / f"{config.method}-seed{config.seed}", executor=executor)
        trainer.fit(progress=progress)
        base = json.loads(base_file.read_text()) if config.method != "base" and base_file.is_file() else None
        reports.append(trainer.report(base))
    (root / "summary.md").write_text(summary_table(root))
    return reports


def summary_table(folder: str | Path) -> str:
    """A markdown table of every report.json under ``folder`` (every method run so far)."""
    rows = ["| method | seed | best step | collab [95% CI] | solo [95% CI] | rescue | drag |",
            "|---|---|---|---|---|---|---|"]
    for path in sorted(Path(folder).rglob("report.json")):
        r = json.loads(path.read_text())
        vs = r.get("vs_base_collab", {})
        rows.append(f"| {r['method']} | {r['seed']} | {r['best_step']} | {r['collab']['mean']:.3f} "
                    f"[{r['collab']['ci'][0]:.3f}, {r['collab']['ci'][1]:.3f}] | {r['solo']['mean']:.3f} "
                    f"[{r['solo']['ci'][0]:.3f}, {r['solo']['ci'][1]:.3f}] | "
                    f"{vs.get('rescue', float('nan')):.3f} | {vs.get('drag', float('nan')):.3f} |")
    return "\n".join(rows) + "\n"


__all__ = ["Trainer", "EvalResult", "TrainState", "load_policy", "resolve_policy", "run_methods",
           "summary_table"]
