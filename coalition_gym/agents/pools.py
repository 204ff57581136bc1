"""Pools: names bound to Generators, plus the fixed helpers (ranker, fuser ...) protocols use.

Helpers are never coalition members. Presets are addressed by name: ``sim:demo``,
``sim:independent``, ``sim:specialists``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import ConfigError, UnknownNameError
from .base import Generator
from .simulated import SIM_PRESETS, AgentProfile, SimulatedAgent, random_profiles

DEFAULT_POOL = "sim:demo"


@dataclass
class Pool:
    members: dict[str, Generator]
    helpers: dict[str, Generator] = field(default_factory=dict)
    styles: dict[str, str] = field(default_factory=dict)  # prompt style per name; "chat" if absent
    dev_scores: dict[str, float] = field(default_factory=dict)  # for tie-breaking, when measured
    name: str = "custom"

    def __post_init__(self) -> None:
        clash = set(self.members) & set(self.helpers)
        if clash:
            raise ConfigError(f"pool {self.name!r}: names {sorted(clash)} are both members and helpers")

    @property
    def member_names(self) -> list[str]:
        return list(self.members)

    def backends(self) -> dict[str, Generator]:
        return {**self.members, **self.helpers}

    def select(self, names: Sequence[str]) -> list[str]:
        """Validate a coalition drawn from this pool, keeping the caller's order."""
        unknown = [n for n in names if n not in self.members]
        if unknown:
            raise UnknownNameError(f"member of pool {self.name!r}", unknown[0], self.members)
        if len(set(names)) != len(names):
            raise ConfigError(f"coalition {list(names)} names a member twice")
        return list(names)


def _simulated_pool(groups: Mapping[str, Mapping[str, AgentProfile]], name: str) -> Pool:
    return Pool(members={n: SimulatedAgent(p) for n, p in groups["members"].items()},
                helpers={n: SimulatedAgent(p) for n, p in groups["helpers"].items()}, name=name)


def pool_names() -> list[str]:
    return [f"sim:{name}" for name in SIM_PRESETS] + ["sim:random-N"]


def load_pool(spec: "str | Pool | Mapping[str, Generator] | Sequence[tuple[str, Generator]]") -> Pool:
    """A Pool from a preset name, an existing Pool, a mapping of names to Generators, or a list of
    ``(name, Generator)`` pairs (names must be unique)."""
    if isinstance(spec, Pool):
        return spec
    if isinstance(spec, Mapping):
        return Pool(members=dict(spec))
    if isinstance(spec, (list, tuple)):
        names = [pair[0] for pair in spec]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"pool lists {repeated[0]!r} more than once; member names must be unique")
        return Pool(members=dict(spec))
    if not isinstance(spec, str):
        raise ConfigError(f"a pool is a preset name, a Pool, a mapping or a list of (name, Generator) pairs, "
                          f"not {type(spec).__name__}")
    kind, _, preset = spec.partition(":")
    if kind == "sim" and preset in SIM_PRESETS:
        return _simulated_pool(SIM_PRESETS[preset], spec)
    if kind == "sim" and preset.startswith("random-"):
        size = preset[len("random-"):]
        if not size.isdigit() or not 1 <= int(size) <= 64:
            raise ConfigError(f"pool {spec!r}: sim:random-N takes N from 1 to 64")
        return _simulated_pool(random_profiles(int(size)), spec)
    raise UnknownNameError("pool preset", spec, pool_names())
