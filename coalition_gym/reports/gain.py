"""Would the same spend on the best model alone do better? Each protocol against cost-matched baselines.

For every protocol (a :class:`System` on a pool, task and items), the report holds its system score and mean
cost per item, and three baselines on the same items (:mod:`.baselines`): the best single member (chosen on
dev), that member's self-consistency at ``k`` answers with ``k`` matched to the protocol's mean cost, and the
pool's majority vote at its own cost. The **gain** is the protocol's score minus the best *admissible*
baseline's: the best single member and its self-consistency always are (their cost is matched, or lower); the
pool vote is when its mean cost is at most ``1 + tolerance`` times the protocol's, and never for the
``majority_vote`` protocol (it is that baseline). The best baseline is the one with the highest mean score
on these items, which favours the baselines: a gain whose CI is above 0 survives that choice.

CIs are 95% paired item-bootstrap percentile intervals (``stats.bootstrap_mean``: the same resampled items
for every quantity of a protocol). Failed episodes score 0 and cost what they had spent when they failed
(nothing is recorded for them: 0), and are counted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..envs.system import System
from ..errors import ConfigError
from ..failures import FailureSummary
from ..settings_check import check_settings, setting
from ..valuation.stats import N_BOOT, bootstrap_mean
from .baselines import (
    UNITS,
    Arm,
    ArmOptions,
    CostMatch,
    best_member,
    capped_k,
    check_unit,
    matched_k,
    pool_vote_arm,
    run_arm,
    self_consistency_arm,
    single_arm,
)
from .robustness import check_protocols

#: the fewest items a paired bootstrap CI is computed over
MIN_ITEMS = 10
CI_TEXT = "95% paired item-bootstrap percentile interval"


@dataclass(frozen=True)
class GainOptions:
    """How :func:`gain` runs: cost ``unit`` (tokens or calls), the most self-consistency answers ``max_k``,
    ``seed`` (episode seeds and bootstraps), ``n_boot`` resamples, the pool vote's cost ``tolerance`` (see
    the module doc), ``progress`` bars and ``record_text`` (reply texts in the per-episode records)."""

    unit: str = setting("tokens", choices=tuple(UNITS), doc="what cost counts: generated tokens per item (as "
                        "the backends count them) or model calls per item; self-consistency's k is matched on it")
    max_k: int = setting(16, ge=1, doc="the most answers self-consistency may draw to match a protocol's cost")
    seed: int = setting(0, ge=0, doc="episode and bootstrap seed (the same for every system)")
    n_boot: int = setting(N_BOOT, ge=2, doc="bootstrap resamples over items")
    tolerance: float = setting(0.1, ge=0, doc="how much more than the protocol the pool vote may cost")
    progress: bool = False
    record_text: bool = False


    def __post_init__(self) -> None:
        check_settings(self, "gain options")

def _estimate(boot: Any, k: int) -> dict[str, Any]:
    return {"value": float(boot.mean[k]), "ci": [float(boot.ci_low[k]), float(boot.ci_high[k])]}


def verdict_of(gain: dict[str, Any]) -> str:
    """``"protocol"`` (gain CI above 0), ``"baseline"`` (below 0) or ``"no difference"`` (it spans 0)."""
    low, high = gain["ci"]
    return "protocol" if low > 0 else "baseline" if high < 0 else "no difference"


@dataclass
class ProtocolGain:
    """One protocol against its baselines: estimates with CIs, the cost match and the gain."""

    protocol: str
    settings: dict[str, Any]
    score: dict[str, Any]
    cost: dict[str, Any]
    match: CostMatch
    baselines: list[dict[str, Any]]
    best_baseline: str
    gain: dict[str, Any]
    failures: FailureSummary = field(default_factory=FailureSummary)
    per_item: dict[str, list[float]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return verdict_of(self.gain)

    @property
    def beats_baseline(self) -> bool:
        """The protocol beats the best cost-matched baseline with its gain CI above 0."""
        return self.verdict == "protocol"

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "settings": self.settings, "score": self.score, "cost": self.cost,
                "match": self.match.to_dict(), "baselines": self.baselines, "best_baseline": self.best_baseline,
                "gain": self.gain, "verdict": self.verdict, "beats_baseline": self.beats_baseline,
                "failures": self.failures.to_dict()}


def admissible(protocol: Arm, baseline: Arm, tolerance: float) -> bool:
    """Whether ``baseline`` competes for the best baseline of ``protocol`` (see the module doc)."""
    if baseline.kind != "pool_vote":
        return True
    if protocol.about.get("protocol") == "majority_vote":
        return False
    return baseline.mean_cost <= (1.0 + tolerance) * protocol.mean_cost


def compare_arms(protocol: Arm, baselines: Sequence[Arm], match: CostMatch, options: GainOptions) -> ProtocolGain:
    """The protocol's estimates, each baseline's and the gains, from one paired bootstrap over items."""
    n = len(baselines)
    rows = np.vstack([protocol.scores, *[b.scores for b in baselines], *[protocol.scores - b.scores for b in baselines],
                      protocol.costs, *[b.costs for b in baselines]])
    boot = bootstrap_mean(rows, n_boot=options.n_boot, seed=options.seed)
    allowed = [k for k, b in enumerate(baselines) if admissible(protocol, b, options.tolerance)]
    best = max(allowed, key=lambda k: (float(baselines[k].scores.mean()), -k))  # ties: the earlier (cheaper) one
    entries = []
    for k, b in enumerate(baselines):
        about: dict[str, Any] = {key: b.about[key] for key in ("member", "k") if key in b.about}
        entries.append({"name": b.name, "kind": b.kind, "label": b.label, **about,
                        "score": _estimate(boot, 1 + k), "cost": _estimate(boot, 2 + 2 * n + k),
                        "cost_ratio": b.mean_cost / protocol.mean_cost if protocol.mean_cost else float("inf"),
                        "cost_matched": b.kind == "self_consistency" and match.matched, "admissible": k in allowed,
                        "gain": _estimate(boot, 1 + n + k)})
    per_item: dict[str, list[float]] = {"protocol": protocol.scores.tolist(), "protocol_cost": protocol.costs.tolist()}
    return ProtocolGain(protocol.name, dict(protocol.about.get("settings", {})), _estimate(boot, 0),
                        _estimate(boot, 1 + 2 * n), match, entries, baselines[best].name,
                        _estimate(boot, 1 + n + best), protocol.failures, per_item)


@dataclass
class GainReport:
    pool: str
    task: str
    coalition: list[str]
    n_items: int
    seed: int
    unit: str
    best_member: str
    dev: dict[str, Any]
    baselines: dict[str, Arm]
    rows: list[ProtocolGain]
    item_ids: list[str]

    def failures(self) -> FailureSummary:
        total = FailureSummary()
        for part in [*(r.failures for r in self.rows), *(a.failures for a in self.baselines.values())]:
            total.merge(part)
        return total

    def share_beating(self) -> float:
        """The share of protocols that beat their best cost-matched baseline with the gain CI above 0."""
        return sum(r.beats_baseline for r in self.rows) / len(self.rows) if self.rows else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "task": self.task, "coalition": self.coalition, "n_items": self.n_items,
                "seed": self.seed, "unit": self.unit, "unit_meaning": UNITS[self.unit], "ci": CI_TEXT,
                "best_member": self.best_member, "dev": self.dev,
                "gain_meaning": "protocol score minus the best admissible baseline's (best single member and its "
                                "self-consistency at matched cost always; the pool vote when it costs at most "
                                "the protocol's, never for majority_vote itself)",
                "baselines": {name: {"label": a.label, "kind": a.kind, "mean_score": float(a.scores.mean()),
                                     "mean_cost": a.mean_cost, **{k: a.about[k] for k in ("member", "k")
                                                                  if k in a.about}}
                              for name, a in self.baselines.items()},
                "protocols": [r.to_dict() for r in self.rows], "share_beating_baseline": self.share_beating(),
                "failures": self.failures().to_dict()}


def _check_systems(systems: Sequence[System]) -> None:
    if not systems:
        check_protocols([])  # says which protocols there are
    check_protocols([s.protocol.name for s in systems])
    first = systems[0]
    if any(s.pool is not first.pool or s.task is not first.task
           or (list(s.members), list(s.items)) != (list(first.members), list(first.items)) for s in systems):
        raise ConfigError("gain: every protocol's system must have the same pool, task, coalition and items")
    if len(first.items) < MIN_ITEMS:
        raise ConfigError(f"gain needs at least {MIN_ITEMS} items for a paired bootstrap CI; got {len(first.items)}")


def gain(systems: Sequence[System], options: GainOptions = GainOptions(), *,
         on_records: Callable[[str, list[dict]], None] | None = None) -> GainReport:
    """Each protocol's gain over its best cost-matched baseline (see the module doc). ``systems``: one per
    protocol, on the same pool, task, coalition and items (share a generation cache to share the samples and
    resume a killed run). ``on_records(arm name, rows)`` receives each run's per-episode records."""
    _check_systems(systems)
    check_unit(options.unit)
    if options.max_k < 1:
        raise ConfigError(f"max_k={options.max_k} must be >= 1")
    first = systems[0]
    best, dev_scores, source = best_member(first)
    arm_options = ArmOptions(options.unit, options.seed, options.progress, options.record_text)

    def emit(arm: Arm) -> Arm:
        if on_records is not None:
            on_records(arm.name, arm.records)
        return arm

    single = emit(single_arm(first, best, arm_options))
    vote = emit(pool_vote_arm(first, arm_options))
    consistency = {1: dataclasses.replace(single, name="self_consistency@1", kind="self_consistency",
                                          label=f"self-consistency@1 of {best}", about={**single.about, "k": 1},
                                          failures=FailureSummary(), records=[])}  # single's, counted once
    rows = []
    for system in systems:
        arm = emit(run_arm(system, system.protocol.name, "protocol", arm_options))
        k = matched_k(arm.mean_cost, single.mean_cost, options.max_k)
        if k not in consistency:
            consistency[k] = emit(self_consistency_arm(first, best, k, arm_options))
        match = CostMatch(options.unit, arm.mean_cost, consistency[k].mean_cost, k,
                          capped_k(arm.mean_cost, single.mean_cost, options.max_k))
        rows.append(compare_arms(arm, [single, consistency[k], vote], match, options))
    used = {single.name: single, vote.name: vote,
            **{c.name: c for k, c in sorted(consistency.items()) if k > 1 or any(r.match.k == 1 for r in rows)}}
    return GainReport(first.pool.name, first.task.name, list(first.members), len(first.items), options.seed,
                      options.unit, best, {"source": source, "scores": dev_scores}, used, rows,
                      [it.id for it in first.items])


