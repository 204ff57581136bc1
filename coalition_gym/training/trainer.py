"""The one training loop shared by C-RL and its baselines; what differs per method lives in
:mod:`.methods` (rollouts, reward, update), checkpoints in :mod:`.checkpoints`, files in :mod:`.reporting`,
learning-signal numbers in :mod:`.diagnostics`.

Checkpoint selection: every ``eval_every`` steps the policy is scored on ``eval_items`` dev items in
the mode its method optimises (collaborative for crl/raft, solo for the indiv methods); the best is
saved; training stops after ``patience`` evaluations without improvement. After every step the full
state (weights, optimiser, step, RNGs, history) is saved, so a killed run resumes where it stopped.
The report scores both the best and the last checkpoint on the test split, which selection never sees.
"""

from __future__ import annotations

import json
import random
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np

from ..agents.base import stable_hash
from ..agents.member_settings import MemberSettings
from ..agents.pools import load_pool
from ..envs.dev_scores import DevScores, dev_scores_for
from ..envs.protocols import Protocol, make_protocol
from ..envs.protocols.collaborative import check_episodic
from ..errors import ConfigError
from ..failures import FailureSummary
from ..result_files import write_json, write_text
from ..tasks import make as make_task
from ..types import Item
from ..valuation.stats import bootstrap_mean
from . import checkpoints
from .advantages import informative_groups
from .config import PolicyGradientConfig, TrainConfig, check_methods, make_config
from .diagnostics import signal_metrics, summarise_signal
from .losses import batch_normalizer, clipped_policy_loss, sft_loss
from .methods import make_method
from .probe import NoSignalError, ProbeResult, diagnose, run_probe
from .reporting import MetricsLog, summary_table, vs_base, write_report
from .rollouts import PolicyCall, RecordingPolicy, Rollout, collect, collect_distributed, protocol_asks


def resolve_policy(spec: str) -> str:
    """A model folder: ``zoo:<recipe>/<member>`` (the package's shipped copy where it ships the recipe)
    or a local path."""
    if spec.startswith("zoo:"):
        from ..agents.zoo import ensure_zoo

        recipe, _, name = spec[4:].partition("/")
        build = ensure_zoo(recipe or "default", progress=False)  # the shipped copy where there is one
        names = list(build.models)
        if name.isdigit() and int(name) < len(names):
            name = names[int(name)]
        return str(build.model_path(name or names[0]))
    if not Path(spec).is_dir():
        raise ConfigError(f"policy {spec!r} is neither a zoo model (zoo:<recipe>/<member>) nor a model folder")
    return spec


def policy_weights(spec: str) -> dict[str, Any]:
    """A policy's starting weights as run records name them (zoo provenance, or a sha256)."""
    from ..agents.hf import weights_record

    return weights_record(resolve_policy(spec))


