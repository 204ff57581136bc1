"""The trainer: a small orchestrator of one policy-training run (C-RL and its baselines). Each job
lives in its own module: loading the policy and the vLLM engine (:mod:`.policy_model`), rollouts
(:mod:`.rollouts`), the updates (:mod:`.policy_updates` over the one :mod:`.update_loop`), evaluation
and selection (:mod:`.evaluation`), checkpoints (:mod:`.checkpoints`), files (:mod:`.reporting`),
learning-signal numbers (:mod:`.diagnostics`). What differs per recipe is its strategy
(:mod:`.methods`: rollouts, reward, update), which gets the updates object, never the trainer.

Checkpoint selection: every ``eval_every`` steps the policy is scored on ``eval_items`` dev items in
the mode its method optimises (collaborative for crl/raft, solo for the indiv methods); the best is
saved; training stops after ``patience`` evaluations without improvement. After every step the full
state (weights, optimiser, step, RNGs, history) is saved, so a killed run resumes where it stopped.
The report scores both the best and the last checkpoint on the test split, which selection never sees.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..agents.member_settings import MemberSettings
from ..agents.pools import load_pool
from ..envs.dev_scores import DevScores
from ..envs.protocols import Protocol, make_protocol
from ..envs.system import System
from ..errors import ConfigError
from ..failures import FailureSummary
from ..result_files import write_json, write_text
from ..tasks import make as make_task
from ..types import Item
from . import checkpoints
from .batches import gather_batch
from .config import PolicyGradientConfig, TrainConfig, check_methods, make_config
from .diagnostics import signal_metrics, summarise_signal
from .evaluation import MODES, EvalResult, RunItems, improves, run_evaluation
from .policy_model import (
    RolloutFallbackWarning,
    load_policy,
    policy_weights,
    push_weights,
    resolve_policy,
    start_engine,
)
from .policy_updates import PolicyUpdates
from .probe import NoSignalError, ProbeResult, diagnose, run_probe
from .recipes import RecipeContext, get_recipe, make_strategy
from .reporting import MetricsLog, summary_table, vs_base, write_report
from .rollouts import PolicyCall, RecordingPolicy, Rollout, RolloutPlan, collect, collect_distributed, protocol_asks
from .update_loop import UpdateLoop


@dataclass
class TrainState:
    step: int = 0
    best_score: float = float("-inf")
    best_ci: list[float] = field(default_factory=list)
    best_step: int = -1
    evals_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    probe: dict[str, Any] | None = None  # the pre-training probe (see training/probe.py)


class Trainer(RunItems):
    def __init__(self, config: TrainConfig, out: str | Path | None = None,
                 log: Callable[[str], None] = print, executor: Any = None):
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # weight loading/saving bars would drown the training bar

        self.config, self.log = config, log
        self.method = make_strategy(config)  # the recipe's rollouts, reward and update
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
        seat = {config.policy_name: config.policy_style}
        # the policy is a seat: the pool answers the frozen collaborators, the trainer's model the policy
        self.collab_system = System(self.collab_protocol, self.task, self.pool, [*self.members, config.policy_name],
                                    seats=seat)
        self._solo_system: System | None = None
        self.check_signal()
        self.model, self.tokenizer = load_policy(config.policy, config.device, config.dtype, config.lora, config.seed)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.updates = PolicyUpdates(self.model, self.tokenizer,
                                     UpdateLoop(self.model, self.optimizer, config.max_grad_norm,
                                                after_step=self.sync_weights),  # vLLM samples the new weights
                                     config.micro_batch)
        self.state = TrainState()
        self.styles = self.collab_system.styles
        self._base_weights: dict[str, Any] | None = None
        self.rng = random.Random(config.seed)
        self.executor = executor  # a RayExecutor spreads rollout collection; None: this process
        self.metrics = MetricsLog(self.out)
        self.failures = FailureSummary()  # failed rollouts and evaluation episodes of this process
        self.weight_syncs = 0  # weight pushes into the rollout engine
        self.last_logprob_gap = 0.0  # mean |sampler - trainer| log-prob per token of the last rollouts (vLLM)
        self.engine = self._start_engine() if config.rollout_backend == "vllm" else None
        if self.engine is not None and getattr(executor, "name", "local") == "ray":
            raise ConfigError("rollout_backend='vllm' serves the policy in this process; drop the Ray executor "
                              "(or use rollout_backend='hf' to spread rollouts over Ray workers)")

    # -- setup helpers --------------------------------------------------------------------------
    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        self.torch.manual_seed(seed)

    def _protocol(self, name: str, settings: dict[str, Any]) -> Protocol:
        proto = make_protocol(name, **settings)  # a coalition-training recipe is refused here
        overrides: dict[str, Any] = {"max_new_tokens": self.config.max_new_tokens}
        if hasattr(proto, "rounds") and "rounds" not in settings:
            overrides["rounds"] = self.config.rounds
        return make_protocol(proto, **overrides)

    @property
    def solo_system(self) -> System:
        """The policy alone under a plain single answer; it reads the collaborative system's dev scores,
        as every rollout and evaluation of the run does."""
        if self._solo_system is None:
            self._solo_system = System(self.solo_protocol, self.task, self.pool, [self.config.policy_name],
                                       seats=self.collab_system.seats, dev_scores=self.dev_scores.scores)
        return self._solo_system

    def check_signal(self) -> None:
        """Refuse, before any rollout, settings in which the collaborative methods can get no signal
        from the policy: it is not in the coalition, it is one of the protocol's fixed helpers, or the
        protocol can never ask it (found by driving the protocol with canned replies)."""
        if self.method.solo or not self.method.trains:
            return
        cfg, proto = self.config, self.collab_protocol
        if cfg.policy_name not in self.training_coalition:
            raise ConfigError(f"the policy {cfg.policy_name!r} is not in the coalition {self.training_coalition}: "
                              f"{cfg.method} would train on no call of its own")
        if len(self.training_coalition) < proto.min_members:
            raise ConfigError(f"{proto.name} needs at least {proto.min_members} members; the training coalition "
                              f"is {self.training_coalition}")
        probe = list(self.task.items("train"))[:4]
        if protocol_asks(self.collab_system, probe, cfg.policy_name) is False:
            raise ConfigError(f"{proto.name} never asks the policy anything with coalition "
                              f"{self.training_coalition}: {cfg.method} would get no signal; seat the policy in a "
                              "protocol where it answers (e.g. majority_vote, debate, slm_mux)")

    def _start_engine(self) -> Any:
        cfg = self.config
        engine = start_engine(cfg.policy, cfg.dtype, cfg.vllm_settings)
        if engine is not None:
            self.sync_weights(engine)  # a resumed or best checkpoint differs from the folder vLLM read
        return engine

    def sync_weights(self, engine: Any = None) -> None:
        """Push the trainer's current weights into the rollout engine (a no-op without one)."""
        engine = engine if engine is not None else getattr(self, "engine", None)
        if engine is None:
            return
        push_weights(engine, self.model)
        self.weight_syncs += 1

    def backend(self, system_prompt: str | None = None, temperature: float | None = None) -> RecordingPolicy:
        from ..agents.hf import HFGenerator
        from ..agents.options import HFOptions

        cfg = self.config
        hf = HFGenerator(self.model, self.tokenizer, HFOptions(max_new_tokens=cfg.max_new_tokens,
                         max_batch_size=cfg.rollout_batch_size, fast_decode=cfg.fast_decode),
                         identity=f"policy:{cfg.method}:step{self.state.step}")
        gen: Any = hf
        if self.engine is not None:
            from ..agents.vllm_engine import VLLMPolicy

            gen = VLLMPolicy(self.engine, hf, identity=f"{hf.identity}:vllm")
        return RecordingPolicy(gen, self.state.system_prompt if system_prompt is None else system_prompt,
                               temperature)

    def recompute_logprobs(self, rollouts: Sequence[Rollout]) -> float:
        """The trainer's own log-probs of calls another engine (vLLM) sampled (see PolicyUpdates)."""
        return self.updates.recompute_logprobs(rollouts)

    @property
    def dev_scores(self) -> DevScores:
        """The frozen collaborators' dev scores on the task (measured once, on first use, when the
        collaborative protocol needs them); the policy is a seat and has none."""
        return self.collab_system.dev

    @property
    def training_coalition(self) -> list[str]:
        return [self.config.policy_name] if self.method.solo else self.members + [self.config.policy_name]

    # -- rollouts -------------------------------------------------------------------------------------
    def rollouts(self, items: Sequence[Item], step_seed: int, first_group: int = 0) -> list[Rollout]:
        cfg = self.config
        system = self.solo_system if self.method.solo else self.collab_system
        policy = self.backend(temperature=cfg.rollout_temperature)
        plan = RolloutPlan(cfg.group_size, step_seed, draws=cfg.collaborator_draws, first_group=first_group)
        if getattr(self.executor, "name", "local") == "ray":
            rollouts = collect_distributed(self.executor, system, items, policy, plan)
        else:
            rollouts = collect(system, items, policy, plan)
        if self.engine is not None:
            self.last_logprob_gap = self.recompute_logprobs(rollouts)
        self._count_failures(self.training_coalition, rollouts)
        return rollouts

    def _count_failures(self, coalition: Sequence[str], rollouts: Sequence[Rollout]) -> None:
        for r in rollouts:
            self.failures.add(coalition, r.error)

    def rewards(self, rollouts: Sequence[Rollout]) -> list[float]:
        return [self.method.reward(r) for r in rollouts]

    def gather_batch(self, step: int) -> tuple[list[Rollout], list[float], dict[str, Any]]:
        """Rollouts for one step, rewarded (see :func:`.batches.gather_batch`: dynamic sampling)."""
        return gather_batch(self.config, step, self.draw_items, self.rollouts, self.rewards)

    # -- updates (the strategies call self.updates; these names are kept for one release) ---------------
    def _token_batch(self, calls: Sequence[PolicyCall]) -> tuple[Any, Any, Any]:
        return self.updates.token_batch(calls)

    @property
    def _pad_id(self) -> int:
        return self.updates.pad_id

    def policy_gradient_update(self, calls: Sequence[PolicyCall], advantages: Sequence[float]) -> dict[str, float]:
        """The clipped policy gradient with this run's settings (see :meth:`PolicyUpdates.policy_gradient`)."""
        cfg = self.config
        assert isinstance(cfg, PolicyGradientConfig)  # only policy-gradient methods have the settings
        return self.updates.policy_gradient(calls, advantages, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                            aggregation=cfg.aggregation, passes=cfg.updates_per_batch)

    def sft_update(self, calls: Sequence[PolicyCall]) -> dict[str, float]:
        return self.updates.sft(calls)

    def train_step(self, step: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        rollouts, rewards, extra = self.gather_batch(step)
        t1 = time.perf_counter()
        metrics, advantages = self.method.update(self.updates, rollouts, rewards)
        t2 = time.perf_counter()
        arr = np.asarray(rewards, dtype=float)

        def mean(xs: Any) -> float:
            return float(np.mean(xs)) if len(xs) else 0.0
        return {"step": step, "reward_mean": mean(arr), "reward_std": float(arr.std()) if len(arr) else 0.0,
                "system_score_mean": mean([r.reward for r in rollouts]),
                "solo_score_mean": mean([r.solo_score for r in rollouts]),
                "rollouts": len(rollouts), "policy_calls": sum(len(r.calls) for r in rollouts),
                **signal_metrics(rollouts, rewards, advantages), **extra, **metrics,
                **({"sampler_logprob_gap": self.last_logprob_gap} if self.engine is not None else {}),
                "rollout_seconds": t1 - t0, "update_seconds": t2 - t1}

    # -- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, items: Sequence[Item], mode: str, system_prompt: str | None = None,
                 seed: int | None = None) -> EvalResult:
        """One execution per item, deterministic for the run's seed: ``collab`` inside the protocol with
        the frozen collaborators, ``solo`` the policy alone, ``without`` the collaborators alone (the
        leave-one-out coalition; the policy is not asked). The policy decodes as ``eval_decoding`` says.
        See :func:`.evaluation.eval_seed` for the seed."""
        if mode not in MODES:
            raise ConfigError(f"evaluation mode {mode!r}; use collab, solo or without")
        seed = self.eval_seed if seed is None else seed
        system = self.solo_system if mode == "solo" else self.collab_system
        members = list(self.members) if mode == "without" else None
        backend = self.backend(system_prompt, 0.0 if self.config.eval_decoding == "greedy" else None)
        self.model.eval()
        try:
            result, rollouts = run_evaluation(system, items, backend, mode, seed, members)
        finally:
            self.model.train()
        self._count_failures(members if members is not None else list(system.members), rollouts)
        return result

    # -- checkpoints -------------------------------------------------------------------------------------
    def record_best(self, result: EvalResult, step: int) -> None:
        self.state.best_score, self.state.best_ci, self.state.best_step = result.mean, list(result.ci), step
        self.state.evals_without_gain = 0
        checkpoints.save_best(self.out, self.model, self.tokenizer, self.state.system_prompt,
                              self.member_settings(step, result.mean))

    def member_settings(self, step: int, dev_score: float | None = None) -> MemberSettings:
        """What a checkpoint needs to be a pool member as it stands (style, system prompt, token cap, the
        decoding the trainer evaluates with) and its provenance (``dev_score``: the best checkpoint's)."""
        from ..agents.hf import context_length

        cfg = self.config
        if self._base_weights is None:  # the starting weights never change: hashed once
            self._base_weights = policy_weights(cfg.policy)
        return MemberSettings(
            style=cfg.policy_style, system_prompt=self.state.system_prompt, max_new_tokens=cfg.max_new_tokens,
            context_length=context_length(self.model, self.tokenizer),
            decoding="greedy" if cfg.eval_decoding == "greedy" else "sampled",
            provenance={"base_model": cfg.policy, "base_weights": self._base_weights, "method": cfg.method,
                        "step": step, "dev_score": dev_score, "eval_seed": self.eval_seed,
                        "run_folder": str(self.out.resolve()), "config": cfg.to_dict()})

    def save_state(self) -> None:
        checkpoints.save_state(self.out, self.model, self.optimizer, asdict(self.state), self.rng,
                               self.config.to_dict(), self.tokenizer, self.member_settings(self.state.step))

    def try_resume(self) -> bool:
        saved = checkpoints.load_state(self.out, self.model, self.optimizer, self.rng, self.config.to_dict())
        if saved is None:
            return False
        self.state = TrainState(**saved)
        self.sync_weights()
        self.log(f"resumed {self.config.method} from step {self.state.step}")
        return True

    def load_best(self) -> None:
        prompt = checkpoints.load_best(self.out, self.model)
        self.sync_weights()
        if prompt is not None:
            self.state.system_prompt = prompt

    def select_untrained(self) -> None:
        """A method that does not train: the best of its candidate system prompts by collaborative dev
        score (Nudge), or the current prompt evaluated once (Base)."""
        candidates = self.method.candidate_prompts()
        if candidates is None:
            self.record_best(self.evaluate(self.dev_items(), "collab"), step=0)
            return
        best: tuple[EvalResult, str] | None = None
        for k, prompt in enumerate(candidates):
            result = self.evaluate(self.dev_items(), "collab", system_prompt=prompt)
            self.metrics.write({"step": k, "candidate": prompt, "dev_score": result.mean})
            if best is None or result.mean > best[0].mean:
                best = (result, prompt)
        if best is None:
            raise ConfigError(f"{self.config.method}: no candidate system prompt to choose from")
        self.state.system_prompt = best[1]
        self.record_best(best[0], step=0)

    # -- the whole run -----------------------------------------------------------------------------------
    def probe(self, force: bool = False) -> ProbeResult | None:
        """The pre-training probe of a policy-gradient method (``probe_groups`` groups; 0: none): logged,
        kept in the state and the report, and a :class:`NoSignalError` when no group is informative,
        unless ``force``."""
        cfg = self.config
        if not isinstance(cfg, PolicyGradientConfig) or cfg.probe_groups < 1:
            return None
        result = run_probe(self, cfg.probe_groups)
        self.state.probe = result.to_dict()
        self.log(result.line())
        self.metrics.write({"step": 0, "probe": result.to_dict()})
        if result.informative_groups == 0.0:
            message = diagnose(result, self)
            if not force:
                raise NoSignalError(f"{message} Pass --force (Trainer.fit(force=True)) to train anyway.")
            self.log(f"warning: {message} Training anyway (force).")
        return result

    def fit(self, progress: bool = True, force: bool = False) -> TrainState:
        """Train (or, for methods that do not train, evaluate). Before the first update the probe checks
        that the method gets a learning signal (:meth:`probe`; ``force`` trains without one)."""
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "config.json", cfg.to_dict())
        self.metrics = MetricsLog(self.out, cfg.tensorboard)
        resumed = self.try_resume()
        if not self.method.trains:
            if not resumed:
                self.select_untrained()
                self.save_state()
            return self.state
        if not resumed:
            self.probe(force)
            result = self.evaluate(self.dev_items(), self.method.selection_mode)
            self.record_best(result, step=0)
            self.metrics.write({"step": 0, "dev_score": result.mean, "dev_ci": list(result.ci), "best": True})
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.steps, initial=self.state.step, desc=cfg.method, unit="step", disable=not progress)
        while self.state.step < cfg.steps and self.state.evals_without_gain < cfg.patience:
            row = self.train_step(self.state.step)
            self.state.step += 1
            row["step"] = self.state.step
            if self.state.step % cfg.eval_every == 0 or self.state.step == cfg.steps:  # a short run can pick its end
                result = self.evaluate(self.dev_items(), self.method.selection_mode)
                row["dev_score"], row["dev_ci"] = result.mean, list(result.ci)
                # an adversary (reward="negate") keeps its lowest dev score
                if improves(result.mean, self.state.best_score, self.method.selection_sign):
                    self.record_best(result, self.state.step)
                    row["best"] = True
                else:
                    self.state.evals_without_gain += 1
            self.state.history.append({k: row[k] for k in ("step", "reward_mean") if k in row})
            self.metrics.write(row)
            self.save_state()
            bar.update(1)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", dev=f"{self.state.best_score:.3f}")
        bar.close()
        return self.state

    def report(self, base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
        """Score the last and then the best checkpoint on the test split in both modes; rescue/drag
        against Base's per-item scores (``{"collab": [...], "solo": [...]}``) when given."""
        items = self.test_items()
        last = {m: self.evaluate(items, m) for m in ("collab", "solo")}
        self.load_best()
        best = {m: self.evaluate(items, m) for m in ("collab", "solo")}
        without = self.evaluate(items, "without") if len(self.members) >= self.collab_protocol.min_members else None
        result: dict[str, Any] = {
            "method": self.config.method, "seed": self.config.seed, "best_step": self.state.best_step,
            "best_dev_score": self.state.best_score, "selection_mode": self.method.selection_mode,
            "dev_at_best": {"mean": self.state.best_score, "ci": self.state.best_ci, "n": len(self.dev_items())},
            "steps_run": self.state.step, "system_prompt": self.state.system_prompt,
            "collab": best["collab"].to_dict(), "solo": best["solo"].to_dict(),
            "last": {m: r.to_dict() for m, r in last.items()},
            "policy_weights": policy_weights(self.config.policy),
            "protocol": self.collab_protocol.settings(), "members": list(self.members),
            "eval_seed": self.eval_seed, "dev_scores": self.dev_scores.record(),
            "signal": summarise_signal(self.metrics.rows()), "probe": self.state.probe,
            "config": self.config.to_dict(),
            "failures": self.failures.to_dict()}
        for mode in ("collab", "solo"):
            moves = vs_base(base_per_item, mode, best[mode].per_item)
            if moves is not None:
                result[f"vs_base_{mode}"] = moves
        if without is not None:  # the policy's leave-one-out effect on the system, item by item
            moves = vs_base({"collab": without.per_item}, "collab", best["collab"].per_item) or {}
            result["vs_without_policy"] = {"without": without.to_dict(), **moves,
                                           "loo": best["collab"].mean - without.mean}
        write_report(self.out, result, {**{m: best[m].per_item for m in best},
                                        **({"without": without.per_item} if without is not None else {})})
        return result


@dataclass
class RunOptions:
    """How policy runs go: a progress bar, a Ray ``executor`` for rollouts (None: this process), a
    ``failures`` summary that every run's failed episodes are added to, ``force`` (train past a probe that
    found no signal) and ``overwrite`` (start over a run folder holding another configuration)."""

    progress: bool = True
    executor: Any = None
    failures: FailureSummary | None = None
    force: bool = False
    overwrite: bool = False


def train_policy(config: TrainConfig, out: str | Path | None = None, options: RunOptions | None = None,
                 base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """A policy recipe's run: train (or just evaluate) ``config`` into ``out`` and report it (against
    Base's per-item scores when given)."""
    options = options or RunOptions()
    trainer = Trainer(config, out=out, executor=options.executor)
    trainer.fit(progress=options.progress, force=options.force)
    report = trainer.report(base_per_item)
    if options.failures is not None:
        options.failures.merge(trainer.failures)
    return report


def run_methods(methods: Sequence[str], root: str | Path, preset: str = "paper", options: RunOptions | None = None,
                **settings: Any) -> list[dict[str, Any]]:
    """Train (or just evaluate) each method into ``root/<method>-seed<seed>`` and report it against Base,
    which runs first when ``root`` has no Base for this seed yet. A run folder that holds a run with
    another configuration (its ``config.json``) is refused before any work, unless ``options.overwrite``
    (then it starts over); the same configuration resumes. ``settings`` are the recipes' settings; the
    :class:`RunOptions` fields given as keywords (the old signature) are taken as options, for one release."""
    old = {f.name: settings.pop(f.name) for f in dataclasses.fields(RunOptions) if f.name in settings}
    options = dataclasses.replace(options or RunOptions(), **old)
    root = Path(root)
    methods = check_methods(methods)
    for method in methods:  # every setting checked before the first run starts
        make_config(method, preset=preset, strict=False, **settings)
    seed = settings.get("seed", 0)
    base_file = root / f"base-seed{seed}" / "per_item.json"
    for method in dict.fromkeys([*methods, "base"]):  # a Base of another configuration must not be compared against
        claim_run_folder(root, make_config(method, preset=preset, strict=False, **settings), options.overwrite)
    if methods != ["base"] and not base_file.is_file():
        methods = ["base"] + [m for m in methods if m != "base"]  # rescue/drag need Base first
    reports = []
    for method in methods:
        config = make_config(method, preset=preset, strict=False, **settings)
        base = json.loads(base_file.read_text()) if config.method != "base" and base_file.is_file() else None
        train = get_recipe(config.method, "policy").train
        reports.append(train(config, RecipeContext(root / f"{config.method}-seed{config.seed}", options, base)))
    write_text(root / "summary.md", summary_table(root))
    return reports


def claim_run_folder(root: Path, config: TrainConfig, overwrite: bool) -> None:
    """Refuse a run folder holding another configuration's run (it would be resumed or compared
    against as if it were this one); with ``overwrite``, clear it so the run starts over."""
    folder = root / f"{config.method}-seed{config.seed}"
    saved = folder / "config.json"
    if not saved.is_file():
        return
    try:
        theirs = json.loads(saved.read_text())
    except ValueError:
        theirs = None
    mine = json.loads(json.dumps(config.to_dict(), default=str))
    if theirs == mine:
        return
    if not overwrite:
        keys = sorted(k for k in set(mine) | set(theirs or {}) if (theirs or {}).get(k) != mine.get(k))
        shown = "; ".join(f"{k} {(theirs or {}).get(k)!r} there, {mine.get(k)!r} here" for k in keys[:3])
        raise ConfigError(f"{folder} holds a {config.method} run with another configuration ({shown}); pass "
                          "--overwrite (run_methods(overwrite=True)) to start it over, or choose another --out")
    shutil.rmtree(folder)


__all__ = ["Trainer", "RunOptions", "NoSignalError", "policy_weights", "RolloutFallbackWarning", "EvalResult",
           "TrainState", "load_policy", "resolve_policy", "run_methods", "train_policy", "summary_table", "ProbeResult"]
