"""The built-in training recipes, each named here and nowhere else. Imported by the package
(``coalition_gym/training/__init__.py``), so every ``coalition_gym.training`` module sees them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from . import config
from . import methods as m
from .collaborative.settings import MultiagentFinetuningSettings, SpartaSettings
from .recipes import register_recipe
from .team.config import TeamConfig


def train_sparta(settings: SpartaSettings, members: Any, task: Any, train: Any, dev: Any, seed: int,
                 work_dir: Path) -> Any:
    from .collaborative.sparta import train_sparta as run  # torch: only when a coalition trains

    return run(settings, members, task, train, dev, seed, work_dir)


def train_multiagent_finetuning(settings: MultiagentFinetuningSettings, members: Any, task: Any, train: Any,
                                dev: Any, seed: int, work_dir: Path) -> Any:
    from .collaborative.finetuning import train_multiagent_finetuning as run

    return run(settings, members, task, train, dev, seed, work_dir)


POLICY = [
    ("crl", config.CRLConfig, m.CRL, "C-RL: rollouts inside the protocol, reward = the system's score"),
    ("grpo-indiv", config.GRPOIndivConfig, m.GRPOIndiv, "GRPO on solo rollouts, reward = the policy's own score"),
    ("dapo-indiv", config.DAPOIndivConfig, m.DAPOIndiv, "DAPO on solo rollouts: clip-higher, dynamic sampling, "
                                                        "overlong penalty"),
    ("raft", config.RAFTConfig, m.RAFT, "Collaborative RAFT: SFT on the policy's calls of winning executions"),
    ("nudge", config.NudgeConfig, m.Nudge, "Prompt nudge: the system prompt with the best collaborative dev score"),
    ("base", config.BaseConfig, m.Base, "Base: the untrained policy, evaluated only"),
]
COALITION: list[tuple[str, type, Callable[..., Any], str]] = [
    ("sparta", SpartaSettings, train_sparta,
     "Sparta alignment: members duel, peers judge, reputation-weighted DPO; the best checkpoint on dev answers"),
    ("multiagent_finetuning", MultiagentFinetuningSettings, train_multiagent_finetuning,
     "Multi-agent finetuning: members debate, each is fine-tuned on its turns that agree with the majority; the "
     "fine-tuned members debate"),
]


def train_team(settings: Any, out: Any = None, options: Any = None, base_per_item: Any = None) -> Any:
    from .team.trainer import train_team as run  # torch: only when a team trains

    return run(settings, out, options, base_per_item)


TEAM = [
    ("team-crl", TeamConfig, train_team, "Team C-RL: K >= 2 seats trained together inside the protocol, each on its "
                                         "credit (system, leave-one-out or Shapley)"),
]


def register_builtin_recipes() -> None:
    for name, settings, strategy, about in POLICY:
        register_recipe(name, settings, m.train_policy, strategy=strategy, description=about)
    for name, settings, train, about in COALITION:
        register_recipe(name, settings, train, kind="coalition", description=about)
    for name, settings, train, about in TEAM:
        register_recipe(name, settings, train, kind="team", description=about)


register_builtin_recipes()
