"""Seeded splits of a training pool into train and dev (8:2 by default)."""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

from ..errors import ConfigError

T = TypeVar("T")
DEV_FRACTION = 0.2


def train_dev_split(items: Sequence[T], seed: int = 0, dev_fraction: float = DEV_FRACTION) -> tuple[list[T], list[T]]:
    """(train, dev): a seeded shuffle, then the first ``round(n * dev_fraction)`` items are dev.
    The same items and seed always give the same split; each item lands in exactly one part."""
    if not 0.0 < dev_fraction < 1.0:
        raise ConfigError(f"dev_fraction={dev_fraction} must lie strictly between 0 and 1")
    order = list(range(len(items)))
    random.Random(f"split/{seed}").shuffle(order)
    n_dev = round(len(items) * dev_fraction)
    if len(items) >= 2:
        n_dev = min(max(n_dev, 1), len(items) - 1)
    dev_idx = sorted(order[:n_dev])
    train_idx = sorted(order[n_dev:])
    return [items[i] for i in train_idx], [items[i] for i in dev_idx]


__all__ = ["train_dev_split", "DEV_FRACTION"]
