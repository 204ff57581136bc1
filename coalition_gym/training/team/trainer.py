"""What two runs of one team configuration may differ in: the ``team-crl`` recipe trains with the one trainer
(:class:`~coalition_gym.training.trainer.Trainer`, the same ``train`` as a policy recipe's; what a team adds:
:mod:`.strategy`), and a resumed run's metrics equal an uninterrupted one's but for the timings."""

from __future__ import annotations

from typing import Any, Sequence

from .strategy import TIMING_KEYS


def comparable_metrics(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows without their timings (the only numbers two runs of one configuration may differ in)."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


__all__ = ["comparable_metrics"]
