"""Cost-matched baselines of a pool on a task: what the same spend buys without collaboration.

Three baselines, each run on the same items with the runner's per-item episode seeds:

- ``best_single``: the member with the highest dev score, answering once (chosen on the task's dev split,
  never on the evaluated items; dev scores a pool file states win, as everywhere);
- ``self_consistency``: that member drawing ``k`` answers, majority of ``k`` (SLM-MUX with a coalition of
  one, which is exactly that vote; its first answer is the ``best_single`` answer, same seed);
- ``pool_vote``: every member answering once, the most frequent answer winning (majority vote).

Cost is per item, in a unit (:data:`UNITS`): ``tokens``, the generated tokens of every call of the episode
(members and fixed helpers, as the backends count them: token ids for HF and vLLM, an OpenAI-compatible
server's ``usage``, else whitespace words: simulated agents carry no token ids, one token per word of their
text), or ``calls``, the Asks answered. ``k`` is matched to a protocol's mean cost per item
(:func:`matched_k`: the k whose expected cost, k times the single answer's, is closest) and the match is
reported as measured (:class:`CostMatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..envs.dev_scores import DEFAULT_DEV_ITEMS, measure_dev_scores
from ..envs.protocols import make_protocol
from ..envs.system import System
from ..errors import ConfigError, did_you_mean
from ..failures import FailureSummary
from ..settings_check import check_settings, setting
from ..valuation.game import CoalitionGame

#: cost units: what one item's cost counts
UNITS = {"tokens": "generated tokens per item (every call of an episode, members and helpers, as the backends "
                   "count them: token ids for HF and vLLM, an OpenAI-compatible server's usage, else "
                   "whitespace words; simulated agents carry no token ids: one token per word of their text)",
         "calls": "model calls per item (Asks answered, members and helpers)"}
#: the baselines' sampling temperature: the protocols' default for members' answers
BASELINE_TEMPERATURE = 0.7


def check_unit(unit: str) -> str:
    if unit not in UNITS:
        raise ConfigError(f"unknown cost unit {unit!r}.{did_you_mean(unit, list(UNITS))} Use one of "
                          f"{', '.join(UNITS)}")
    return unit


@dataclass
class Arm:
    """One system measured on the items: a protocol or a baseline, with per-item scores and costs."""

    name: str  # "debate", "best_single", "self_consistency@5", "pool_vote"
    kind: str  # "protocol" | "best_single" | "self_consistency" | "pool_vote"
    label: str  # what tables show
    scores: np.ndarray
    costs: np.ndarray
    failures: FailureSummary = field(default_factory=FailureSummary)
    about: dict[str, Any] = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)

    @property
    def mean_cost(self) -> float:
        return float(self.costs.mean()) if self.costs.size else 0.0


@dataclass(frozen=True)
class CostMatch:
    """How well a baseline's mean cost per item matches a protocol's (matched on average, not per item)."""

    unit: str
    protocol_cost: float
    baseline_cost: float
    k: int
    capped: bool = False  # k is the cap (max_k), below the k that would match: the baseline spends less

    @property
    def matched(self) -> bool:
        """Whether the baseline's cost is matched to the protocol's (False when k was capped below the match)."""
        return not self.capped

    @property
    def ratio(self) -> float:
        """baseline / protocol mean cost (1.0 = a perfect match)."""
        return self.baseline_cost / self.protocol_cost if self.protocol_cost else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "k": self.k, "protocol_cost": self.protocol_cost,
                "baseline_cost": self.baseline_cost, "ratio": self.ratio, "capped": self.capped,
                "matched": "mean cost per item" if self.matched else "no: k capped at max_k, the baseline spends less"}


def matched_k(target: float, per_answer: float, max_k: int) -> int:
    """The number of answers whose expected cost (``k * per_answer``) is closest to ``target``, in [1, max_k]."""
    if max_k < 1:
        raise ConfigError(f"max_k={max_k} must be >= 1")
    if per_answer <= 0:
        return 1
    low = max(1, min(max_k, int(target // per_answer)))
    high = min(max_k, low + 1)
    return min((low, high), key=lambda k: (abs(k * per_answer - target), k))


def capped_k(target: float, per_answer: float, max_k: int) -> bool:
    """Whether matching ``target`` would need more than ``max_k`` answers (then k = max_k spends less)."""
    return per_answer > 0 and matched_k(target, per_answer, max(max_k, int(target // per_answer) + 1)) > max_k


def best_member(system: System, n_items: int = DEFAULT_DEV_ITEMS) -> tuple[str, dict[str, float], str]:
    """The frozen member with the highest dev score (ties: coalition order), every member's dev score and
    where they come from (``"explicit"``: the pool file's; ``"measured"``: the task's dev split). Raises
    when there are none (a held-out task without a dev split, and no pool dev scores)."""
    members = system.frozen
    if not members:
        raise ConfigError("the coalition has no member the pool answers: no best single member to choose")
    explicit = dict(getattr(system.pool, "dev_scores", None) or {})
    if explicit and all(m in explicit for m in members):
        scores, source = {m: float(explicit[m]) for m in members}, "explicit"
    else:
        found = measure_dev_scores(system.task, system.backends, members, system.styles, split="dev",
                                   n_items=n_items, max_new_tokens=system.protocol.max_new_tokens,
                                   cache=system.cache)
        if found.source == "unavailable":
            raise ConfigError(f"the best single member is chosen on dev scores, but {found.why}; give dev_scores "
                              "for every member in the pool file")
        scores, source = dict(found.scores), "measured"
    top = max(scores[m] for m in members)
    return next(m for m in members if scores[m] == top), scores, source


@dataclass(frozen=True)
class ArmOptions:
    """How arms run: ``unit`` of cost, ``seed`` (episode seeds), ``progress`` bars, ``record_text``."""

    unit: str = "tokens"
    seed: int = setting(0, ge=0, doc="episode seed")
    progress: bool = False
    record_text: bool = False

    def __post_init__(self) -> None:
        check_settings(self, "arm options")


def run_arm(system: System, name: str, kind: str, options: ArmOptions, label: str | None = None) -> Arm:
    """Run ``system``'s coalition on its items once (a coalition game's one coalition: the system's
    generation cache shared, failures recorded, not raised) and collect per-item scores and costs."""
    game = CoalitionGame(system, seed=options.seed, progress=options.progress, record_text=options.record_text)
    game.progress_label = label or name  # what runs ("self-consistency@5 of atlas"), not the protocol under it
    try:
        coalition = list(game.players)
        scores = np.asarray(game.per_item(coalition), dtype=float)
        records = game.records[frozenset(coalition)]
    finally:
        game.close()
    costs = np.array([float((r.get("cost") or {}).get(options.unit, 0)) for r in records])
    failures = FailureSummary().add_records(records)
    return Arm(name, kind, label or name, scores, costs, failures,
               {"protocol": system.protocol.name, "settings": system.protocol.settings(), "coalition": coalition},
               records)


def _baseline_system(system: System, protocol: str, members: Sequence[str], **settings: Any) -> System:
    proto = make_protocol(protocol, temperature=BASELINE_TEMPERATURE, max_new_tokens=system.protocol.max_new_tokens,
                          **settings)
    return system.with_protocol(proto).replace(members=tuple(members))


def single_arm(system: System, member: str, options: ArmOptions) -> Arm:
    """``member`` answering once (self-consistency of one sample)."""
    arm = run_arm(_baseline_system(system, "slm_mux", [member], samples=1, tie_break="first"), "best_single",
                  "best_single", options, f"best single: {member} answering once")
    arm.about["member"] = member
    return arm


def self_consistency_arm(system: System, member: str, k: int, options: ArmOptions) -> Arm:
    """``member`` drawing ``k`` answers, the most frequent one winning (ties: the first drawn)."""
    arm = run_arm(_baseline_system(system, "slm_mux", [member], samples=k, tie_break="first"),
                  f"self_consistency@{k}", "self_consistency", options, f"self-consistency@{k} of {member}")
    arm.about.update(member=member, k=k)
    return arm


def pool_vote_arm(system: System, options: ArmOptions) -> Arm:
    """Every frozen member answering once; the plurality answer wins (majority vote's defaults: ties go to the
    higher dev score, so with default settings the ``majority_vote`` protocol is this baseline)."""
    return run_arm(_baseline_system(system, "majority_vote", system.frozen), "pool_vote",
                   "pool_vote", options, f"pool vote of {', '.join(system.frozen)}")


__all__ = ["Arm", "ArmOptions", "BASELINE_TEMPERATURE", "CostMatch", "UNITS", "best_member",
           "capped_k", "check_unit", "matched_k", "pool_vote_arm", "run_arm", "self_consistency_arm", "single_arm"]
