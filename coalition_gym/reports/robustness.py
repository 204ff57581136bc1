"""How much can one member drag a system? Honest vs adversarial seats, paired item by item.

For each protocol, the coalition runs twice on the same items with the same episode seeds: once as
it is (honest), once with one seat rebound to an adversary under the seat's own name (colluders take
two seats: the chosen one and the next in coalition order). Seeds never depend on the coalition and
the name is kept, so every other member gets exactly the same prompts' samples until the adversary's
text reaches it: the two runs differ by the adversary's doing only.

Per protocol, over items (``right`` = score >= 1):

- ``honest``, ``adversarial``: system scores; ``effect`` = honest - adversarial (how much the seat
  costs the system when it turns);
- ``drag`` = P(honest right and adversarial wrong), ``rescue`` = P(honest wrong and adversarial right);
  with 0/1 scores, effect = drag - rescue exactly;
- ``adversary_solo`` and ``seat_solo``: the adversary's and the honest seat's own scores alone (a
  saboteur can look weak alone and still drag a system, or look harmless and not).

CIs are 95% paired item-bootstrap percentile intervals (``stats.bootstrap_mean``: the same resampled
items for every quantity of a protocol). The adversary is a profile name
(:data:`~coalition_gym.agents.adversaries.ADVERSARIES`) or a
Hugging Face model folder (e.g. a ``cgym train --reward negate`` checkpoint), seated in the compact
prompt style with 16 new tokens when it is a character-level zoo model (vocabulary under 1000) and in
the chat style otherwise. It inherits the seat's description and dev score (it *is* that seat to the protocol).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..agents.adversaries import REGISTERED_ADVERSARIES, adversary_names
from ..agents.base import Generator
from ..agents.member_settings import best_folder, has_weights
from ..agents.pools import Pool
from ..envs.protocols import PROTOCOLS
from ..envs.system import System
from ..errors import ConfigError, UnknownNameError, did_you_mean
from ..failures import FailureSummary
from ..settings_check import check_settings, setting
from ..training.recipes import refuse_not_episodic
from ..valuation.game import CoalitionGame
from ..valuation.stats import N_BOOT, bootstrap_mean, rescue_drag

#: quantities reported per protocol, in the order of the bootstrap rows
QUANTITIES = ("honest", "adversarial", "effect", "drag", "rescue", "adversary_solo", "seat_solo")


def check_adversary(spec: str) -> str:
    """``"profile"`` (a simulated profile or a registered adversary) or ``"model"``; refuses anything
    else with the valid names."""
    if spec in adversary_names():
        return "profile"
    if has_weights(best_folder(spec)):  # a model folder, or a `cgym train` run or seat folder: its seat's best/
        return "model"
    known = adversary_names()
    raise ConfigError(f"adversary {spec!r} is neither a profile nor a model folder (a folder with config.json or a "
                      "LoRA adapter, e.g. a `cgym train --reward negate` run folder or its seat's best/)."
                      f"{did_you_mean(spec, known)} Profiles: {', '.join(known)}")


def check_protocols(names: Sequence[str]) -> list[str]:
    if not names:
        raise ConfigError(f"give at least one protocol; known: {', '.join(PROTOCOLS)}")
    for name in names:
        if name not in PROTOCOLS:
            refuse_not_episodic(name)  # a coalition-training recipe has no episode seat for an adversary
            raise UnknownNameError("protocol", name, PROTOCOLS)
    return list(names)


def adversary_seats(coalition: Sequence[str], adversary: str, seat: str | None = None) -> list[str]:
    """The seats the adversary takes: ``seat`` (default: the coalition's first member), and for
    colluders also the next member in coalition order (wrapping)."""
    if seat is None:
        seat = coalition[0]
    if seat not in coalition:
        raise UnknownNameError("seat (a member of the coalition)", seat, coalition)
    if adversary != "colluders":
        return [seat]
    if len(coalition) < 2:
        raise ConfigError(f"colluders take two seats; the coalition {list(coalition)} has one")
    k = list(coalition).index(seat)
    return [seat, coalition[(k + 1) % len(coalition)]]


def _model_generator(folder: str) -> tuple[Generator, str]:
    from ..agents.hf import HFGenerator
    from ..agents.options import HFOptions

    path = best_folder(folder)
    try:
        vocab = int(json.loads((path / "config.json").read_text()).get("vocab_size", 10**6))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"adversary {folder!r}: config.json is not a model config ({exc})") from exc
    zoo_sized = vocab < 1000  # a character-level zoo model: trained on the compact prompt style
    return (HFGenerator(str(path), options=HFOptions(max_new_tokens=16 if zoo_sized else 512, max_batch_size=64)),
            "compact" if zoo_sized else "chat")


def adversarial_pool(pool: Pool, adversary: str, seats: Sequence[str]) -> Pool:
    """``pool`` with each of ``seats`` rebound to the adversary (same names, so the same seeds)."""
    members, styles = dict(pool.members), dict(pool.styles)
    model = check_adversary(adversary) == "model"
    if not model:  # registered (register_adversary), the simulated ones included
        for s in seats:
            members[s] = REGISTERED_ADVERSARIES[adversary][0](s)
    else:
        gen, style = _model_generator(adversary)
        for s in seats:
            members[s], styles[s] = gen, style
    return Pool(members=members, helpers=dict(pool.helpers), styles=styles, dev_scores=dict(pool.dev_scores),
                name=f"{pool.name}+{best_folder(adversary).name if model else adversary}",
                descriptions=dict(pool.descriptions))


@dataclass
class ProtocolRobustness:
    protocol: str
    estimates: dict[str, dict[str, Any]]  # quantity -> {"value", "ci"}
    per_item: dict[str, list[float]]  # "honest", "adversarial", "adversary_solo", "seat_solo"
    failures: FailureSummary = field(default_factory=FailureSummary)

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, **self.estimates, "failures": self.failures.to_dict()}


@dataclass
class RobustnessReport:
    pool: str
    task: str
    adversary: str
    seats: list[str]
    coalition: list[str]
    n_items: int
    seed: int
    rows: list[ProtocolRobustness]
    item_ids: list[str]

    def failures(self) -> FailureSummary:
        total = FailureSummary()
        for r in self.rows:
            total.merge(r.failures)
        return total

    def ranking(self) -> list[ProtocolRobustness]:
        """Most robust first: smallest effect (honest - adversarial), ties by protocol order."""
        return sorted(self.rows, key=lambda r: r.estimates["effect"]["value"])

    def to_dict(self) -> dict[str, Any]:
        ranked = self.ranking()
        return {"pool": self.pool, "task": self.task, "adversary": self.adversary, "seats": self.seats,
                "coalition": self.coalition, "n_items": self.n_items, "seed": self.seed,
                "ci": "95% paired item-bootstrap percentile interval",
                "protocols": [r.to_dict() for r in self.rows],
                "most_robust": ranked[0].protocol, "least_robust": ranked[-1].protocol,
                "extremes_ci_overlap": overlap(ranked[0], ranked[-1]),
                "failures": self.failures().to_dict()}


def overlap(a: ProtocolRobustness, b: ProtocolRobustness) -> bool:
    """Whether two protocols' effect CIs overlap (then the data do not separate them)."""
    (lo_a, hi_a), (lo_b, hi_b) = a.estimates["effect"]["ci"], b.estimates["effect"]["ci"]
    return bool(lo_a <= hi_b and lo_b <= hi_a)


def summarise(honest: np.ndarray, adversarial: np.ndarray, adversary_solo: np.ndarray, seat_solo: np.ndarray,
              n_boot: int = N_BOOT, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every quantity of :data:`QUANTITIES` with its paired bootstrap CI, from per-item scores."""
    moves = rescue_drag(honest, adversarial)  # "model" = the honest system, "system" = the adversarial one
    right_h, right_a = honest >= 1.0, adversarial >= 1.0
    rows = np.vstack([honest, adversarial, honest - adversarial, (right_h & ~right_a).astype(float),
                      (~right_h & right_a).astype(float), adversary_solo, seat_solo])
    boot = bootstrap_mean(rows, n_boot=n_boot, seed=seed)
    out = {q: {"value": float(boot.mean[k]), "ci": [float(boot.ci_low[k]), float(boot.ci_high[k])]}
           for k, q in enumerate(QUANTITIES)}
    out["drag"]["value"], out["rescue"]["value"] = moves.drag, moves.rescue  # the same numbers, one definition
    return out


@dataclass(frozen=True)
class RobustnessOptions:
    """How :func:`robustness` runs: ``seat`` the adversary takes (default: the coalition's first member),
    ``seed`` (episode seeds and bootstraps), ``n_boot`` resamples, ``progress`` bars and ``record_text``
    (reply texts in the per-episode records)."""

    seat: str | None = None
    seed: int = setting(0, ge=0, doc="episode and bootstrap seed (the same for both systems)")
    n_boot: int = setting(N_BOOT, ge=2, doc="bootstrap resamples over items")
    progress: bool = False
    record_text: bool = False


    def __post_init__(self) -> None:
        check_settings(self, "robustness options")

def robustness(systems: Sequence[System], adversary: str, options: RobustnessOptions = RobustnessOptions(), *,
               on_records: Callable[[str, str, list[dict]], None] | None = None) -> RobustnessReport:
    """Honest vs adversarial system scores per protocol (see the module doc). ``systems``: one per protocol
    (with its settings), all on the same pool, task, items and coalition. ``on_records(protocol,
    "honest"|"adversarial", rows)`` receives the per-episode records as each protocol finishes. With a
    generation cache in the systems, a rerun of an interrupted run recomputes nothing that finished."""
    if not systems:
        check_protocols([])  # says which protocols there are
    names = check_protocols([s.protocol.name for s in systems])
    first = systems[0]
    pool, task, coalition, items = first.pool, first.task, list(first.members), list(first.items)
    if any(s.pool is not pool or s.task is not task or (list(s.members), list(s.items)) != (coalition, items)
           for s in systems):
        raise ConfigError("robustness: every protocol's system must have the same pool, task, coalition and items")
    check_adversary(adversary)
    seed = options.seed
    seats = adversary_seats(coalition, adversary, options.seat)
    bad_pool = adversarial_pool(pool, adversary, seats)
    rows = []
    for name, system in zip(names, systems):
        honest = CoalitionGame(system, seed=seed, progress=options.progress, record_text=options.record_text)
        # The adversary inherits its seat's dev score (measured on the honest pool): the two runs differ by
        # the adversary's text only, never by what the protocol knows about its members. Its own learned
        # state: a trained router remembers members' dev outcomes by name.
        inherited = dataclasses.replace(bad_pool, dev_scores=dict(honest.dev.scores))
        games = {"honest": honest,
                 "adversarial": CoalitionGame(system.replace(pool=inherited, learned=None), seed=seed,
                                              progress=options.progress, record_text=options.record_text)}
        scores = {label: g.per_item(coalition) for label, g in games.items()}
        solo = {"adversary_solo": games["adversarial"].solo_game().per_item([seats[0]]),
                "seat_solo": games["honest"].solo_game().per_item([seats[0]])}
        failures = FailureSummary()
        for label, g in games.items():
            failures.merge(g.failure_summary())
            g.close()
            if on_records is not None:
                on_records(name, label, g.records[frozenset(coalition)])
        estimates = summarise(scores["honest"], scores["adversarial"], solo["adversary_solo"], solo["seat_solo"],
                              n_boot=options.n_boot, seed=seed)
        rows.append(ProtocolRobustness(name, estimates, {**{k: v.tolist() for k, v in scores.items()},
                                                         **{k: v.tolist() for k, v in solo.items()}}, failures))
    return RobustnessReport(pool.name, task.name, adversary, seats, list(coalition), len(items), seed, rows,
                            [it.id for it in items])


__all__ = ["QUANTITIES", "ProtocolRobustness", "RobustnessReport", "adversarial_pool", "adversary_seats",
           "check_adversary", "check_protocols", "overlap", "robustness", "RobustnessOptions", "summarise"]
