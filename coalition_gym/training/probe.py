"""The pre-training probe: a few groups rolled out with the untrained policy before the first update,
so a run that cannot learn says so at once instead of training nothing for hours. Every trainer runs it:
the one :class:`~coalition_gym.training.trainer.Trainer` for a single policy or for each of a team's seats,
and the TRL adapters (:meth:`~coalition_gym.training.trl_adapter.PolicySeat.probe`).

A group-relative method learns only from groups whose rewards differ. The probe measures, per trained seat,
the share of such groups (in the seat's own reward: a team seat's credit), the seat's pivotality (how often a
different answer of its changes that reward) and its own score, on items and seeds of its own (the training's
item order and sampling stay as they are). With no informative group for any seat, :func:`refuse_without_signal`
names the likely cause per seat (:func:`diagnose`) and stops, unless forced.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..agents.base import stable_hash
from ..errors import ConfigError
from .diagnostics import pivotality, signal_metrics
from .rollouts import Rollout

#: A policy whose own answers score below this on the probe "cannot solve the task".
CANNOT_SOLVE = 0.05
#: A setting where the policy's answer counts, suggested when the collaborators decide every item (and not
#: suggested to a run that already has it)
WHERE_IT_COUNTS = ("majority_vote", {"tie_break": "first"})


class NoSignalError(ConfigError):
    """The probe found no informative group: training would not change the policy."""


@dataclass
class ProbeResult:
    groups: int
    group_size: int
    informative_groups: float  # share of groups whose rewards are not all equal
    pivotality: float | None  # None: the policy's answers never differed inside a group
    policy_score: float  # the policy's own answers, scored (inside the system for collaborative methods)
    reward_mean: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        piv = "n/a" if self.pivotality is None else f"{self.pivotality:.2f}"
        return (f"probe ({self.groups} groups x G={self.group_size}, untrained policy): informative groups "
                f"{self.informative_groups:.2f}, pivotality {piv}, policy's own score {self.policy_score:.3f}, "
                f"reward {self.reward_mean:.3f}")


@dataclass(frozen=True)
class ProbeSetting:
    """What :func:`diagnose` names: the run's method, task, G, protocol (with its resolved settings) and
    collaborators, and whether the method rolls the policy out alone."""

    method: str
    task: str
    group_size: int
    protocol: str
    collaborators: str
    protocol_settings: Mapping[str, Any] = field(default_factory=dict)
    solo: bool = False


def seat_probe(rollouts: Sequence[Rollout], rewards: Sequence[float], group_size: int,
               seat: str | None = None) -> ProbeResult:
    """One seat's probe numbers from rolled-out groups and the seat's rewards (``seat`` None: the one policy)."""
    groups = len({r.group for r in rollouts})
    if seat is None:
        signal = signal_metrics(rollouts, rewards, None)
        informative, piv = float(signal["informative_groups"]), signal["pivotality"]
        own = [r.own_score for r in rollouts]
    else:
        by_group: dict[int, set[float]] = {}
        for r, value in zip(rollouts, rewards):
            by_group.setdefault(r.group, set()).add(round(float(value), 12))
        informative = sum(len(v) > 1 for v in by_group.values()) / max(groups, 1)
        piv = pivotality(rollouts, rewards, seat)
        own = [r.own_scores.get(seat, 0.0) for r in rollouts]
    return ProbeResult(groups=groups, group_size=group_size, informative_groups=informative, pivotality=piv,
                       policy_score=float(np.mean(own)) if own else 0.0,
                       reward_mean=float(np.mean(rewards)) if len(rewards) else 0.0)


def probe_rollouts(rollouts: Sequence[Rollout], rewards: Sequence[float], group_size: int,
                   seats: Sequence[str]) -> dict[str, ProbeResult]:
    """seat -> its probe: one seat on ``rewards``, each of K >= 2 seats on its own credit."""
    if len(seats) == 1:
        return {seats[0]: seat_probe(rollouts, rewards, group_size)}
    return {s: seat_probe(rollouts, [r.credit[s] for r in rollouts], group_size, s) for s in seats}


def run_probe(trainer: Any, n_groups: int) -> dict[str, ProbeResult]:
    """Roll out ``n_groups`` train items (G executions each) with the current weights of every seat; no update."""
    cfg = trainer.config
    items = trainer.draw_items(n_groups, random.Random(stable_hash("probe-items", cfg.seed)))  # not the run's rng
    rollouts = trainer.rollouts(items, stable_hash("probe", cfg.seed))
    return probe_rollouts(rollouts, trainer.rewards(rollouts), cfg.group_size, trainer.seats)


def _elsewhere(setting: ProbeSetting) -> str:
    """The suggestion of a protocol where the policy's answer counts, unless the run already has it."""
    protocol, settings = WHERE_IT_COUNTS
    if setting.protocol == protocol and all(setting.protocol_settings.get(k) == v for k, v in settings.items()):
        return ""
    shown = ", ".join(f"protocol.{k}={v}" for k, v in settings.items())
    return f"a protocol where its answer counts (e.g. {protocol} with {shown}), "


