"""One config family for every recipe the trainer runs, one dataclass per recipe carrying only its own fields
(as TRL's ``GRPOConfig`` does). :class:`TrainConfig` holds what every run shares, the trainable seats included
(``policies``: one model each; ``seats``: their names; ``credit``; ``shared_base``): a single policy is a run of
one seat. ``PolicyGradientConfig`` adds what the three RL recipes share; ``CRLConfig``, ``GRPOIndivConfig``,
``DAPOIndivConfig``, ``RAFTConfig``, ``NudgeConfig`` and ``BaseConfig`` their own settings; ``TeamCRLConfig``
(team C-RL, any number of seats, each on its own credit) the clipped policy gradient and three defaults of its
own. A policy recipe seats one policy rewarded by the system's score; a team recipe any number, each on its
credit. :func:`make_config` builds any of them, with the same presets.

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
from typing import Any, Iterable, Mapping, Sequence

from ..agents.hf_fast import FAST_DECODE
from ..agents.lora import LoraSpec
from ..agents.options import DTYPES
from ..errors import ConfigError, did_you_mean, setting_hint
from ..settings_check import check_settings, setting
from ..tasks.base import PROMPT_STYLES
from .credit import CREDIT_MODES, SHAPLEY_SEAT_LIMIT
from .recipes import RECIPES, TRAINER_KINDS, get_recipe, recipe_names, recipe_of
from .reporting import REPORT_TO, check_report_to

COLLABORATOR_DRAWS = ("shared", "fresh")
ROLLOUT_BACKENDS = ("hf", "vllm")
EVAL_DECODING = ("sampled", "greedy")
REWARDS = ("system", "negate")  # PolicyGradientConfig.reward
AGGREGATIONS = ("token-mean", "seq-mean-token-mean")  # how the clipped PG loss averages (losses.aggregate)


@dataclass
class LoraSettings:
    """LoRA (peft) for the trained weights: ``lora_r`` > 0 trains one adapter of that rank on the frozen base
    instead of every weight (how a 7B policy fits beside its collaborators); 0, the default, trains every weight
    (the zoo's models are small). Checkpoints then hold the adapter; ``cgym train --export DIR`` merges it."""

    lora_r: int = setting(0, ge=0, doc="LoRA rank; 0: no adapter, every weight trains")
    lora_alpha: int = setting(16, gt=0, doc="LoRA scale numerator (the update is scaled by alpha / r)")
    lora_dropout: float = setting(0.0, ge=0, le=1, doc="dropout on the adapter's input")
    # "all-linear", or the module names to wrap, comma-separated (e.g. "q_proj,v_proj"; GPT-2: "c_attn,c_proj")
    lora_target: str = "all-linear"

    @property
    def lora(self) -> LoraSpec | None:
        """The adapter's shape, or None when LoRA is off."""
        if self.lora_r == 0:
            return None
        return LoraSpec(self.lora_r, self.lora_alpha, self.lora_dropout, self.lora_target)


@dataclass
class RunSettings:
    """What every run of trainable seats inside a protocol sets: the system, the step's shape, the optimiser,
    evaluation and selection, where it runs and how fast it rolls out."""

    protocol: str = "slm_mux"
    protocol_settings: dict[str, Any] = field(default_factory=dict)  # e.g. {"rounds": 2}; see rounds below
    task: str = "rg/basic_arithmetic"
    task_kwargs: dict[str, Any] = field(default_factory=lambda: {"size": 200})
    policy_style: str = setting("compact", choices=PROMPT_STYLES, doc="the trained policy's (every seat's) prompt "
                                                                      "style")
    collaborators: str = "sim:demo"  # the frozen members' pool: never trained
    members: list[str] | None = None
    steps: int = setting(100, ge=1)
    items_per_step: int = setting(8, ge=1)
    group_size: int = setting(8, ge=1, doc="G executions of each item; items_per_step * G per optimiser step")
    # "shared": the G executions of an item draw the collaborators (and the protocol's own randomness)
    # once, only the policy samples afresh, so a group's reward differences are the policy's doing;
    # "fresh": every execution draws everything anew.
    collaborator_draws: str = setting("shared", choices=COLLABORATOR_DRAWS)
    # the policy's sampling temperature in training; None: the protocol's
    rollout_temperature: float | None = setting(None, gt=0)
    lr: float = setting(1e-6, gt=0)
    weight_decay: float = setting(0.0, ge=0)
    max_grad_norm: float = setting(1.0, gt=0, doc="gradients clipped to this global norm")
    micro_batch: int = setting(16, ge=1)
    rounds: int = setting(2, ge=1, doc="collaboration rounds during training (debate); ignored by one-round "
                                       "protocols")
    max_new_tokens: int = setting(64, ge=1)
    eval_every: int = setting(3, ge=1)
    eval_items: int = setting(16, ge=1)
    # the policy's decoding at evaluation: the protocol's sampling, or greedy
    eval_decoding: str = setting("sampled", choices=EVAL_DECODING)
    patience: int = setting(25, ge=1, doc="evaluations without improvement before stopping")
    test_items: int | None = setting(None, ge=1, doc="None: the full test split")
    seed: int = setting(0, ge=0)
    device: str = "auto"  # auto, cpu, cuda, cuda:1 ...
    dtype: str = setting("auto", choices=DTYPES)
    out: str = "runs/train"
    report_to: str = setting("none", choices=tuple(REPORT_TO), doc="where the metrics go besides metrics.jsonl: "
                             "none, tensorboard, wandb or trackio (as TRL's report_to)")
    # rows per HF forward batch; None: sized by free GPU memory (CPU: 64)
    rollout_batch_size: int | None = setting(None, ge=1)
    fast_decode: str = setting("auto", choices=FAST_DECODE)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ClippedPGSettings:
    """The clipped policy gradient on group-relative advantages (C-RL, the RL baselines, team C-RL)."""

    eps_low: float = setting(0.2, ge=0, doc="clip epsilon below 1")
    eps_high: float | None = setting(None, ge=0, doc="clip epsilon above 1; None: eps_low (symmetric)")
    aggregation: str = setting("token-mean", choices=AGGREGATIONS)
    # optimiser steps on each rollout batch (ratios leave 1 from the second on)
    updates_per_batch: int = setting(1, ge=1)
    advantage_eps: float = setting(1e-4, gt=0, doc="(r - mean) / (std + eps), as TRL")
    scale_advantages: bool = True  # False: centre only (Dr. GRPO)
    # Before the first update, this many groups are rolled out with the untrained seats: with no informative
    # group for any seat training stops with the likely cause (training/probe.py). 0: no probe.
    probe_groups: int = setting(16, ge=0, doc="groups rolled out before the first update; 0: no probe")

    def check_clipped_pg(self, group_size: int) -> None:
        if group_size < 2:
            raise ConfigError(f"group_size={group_size}: group-relative advantages need G >= 2 "
                              "(a group of one has no baseline, so every advantage is 0)")


def trainer_methods() -> list[str]:
    """The recipes the trainer runs (policy and team recipes: their settings are :class:`TrainConfig` subclasses)."""
    return [name for name, recipe in RECIPES.items() if recipe.kind in TRAINER_KINDS]


@dataclass
class TrainConfig(LoraSettings, RunSettings):
    """Settings shared by every recipe the trainer runs: the run's (:class:`RunSettings`), LoRA, the trainable seats
    and the rollout backend. A policy recipe seats one policy, rewarded by the system's score (``credit`` system);
    a team recipe seats any number."""

    method: str = ""  # the recipe's name; "": the recipe registered with this settings class
    # one model per trainable seat: HF model folders or zoo:<preset>/<member name or index>; different
    # architectures and tokenizers are fine (every seat has its own model, tokenizer and optimiser)
    policies: list[str] = field(default_factory=lambda: ["zoo:default/0"])
    seats: list[str] | None = None  # the seats' names, one per policy; None: "policy" for one, seat0, seat1, ...
    credit: str = setting("system", choices=CREDIT_MODES, doc="each seat's reward: system, loo or shapley (loo and "
                                                             "shapley: a team recipe's)")
    # every seat on one copy of one model (the policies must all name it), one LoRA adapter each (needs lora_r > 0)
    shared_base: bool = False
    # Rollout speed (issue 17). "hf": the trainer's own model generates (fast_decode: static KV cache and
    # CUDA graphs, "auto" = on CUDA); "vllm": an in-process vLLM engine colocated with the trainer, sent
    # the new weights after every optimiser step (falls back to "hf" with a warning when it cannot start).
    rollout_backend: str = setting("hf", choices=ROLLOUT_BACKENDS)
    vllm_settings: dict[str, Any] = field(default_factory=dict)  # extra vllm.LLM(...) arguments

    def __post_init__(self) -> None:
        if not self.method:
            owner = recipe_of(self)
            self.method = owner.name if owner is not None else ""
        if self.method not in trainer_methods():
            raise ConfigError(f"unknown method {self.method!r} (no policy- or team-training recipe has that name); "
                              f"use one of {', '.join(trainer_methods())}")
        if self.credit not in CREDIT_MODES:  # before the generic check: a typo gets the close name
            raise ConfigError(f"unknown credit mode {self.credit!r}.{did_you_mean(str(self.credit), CREDIT_MODES)} "
                              f"Use one of {', '.join(CREDIT_MODES)}")
        check_settings(self, self.method)  # types, bounds and choices, declared on the fields (every subclass's)
        check_report_to(self.report_to)  # a tracker's missing package, before any work
        self._check_seats(get_recipe(self.method).kind == "team")
        if self.lora is not None and self.rollout_backend == "vllm":
            raise ConfigError("rollout_backend='vllm' with lora_r > 0 is not supported: the engine is sent full "
                              "weights after every step; use rollout_backend='hf' with LoRA")

    def _check_seats(self, any_number: bool) -> None:
        """The seats' names (defaulted), and what the seats allow: one seat on the system's score for a policy
        recipe, any number on any credit for a team recipe (``any_number``)."""
        self.policies = [str(p) for p in self.policies]
        k = len(self.policies)
        if k < 1:  # one seat is a team of one (credit loo: its leave-one-out value to the system)
            raise ConfigError(f"{self.method} needs K >= 1 policies (one per trainable seat); got {self.policies}")
        teams = ", ".join(recipe_names("team"))
        if not any_number and k != 1:
            raise ConfigError(f"{self.method} trains one policy; got {k} ({self.policies}): several seats train as "
                              f"one team ({teams})")
        if not any_number and self.credit != "system":
            raise ConfigError(f"{self.method} rewards its policy with the system's score (credit='system'); "
                              f"credit={self.credit!r} is a team recipe's ({teams}; one policy: a team of one)")
        if self.seats is None:
            self.seats = ["policy"] if k == 1 else [f"seat{i}" for i in range(k)]
        self.seats = [str(s) for s in self.seats]
        if len(self.seats) != k:
            raise ConfigError(f"{k} policies but {len(self.seats)} seat names {self.seats}: give one name per policy")
        if len(set(self.seats)) != k or not all(self.seats):
            raise ConfigError(f"seat names must be distinct and non-empty; got {self.seats}")
        odd = [s for s in self.seats if "/" in s or "\\" in s or s.startswith(".")]
        if odd:  # each seat gets its own folder out/<seat>/ and metric keys <seat>/<name>
            raise ConfigError(f"seat name {odd[0]!r}: a seat name is a folder name (no '/' or '\\', not starting "
                              "with '.')")
        if self.shared_base and self.lora is None:
            raise ConfigError("shared_base=True puts every seat on one copy of one model with one LoRA adapter each: "
                              "set lora_r > 0 (e.g. --set lora_r=8)")
        if self.credit == "shapley" and k > SHAPLEY_SEAT_LIMIT:
            raise ConfigError(f"credit='shapley' is exact over the seats (2^K sub-teams per execution) and allows at "
                              f"most {SHAPLEY_SEAT_LIMIT} seats (SHAPLEY_SEAT_LIMIT); K={k}. Use credit='loo'")
        if self.rollout_backend == "vllm" and k > 1:
            raise ConfigError(f"rollout_backend='vllm' serves one policy; {k} seats roll out with rollout_backend='hf'")

    @property
    def solo(self) -> bool:
        """GRPO-indiv and DAPO-indiv roll out the policy alone and reward its own correctness."""
        return False

    @property
    def seat_policies(self) -> dict[str, str]:
        """seat name -> its model spec, in seat order (what the trainer seats)."""
        assert self.seats is not None  # set in __post_init__
        return dict(zip(self.seats, self.policies))


@dataclass
class PolicyGradientConfig(ClippedPGSettings, TrainConfig):
    """What the three RL methods share: group-relative advantages and the clipped policy gradient."""

    dynamic_sampling: bool = False  # DAPO: drop all-equal groups, refill up to items_per_step
    max_refills: int = setting(4, ge=0, doc="dynamic sampling: refills of a step's batch at most")
    # "negate": the method's reward with its sign flipped (crl: -system score), and dev checkpoints
    # chosen by the lowest score: trains an adversary (cgym robustness --adversary <run folder>).
    reward: str = setting("system", choices=REWARDS)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_clipped_pg(self.group_size)


@dataclass
class CRLConfig(PolicyGradientConfig):
    """C-RL: rollouts inside the protocol, reward = the system's score, token-mean clipped PG."""



@dataclass
class GRPOIndivConfig(PolicyGradientConfig):
    """GRPO on solo rollouts (reward = the policy's own correctness), sequence-level aggregation."""

    aggregation: str = setting("seq-mean-token-mean", choices=AGGREGATIONS)

    @property
    def solo(self) -> bool:
        return True


@dataclass
class DAPOIndivConfig(PolicyGradientConfig):
    """DAPO on solo rollouts: clip-higher 0.28, dynamic sampling, token-level loss, overlong penalty."""

    eps_high: float | None = setting(0.28, ge=0, doc="clip epsilon above 1 (clip-higher)")
    dynamic_sampling: bool = True
    overlong_max: int | None = setting(None, ge=1, doc="None: max_new_tokens (the penalty follows the generation cap)")
    overlong_cache: int = setting(16, ge=0, doc="tokens before overlong_max where the penalty ramps up")

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

    raft_threshold: float = setting(1.0, ge=0, le=1, doc="executions scoring at least this are trained on")


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

    nudge_prompts: list[str] = field(default_factory=lambda: list(NUDGE_PROMPTS))


@dataclass
class BaseConfig(TrainConfig):
    """Base: the untrained policy, evaluated only."""



@dataclass
class TeamCRLConfig(ClippedPGSettings, TrainConfig):
    """Team C-RL: K >= 1 trainable seats inside one protocol beside frozen collaborators, each rewarded by its
    credit (:mod:`.credit`) and updated by C-RL's clipped policy gradient on its own calls. Three defaults differ
    from a policy recipe's: two seats, leave-one-out credit and greedy evaluation.

    LoRA (``lora_r`` > 0) gives every seat an adapter over its frozen model; ``shared_base=True`` puts all seats
    on *one* copy of one model, each with its own adapter (peft): how several seats fit on one GPU (each still has
    its own optimiser over its adapter, adapter checkpoints and report). Two seats naming the same model without
    ``shared_base`` are refused (they would be two full copies silently); to train two independent full copies,
    copy the model folder."""

    policies: list[str] = field(default_factory=lambda: ["zoo:default/0", "zoo:default/1"])
    credit: str = setting("loo", choices=CREDIT_MODES, doc="each seat's reward: system, loo or shapley")
    # greedy by default (C-RL's default is sampled): the dev score then depends on the weights alone, not on
    # the K seats' sampling draws, and K seats sampling make a single dev pass K times noisier
    eval_decoding: str = setting("greedy", choices=EVAL_DECODING)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_clipped_pg(self.group_size)



PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
    "tiny": {"lr": 3e-4, "items_per_step": 8, "group_size": 8, "max_new_tokens": 16, "overlong_cache": 4,
             "micro_batch": 64, "eval_items": 200, "eval_every": 25, "patience": 12},
}


