"""One config dataclass per training method (``CRLConfig``, ``GRPOIndivConfig``, ``DAPOIndivConfig``,
``RAFTConfig``, ``NudgeConfig``, ``BaseConfig``), sharing ``TrainConfig``'s documented defaults.

Defaults follow the paper's C-RL setup (appendix B.2): 64 protocol executions per optimiser step (8
items x G=8), group-relative advantages, clipped policy gradient with epsilon 0.2, no KL term, no
reference model, AdamW at lr 1e-6, up to 100 steps, evaluation on 16 dev items every 3 steps, early
stop after 25 evaluations without improvement, two collaboration rounds during training.

``preset="tiny"`` adapts them to the project's tiny zoo models on CPU (a learning rate of 1e-6 does
not move a model of a few hundred thousand parameters in a few dozen steps): lr 3e-4, 4 items x G=8,
16 new tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

METHODS = ("crl", "grpo-indiv", "dapo-indiv", "raft", "nudge", "base")


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
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    eps_low: float = 0.2
    eps_high: float | None = None  # None: symmetric clipping
    aggregation: str = "token-mean"
    updates_per_batch: int = 1  # optimiser steps on each rollout batch (ratios leave 1 from the second on)
    micro_batch: int = 16
    rounds: int = 2  # collaboration rounds during training (debate); ignored by one-round protocols
    max_new_tokens: int = 64
    eval_every: int = 3
    eval_items: int = 16
    patience: int = 25  # evaluations without improvement before stopping
    test_items: int | None = None  # None: the full test split
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    out: str = "runs/train"
    tensorboard: bool = False
    # DAPO (solo rollouts): dynamic sampling and the overlong penalty
    dynamic_sampling: bool = False
    max_refills: int = 4
    overlong_max: int | None = None
    overlong_cache: int = 0
    # Collaborative RAFT
    raft_threshold: float = 1.0  # keep executions whose system score reaches this
    # prompt nudge
    nudge_prompts: list[str] = field(default_factory=lambda: list(NUDGE_PROMPTS))

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown method {self.method!r}; use one of {', '.join(METHODS)}")
        for name in ("steps", "items_per_step", "group_size", "micro_batch", "eval_every", "eval_items",
                     "updates_per_batch", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        if self.group_size < 2 and self.method in ("crl", "grpo-indiv", "dapo-indiv"):
            raise ConfigError(f"group_size={self.group_size}: group-relative advantages need G >= 2")
        if self.lr <= 0:
            raise ConfigError(f"lr={self.lr} must be > 0")

    @property
    def solo(self) -> bool:
        """GRPO-indiv and DAPO-indiv roll out the policy alone and reward its own correctness."""
        return self.method in ("grpo-indiv", "dapo-indiv")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


NUDGE_PROMPTS = (
    "",
    "You are one member of a team. Answer carefully; your answer will be combined with others'.",
    "Be concise and end with the final answer only.",
    "Double-check the arithmetic before answering.",
    "Other models will read your answer: state it clearly and confidently on the last line.",
)

@dataclass
class CRLConfig(TrainConfig):
    """C-RL: rollouts inside the protocol, reward = the system's score, token-mean clipped PG."""

    method: str = "crl"


@dataclass
class GRPOIndivConfig(TrainConfig):
    """GRPO on solo rollouts (reward = the policy's own correctness), sequence-level aggregation."""

    method: str = "grpo-indiv"
    aggregation: str = "seq-mean-token-mean"


@dataclass
class DAPOIndivConfig(TrainConfig):
    """DAPO on solo rollouts: clip-higher 0.28, dynamic sampling, token-level loss, overlong penalty."""

    method: str = "dapo-indiv"
    eps_high: float | None = 0.28
    dynamic_sampling: bool = True
    overlong_max: int | None = 64
    overlong_cache: int = 16


@dataclass
class RAFTConfig(TrainConfig):
    """Collaborative RAFT: SFT on the policy's calls from executions scoring >= raft_threshold."""

    method: str = "raft"


@dataclass
class NudgeConfig(TrainConfig):
    """Prompt nudge: no weight update; the best of nudge_prompts by collaborative dev score."""

    method: str = "nudge"


@dataclass
class BaseConfig(TrainConfig):
    """Base: the untrained policy, evaluated only."""

    method: str = "base"


CONFIGS: dict[str, type[TrainConfig]] = {
    "crl": CRLConfig, "grpo-indiv": GRPOIndivConfig, "dapo-indiv": DAPOIndivConfig, "raft": RAFTConfig,
    "nudge": NudgeConfig, "base": BaseConfig,
}

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
    "tiny": {"lr": 3e-4, "items_per_step": 4, "group_size": 8, "max_new_tokens": 16, "overlong_max": 16,
             "overlong_cache": 4, "micro_batch": 64},
}


def make_config(method: str, preset: str = "paper", **overrides: Any) -> TrainConfig:
    """The method's config class with its defaults, then the preset's, then yours."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; use one of {', '.join(PRESETS)}")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"TrainConfig has no setting {unknown[0]!r}")
    settings: dict[str, Any] = dict(PRESETS[preset])
    if method != "dapo-indiv":  # the overlong penalty belongs to DAPO
        settings.pop("overlong_max", None)
        settings.pop("overlong_cache", None)
    settings.update(overrides)
    settings.pop("method", None)
    return CONFIGS[method](**settings)