def diagnose(result: ProbeResult, setting: ProbeSetting, who: str = "the policy") -> str:
    """Why no group was informative for ``who``, and what to try."""
    if result.policy_score < CANNOT_SOLVE:
        return (f"{who} cannot solve the task: its own answers score {result.policy_score:.3f} on {setting.task}. "
                "Try an easier task, a stronger policy, or more new tokens (max_new_tokens)")
    if result.pivotality is None:
        return (f"{who} gave the same answer in all G={setting.group_size} executions of every item (its own score "
                f"{result.policy_score:.3f}), so no group has a better and a worse execution. Raise "
                "rollout_temperature or group_size, or pick a task it has not mastered")
    if not setting.solo and result.pivotality == 0.0:
        return (f"the collaborators decide every item: no other answer of {who} changed the outcome of "
                f"{setting.protocol} with {setting.collaborators} (a vote it never joins, a helper that ignores "
                f"it). Try {_elsewhere(setting)}fewer or weaker collaborators, or a task {who} answers exactly "
                "more often")
    return (f"every group of G={setting.group_size} executions scored the same for {who}: G is too small or it "
            "samples too little variety. Raise group_size or rollout_temperature")


def refuse_without_signal(results: Mapping[str, ProbeResult], setting: ProbeSetting, force: bool,
                          log: Callable[[str], None], how_to_force: str) -> None:
    """Log every seat's probe; when no seat can learn raise :class:`NoSignalError` naming each seat's likely cause
    (``force``: a warning, and on); a seat that cannot in a team where another can gets a warning. A seat cannot
    learn without an informative group, nor, in a team, when its own answers never moved its credit (pivotality
    0 or none: its informative groups are its partners' noise)."""
    team = len(results) > 1
    for seat, result in results.items():
        log(f"{seat}: {result.line()}" if team else result.line())
    # a team seat's credit also moves with its partners' samples: it learns only where its own answer moves it
    silent = {s: r for s, r in results.items() if r.informative_groups == 0.0 or (team and not r.pivotality)}
    if not silent:
        return
    causes = "; ".join(diagnose(r, setting, f"seat {s!r}" if team else "the policy") for s, r in silent.items())
    if len(silent) < len(results):
        log(f"warning: {', '.join(map(repr, silent))} got no learning signal in the probe (no informative group, "
            f"or its own answers never moved its credit) and will not learn. Likely cause: {causes}.")
        return
    shown = "" if team else f" ({next(iter(results.values())).line()})"
    message = (f"{setting.method} would train nothing: no informative group in the probe{shown}"
               f"{' for any seat' if team else ''}. Likely cause: {causes}.")
    if not force:
        raise NoSignalError(f"{message} {how_to_force}")
    log(f"warning: {message} Training anyway (force).")


__all__ = ["NoSignalError", "ProbeResult", "ProbeSetting", "run_probe", "probe_rollouts", "seat_probe",
           "diagnose", "refuse_without_signal", "CANNOT_SOLVE", "WHERE_IT_COUNTS"]
