"""Solo strength and leave-one-out contribution of each member of a pool (n + 1 + n coalitions).

Every coalition runs the same items with the same episode seeds, so a member asked the same prompt
in two coalitions draws the same sample (common random numbers). ``v(S)`` is the mean system score
of coalition S; a member's solo strength is ``v({i})`` and its leave-one-out contribution is
``v(N) - v(N minus i)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Sequence

from tqdm.auto import tqdm

from ..agents.pools import Pool
from ..envs.protocols import Protocol
from ..envs.runner import RunStats, run_episodes
from ..tasks.base import Task
from ..types import EpisodeResult, Item


@dataclass
class MemberStrength:
    member: str
    solo: float
    without: float  # v(N minus member)
    loo: float  # v(N) - v(N minus member)


@dataclass
class LeaveOneOutReport:
    protocol: str
    task: str
    n_items: int
    full: float
    members: list[MemberStrength]
    failures: int = 0
    stats: RunStats = field(default_factory=RunStats)

    def to_dict(self) -> dict:
        return {"protocol": self.protocol, "task": self.task, "n_items": self.n_items, "v_full": self.full,
                "failures": self.failures, "batching_factor": self.stats.batching_factor,
                "members": [vars(m) for m in self.members]}


def coalition_value(results: Sequence[EpisodeResult]) -> float:
    return fmean(r.score for r in results) if results else 0.0


def solo_and_leave_one_out(protocol: Protocol, task: Task, items: Sequence[Item], pool: Pool,
                           members: Sequence[str] | None = None, seed: int = 0,
                           progress: bool = False) -> LeaveOneOutReport:
    names = pool.select(list(members)) if members is not None else pool.member_names
    stats = RunStats()
    backends = pool.backends()
    bar = tqdm(total=2 * len(names) + 1, desc=f"{protocol.name} coalitions", unit="coalition",
               leave=False, disable=not progress)

    def value(coalition: Sequence[str], label: str) -> tuple[float, int]:
        bar.set_postfix_str(label)
        results = run_episodes(protocol, task, items, coalition, backends, seed=seed, styles=pool.styles,
                               dev_scores=pool.dev_scores, stats=stats)
        bar.update(1)
        return coalition_value(results), sum(r.error is not None for r in results)

    full, failures = value(names, "full")
    rows = []
    for m in names:
        solo, f1 = value([m], f"solo {m}")
        rest = [x for x in names if x != m]
        without, f2 = value(rest, f"without {m}") if rest else (0.0, 0)  # v(empty) = 0
        failures += f1 + f2
        rows.append(MemberStrength(m, solo, without, full - without))
    bar.close()
    return LeaveOneOutReport(protocol.name, task.name, len(items), full, rows, failures, stats)
