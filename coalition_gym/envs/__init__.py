"""Collaboration protocols as Gymnasium and PettingZoo environments, the System every driver starts episodes
from, and the runner that drives them."""

from .gym_env import CollaborationEnv
from .protocols import PROTOCOLS, make_protocol
from .pz_env import CollaborationParallelEnv, parallel_env
from .registration import ENV_IDS, describe_envs, protocol_of, register_envs
from .runner import RunStats, run_episodes, run_programs
from .system import System

__all__ = ["CollaborationEnv", "CollaborationParallelEnv", "parallel_env", "PROTOCOLS", "make_protocol",
           "ENV_IDS", "describe_envs", "protocol_of", "register_envs", "RunStats", "run_episodes",
           "run_programs", "System"]