#: Other libraries' names (TRL, transformers, peft) for a training setting -> the one name every recipe here uses,
#: so an unknown-setting error suggests ours (the names are too different for a typo match).
SETTING_SYNONYMS: dict[str, str] = {
    "learning_rate": "lr", "lora_rank": "lora_r", "r": "lora_r", "rank": "lora_r", "num_generations": "group_size",
    "max_steps": "steps", "max_completion_length": "max_new_tokens", "lora_target_modules": "lora_target",
    "target_modules": "lora_target", "per_device_train_batch_size": "micro_batch", "temperature":
    "rollout_temperature", "epsilon": "eps_low", "epsilon_high": "eps_high",
    "num_iterations": "updates_per_batch", "policy": "policies", "policy_name": "seats",
}


def field_names(method: str) -> set[str]:
    """The settings of a recipe the trainer runs (its registered settings class's fields)."""
    check_methods([method], TRAINER_KINDS)
    return {f.name for f in dataclasses.fields(get_recipe(method).settings)}


def check_methods(methods: Iterable[str], kinds: Sequence[str] = ("policy",)) -> list[str]:
    """``methods`` when each names a recipe of ``kinds``; a coalition recipe or an unknown name is refused."""
    known = [n for n, r in RECIPES.items() if r.kind in kinds]
    methods = [m.strip() for m in methods if m.strip()]
    unknown = [m for m in methods if m not in known]
    coalition = [m for m in unknown if m in recipe_names("coalition")]
    if coalition:
        raise ConfigError(f"{coalition[0]!r} is a coalition-training recipe (it trains a coalition's members, not a "
                          f"policy): value it with `cgym eval --protocol {coalition[0]}`; policy recipes: "
                          f"{', '.join(known)}")
    if unknown or not methods:
        bad = unknown[0] if unknown else ""
        raise ConfigError(f"unknown method {bad!r}.{did_you_mean(bad, known)} Use one of {', '.join(known)}")
    return methods


