"""Environment ids and their entry points, registered with Gymnasium on import of the package."""

from __future__ import annotations

import gymnasium as gym

from ..errors import UnknownNameError
from .protocols import PROTOCOLS

NAMESPACE = "coalition_gym"
ENTRY_POINT = "coalition_gym.envs.gym_env:CollaborationEnv"
VECTOR_ENTRY_POINT = "coalition_gym.envs.vector_env:CollaborationVectorEnv"

#: env id -> protocol name. Descriptions come from the protocol classes.
ENV_IDS: dict[str, str] = {
    f"{NAMESPACE}/Debate-v0": "debate",
    f"{NAMESPACE}/LLMBlender-v0": "llm_blender",
    f"{NAMESPACE}/SLMMux-v0": "slm_mux",
    f"{NAMESPACE}/MajorityVote-v0": "majority_vote",
    f"{NAMESPACE}/MixtureOfAgents-v0": "mixture_of_agents",
    f"{NAMESPACE}/HeterogeneousSwarms-v0": "heterogeneous_swarms",
    f"{NAMESPACE}/Feedback-v0": "feedback",
    f"{NAMESPACE}/PromptRouting-v0": "prompt_routing",
    f"{NAMESPACE}/TrainedRouter-v0": "trained_router",
    f"{NAMESPACE}/Cascade-v0": "cascade",
}


def register_envs() -> None:
    for env_id, protocol in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT,
                         kwargs={"protocol": protocol})


def describe_envs() -> list[tuple[str, str]]:
    return [(env_id, PROTOCOLS[p].description) for env_id, p in ENV_IDS.items()]


def protocol_of(env_id_or_protocol: str) -> str:
    """The protocol behind an env id; a protocol name is returned as is."""
    if env_id_or_protocol in ENV_IDS:
        return ENV_IDS[env_id_or_protocol]
    if env_id_or_protocol in PROTOCOLS:
        return env_id_or_protocol
    raise UnknownNameError("environment id", env_id_or_protocol, list(ENV_IDS))
