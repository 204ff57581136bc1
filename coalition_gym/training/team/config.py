"""Settings of team training (``cgym train --policy A --policy B ...``): several trainable seats in one
protocol, each with its own model, optimiser, checkpoints and dev selection, rewarded by a credit mode
(:mod:`..credit`).

The settings a team shares with single-seat C-RL are the same fields (:class:`..config.RunSettings`,
``LoraSettings``, ``ClippedPGSettings``), and the ``tiny`` / ``paper`` presets are the same
(:data:`coalition_gym.training.config.PRESETS`), so a user who knows ``cgym train`` knows these; a team's
``eval_decoding`` defaults to greedy and its ``group_size`` must be >= 2. What is new: ``policies`` (K >= 1
model specs, one per seat), ``seats`` (their names), ``credit`` and ``shared_base``.

LoRA (``lora_r`` > 0, the single-seat settings :class:`~coalition_gym.training.config.LoraSettings`) gives every
seat an adapter over its frozen model. ``shared_base=True`` puts all seats on *one* copy of one model, each with
its own adapter (peft): how several seats fit on one GPU. The seats then share the frozen base weights and
switch adapters per call, and each still has its own optimiser (over its adapter only), checkpoints (adapter
folders) and report. Two seats naming the same model without ``shared_base`` are refused (they would be two
full copies silently); to train two independent full copies, copy the model folder.

There is no vLLM rollout backend for teams yet (one engine per seat): rollouts run on each seat's HF model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, did_you_mean, setting_hint
from ...settings_check import check_settings, setting
from ..config import EVAL_DECODING, PRESETS, SETTING_SYNONYMS, ClippedPGSettings, LoraSettings, RunSettings
from ..credit import CREDIT_MODES, SHAPLEY_SEAT_LIMIT
from ..reporting import check_report_to

TEAM_METHOD = "team-crl"


@dataclass
class TeamConfig(ClippedPGSettings, LoraSettings, RunSettings):
    """Team C-RL: K >= 1 trainable seats inside one protocol beside frozen collaborators. The run's settings
    (:class:`~coalition_gym.training.config.RunSettings`), LoRA and the clipped policy gradient are the single-seat
    trainer's; below, what a team adds and the two defaults it changes."""

    method: str = TEAM_METHOD
    # one model per trainable seat: HF model folders or zoo:<preset>/<member name or index>; different
    # architectures and tokenizers are fine (every seat has its own model, tokenizer and optimiser)
    policies: list[str] = field(default_factory=lambda: ["zoo:default/0", "zoo:default/1"])
    seats: list[str] | None = None  # the seats' names, one per policy; None: seat0, seat1, ...
    # every seat on one copy of one model (the policies must all name it), one LoRA adapter each (needs lora_r > 0)
    shared_base: bool = False
    credit: str = setting("loo", choices=CREDIT_MODES, doc="each seat's reward: system, loo or shapley")
    group_size: int = setting(8, ge=2, doc="G executions of each item (group-relative advantages need G >= 2)")
    # greedy by default (C-RL's default is sampled): the dev score then depends on the weights alone, not on
    # the K seats' sampling draws, and K seats sampling make a single dev pass K times noisier
    eval_decoding: str = setting("greedy", choices=EVAL_DECODING)

    def __post_init__(self) -> None:
        if self.credit not in CREDIT_MODES:  # before the generic check: a typo gets the close name
            raise ConfigError(f"unknown credit mode {self.credit!r}.{did_you_mean(str(self.credit), CREDIT_MODES)} "
                              f"Use one of {', '.join(CREDIT_MODES)}")
        check_settings(self, self.method)
        check_report_to(self.report_to)  # a tracker's missing package, before any work
        self.policies = [str(p) for p in self.policies]
        k = len(self.policies)
        if k < 1:  # one seat is a team of one (credit loo: its leave-one-out value to the system)
            raise ConfigError(f"team training needs K >= 1 policies (one per trainable seat); got {self.policies}")
        if self.seats is None:
            self.seats = [f"seat{i}" for i in range(k)]
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
        self.check_clipped_pg(self.group_size)

    @property
    def seat_policies(self) -> dict[str, str]:
        """seat name -> its model spec, in seat order."""
        assert self.seats is not None  # set in __post_init__
        return dict(zip(self.seats, self.policies))

    # the single-seat settings a team does not have (see the module doc), under the names the trainer reads
    @property
    def rollout_backend(self) -> str:
        return "hf"

    @property
    def vllm_settings(self) -> dict[str, Any]:
        return {}



def team_field_names() -> set[str]:
    return {f.name for f in dataclasses.fields(TeamConfig)}


def make_team_config(preset: str = "paper", **overrides: Any) -> TeamConfig:
    """A :class:`TeamConfig` with its defaults, then the preset's (the single-seat presets: ``paper``, ``tiny``),
    then ``overrides``; an unknown setting is refused with the close names."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}.{did_you_mean(preset, PRESETS)} Use one of {', '.join(PRESETS)}")
    names = team_field_names()
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"team training has no setting {unknown[0]!r}"
                          f"{setting_hint(unknown[0], names, SETTING_SYNONYMS)}")
    settings = {k: v for k, v in PRESETS[preset].items() if k in names}
    settings.update(overrides)
    return TeamConfig(**settings)


__all__ = ["TeamConfig", "TEAM_METHOD", "make_team_config", "team_field_names"]
