"""--reward negate: the recipe's reward with its sign flipped, and dev selection keeping the lowest score."""

import pytest

from coalition_gym.errors import ConfigError
from coalition_gym.training.config import make_config
from coalition_gym.training.recipes import make_strategy
from coalition_gym.training.rollouts import Rollout


def rollout(system: float, solo: float) -> Rollout:
    return Rollout(index=0, item=None, group=0, reward=system, own_scores={"policy": solo})  # type: ignore[arg-type]


@pytest.mark.parametrize("method,expected", [("crl", 1.0), ("grpo-indiv", 0.25), ("dapo-indiv", 0.25)])
def test_negate_flips_the_methods_reward(method, expected):
    honest = make_strategy(make_config(method, preset="tiny"))
    adversary = make_strategy(make_config(method, preset="tiny", reward="negate"))
    r = rollout(system=1.0, solo=0.25)
    assert honest.reward(r) == pytest.approx(expected)
    assert adversary.reward(r) == pytest.approx(-expected)
    assert (honest.selection_sign, adversary.selection_sign) == (1.0, -1.0)


def test_reward_is_validated_and_only_rl_methods_have_it():
    with pytest.raises(ConfigError, match="reward='flip'; use one of system, negate"):
        make_config("crl", reward="flip")
    with pytest.raises(ConfigError, match="'reward' is not a setting of raft"):
        make_config("raft", reward="negate")
    assert make_strategy(make_config("raft")).selection_sign == 1.0
