"""Task registry: ``make("rg/basic_arithmetic", size=100)``."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, UnknownNameError
from .base import SPLITS, Task
from .reasoning_gym import ReasoningGymTask, rg_dataset_names

DEFAULT_TASK = "rg/basic_arithmetic"


def make(name: str | Task, **kwargs: Any) -> Task:
    """A task by name. ``rg/<dataset>`` takes ``size``, ``seed`` and ``config`` (the dataset's own
    options). A Task instance is returned unchanged."""
    if isinstance(name, Task):
        if kwargs:
            raise ConfigError(f"task options {sorted(kwargs)} cannot apply to an already built task "
                              f"{name.name!r}; pass its name instead, or build it with those options")
        return name
    if isinstance(name, str) and name.startswith("rg/"):
        return ReasoningGymTask(name[3:], **kwargs)
    raise UnknownNameError("task", str(name), task_names())


def task_names() -> list[str]:
    return [f"rg/{d}" for d in rg_dataset_names()]


__all__ = ["Task", "make", "task_names", "SPLITS", "DEFAULT_TASK", "ReasoningGymTask"]
