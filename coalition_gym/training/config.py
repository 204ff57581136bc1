"""One config dataclass per training method, each carrying only its own fields (as TRL's
``GRPOConfig`` does): ``TrainConfig`` holds what every method shares, ``PolicyGradientConfig`` what
the three RL methods share, and ``CRLConfig``, ``GRPOIndivConfig``, ``DAPOIndivConfig``,
``RAFTConfig``, ``NudgeConfig`` and ``BaseConfig`` their own settings.

Defaults follow the paper's C-RL setup (appendix B.2): 64 protocol executions per optimiser step (8
items x G=8), group-relative advantages, clipped policy gradient with epsilon 0.2, no KL term, no
reference model, AdamW at lr 1e-6, up to 100 steps, evaluation on 16 dev items every 3 steps, early
stop after 25 evaluations without improvement, two collaboration rounds during training.

``preset="tiny"`` adapts them to the project's tiny zoo models on CPU (a learning rate of 1e-6 does
not move a model of a few hundred thousand parameters in a few dozen steps): lr 3e-4, 8 items x G=8,
16 new tokens, and 200 dev items every 25 steps, stopping after 12 evaluations without gain, so that
picking the best checkpoint is not picking noise and a sparse C-RL signal gets 300 steps to show.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import ConfigError, did_you_mean


def method_names() -> list[str]:
    """Every registered training method (the built-ins, then :func:`register_method`'s)."""
    return list(CONFIGS)
COLLABORATOR_DRAWS = ("shared", "fresh")
ROLLOUT_BACKENDS = ("hf", "vllm")
EVAL_DECODING = ("sampled", "greedy")
REWARDS = ("system", "negate")  # PolicyGradientConfig.reward


@dataclass
class TrainConfig:
    """Settings shared by every method."""

    method: str = "crl"
    protocol: str = "slm_mux"
    protocol_settings: dict[str, Any] = field(default_factory=dict)  # e.g. {"rounds": 2}; see rounds below
    task: str = "rg/basic_arithmetic"
    task_kwargs: dict[str, Any] = field(default_factory=lambda: {"size": 200})
    policy: str = "zoo:default/0"  # an HF model folder, or zoo:<preset>/<member name or index>
    policy_name: str = "policy"
    policy_style: str = "compact"
    collaborators: str = "sim:demo"
    members: list[str] | None = None
    steps: int = 100
    items_per_step: int = 8
    group_size: int = 8  # G executions of each item; items_per_step * group_size per optimiser step
    # "shared": the G executions of an item draw the collaborators (and the protocol's own randomness)
    # once, only the policy samples afresh, so a group's reward differences are the policy's doing;
    # "fresh": every execution draws everything anew.
    collaborator_draws: str = "shared"
    rollout_temperature: float | None = None  # the policy's sampling temperature in training; None: the protocol's
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch: int = 16
    rounds: int = 2  # collaboration rounds during training (debate); ignored by one-round protocols
    max_new_tokens: int = 64
    eval_every: int = 3
    eval_items: int = 16
    eval_decoding: str = "sampled"  # the policy's decoding at evaluation: the protocol's sampling, or greedy
    patience: int = 25  # evaluations without improvement before stopping
    test_items: int | None = None  # None: the full test split
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    out: str = "runs/train"
    tensorboard: bool = False
    # Rollout speed (issue 17). "hf": the trainer's own model generates (fast_decode: static KV cache and
    # CUDA graphs, "auto" = on CUDA); "vllm": an in-process vLLM engine colocated with the trainer, sent
    # the new weights after every optimiser step (falls back to "hf" with a warning when it cannot start).
    rollout_backend: str = "hf"
    rollout_batch_size: int | None = None  # rows per HF forward batch; None: sized by free GPU memory (CPU: 64)
    fast_decode: str = "auto"
    vllm_settings: dict[str, Any] = field(default_factory=dict)  # extra vllm.LLM(...) arguments

    def __post_init__(self) -> None:
        if self.method not in CONFIGS:
            raise ConfigError(f"unknown method {self.method!r}; use one of {', '.join(method_names())}")
        for name in ("steps", "items_per_step", "group_size", "micro_batch", "eval_every", "eval_items",
                     "max_new_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name}={value!r} must be an integer >= 1")
        if self.lr <= 0:
            raise ConfigError(f"lr={self.lr} must be > 0")
        if self.collaborator_draws not in COLLABORATOR_DRAWS:
            raise ConfigError(f"collaborator_draws={self.collaborator_draws!r}; use one of "
                              f"{', '.join(COLLABORATOR_DRAWS)}")
        if self.eval_decoding not in EVAL_DECODING:
            raise ConfigError(f"eval_decoding={self.eval_decoding!r}; use one of {', '.join(EVAL_DECODING)}")
        if self.rollout_backend not in ROLLOUT_BACKENDS:
            raise ConfigError(f"rollout_backend={self.rollout_backend!r}; use one of {', '.join(ROLLOUT_BACKENDS)}")
        if self.rollout_batch_size is not None and (not isinstance(self.rollout_batch_size, int)
                                                    or isinstance(self.rollout_batch_size, bool)
                                                    or self.rollout_batch_size < 1):
            raise ConfigError(f"rollout_batch_size={self.rollout_batch_size!r} must be an integer >= 1, or None "
                              "(sized by free GPU memory)")
        from ..agents.hf_fast import FAST_DECODE

        if self.fast_decode not in FAST_DECODE:
            raise ConfigError(f"fast_decode={self.fast_decode!r}; use one of {', '.join(FAST_DECODE)}")
        if self.rollout_temperature is not None and self.rollout_temperature <= 0:
            raise ConfigError(f"rollout_temperature={self.rollout_temperature} must be > 0 (training samples)")

    @property
    def solo(self) -> bool:
        """GRPO-indiv and DAPO-indiv roll out the policy alone and reward its own correctness."""
        return False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PolicyGradientConfig(TrainConfig):
    """What the three RL methods share: group-relative advantages and the clipped policy gradient."""

    eps_low: float = 0.2
    eps_high: float | None = None  # None: symmetric clipping
    aggregation: str = "token-mean"
    updates_per_batch: int = 1  # optimiser steps on each rollout batch (ratios leave 1 from the second on)
    advantage_eps: float = 1e-4  # (r - mean) / (std + eps), as TRL
    scale_advantages: bool = True  # False: centre only (Dr. GRPO)
    dynamic_sampling: bool = False  # DAPO: drop all-equal groups, refill up to items_per_step
    max_refills: int = 4
    # Before the first update, this many groups are rolled out with the untrained policy: with no
    # informative group among them training stops with the likely cause (training/probe.py). 0: no probe.
    probe_groups: int = 16
    # "negate": the method's reward with its sign flipped (crl: -system score), and dev checkpoints
    # chosen by the lowest score: trains an adversary (cgym robustness --adversary <run>/best).
    reward: str = "system"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reward not in REWARDS:
            raise ConfigError(f"reward={self.reward!r}; use one of {', '.join(REWARDS)}")
        if self.group_size < 2:
            raise ConfigError(f"group_size={self.group_size}: group-relative advantages need G >= 2 "
                              "(a group of one has no baseline, so every advantage is 0)")
        if not isinstance(self.probe_groups, int) or isinstance(self.probe_groups, bool) or self.probe_groups < 0:
            raise ConfigError(f"probe_groups={self.probe_groups!r} must be an integer >= 0 (0: no probe)")
        if self.updates_per_batch < 1:
            raise ConfigError(f"updates_per_batch={self.updates_per_batch} must be >= 1")
        if self.eps_low < 0 or (self.eps_high is not None and self.eps_high < 0):
            raise ConfigError(f"clip epsilons must be >= 0, got eps_low={self.eps_low}, eps_high={self.eps_high}")
        from .losses import AGGREGATIONS

        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"unknown loss aggregation {self.aggregation!r}; use one of {', '.join(AGGREGATIONS)}")