#: What a run trains when a setting is not given (``cgym train`` and :func:`~.trainer.run_methods` alike): a
#: shipped zoo policy in a system where its answer changes the outcome (benchmarks/crl_demo.py's
#: "dissociation-quill" setting: quill, a speller, beside two calculators in SLM-MUX), so the defaults show a
#: learning signal within minutes on a CPU. The protocol settings go with the default protocol; the learning
#: rate with the default policy (crl_demo's dev-selected rate for it: the preset's 3e-4 is tuned for no model).
DEFAULT_RUN: dict[str, Any] = {"policies": ["zoo:default/quill"], "protocol": "slm_mux",
                               "task": "mix:zoo:arith,zoo:reverse", "collaborators": "sim:calculators"}
DEFAULT_PROTOCOL_SETTINGS: dict[str, Any] = {"tie_break": "random"}
DEFAULT_POLICY_LR = 1e-4


def default_run(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` over the default run (:data:`DEFAULT_RUN`): the default protocol brings its settings (under
    the given ones), the default policy its learning rate."""
    out = {**DEFAULT_RUN, **settings}
    out["policies"] = list(out["policies"])
    if "protocol" not in settings:
        out["protocol_settings"] = {**DEFAULT_PROTOCOL_SETTINGS, **dict(settings.get("protocol_settings") or {})}
    if "policies" not in settings:
        out.setdefault("lr", DEFAULT_POLICY_LR)
    return out


def preset_for(preset: str, policies: Sequence[str]) -> str:
    """``auto``: the tiny preset when every policy is a zoo model (CPU-sized steps), the paper's otherwise."""
    if preset != "auto":
        return preset
    return "tiny" if all(str(p).startswith("zoo:") for p in policies) else "paper"


def make_config(method: str, preset: str = "paper", strict: bool = True, **overrides: Any) -> TrainConfig:
    """The method's config class (a policy or team recipe's) with its defaults, then the preset's (where the
    method has the field), then yours. ``strict=False`` skips overrides the method has no field for (one settings
    dict for several methods); unknown everywhere is always an error."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}.{did_you_mean(preset, PRESETS)} Use one of {', '.join(PRESETS)}")
    mine = field_names(method)
    everywhere = set().union(*(field_names(m) for m in trainer_methods()))
    unknown = sorted(set(overrides) - everywhere)
    if unknown:
        raise ConfigError(f"no training method has a setting {unknown[0]!r}"
                          f"{setting_hint(unknown[0], mine, SETTING_SYNONYMS)}")
    foreign = sorted(set(overrides) - mine)
    if foreign and strict:
        owners = [m for m in trainer_methods() if foreign[0] in field_names(m)]
        raise ConfigError(f"{foreign[0]!r} is not a setting of {method} (it belongs to {', '.join(owners)})")
    settings = {k: v for k, v in PRESETS[preset].items() if k in mine}
    settings.update({k: v for k, v in overrides.items() if k in mine})
    settings.pop("method", None)
    return get_recipe(method).settings(method=method, **settings)
