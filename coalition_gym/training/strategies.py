"""Each policy-training recipe's strategy: how it rolls out, what it rewards, how it updates. The
trainer's loop (:mod:`.trainer`) calls them with every seat's :class:`~.policy_updates.PolicyUpdates` (a policy
is a team of one seat; the team's strategy is :class:`~.team.strategy.TeamCRL`); a strategy never calls back into
the trainer. Besides rollouts, reward and update, a strategy says what a step's metric row and the probe's
record hold, and what the report scores. Names and settings classes are bound in :mod:`.builtin_recipes`.

| recipe | rollouts | reward | update |
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

from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from .advantages import broadcast, group_advantages, overlong_penalty
from .config import DAPOIndivConfig, NudgeConfig, PolicyGradientConfig, RAFTConfig, TrainConfig
from .diagnostics import signal_metrics
from .reporting import ReportInputs, policy_scores
from .rollouts import Rollout

if TYPE_CHECKING:  # the updates need torch; importing the strategies must not
    from .policy_updates import PolicyUpdates
    from .probe import ProbeResult


def _calls_with_tokens(rollouts: Sequence[Rollout]) -> list[Any]:
    return [c for r in rollouts for c in r.calls if c.completion_ids]


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else 0.0


def only_seat(updates: Mapping[str, PolicyUpdates]) -> PolicyUpdates:
    """The one seat's updates of a single policy's run."""
    if len(updates) != 1:
        raise ConfigError(f"a single policy's recipe trains one seat; got {list(updates)}")
    return next(iter(updates.values()))


class Strategy:
    """A policy recipe's rollouts, reward and update inside the trainer's loop (one per recipe; the
    recipe's name is in its ``register_recipe`` call alone)."""

    trains: ClassVar[bool] = True  # False: evaluated (and, for nudge, selected) without weight updates
    # True: the report compares the trained seats with themselves untrained on test (a team); False: with the
    # Base run's per-item scores, when given (a policy's recipes, which run Base beside them)
    compares_with_untrained: ClassVar[bool] = False
    # the test evaluations of the report ("without": the collaborators alone, where they form a coalition)
    report_modes: ClassVar[tuple[str, ...]] = ("collab", "solo", "without")

    def __init__(self, config: TrainConfig):
        self.config = config

    @property
    def solo(self) -> bool:
        return self.config.solo

    @property
    def selection_mode(self) -> str:
        """The mode the recipe optimises, in which its dev checkpoints are compared."""
        return "solo" if self.solo else "collab"

    @property
    def negated(self) -> bool:
        """Trained as an adversary: rewards and dev selection flipped (only the RL recipes can be)."""
        return False

    @property
    def probe_groups(self) -> int:
        """Groups the pre-training probe rolls out (:mod:`.probe`); 0: no probe (no group-relative advantages)."""
        return 0

    @property
    def selection_sign(self) -> float:
        """+1: the best dev checkpoint has the highest score; -1 (negated): the lowest."""
        return -1.0 if self.negated else 1.0

    def reward(self, rollout: Rollout) -> float:
        return self.selection_sign * self.base_reward(rollout)

    def base_reward(self, rollout: Rollout) -> float:
        return rollout.own_score if self.solo else rollout.reward

    def step_signal(self, rollouts: Sequence[Rollout], rewards: Sequence[float], advantages: Sequence[float] | None
                    ) -> dict[str, Any]:
        """A step's learning-signal numbers for its metric row (:mod:`.diagnostics`): the system's and the
        policy's own score, its calls, and whether its groups can teach it anything."""
        return {"system_score_mean": _mean([r.reward for r in rollouts]),
                "policy_score_mean": _mean([r.own_score for r in rollouts]),
                "policy_calls": sum(len(r.calls) for r in rollouts), **signal_metrics(rollouts, rewards, advantages)}

    def probe_record(self, results: Mapping[str, ProbeResult]) -> dict[str, Any]:
        """What the metrics and the report keep of the probe: the policy's numbers."""
        (result,) = results.values()
        return result.to_dict()

    def report(self, inputs: ReportInputs, weights: Mapping[str, Any]) -> dict[str, Any]:
        """The run's report from the trainer's test results (:func:`.reporting.policy_scores`)."""
        return policy_scores(inputs, weights)

    def update(self, updates: Mapping[str, PolicyUpdates], rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        """One update on a step's batch with the seat's updates (seat -> its PolicyUpdates; a policy's recipe
        has one): (metrics, per-rollout advantages or None). Strategies that do not train (``trains = False``)
        never get a batch; one that is asked anyway says so."""
        raise ConfigError(f"training recipe {self.config.method!r} does not update weights (trains={self.trains}); "
                          "the trainer selects among its candidate prompts instead")

    def candidate_prompts(self) -> list[str] | None:
        """Strategies that do not train: the system prompts the trainer scores on dev, keeping the best
        (each written to the metrics); None: the current prompt, evaluated once (Base)."""
        return None


class PolicyGradient(Strategy):
    """Group-relative advantages, broadcast to every policy call of an execution (uniform credit), and
    the clipped policy gradient normalised over the whole batch."""

    config: PolicyGradientConfig

    @property
    def negated(self) -> bool:
        return self.config.reward == "negate"

    @property
    def probe_groups(self) -> int:
        return self.config.probe_groups

    def update(self, updates: Mapping[str, PolicyUpdates], rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        cfg = self.config
        adv = group_advantages(rewards, [r.group for r in rollouts], eps=cfg.advantage_eps,
                               scale=cfg.scale_advantages)
        index_of = {r.index: k for k, r in enumerate(rollouts)}
        calls = _calls_with_tokens(rollouts)
        per_call = broadcast(adv, [index_of[c.rollout] for c in calls]) if calls else np.zeros(0)
        metrics = only_seat(updates).policy_gradient(calls, [float(a) for a in per_call], eps_low=cfg.eps_low,
                                          eps_high=cfg.eps_high, aggregation=cfg.aggregation,
                                          passes=cfg.updates_per_batch)
        return metrics, [float(a) for a in adv]


class CRL(PolicyGradient):
    """C-RL: rollouts inside the protocol, reward = the system's score."""


class GRPOIndiv(PolicyGradient):
    """GRPO on solo rollouts: reward = the policy's own score."""


class DAPOIndiv(PolicyGradient):
    def base_reward(self, rollout: Rollout) -> float:
        cfg = self.config
        assert isinstance(cfg, DAPOIndivConfig)
        longest = max((len(c.completion_ids) for c in rollout.calls), default=0)
        return rollout.own_score + overlong_penalty(longest, cfg.overlong_limit, cfg.overlong_cache)


class RAFT(Strategy):
    config: RAFTConfig

    def update(self, updates: Mapping[str, PolicyUpdates], rollouts: Sequence[Rollout], rewards: Sequence[float]
               ) -> tuple[dict[str, Any], list[float] | None]:
        winners = {r.index for r, w in zip(rollouts, rewards) if w >= self.config.raft_threshold}
        kept = _calls_with_tokens([r for r in rollouts if r.index in winners])
        metrics = only_seat(updates).sft(kept)
        metrics["kept_executions"] = len(winners)
        return metrics, None


class Nudge(Strategy):
    """No weight update; the candidate system prompt with the best collaborative dev score."""

    trains = False
    config: NudgeConfig

    def candidate_prompts(self) -> list[str] | None:
        return list(self.config.nudge_prompts)


class Base(Strategy):
    """The untrained policy, evaluated only."""

    trains = False


__all__ = ["only_seat", "Strategy", "PolicyGradient", "CRL", "GRPOIndiv", "DAPOIndiv", "RAFT", "Nudge", "Base"]