@dataclass
class CRLConfig(PolicyGradientConfig):
    """C-RL: rollouts inside the protocol, reward = the system's score, token-mean clipped PG."""

    method: str = "crl"


@dataclass
class GRPOIndivConfig(PolicyGradientConfig):
    """GRPO on solo rollouts (reward = the policy's own correctness), sequence-level aggregation."""

    method: str = "grpo-indiv"
    aggregation: str = "seq-mean-token-mean"

    @property
    def solo(self) -> bool:
        return True


@dataclass
class DAPOIndivConfig(PolicyGradientConfig):
    """DAPO on solo rollouts: clip-higher 0.28, dynamic sampling, token-level loss, overlong penalty."""

    method: str = "dapo-indiv"
    eps_high: float | None = 0.28
    dynamic_sampling: bool = True
    overlong_max: int | None = None  # None: max_new_tokens (the penalty follows the generation cap)
    overlong_cache: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        limit = self.overlong_limit
        if not 0 <= self.overlong_cache <= limit:
            raise ConfigError(f"overlong_cache={self.overlong_cache} must be in [0, overlong_max={limit}]")

    @property
    def overlong_limit(self) -> int:
        return self.overlong_max if self.overlong_max is not None else self.max_new_tokens

    @property
    def solo(self) -> bool:
        return True


