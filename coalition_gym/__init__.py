"""coalition-gym: multi-LLM collaboration protocols as Gymnasium/PettingZoo environments.

Importing the package registers every environment id with Gymnasium (``coalition_gym/Debate-v0`` ...).
"""

__version__ = "0.1.0"  # first: modules imported below read it

from .agents import AgentProfile, Generator, Pool, SimulatedAgent, load_pool
from .envs import (ENV_IDS, PROTOCOLS, CollaborationEnv, CollaborationParallelEnv, RunStats, make_protocol,
                   parallel_env, register_envs, run_episodes)
from .errors import CoalitionGymError
from .tasks import make as make_task
from .types import Ask, EpisodeResult, Item, Message, Outcome, Sample, SamplingParams

register_envs()

__all__ = ["AgentProfile", "Generator", "Pool", "SimulatedAgent", "load_pool", "ENV_IDS", "PROTOCOLS", "RunStats",
           "CollaborationEnv",
           "CollaborationParallelEnv", "make_protocol", "parallel_env", "register_envs", "run_episodes",
           "CoalitionGymError", "make_task", "Ask", "EpisodeResult", "Item", "Message", "Outcome", "Sample",
           "SamplingParams", "__version__"]
