"""Each training method as a small strategy: how it rolls out, what it rewards, how it updates.
The one loop in :mod:`.trainer` calls them.

| method | rollouts | reward | update |
|---|---|---|---|
| crl | the protocol, policy seated with frozen collaborators | system score | clipped PG, group advantages |
| crl, ``reward="negate"`` | the same | minus the system score | the same; dev selection keeps the lowest score |
| grpo-indiv | the policy alone (majority vote of one) | its own score | clipped PG, seq-mean-token-mean |
| dapo-indiv | the policy alone | its own score + overlong penalty | clip-higher, dynamic sampling |
| raft | the protocol | system score | SFT on the policy's calls of executions at or above the threshold |
| nudge | none | - | none: picks the system prompt with the best collaborative dev score |
| base | none | - | none |
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from ..errors import ConfigError
from .advantages import broadcast, group_advantages, overlong_penalty
from .config import CONFIGS, DAPOIndivConfig, NudgeConfig, PolicyGradientConfig, RAFTConfig, TrainConfig
from .rollouts import Rollout

if TYPE_CHECKING:
    from .trainer import Trainer


def _calls_with_tokens(rollouts: Sequence[Rollout]) -> list[Any]:
    return [c for r in rollouts for c in r.calls if c.completion_ids]


class Method:
    name: ClassVar[str] = ""
    trains: ClassVar[bool] = True  # False: evaluated (and, for nudge, selected) without weight updates

    def __init__(self, config: TrainConfig):
        self.config = config

    @property
    def solo(self) -> bool:
        return self.config.solo

    @property
    def selection_mode(self) -> str:
        """The mode the method optimises, in which its dev checkpoints are compared."""
        return "solo" if self.solo else "collab"

    @property
    def negated(self) -> bool:
        """Trained as an adversary: rewards and dev selection flipped (``reward="negate"``)."""
        return getattr(self.config, "reward", "system") == "negate"

    @property
    def selection_sign(self) -> float:
        """+1: the best dev checkpoint has the highest score; -1 (negated): the lowest."""
        return -1.0 if self.negated else 1.0

    def reward(self, rollout: Rollout) -> float:
        return self.selection_sign * self.base_reward(rollout)

    def base_reward(self, rollout: Rollout) -> float:
        return rollout.solo_score if self.solo else rollout.reward

    def update(self, trainer: "Trainer", rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        """One update on a step's batch: (metrics, per-rollout advantages or None). Methods that do not
        train (``trains = False``) never get a batch; one that is asked anyway says so."""
        raise ConfigError(f"training method {self.name!r} does not update weights (trains={self.trains}); "
                          "the trainer calls run_untrained for it")

    def run_untrained(self, trainer: "Trainer") -> None:
        """Methods that do not train: whatever they do instead (nothing for Base)."""


class PolicyGradient(Method):
    """Group-relative advantages, broadcast to every policy call of an execution (uniform credit), and
    the clipped policy gradient normalised over the whole batch."""

    config: PolicyGradientConfig

    def update(self, trainer: "Trainer", rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        cfg = self.config
        adv = group_advantages(rewards, [r.group for r in rollouts], eps=cfg.advantage_eps,
                               scale=cfg.scale_advantages)
        index_of = {r.index: k for k, r in enumerate(rollouts)}
        calls = _calls_with_tokens(rollouts)
        per_call = broadcast(adv, [index_of[c.rollout] for c in calls]) if calls else np.zeros(0)
        return trainer.policy_gradient_update(calls, [float(a) for a in per_call]), [float(a) for a in adv]


class CRL(PolicyGradient):
    name = "crl"


class GRPOIndiv(PolicyGradient):
    name = "grpo-indiv"


class DAPOIndiv(PolicyGradient):
    name = "dapo-indiv"

    def base_reward(self, rollout: Rollout) -> float:
        cfg = self.config
        assert isinstance(cfg, DAPOIndivConfig)
        longest = max((len(c.completion_ids) for c in rollout.calls), default=0)
        return rollout.solo_score + overlong_penalty(longest, cfg.overlong_limit, cfg.overlong_cache)


class RAFT(Method):
    name = "raft"
    config: RAFTConfig

    def update(self, trainer: "Trainer", rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        winners = {r.index for r, w in zip(rollouts, rewards) if w >= self.config.raft_threshold}
        kept = _calls_with_tokens([r for r in rollouts if r.index in winners])
        metrics = trainer.sft_update(kept)
        metrics["kept_executions"] = len(winners)
        return metrics, None


class Nudge(Method):
    name = "nudge"
    trains = False
    config: NudgeConfig

    def run_untrained(self, trainer: "Trainer") -> None:
        """No weight update; the candidate system prompt with the best collaborative dev score."""
        best = None
        for k, prompt in enumerate(self.config.nudge_prompts):
            result = trainer.evaluate(trainer.dev_items(), "collab", system_prompt=prompt)
            trainer.metrics.write({"step": k, "candidate": prompt, "dev_score": result.mean})
            if best is None or result.mean > best[0].mean:
                best = (result, prompt)
        assert best is not None
        trainer.state.system_prompt = best[1]
        trainer.record_best(best[0], step=0)


class Base(Method):
    name = "base"
    trains = False

    def run_untrained(self, trainer: "Trainer") -> None:
        trainer.record_best(trainer.evaluate(trainer.dev_items(), "collab"), step=0)


#: method name -> its strategy class; extended by :func:`register_method`
METHOD_CLASSES: dict[str, type[Method]] = {m.name: m for m in (CRL, GRPOIndiv, DAPOIndiv, RAFT, Nudge, Base)}


def register_method(method_class: type[Method], config_class: type[TrainConfig]) -> None:
    """Add a training method: its strategy (how it rolls out, rewards and updates; ``name`` names it)
    and its config class (a TrainConfig subclass whose ``method`` default is that name). ``cgym train
    --method NAME`` and ``make_config(NAME, ...)`` then accept it in this process."""
    name = getattr(method_class, "name", None)
    if not (isinstance(method_class, type) and issubclass(method_class, Method)) or not name:
        raise ConfigError(f"register_method needs a Method subclass with a name, got {method_class!r}")
    if not (isinstance(config_class, type) and issubclass(config_class, TrainConfig)):
        raise ConfigError(f"register_method needs a TrainConfig subclass, got {config_class!r}")
    if (CONFIGS.get(name, config_class) is not config_class
            or METHOD_CLASSES.get(name, method_class) is not method_class):
        raise ConfigError(f"training method {name!r} is already registered")
    CONFIGS[name] = config_class
    METHOD_CLASSES[name] = method_class


def make_method(config: TrainConfig) -> Method:
    return METHOD_CLASSES[config.method](config)


__all__ = ["Method", "PolicyGradient", "CRL", "GRPOIndiv", "DAPOIndiv", "RAFT", "Nudge", "Base", "METHOD_CLASSES",
           "make_method", "register_method"]
