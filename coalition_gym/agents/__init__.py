"""Everything that writes text: the Generator interface and its backends."""

from .base import Generator, derive_seed, render_plain, stable_hash
from .pools import DEFAULT_POOL, Pool, load_pool, pool_names
from .simulated import SIM_PRESETS, AgentProfile, SimulatedAgent

__all__ = ["Generator", "derive_seed", "render_plain", "stable_hash", "Pool", "load_pool", "pool_names",
           "DEFAULT_POOL", "AgentProfile", "SimulatedAgent", "SIM_PRESETS"]
