"""The ``team-crl`` recipe's run (``cgym train --policy A --policy B ...``): K >= 2 trainable seats learning together
inside one protocol, beside frozen collaborators, trained by the one trainer
(:class:`~coalition_gym.training.trainer.Trainer`; what a team adds: :mod:`.strategy`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..trainer import train_policy
from .config import TeamConfig
from .strategy import TIMING_KEYS


def train_team(config: TeamConfig, out: str | Path | None = None, options: Any = None,
               base_per_item: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """The ``team-crl`` recipe's ``train``: fit ``config``'s seats into ``out`` and report them (``options``: a
    ``trainer.RunOptions``; ``base_per_item`` is accepted for the policy recipes' signature and unused: the
    report compares with the untrained team itself)."""
    return train_policy(config, out, options)


def comparable_metrics(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows without their timings (the only numbers two runs of one configuration may differ in)."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


__all__ = ["train_team", "comparable_metrics"]
