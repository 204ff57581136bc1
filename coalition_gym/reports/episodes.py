"""A protocol's episodes with a pool, scored: the library call behind ``cgym run``.

:func:`run_env` builds the system a :class:`~coalition_gym.envs.system.SystemSpec` names (through
``System.build``, so a router gets the pool's member descriptions as everywhere else), runs
``options.episodes`` episodes over its items (more episodes than items: the items again with new seeds) and
returns an :class:`EpisodeRun`: the results, the system score with its 95% CI, parse rate, failures and
batching. The frozen members' dev scores rest on the task's default dev split, not on as few items as the
episodes ask for. :meth:`EpisodeRun.write` writes episodes.jsonl, summary.json and run.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..envs.dev_scores import DEFAULT_DEV_ITEMS, DevScores
from ..envs.runner import EpisodeResult, RunStats, episode_record, run_episodes
from ..envs.system import System, SystemSpec
from ..failures import FailureSummary
from ..records import describe_pool, describe_task
from ..result_files import Bundle, write_bundle
from ..settings_check import check_settings, setting
from ..tasks import make as make_task
from ..valuation.stats import N_BOOT, bootstrap_mean


@dataclass(frozen=True)
class EpisodeRunOptions:
    """How :func:`run_env` runs: ``episodes`` in all, the episode ``seed`` (the first pass over the items;
    each later pass adds one), ``n_boot`` resamples for the score's CI, ``progress`` bars and
    ``record_text`` (reply texts in episodes.jsonl)."""

    episodes: int = setting(100, ge=1, doc="episodes to run")
    seed: int = setting(0, ge=0, doc="episode seed (the same for every coalition)")
    n_boot: int = setting(N_BOOT, ge=2, doc="bootstrap resamples over episodes")
    progress: bool = False
    record_text: bool = True

    def __post_init__(self) -> None:
        check_settings(self, "run options")


@dataclass
class EpisodeRun:
    """What :func:`run_env` ran: the system, one result per episode, the backends' call statistics and the
    frozen members' dev scores."""

    system: System
    results: list[EpisodeResult]
    options: EpisodeRunOptions
    stats: RunStats = field(default_factory=RunStats)
    dev: DevScores = field(default_factory=DevScores)

    @property
    def score(self) -> tuple[float, float, float]:
        """The mean system score and its 95% bootstrap CI over episodes."""
        scores = np.array([[r.score for r in self.results]], dtype=float)
        boot = bootstrap_mean(scores, n_boot=self.options.n_boot, seed=self.options.seed % 2**32)
        return float(boot.mean[0]), float(boot.ci_low[0]), float(boot.ci_high[0])

    def failures(self) -> FailureSummary:
        return FailureSummary().add_records(self.results)

    def summary(self) -> dict[str, Any]:
        mean, low, high = self.score
        system = self.system
        return {"protocol": system.protocol.settings(), "task": system.task.name, "pool": system.pool.name,
                "members": list(system.members), "episodes": len(self.results), "seed": self.options.seed,
                "system_score": mean, "ci": [low, high], "parse_rate": self.parse_rate,
                "failures": self.failures().to_dict(), "batching_factor": self.stats.batching_factor,
                "backend_calls": self.stats.backend_calls, "dev_scores": self.dev.record()}

    @property
    def parse_rate(self) -> float:
        return sum(r.parsed for r in self.results) / len(self.results)

    def sentence(self, label: str | None = None) -> str:
        """One line: ``label`` (default: the protocol's name) on the task with the pool, score and CI, ..."""
        mean, low, high = self.score
        system = self.system
        return (f"{label or system.protocol.name} on {system.task.name} with {system.pool.name} "
                f"{list(system.members)}: system score {mean:.3f} [95% CI {low:.3f}, {high:.3f}] "
                f"(n={len(self.results)}, parsed {self.parse_rate:.0%}, failures {self.failures().failed}, "
                f"{self.stats.batching_factor:.0f} asks per backend call)")

    def run_record(self, split: str | None) -> dict[str, Any]:
        """The parts of the run record this run fills (pool, task, protocol, seeds, dev scores)."""
        system = self.system
        return {"pool": describe_pool(system.pool, list(system.members)), "task": describe_task(system.task, split),
                "protocol": {"name": system.protocol.name, "settings": system.protocol.settings()},
                "dev_scores": self.dev.record()}

    def write(self, out: Path, summary: dict[str, Any]) -> list[Path]:
        """episodes.jsonl (one record per episode, with the outcome's details), summary.json and run.json
        (``summary["run"]``) in ``out``: one bundle."""
        rows = ({**episode_record(r, self.system.item(r.item_id), self.options.record_text),
                 "details": dict(r.outcome.details) if r.outcome is not None else None} for r in self.results)
        bundle = Bundle("summary", record=summary["run"], summary=summary, results=rows,
                        names={"results": "episodes.jsonl"})
        return list(write_bundle(out, bundle).values())


def run_env(spec: SystemSpec, options: EpisodeRunOptions = EpisodeRunOptions()) -> EpisodeRun:
    """Run ``options.episodes`` episodes of the system ``spec`` names (see the module doc)."""
    system = System.build(spec)
    dev = System.build(_dev_spec(spec, len(system.items)), cache=system.cache).dev
    system = system.replace(dev_scores=dev.scores)
    stats, results = RunStats(), []
    items = list(system.items)
    for cycle in range(math.ceil(options.episodes / len(items))):  # more episodes than items: new seeds
        chunk = items[: options.episodes - cycle * len(items)]
        results += run_episodes(system, chunk, seed=options.seed + cycle, stats=stats, progress=options.progress,
                                description=system.protocol.name)
    return EpisodeRun(system, results, options, stats, dev)


def _dev_spec(spec: SystemSpec, n_items: int) -> SystemSpec:
    """The spec whose task's dev split the members' dev scores rest on: the task at its default dev size at
    least (a task given as an object is used as it is)."""
    if not isinstance(spec.task, str):
        return spec
    kwargs = {**dict(spec.task_kwargs or {}), "size": max(n_items, DEFAULT_DEV_ITEMS)}
    return SystemSpec(spec.protocol, make_task(spec.task, **kwargs), spec.collaborators, spec.members, None,
                      None, spec.protocol_settings)
