"""The built-in training recipes, each named here and nowhere else. Imported by the package
(``coalition_gym/training/__init__.py``), so every ``coalition_gym.training`` module sees them."""

from __future__ import annotations

from typing import Any

from . import config
from . import strategies as s
from .collaborative.settings import MultiagentFinetuningSettings, SpartaSettings
from .recipes import RecipeContext, TrainFunction, register_recipe
from .team.strategy import TeamCRL


def train_policy_recipe(settings: config.TrainConfig, context: RecipeContext) -> Any:
    """Every built-in policy and team recipe's ``train`` (and a user's, with their own strategy): the trainer's
    run of ``settings`` into ``context.out`` with ``context.options``, reported against
    ``context.base_per_item`` when given (a team's report compares with the untrained team instead)."""
    from .trainer import train_policy as run  # torch: only when a policy trains

    return run(settings, context.out, context.options, context.base_per_item)


def train_sparta(settings: SpartaSettings, context: RecipeContext) -> Any:
    """Sparta on ``context.members``: one coalition's training (:mod:`.collaborative.sparta`)."""
    from .collaborative.sparta import train_sparta as run  # torch: only when a coalition trains

    return run(settings, context)


def train_multiagent_finetuning(settings: MultiagentFinetuningSettings, context: RecipeContext) -> Any:
    """Multi-agent finetuning on ``context.members`` (:mod:`.collaborative.finetuning`)."""
    from .collaborative.finetuning import train_multiagent_finetuning as run

    return run(settings, context)


POLICY = [
    ("crl", config.CRLConfig, s.CRL, "C-RL: rollouts inside the protocol, reward = the system's score"),
    ("grpo-indiv", config.GRPOIndivConfig, s.GRPOIndiv, "GRPO on solo rollouts, reward = the policy's own score"),
    ("dapo-indiv", config.DAPOIndivConfig, s.DAPOIndiv, "DAPO on solo rollouts: clip-higher, dynamic sampling, "
                                                        "overlong penalty"),
    ("raft", config.RAFTConfig, s.RAFT, "Collaborative RAFT: SFT on the policy's calls of winning executions"),
    ("nudge", config.NudgeConfig, s.Nudge, "Prompt nudge: the system prompt with the best collaborative dev score"),
    ("base", config.BaseConfig, s.Base, "Base: the untrained policy, evaluated only"),
]
COALITION: list[tuple[str, type, TrainFunction, str]] = [
    ("sparta", SpartaSettings, train_sparta,
     "Sparta alignment: members duel, peers judge, reputation-weighted DPO; the best checkpoint on dev answers"),
    ("multiagent_finetuning", MultiagentFinetuningSettings, train_multiagent_finetuning,
     "Multi-agent finetuning: members debate, each is fine-tuned on its turns that agree with the majority; the "
     "fine-tuned members debate"),
]
TEAM = [
    ("team-crl", config.TeamCRLConfig, train_policy_recipe,
     "Team C-RL: K >= 1 seats trained together inside the protocol, each on its credit (system, leave-one-out or "
     "Shapley)"),
]


def register_builtin_recipes() -> None:
    for name, settings, strategy, about in POLICY:
        register_recipe(name, settings, train_policy_recipe, strategy=strategy, description=about)
    for name, settings, train, about in COALITION:
        register_recipe(name, settings, train, kind="coalition", description=about)
    for name, settings, train, about in TEAM:
        register_recipe(name, settings, train, kind="team", strategy=TeamCRL, description=about)


register_builtin_recipes()

__all__ = ["train_policy_recipe", "train_sparta", "train_multiagent_finetuning",
           "register_builtin_recipes"]