def gain_share(reports: Sequence[GainReport]) -> dict[str, Any]:
    """Over settings (one report per pool x task), per protocol: the share of settings where it beats its best
    cost-matched baseline with the gain CI above 0 (and where a baseline beats it, CI below 0), with a sentence."""
    per: dict[str, dict[str, Any]] = {}
    for report in reports:
        for row in report.rows:
            entry = per.setdefault(row.protocol, {"settings": 0, "beats": 0, "beaten": 0, "rows": []})
            entry["settings"] += 1
            entry["beats"] += row.verdict == "protocol"
            entry["beaten"] += row.verdict == "baseline"
            entry["rows"].append({"pool": report.pool, "task": report.task, "unit": report.unit, "gain": row.gain,
                                  "verdict": row.verdict, "best_baseline": row.best_baseline})
    for entry in per.values():
        entry["share"] = entry["beats"] / entry["settings"]
    unit = reports[0].unit if reports else "tokens"
    sentence = "; ".join(f"{name} beats its best cost-matched baseline ({unit}) with the gain CI above 0 in "
                         f"{e['beats']} of {e['settings']} settings ({e['share']:.0%}), a baseline beats it in "
                         f"{e['beaten']}" for name, e in per.items())
    return {"unit": unit, "per_protocol": per, "sentence": sentence + "." if sentence else ""}


__all__ = ["CI_TEXT", "GainOptions", "GainReport", "MIN_ITEMS", "ProtocolGain", "admissible", "compare_arms", "gain",
           "gain_share", "verdict_of"]
