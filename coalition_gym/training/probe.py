"""The pre-training probe: a few groups rolled out with the untrained policy before the first update,
so a run that cannot learn says so at once instead of training nothing for hours.

A group-relative method learns only from groups whose rewards differ. The probe measures the share of
such groups, the policy's pivotality (how often a different answer of its changes the reward) and its
own score, on items and seeds of its own (the training's item order and sampling stay as they are).
With no informative group, :func:`diagnose` names the likely cause and what to try.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..agents.base import stable_hash
from ..errors import ConfigError
from .diagnostics import signal_metrics

#: A policy whose own answers score below this on the probe "cannot solve the task".
CANNOT_SOLVE = 0.05


class NoSignalError(ConfigError):
    """The probe found no informative group: training would not change the policy."""


@dataclass
class ProbeResult:
    groups: int
    group_size: int
    informative_groups: float  # share of groups whose rewards are not all equal
    pivotality: float | None  # None: the policy's answers never differed inside a group
    solo_score: float  # the policy's own answers, scored (inside the system for collaborative methods)
    reward_mean: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        piv = "n/a" if self.pivotality is None else f"{self.pivotality:.2f}"
        return (f"probe ({self.groups} groups x G={self.group_size}, untrained policy): informative groups "
                f"{self.informative_groups:.2f}, pivotality {piv}, policy's own score {self.solo_score:.3f}, "
                f"reward {self.reward_mean:.3f}")


def run_probe(trainer: Any, n_groups: int) -> ProbeResult:
    """Roll out ``n_groups`` train items (G executions each) with the current policy; no update."""
    cfg = trainer.config
    items = trainer.draw_items(n_groups, random.Random(stable_hash("probe-items", cfg.seed)))  # not the run's rng
    rollouts = trainer.rollouts(items, stable_hash("probe", cfg.seed))
    rewards = trainer.rewards(rollouts)
    signal = signal_metrics(rollouts, rewards, None)
    return ProbeResult(groups=n_groups, group_size=cfg.group_size,
                       informative_groups=float(signal["informative_groups"]), pivotality=signal["pivotality"],
                       solo_score=float(np.mean([r.own_score for r in rollouts])) if rollouts else 0.0,
                       reward_mean=float(np.mean(rewards)) if rewards else 0.0)


def diagnose(result: ProbeResult, trainer: Any) -> str:
    """Why no group was informative, and what to try."""
    cfg = trainer.config
    if result.solo_score < CANNOT_SOLVE:
        cause = (f"the policy cannot solve the task: its own answers score {result.solo_score:.3f} on "
                 f"{cfg.task}. Try an easier task, a stronger policy, or more new tokens (max_new_tokens)")
    elif result.pivotality is None:
        cause = (f"the policy gave the same answer in all G={cfg.group_size} executions of every item (its own "
                 f"score {result.solo_score:.3f}), so no group has a better and a worse execution. Raise "
                 "rollout_temperature or group_size, or pick a task it has not mastered")
    elif not trainer.method.solo and result.pivotality == 0.0:
        cause = (f"the collaborators decide every item: no other answer of the policy changed the outcome of "
                 f"{cfg.protocol} with {cfg.collaborators} (a vote it never joins, a helper that ignores it). "
                 "Try a protocol where its answer counts (e.g. majority_vote with protocol.tie_break=first), "
                 "fewer or weaker collaborators, or a task the policy answers exactly more often")
    else:
        cause = (f"every group of G={cfg.group_size} executions scored the same: G is too small or the policy "
                 "samples too little variety. Raise group_size or rollout_temperature")
    return (f"{cfg.method} would train nothing: no informative group in the probe ({result.line()}). Likely "
            f"cause: {cause}.")


__all__ = ["NoSignalError", "ProbeResult", "run_probe", "diagnose", "CANNOT_SOLVE"]
