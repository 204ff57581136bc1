"""coalition-gym: multi-LLM collaboration protocols as Gymnasium/PettingZoo environments.

Importing the package registers every environment id with Gymnasium (``coalition_gym/Debate-v0`` ...).

The headline verbs: ``gym.make(...)``; a :class:`System` (protocol + task + pool + coalition) run with
:func:`run_episodes`, or valued as a :class:`CoalitionGame` by the estimators and :func:`evaluate` (a
leaderboard); the extension points: subclass :class:`Protocol`,
:class:`Task` or :class:`Generator` and make them available by name with :func:`register_protocol`,
:func:`register_task` and :func:`register_backend`, a scorer as an :class:`AnswerKind` with
:func:`register_answer_kind` (see ``examples/``); training recipes (policy and coalition training) and
adversaries with :func:`register_recipe` (every recipe is called as ``train(settings, RecipeContext)``) and
:func:`register_adversary`; pool presets with :func:`register_pool`; valuation
estimators and Monte Carlo samplers
with :func:`register_estimator` and :func:`register_sampler`. Settings classes declare bounds and choices
with :func:`setting` (checked by :func:`check_settings`). ``cgym --import MODULE`` or the
``coalition_gym.plugins`` entry point brings them to every ``cgym`` command.
"""

from .agents import AgentProfile, Generator, Pool, SimulatedAgent, load_pool
from .agents.adversaries import register_adversary
from .agents.backends import register_backend
from .agents.pools import register_pool
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
from .envs.system import System, SystemSpec
from .errors import CoalitionGymError
from .reports.leaderboard import EvalOptions, evaluate
from .scorers.kinds import AnswerKind, register_answer_kind
from .scorers.result import ScoreResult
from .settings_check import check_settings, setting
from .tasks import make as make_task
from .tasks import register_task
from .tasks.base import Task
from .training.recipes import RecipeContext, register_recipe
from .types import Ask, EpisodeResult, Item, Message, Outcome, Sample, SamplingParams
from .valuation import (
    CoalitionGame,
    exact_banzhaf,
    exact_shapley,
    leave_one_out,
    sampled_shapley_values,
    solo,
)
from .valuation.estimators import register_estimator
from .valuation.sampling import Sampler, register_sampler
from .version import __version__

register_envs()

__all__ = ["AgentProfile", "Generator", "Pool", "SimulatedAgent", "load_pool", "register_backend", "ENV_IDS",
           "register_adversary", "register_recipe", "RecipeContext",
           "PROTOCOLS", "RunStats", "CollaborationEnv", "CollaborationParallelEnv", "make_protocol", "parallel_env",
           "register_envs", "run_episodes", "EpisodeContext", "Protocol", "register_protocol", "CoalitionGymError",
           "make_task", "register_task", "Task", "Ask", "EpisodeResult", "Item", "Message", "Outcome", "Sample",
           "AnswerKind", "ScoreResult", "register_answer_kind",
           "register_estimator", "register_sampler", "register_pool", "Sampler", "setting", "check_settings",
           "SamplingParams", "CoalitionGame", "exact_banzhaf", "exact_shapley", "leave_one_out",
           "sampled_shapley_values", "solo", "evaluate", "EvalOptions", "System", "SystemSpec",
           "__version__"]
