"""What a team adds to the one trainer (:class:`~coalition_gym.training.trainer.Trainer`), as the single-seat
recipes add theirs in :mod:`..strategies`: the ``team-crl`` strategy (each seat's group-relative advantages on
*its own* credit, :mod:`..credit`, broadcast to its calls of that execution; each seat's clipped policy gradient
on its own calls, C-RL's loss and settings), the refusals that need the models, the evaluation's per-seat view
(:class:`TeamEval`: each seat's solo score, the seat alone; policy score, its answer inside the team; leave-one-out
and Shapley value over the seats) and the report.

Files of a team run: ``out/config.json``, ``out/metrics.jsonl`` (per step the team reward and every seat's
diagnostics, :mod:`.diagnostics`), ``out/report.json`` (system score before/after on test with CIs, each seat's
solo / policy score / leave-one-out / Shapley before and after, the counterfactual cost, seconds per step), and per seat
``out/<seat>/`` (every run's layout, :func:`..checkpoints.seat_folders`) with ``best/`` and ``last/`` (HF model
folders with their ``coalition_gym.json``: a pool member as they stand; with LoRA, adapter folders; ``last/`` also
holds the optimiser state) and the seat's ``report.json``. With ``shared_base`` every seat is one adapter of one
shared model (:class:`..config.TeamCRLConfig`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ...errors import ConfigError
from ...result_files import write_json
from ...valuation.stats import rescue_drag
from ..advantages import group_advantages
from ..config import TeamCRLConfig, TrainConfig
from ..curves import team_curves
from ..evaluation import EvalResult, summarise
from ..policy_model import resolve_policy
from ..reporting import ReportInputs
from ..rollouts import CounterfactualCost, Rollout
from ..verdict import paired_verdict
from .diagnostics import loo_credit, seat_signal, summarise_seats, team_signal

if TYPE_CHECKING:
    from ..policy_updates import PolicyUpdates
    from ..probe import ProbeResult

#: per-step timings (every run's rows): left out when two runs' metrics are compared (everything else is
#: deterministic); the counterfactuals run in the rollouts' call and the advantages in the update, timed there
TIMING_KEYS = ("rollout_seconds", "update_seconds")


class TeamCRL:
    """Team C-RL: every seat rewarded by its credit in each execution, updated on its own calls. The one trainer
    calls it as it calls a single policy's strategy (:class:`..strategies.Strategy`)."""

    trains, solo, selection_sign, negated = True, False, 1.0, False
    selection_mode = "team"  # the team's dev system score, with every seat's view (TeamEval)
    report_modes = ("team",)
    compares_with_untrained = True  # the report: the team before and after training, on test

    def __init__(self, config: TeamCRLConfig):
        self.config = config

    @property
    def probe_groups(self) -> int:
        return self.config.probe_groups

    def step_signal(self, rollouts: Sequence[Rollout], rewards: Sequence[float], advantages: Sequence[float] | None
                    ) -> dict[str, Any]:
        """The team's side of a step's row (each seat's is in its update metrics, ``<seat>/<name>``)."""
        return team_signal(rollouts)

    def probe_record(self, results: Mapping[str, ProbeResult]) -> dict[str, Any]:
        """Every seat's probe numbers, by seat."""
        return {seat: r.to_dict() for seat, r in results.items()}

    def report(self, inputs: ReportInputs, weights: Mapping[str, Any]) -> dict[str, Any]:
        return team_scores(inputs, weights)

    def reward(self, rollout: Rollout) -> float:
        """The team's system score (what dynamic sampling and the step's reward_mean read; each seat trains on its
        credit)."""
        return rollout.reward

    def candidate_prompts(self) -> list[str] | None:
        return None

    def update(self, updates: Mapping[str, PolicyUpdates], rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        """Each seat's advantages on its credit and its clipped policy gradient; the seats' diagnostics and update
        metrics as ``<seat>/<name>``."""
        cfg = self.config
        seats = list(updates)
        groups = [r.group for r in rollouts]
        row: dict[str, Any] = {}
        for seat in seats:
            advantages = group_advantages([r.credit[seat] for r in rollouts], groups, eps=cfg.advantage_eps,
                                          scale=cfg.scale_advantages)
            calls, per_call = [], []
            for r, a in zip(rollouts, advantages):
                for call in r.calls_of(seat):
                    if call.completion_ids:
                        calls.append(call)
                        per_call.append(float(a))
            metrics = (updates[seat].policy_gradient(calls, per_call, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                                     aggregation=cfg.aggregation, passes=cfg.updates_per_batch)
                       if calls else {})
            signal = seat_signal(rollouts, seat, seats, advantages)
            row.update({f"{seat}/{k}": v for k, v in {**signal, **metrics}.items()})
        return row, None


@dataclass
class TeamEval:
    """One evaluation pass: the team's system score per item, and per seat its ``solo`` score (the seat alone),
    ``policy_score`` (its own answer inside the team), ``loo`` and ``shapley`` value over the seats (None above
    SHAPLEY_SEAT_LIMIT seats), each with a CI; and what the counterfactuals cost."""

    system: EvalResult
    seats: dict[str, dict[str, EvalResult | None]]
    cost: CounterfactualCost

    @property
    def mean(self) -> float:
        return self.system.mean

    @property
    def ci(self) -> tuple[float, float]:
        return self.system.ci

    def to_dict(self) -> dict[str, Any]:
        return {"system": {**self.system.to_dict(), "per_item": list(self.system.per_item)},
                "seats": {s: {k: (r.to_dict() if r is not None else None) for k, r in parts.items()}
                          for s, parts in self.seats.items()},
                "cost": asdict(self.cost)}

    def row(self, prefix: str = "dev") -> dict[str, Any]:
        """Flat numbers for metrics.jsonl: ``dev_score``, ``dev_ci`` and ``<seat>/dev_<kind>``."""
        out = self.system.row(prefix)
        for seat, parts in self.seats.items():
            for kind, result in parts.items():
                out[f"{seat}/{prefix}_{kind}"] = result.mean if result is not None else None
        return out

    @classmethod
    def of(cls, rollouts: Sequence[Rollout], solo: Mapping[str, EvalResult], seed: int, cost: CounterfactualCost,
           shapley: bool) -> "TeamEval":
        """The view of one pass: ``rollouts`` of the team (with Shapley credit when ``shapley``, else
        leave-one-out), ``solo`` each seat alone."""
        seats: dict[str, dict[str, EvalResult | None]] = {}
        names = list(solo)
        for seat in names:
            loo = [loo_credit(r, seat, names) for r in rollouts]
            seats[seat] = {
                "solo": solo[seat],
                "policy_score": summarise("policy_score", [r.own_scores.get(seat, 0.0) for r in rollouts], seed),
                "loo": summarise("loo", [v or 0.0 for v in loo], seed),
                "shapley": summarise("shapley", [r.credit[seat] for r in rollouts], seed) if shapley else None}
        return cls(summarise("system", [r.reward for r in rollouts], seed), seats, cost)


def check_team_models(config: TrainConfig, seats: Sequence[str], models: Mapping[str, Any] | None
                      ) -> None:
    """The refusals about the seats' models, before any is loaded: two seats of one model without ``shared_base``
    (or, with it, seats naming different models), and two seats given one model object. A single policy passes."""
    if config.shared_base:
        if models:
            raise ConfigError("shared_base=True loads the one base model itself and adds the seats' adapters; pass "
                              "no preloaded models")
        specs = list(config.seat_policies.values())
        paths = {os.path.realpath(resolve_policy(spec)) for spec in specs}
        if len(paths) != 1:
            raise ConfigError(f"shared_base=True puts every seat on one model, but the policies name {len(paths)} "
                              f"models ({specs}); name the same model for every seat, or drop shared_base")
    if models:
        by_object: dict[int, str] = {}
        for seat in seats:
            if seat in models:
                first = by_object.setdefault(id(models[seat][0]), seat)
                if first != seat:
                    raise ConfigError(f"seats {first!r} and {seat!r} are given the same model object: they would "
                                      "train one set of weights twice per step. To share one base, name one model "
                                      "for every seat with shared_base=True and lora_r > 0 (one adapter per seat); "
                                      "otherwise give each seat its own model")
    by_path: dict[str, str] = {}
    for seat, spec in config.seat_policies.items() if len(seats) > 1 else ():  # one seat shares with nobody
        if config.shared_base or (models and seat in models):
            continue
        path = os.path.realpath(resolve_policy(spec))
        first = by_path.setdefault(path, seat)
        if first != seat:
            raise ConfigError(f"seats {first!r} and {seat!r} are given the same model ({path}). Two seats of one "
                              "model need shared_base=True with lora_r > 0 (one LoRA adapter per seat over the "
                              "shared base); to train two independent full copies, copy the model folder and give "
                              "each seat its own")


def team_scores(inputs: ReportInputs, weights: Mapping[str, Any]) -> dict[str, Any]:
    """A team's report (``weights``: seat -> its base weights' record): the team's system score of the best and
    the last checkpoints on test beside the untrained team's, each seat's solo / policy score / leave-one-out /
    Shapley before and after, the counterfactual cost and seconds per step; writes ``report.json`` and every
    seat's ``<seat>/report.json``."""
    head, out, rows = inputs.header, inputs.out, inputs.rows
    seat_names = list(inputs.seat_policies)
    last, after, before = inputs.last["team"].to_dict(), inputs.best["team"].to_dict(), inputs.before or {}
    steps = [r for r in rows if "reward_mean" in r]

    def mean_of(key: str) -> float | None:
        values = [r[key] for r in steps if r.get(key) is not None]
        return float(np.mean(values)) if values else None

    signal = summarise_seats(rows, seat_names)
    moves = None
    if before and len(before["system"]["per_item"]) == len(after["system"]["per_item"]):
        rd = rescue_drag(before["system"]["per_item"], after["system"]["per_item"])
        moves = {"rescue": rd.rescue, "drag": rd.drag}
    seats = {seat: {"seat": seat, "policy": inputs.seat_policies[seat], "policy_weights": weights[seat],
                    "best_step": head["best_step"], "selected_by": "team dev system score",
                    "before": before.get("seats", {}).get(seat), "after": after["seats"][seat],
                    "last": last["seats"][seat], "signal": signal.get(seat, {}),
                    "folder": str(inputs.seat_folders[seat].resolve())} for seat in seat_names}
    seconds = {k.removesuffix("_seconds"): mean_of(k) for k in TIMING_KEYS}
    seconds["step"] = sum(v for v in seconds.values() if v is not None) if steps else None
    result: dict[str, Any] = {
        **head, "system": {"before": before.get("system"), "after": after["system"], "last": last["system"],
                           **({"vs_before": moves} if moves is not None else {})},
        "per_seat": {s: {k: seats[s][k] for k in ("before", "after", "last")} for s in seat_names},
        "counterfactual_cost": {"training": head["training_cost"], "test_after": after["cost"]},
        "seconds_per_step": seconds,
        "verdict": (paired_verdict(before["system"]["per_item"], after["system"]["per_item"]) if before else None),
        "signal": signal, "policy_weights": dict(weights)}
    result["curves"] = str(team_curves(out, head["method"], seat_names))
    write_json(out / "report.json", result)
    shared = {k: head[k] for k in ("method", "seed", "credit", "members", "protocol", "eval_seed")}
    for seat in seat_names:
        write_json(inputs.seat_folders[seat] / "report.json",
                   {**seats[seat], **shared, "team_report": str((out / "report.json").resolve())})
    return result


__all__ = ["TeamCRL", "TeamEval", "check_team_models", "team_scores", "TIMING_KEYS"]