def load_policy(spec: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..agents.hf import resolve_device_dtype

    path = resolve_policy(spec)
    device, dtype = resolve_device_dtype(device, dtype)
    import torch

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.to(device), tokenizer  # type: ignore[arg-type]  # transformers' stubs type .to() oddly


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
    best_ci: list[float] = field(default_factory=list)
    best_step: int = -1
    evals_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    probe: dict[str, Any] | None = None  # the pre-training probe (see training/probe.py)


class RolloutFallbackWarning(UserWarning):
    """The configured rollout backend (vLLM) could not start; rollouts use the HF backend."""


def _chunks(seq: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [seq[i:i + size] for i in range(0, len(seq), size)]


class Trainer:
    def __init__(self, config: TrainConfig, out: str | Path | None = None,
                 log: Callable[[str], None] = print, executor: Any = None):
        import torch
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # weight loading/saving bars would drown the training bar

        self.config, self.log = config, log
        self.method = make_method(config)
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
        self.check_signal()
        self.model, self.tokenizer = load_policy(config.policy, config.device, config.dtype)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.state = TrainState()
        self.styles = {**self.pool.styles, config.policy_name: config.policy_style}
        self._dev: DevScores | None = None
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
        proto = make_protocol(name, **settings)
        check_episodic(proto)
        overrides: dict[str, Any] = {"max_new_tokens": self.config.max_new_tokens}
        if hasattr(proto, "rounds") and "rounds" not in settings:
            overrides["rounds"] = self.config.rounds
        return make_protocol(proto, **overrides)

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
        asked = protocol_asks(proto, self.task, probe, self.training_coalition, list(self.pool.backends()),
                              cfg.policy_name)
        if asked is False:
            raise ConfigError(f"{proto.name} never asks the policy anything with coalition "
                              f"{self.training_coalition}: {cfg.method} would get no signal; seat the policy in a "
                              "protocol where it answers (e.g. majority_vote, debate, slm_mux)")

    def _start_engine(self) -> Any:
        """The vLLM rollout engine, or None (with a :class:`RolloutFallbackWarning`) when vllm is
        missing or cannot load the policy's folder: rollouts then run on the HF backend."""
        from ..agents import vllm_engine

        cfg = self.config
        try:
            engine = vllm_engine.VLLMEngine(resolve_policy(cfg.policy), dtype=cfg.dtype, **cfg.vllm_settings)
        except Exception as exc:  # vllm raises many kinds; any of them means "not this backend"
            warnings.warn(f"rollout_backend='vllm' is unavailable for policy {cfg.policy!r} "
                          f"({type(exc).__name__}: {exc}); rolling out with the HF backend instead",
                          RolloutFallbackWarning, stacklevel=3)
            return None
        self.sync_weights(engine)  # a resumed or best checkpoint differs from the folder vLLM read
        return engine

    def sync_weights(self, engine: Any = None) -> None:
        """Push the trainer's current weights into the rollout engine (a no-op without one)."""
        engine = engine if engine is not None else self.engine
        if engine is None:
            return
        engine.load_weights([(name, p.detach()) for name, p in self.model.named_parameters()])
        self.weight_syncs += 1

    def backend(self, system_prompt: str | None = None, temperature: float | None = None) -> RecordingPolicy:
        from ..agents.hf import HFGenerator

        cfg = self.config
        hf = HFGenerator(self.model, self.tokenizer, max_new_tokens=cfg.max_new_tokens,
                         identity=f"policy:{cfg.method}:step{self.state.step}", max_batch_size=cfg.rollout_batch_size,
                         fast_decode=cfg.fast_decode)
        gen: Any = hf
        if self.engine is not None:
            from ..agents.vllm_engine import VLLMPolicy

            gen = VLLMPolicy(self.engine, hf, identity=f"{hf.identity}:vllm")
        return RecordingPolicy(gen, self.state.system_prompt if system_prompt is None else system_prompt,
                               temperature)

    def recompute_logprobs(self, rollouts: Sequence[Rollout]) -> float:
        """Replace every call's sampler log-probs by the trainer's own (no grad), keeping the sampler's in
        ``sampler_logprobs``; returns the mean absolute gap per token. Used when another engine (vLLM)
        sampled: the loss's old log-probs must come from the model being trained."""
        from ..agents.hf import sequence_logprobs

        calls = [c for r in rollouts for c in r.calls if c.completion_ids]
        gap, tokens = 0.0, 0
        by_temp: dict[float, list[PolicyCall]] = {}
        for c in calls:
            by_temp.setdefault(c.temperature if c.temperature > 0 else 1.0, []).append(c)
        for temp, group in by_temp.items():
            for chunk in _chunks(group, self.config.micro_batch):
                lps = sequence_logprobs(self.model, [c.prompt_ids for c in chunk], [c.completion_ids for c in chunk],
                                        temp, self._pad_id)
                for c, lp in zip(chunk, lps):
                    c.sampler_logprobs, c.logprobs = list(c.logprobs), lp
                    gap += sum(abs(a - b) for a, b in zip(c.sampler_logprobs, lp))
                    tokens += len(lp)
        return gap / tokens if tokens else 0.0

    @property
    def dev_scores(self) -> DevScores:
        """The frozen collaborators' dev scores on the task (measured once, on first use, when the
        collaborative protocol needs them); the policy is a seat and has none."""
        if self._dev is None:
            self._dev = dev_scores_for(self.collab_protocol, self.task, self.pool, self.members)
        return self._dev

    @property
    def training_coalition(self) -> list[str]:
        return [self.config.policy_name] if self.method.solo else self.members + [self.config.policy_name]

    # -- rollouts -------------------------------------------------------------------------------------
    def rollouts(self, items: Sequence[Item], step_seed: int, first_group: int = 0) -> list[Rollout]:
        cfg = self.config
        proto = self.solo_protocol if self.method.solo else self.collab_protocol
        args = (proto, self.task, items, self.training_coalition, self.pool.backends())
        policy = self.backend(temperature=cfg.rollout_temperature)
        if getattr(self.executor, "name", "local") == "ray":
            rollouts = collect_distributed(self.executor, policy, *args, cfg.policy_name, cfg.group_size,
                                           step_seed, self.styles, self.dev_scores.scores, first_group=first_group,
                                           draws=cfg.collaborator_draws)
        else:
            rollouts = collect(*args, policy, cfg.policy_name, cfg.group_size, step_seed, self.styles,
                               self.dev_scores.scores, first_group=first_group, draws=cfg.collaborator_draws)
        if self.engine is not None:
            self.last_logprob_gap = self.recompute_logprobs(rollouts)
        self._count_failures(self.training_coalition, rollouts)
        return rollouts

    def _count_failures(self, coalition: Sequence[str], rollouts: Sequence[Rollout]) -> None:
        for r in rollouts:
            self.failures.add(coalition, r.error)

    def draw_items(self, n: int, rng: random.Random | None = None) -> list[Item]:
        """``n`` train items drawn with replacement by ``rng`` (default: the run's own, saved with it)."""
        rng = rng or self.rng
        pool = list(self.task.items("train"))
        return [pool[rng.randrange(len(pool))] for _ in range(n)]

    def rewards(self, rollouts: Sequence[Rollout]) -> list[float]:
        return [self.method.reward(r) for r in rollouts]

    def gather_batch(self, step: int) -> tuple[list[Rollout], list[float], dict[str, Any]]:
        """Rollouts for one step. Dynamic sampling (DAPO; any PG method may turn it on) drops all-equal
        groups and refills with new items, keeping at most ``items_per_step`` informative groups."""
        cfg = self.config
        rollouts = self.rollouts(self.draw_items(cfg.items_per_step), stable_hash("step", cfg.seed, step))
        rewards = self.rewards(rollouts)
        groups = [r.group for r in rollouts]
        first_share = len(informative_groups(rewards, groups)) / max(len(set(groups)), 1)
        refills = 0
        if isinstance(cfg, PolicyGradientConfig) and cfg.dynamic_sampling:
            kept_groups: list[int] = []
            pairs: list[tuple[Rollout, float]] = []

            def keep(batch: list[Rollout], scores: list[float]) -> None:
                ok = informative_groups(scores, [r.group for r in batch])
                for g in sorted(ok, key=lambda g: min(r.index for r in batch if r.group == g)):
                    if len(kept_groups) < cfg.items_per_step:
                        kept_groups.append(g)
                pairs.extend((r, w) for r, w in zip(batch, scores) if r.group in kept_groups)

            keep(rollouts, rewards)
            while len(kept_groups) < cfg.items_per_step and refills < cfg.max_refills:
                refills += 1
                more = self.rollouts(self.draw_items(cfg.items_per_step),
                                     stable_hash("refill", cfg.seed, step, refills), first_group=refills * 10_000)
                for r in more:  # indices stay unique across refills (calls point at their rollout)
                    r.index += refills * 10_000 * cfg.group_size
                    for c in r.calls:
                        c.rollout = r.index
                keep(more, self.rewards(more))
            rollouts, rewards = [r for r, _ in pairs], [w for _, w in pairs]
        return rollouts, rewards, {"first_informative_groups": first_share, "refills": refills}

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

    def _optimise(self, calls: Sequence[PolicyCall], active: Sequence[int], passes: int,
                  micro_loss: Callable[[Any, Any, Any, Sequence[int]], tuple[Any, float, float]]) -> dict[str, float]:
        """``passes`` optimiser steps, each over ``active`` calls in micro-batches. ``micro_loss`` returns
        the micro-batch's *share* of the full-batch loss (normalised by the whole batch), so the
        gradients add up to the one-shot gradient whatever the micro-batch size."""
        torch = self.torch
        metrics = {"loss": 0.0, "clip_low": 0.0, "clip_high": 0.0, "grad_norm": 0.0}
        if not active:
            return metrics  # nothing carries signal: the weights (and Adam's moments) stay as they are
        all_tokens = sum(len(c.completion_ids) for c in calls)  # clip shares of the whole batch, as TRL logs them
        for _ in range(passes):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum, low, high = 0.0, 0.0, 0.0
            for idx in _chunks(list(active), self.config.micro_batch):
                new, old, mask = self._token_batch([calls[k] for k in idx])
                loss, lo, hi = micro_loss(new, old, mask, idx)
                loss.backward()
                loss_sum += float(loss.detach())
                share = float(mask.sum()) / all_tokens
                low, high = low + lo * share, high + hi * share
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
            self.optimizer.step()
            self.sync_weights()  # the rollout engine (vLLM) samples from the weights just made
            metrics.update(loss=loss_sum, clip_low=low, clip_high=high, grad_norm=float(norm))
        return metrics

    def policy_gradient_update(self, calls: Sequence[PolicyCall], advantages: Sequence[float]) -> dict[str, float]:
        """The clipped policy gradient on ``calls``, normalised over *all* of them (TRL's semantics):
        calls with advantage 0 add nothing to the loss but count in its denominator, so the step size does
        not swell when many groups carry no signal. Only the non-zero ones are forwarded."""
        cfg, torch = cast(PolicyGradientConfig, self.config), self.torch  # only policy-gradient methods get here
        normalizer = batch_normalizer([len(c.completion_ids) for c in calls], cfg.aggregation)
        active = [k for k, a in enumerate(advantages) if a != 0.0]

        def micro_loss(new: Any, old: Any, mask: Any, idx: Sequence[int]) -> tuple[Any, float, float]:
            adv = torch.tensor([advantages[k] for k in idx], dtype=torch.float32)
            out = clipped_policy_loss(new, old, adv, mask, cfg.eps_low, cfg.eps_high, cfg.aggregation, normalizer)
            return out.loss, out.clip_fraction_low, out.clip_fraction_high

        metrics = self._optimise(calls, active, cfg.updates_per_batch, micro_loss)
        metrics["tokens"] = sum(len(c.completion_ids) for c in calls)
        return metrics

    def sft_update(self, calls: Sequence[PolicyCall]) -> dict[str, float]:
        """One SFT step (token-mean negative log-likelihood) on ``calls`` (Collaborative RAFT)."""
        normalizer = batch_normalizer([len(c.completion_ids) for c in calls], "token-mean")
        metrics = self._optimise(calls, list(range(len(calls))), 1,
                                 lambda new, old, mask, idx: (sft_loss(new, mask, normalizer=normalizer), 0.0, 0.0))
        metrics["tokens"] = sum(len(c.completion_ids) for c in calls)
        return metrics

    def train_step(self, step: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        rollouts, rewards, extra = self.gather_batch(step)
        t1 = time.perf_counter()
        metrics, advantages = self.method.update(self, rollouts, rewards)
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
        The seed depends on the run's seed only, so every method of one seed meets the same collaborator
        draws on every item (paired comparisons), and different seeds draw independently."""
        if mode not in ("collab", "solo", "without"):
            raise ConfigError(f"evaluation mode {mode!r}; use collab, solo or without")
        seed = self.eval_seed if seed is None else seed
        coalition = {"collab": self.members + [self.config.policy_name], "solo": [self.config.policy_name],
                     "without": list(self.members)}[mode]
        proto = self.solo_protocol if mode == "solo" else self.collab_protocol
        backend = self.backend(system_prompt, 0.0 if self.config.eval_decoding == "greedy" else None)
        self.model.eval()
        try:
            rollouts = collect(proto, self.task, items, coalition, self.pool.backends(), backend,
                               self.config.policy_name, 1, seed, self.styles, self.dev_scores.scores,
                               draws="episode")  # the runner's episode seeds: `cgym eval --seed` replays it
        finally:
            self.model.train()
        self._count_failures(coalition, rollouts)
        scores = [r.solo_score if mode == "solo" else r.reward for r in rollouts]
        _, _, lo, hi = bootstrap_mean(np.asarray([scores]), n_boot=1000, seed=seed)
        return EvalResult(mode, scores, float(np.mean(scores)), (float(lo[0]), float(hi[0])))

    @property
    def eval_seed(self) -> int:
        """The episode seed of every evaluation of this run (``cgym eval --seed`` with it replays them)."""
        return stable_hash("eval", self.config.seed) % 2**31

    def dev_items(self) -> list[Item]:
        return list(self.task.items("dev"))[: self.config.eval_items]

    def test_items(self) -> list[Item]:
        return list(self.task.items("test"))[: self.config.test_items]

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
                self.method.run_untrained(self)
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
                sign = self.method.selection_sign  # an adversary (reward="negate") keeps its lowest dev score
                if sign * result.mean > sign * self.state.best_score:
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


def run_methods(methods: Sequence[str], root: str | Path, preset: str = "paper", progress: bool = True,
                executor: Any = None, failures: FailureSummary | None = None, force: bool = False,
                overwrite: bool = False, **settings: Any) -> list[dict[str, Any]]:
    """Train (or just evaluate) each method into ``root/<method>-seed<seed>`` and report it against Base,
    which runs first when ``root`` has no Base for this seed yet. A run folder that holds a run with
    another configuration (its ``config.json``) is refused before any work, unless ``overwrite``
    (then it starts over); the same configuration resumes. Failed episodes of every run are added to
    ``failures`` when given; ``force`` trains past a probe that found no signal."""
    root = Path(root)
    methods = check_methods(methods)
    for method in methods:  # every setting checked before the first run starts
        make_config(method, preset=preset, strict=False, **settings)
    seed = settings.get("seed", 0)
    base_file = root / f"base-seed{seed}" / "per_item.json"
    for method in dict.fromkeys([*methods, "base"]):  # a Base of another configuration must not be compared against
        claim_run_folder(root, make_config(method, preset=preset, strict=False, **settings), overwrite)
    if methods != ["base"] and not base_file.is_file():
        methods = ["base"] + [m for m in methods if m != "base"]  # rescue/drag need Base first
    reports = []
    for method in methods:
        config = make_config(method, preset=preset, strict=False, **settings)
        trainer = Trainer(config, out=root / f"{config.method}-seed{config.seed}", executor=executor)
        trainer.fit(progress=progress, force=force)
        base = json.loads(base_file.read_text()) if config.method != "base" and base_file.is_file() else None
        reports.append(trainer.report(base))
        if failures is not None:
            failures.merge(trainer.failures)
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


__all__ = ["Trainer", "NoSignalError", "policy_weights", "RolloutFallbackWarning", "EvalResult", "TrainState",
           "load_policy", "resolve_policy", "run_methods", "summary_table"]
