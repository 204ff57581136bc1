"""coalition-gym: multi-LLM collaboration protocols as Gymnasium/PettingZoo environments.

Importing the package registers every environment id with Gymnasium (``coalition_gym/Debate-v0`` ...).

The headline verbs: ``gym.make(...)``, :func:`run_episodes`, :func:`evaluate` (a leaderboard),
:class:`CoalitionGame` with the estimators; the extension points: subclass :class:`Protocol`,
:class:`Task` or :class:`Generator` and make them available by name with :func:`register_protocol`,
:func:`register_task` and :func:`register_backend` (see ``examples/``); training methods and adversaries
with :func:`register_method` and :func:`register_adversary`. ``cgym --import MODULE`` or the
``coalition_gym.plugins`` entry point brings them to every ``cgym`` command.
"""

from .agents import AgentProfile, Generator, Pool, SimulatedAgent, load_pool
from .agents.adversaries import register_adversary
from .agents.pools import register_backend
from .envs import (
    ENV_IDS,
    PROTOCOLS,
    CollaborationEnv,
    CollaborationParallelEnv,
    RunStats,
    make_protocol,
    parallel_env,
    register_envs,
    run_episodes,
)
from .envs.protocols.base import EpisodeContext, Protocol
from .envs.registration import register_protocol
from .errors import CoalitionGymError
from .reports.leaderboard import evaluate
from .tasks import make as make_task
from .tasks import register_task
from .tasks.base import Task
from .training.methods import register_method
from .types import Ask, EpisodeResult, Item, Message, Outcome, Sample, SamplingParams
from .valuation import (
    CoalitionGame,
    exact_banzhaf,
    exact_shapley,
    leave_one_out,
    sampled_shapley_values,
    solo,
)
from .version import __version__

register_envs()

__all__ = ["AgentProfile", "Generator", "Pool", "SimulatedAgent", "load_pool", "register_backend", "ENV_IDS",
           "register_adversary", "register_method",
           "PROTOCOLS", "RunStats", "CollaborationEnv", "CollaborationParallelEnv", "make_protocol", "parallel_env",
           "register_envs", "run_episodes", "EpisodeContext", "Protocol", "register_protocol", "CoalitionGymError",
           "make_task", "register_task", "Task", "Ask", "EpisodeResult", "Item", "Message", "Outcome", "Sample",
           "SamplingParams", "CoalitionGame", "exact_banzhaf", "exact_shapley", "leave_one_out",
           "sampled_shapley_values", "solo", "evaluate", "__version__"]
