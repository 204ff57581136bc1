"""Environment ids and their entry points, registered with Gymnasium on import of the package."""

from __future__ import annotations

import gymnasium as gym

from ..errors import ConfigError, UnknownNameError
from .protocols import BUILTIN_PROTOCOLS, PROTOCOLS, Protocol

NAMESPACE = "coalition_gym"
ENTRY_POINT = "coalition_gym.envs.gym_env:CollaborationEnv"
VECTOR_ENTRY_POINT = "coalition_gym.envs.vector_env:CollaborationVectorEnv"

#: env id -> protocol name, one per registered protocol. Descriptions come from the protocol classes.
ENV_IDS: dict[str, str] = {}


def env_id_of(cls: type) -> str:
    """``coalition_gym/<ClassName>-v0``: Debate -> coalition_gym/Debate-v0."""
    return f"{NAMESPACE}/{cls.__name__}-v0"


def register_protocol(cls: type[Protocol], env_id: str | None = None) -> str | None:
    """Make a protocol class available everywhere by its ``name``: ``make_protocol``, ``cgym run/eval
    --protocol``, ``cgym protocols``, and an environment id (``gym.make``, ``gym.make_vec``,
    ``cgym envs``; default ``coalition_gym/<ClassName>-v0``). Returns the env id."""
    if not (isinstance(cls, type) and issubclass(cls, Protocol)) or cls is Protocol:
        raise ConfigError(f"register_protocol takes a Protocol subclass, not {cls!r}")
    name = getattr(cls, "name", "")
    if not name or name == Protocol.name:
        raise ConfigError(f"{cls.__name__} needs its own class attribute name (e.g. name = 'my_protocol')")
    if PROTOCOLS.get(name, cls) is not cls:
        raise ConfigError(f"protocol name {name!r} is taken by {PROTOCOLS[name].__name__}; choose another")
    env_id = env_id or env_id_of(cls)
    if ENV_IDS.get(env_id, name) != name:
        raise ConfigError(f"environment id {env_id!r} is taken by protocol {ENV_IDS[env_id]!r}")
    PROTOCOLS[name] = cls
    ENV_IDS[env_id] = name
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT,
                     kwargs={"protocol": name})
    return env_id


def register_envs() -> None:
    """Register the built-in protocols (and their env ids); idempotent."""
    for cls in BUILTIN_PROTOCOLS:
        register_protocol(cls)


def describe_envs() -> list[tuple[str, str]]:
    return [(env_id, PROTOCOLS[p].description) for env_id, p in ENV_IDS.items()]


def protocol_of(env_id_or_protocol: str) -> str:
    """The protocol behind an env id; a protocol name is returned as is."""
    if env_id_or_protocol in ENV_IDS:
        return ENV_IDS[env_id_or_protocol]
    if env_id_or_protocol in PROTOCOLS:
        return env_id_or_protocol
    raise UnknownNameError("environment id", env_id_or_protocol, list(ENV_IDS))