@dataclass
class RAFTConfig(TrainConfig):
    """Collaborative RAFT: SFT on the policy's calls from executions scoring >= raft_threshold."""

    method: str = "raft"
    raft_threshold: float = 1.0


NUDGE_PROMPTS = (
    "",
    "You are one member of a team. Answer carefully; your answer will be combined with others'.",
    "Be concise and end with the final answer only.",
    "Double-check the arithmetic before answering.",
    "Other models will read your answer: state it clearly and confidently on the last line.",
)


@dataclass
class NudgeConfig(TrainConfig):
    """Prompt nudge: no weight update; the best of nudge_prompts by collaborative dev score."""

    method: str = "nudge"
    nudge_prompts: list[str] = field(default_factory=lambda: list(NUDGE_PROMPTS))


@dataclass
class BaseConfig(TrainConfig):
    """Base: the untrained policy, evaluated only."""

    method: str = "base"


#: method name -> its config class; extended by ``training.methods.register_method``
CONFIGS: dict[str, type[TrainConfig]] = {
    "crl": CRLConfig, "grpo-indiv": GRPOIndivConfig, "dapo-indiv": DAPOIndivConfig, "raft": RAFTConfig,
    "nudge": NudgeConfig, "base": BaseConfig,
}

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
    "tiny": {"lr": 3e-4, "items_per_step": 8, "group_size": 8, "max_new_tokens": 16, "overlong_cache": 4,
             "micro_batch": 64, "eval_items": 200, "eval_every": 25, "patience": 12},
}


def field_names(method: str) -> set[str]:
    return {f.name for f in dataclasses.fields(CONFIGS[method])}


def check_methods(methods: Iterable[str]) -> list[str]:
    methods = [m.strip() for m in methods if m.strip()]
    unknown = [m for m in methods if m not in CONFIGS]
    if unknown or not methods:
        bad = unknown[0] if unknown else ""
        raise ConfigError(f"unknown method {bad!r}.{did_you_mean(bad, method_names())} Use one of "
                          f"{', '.join(method_names())}")
    return methods


def make_config(method: str, preset: str = "paper", strict: bool = True, **overrides: Any) -> TrainConfig:
    """The method's config class with its defaults, then the preset's (where the method has the
    field), then yours. ``strict=False`` skips overrides the method has no field for (one settings
    dict for several methods); unknown everywhere is always an error."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}.{did_you_mean(preset, PRESETS)} Use one of {', '.join(PRESETS)}")
    check_methods([method])
    mine = field_names(method)
    everywhere = set().union(*(field_names(m) for m in CONFIGS))
    unknown = sorted(set(overrides) - everywhere)
    if unknown:
        raise ConfigError(f"no training method has a setting {unknown[0]!r}")
    foreign = sorted(set(overrides) - mine)
    if foreign and strict:
        owners = [m for m in CONFIGS if foreign[0] in field_names(m)]
        raise ConfigError(f"{foreign[0]!r} is not a setting of {method} (it belongs to {', '.join(owners)})")
    settings = {k: v for k, v in PRESETS[preset].items() if k in mine}
    settings.update({k: v for k, v in overrides.items() if k in mine})
    settings.pop("method", None)
    return CONFIGS[method](**settings)
