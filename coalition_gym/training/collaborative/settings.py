"""Settings of the coalition-training recipes: what trains the members, and the plain protocol the
trained coalition then runs (``evaluation``).

- **Sparta alignment** (Jiang et al. 2025): members answer in pairs, the others judge, reputations move
  Elo-style, everyone is trained by DPO on the judged preferences; after the last iteration the best
  checkpoint on dev, whichever member and iteration it is, answers alone (``selected_checkpoint``).
- **Multi-agent finetuning** (Subramaniam et al. 2025): members debate; each is fine-tuned on its own
  debate turns that agree with the final majority; at test time the fine-tuned members debate again
  and the majority answers (``debate``).

Settings are flat, as ``--set`` gives them: :func:`make_coalition_settings` sends the recipe's own
keys to its settings class and the rest to its evaluation protocol.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...envs.protocols import Debate, Protocol, make_protocol
from ...envs.protocols.collaborative import SelectedCheckpoint
from ...errors import ConfigError, setting_hint
from ...settings_check import check_settings, setting
from ..config import SETTING_SYNONYMS
from ..recipes import get_recipe, recipe_of

JUDGE_MODES = ("auto", "prompt", "likelihood")


@dataclass
class CoalitionTrainingSettings:
    """Settings every coalition-training recipe has (the data and the optimiser), and its evaluation."""

    #: Smallest coalition a recipe trains (a smaller one is valued 0 without training).
    min_members: ClassVar[int] = 2
    #: The plain protocol the trained members run, and the recipe's defaults for it.
    evaluation_protocol: ClassVar[type[Protocol]] = Debate
    evaluation_defaults: ClassVar[dict[str, Any]] = {}

    iterations: int = setting(1, ge=1, doc="train, judge/debate, update: this many times")
    train_items: int = setting(500, ge=1, doc="items of the task's train split used as prompts, per iteration")
    dev_items: int = setting(100, ge=1, doc="items of the dev split for checkpoint selection and dev scores")
    lr: float = setting(1e-5, gt=0, doc="the optimiser's learning rate (cgym train's name too)")
    epochs: int = setting(1, ge=1)
    batch_size: int = setting(16, ge=1)
    evaluation: Protocol = field(default=None)  # type: ignore[assignment]  # None: the recipe's defaults

    def __post_init__(self) -> None:
        if self.evaluation is None:
            self.evaluation = self.evaluation_protocol(**self.evaluation_defaults)
        check_settings(self, self.recipe_name)  # types, bounds and choices, declared on the fields

    @property
    def recipe_name(self) -> str:
        recipe = recipe_of(self)
        return recipe.name if recipe is not None else type(self).__name__

    def settings(self) -> dict[str, Any]:
        """Every setting, flat: the evaluation protocol's, then the recipe's own."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "evaluation"}
        return {**self.evaluation.settings(), **own}


@dataclass
class SpartaSettings(CoalitionTrainingSettings):
    evaluation_protocol: ClassVar[type[Protocol]] = SelectedCheckpoint

    iterations: int = setting(3, ge=1)
    # the reference DPO learning rate (7B models); tiny CPU models need more
    lr: float = setting(1e-6, gt=0)
    beta: float = setting(0.1, gt=0, doc="DPO temperature")
    random_match_prob: float = setting(0.2, ge=0, le=1, doc="P(a random opponent) instead of a close one")
    num_opponents: int = setting(3, ge=1, doc="closest-reputation members an opponent is drawn from")
    # prompt: the judge writes a 1-10 score; likelihood: 1 + 9 * its mean token prob
    judge: str = setting("auto", choices=JUDGE_MODES)
    initial_k: float = setting(10.0, gt=0, doc="reputation step size, decayed to min_k")
    min_k: float = setting(5.0, gt=0)
    decay_rate: float = setting(0.9, gt=0, le=1)
    decay_steps: int = setting(10, ge=1)
    scaling_factor: float = setting(20.0, gt=0)
    window: int = setting(10, ge=1, doc="recent reputation changes whose spread is a member's deviation")
    min_deviation: float = setting(0.1, gt=0)
    epsilon: float = setting(0.01, gt=0)


@dataclass
class MultiagentFinetuningSettings(CoalitionTrainingSettings):
    evaluation_protocol: ClassVar[type[Protocol]] = Debate
    evaluation_defaults: ClassVar[dict[str, Any]] = {"rounds": 2}  # the reference's debate length

    # loss weight of critique turns that fixed a wrong first answer (1 - it: those that stayed right)
    fixed_weight: float = setting(0.5, ge=0, le=1)


def flat_setting_names(settings_class: type[CoalitionTrainingSettings]) -> list[str]:
    """Every flat setting of a coalition recipe: its own and its evaluation protocol's."""
    own = [f.name for f in dataclasses.fields(settings_class) if f.name != "evaluation"]
    evaluation = settings_class.evaluation_protocol(**settings_class.evaluation_defaults)
    return list(dict.fromkeys([*evaluation.settings(), *own]))


def make_coalition_settings(name: str, **settings: Any) -> CoalitionTrainingSettings:
    """A coalition recipe's settings from flat keys (``--set``): its own keys to its settings class, the
    rest to its evaluation protocol (over the recipe's defaults for it)."""
    cls: type[CoalitionTrainingSettings] = get_recipe(name, "coalition").settings
    own = {f.name for f in dataclasses.fields(cls) if f.name != "evaluation"}
    known = flat_setting_names(cls)
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ConfigError(f"{name!r} has no setting {unknown[0]!r}{setting_hint(unknown[0], known, SETTING_SYNONYMS)}")
    rest = {k: v for k, v in settings.items() if k not in own}
    evaluation = make_protocol(cls.evaluation_protocol(**cls.evaluation_defaults), **rest)  # checks the types
    return cls(evaluation=evaluation, **{k: v for k, v in settings.items() if k in own})


__all__ = ["CoalitionTrainingSettings", "SpartaSettings", "MultiagentFinetuningSettings", "JUDGE_MODES",
           "make_coalition_settings", "flat_setting_names"]
