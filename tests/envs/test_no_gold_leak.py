"""What a policy sees: no gold answer and no scorer data in any observation, info or pending_ask, for
every env id. The collaborators here never say the gold, so any canary that shows up leaked."""

import dataclasses
import json

import gymnasium as gym
import pytest
from conftest import ListTask, Scripted

import coalition_gym  # noqa: F401  (registers the ids)
from coalition_gym.agents.pools import Pool
from coalition_gym.envs.registration import ENV_IDS

CANARY = "CANARY"


class SecretTask(ListTask):
    """Gold answers and scorer data (tests, references) that no collaborator ever writes."""

    name = "secret"

    def __init__(self):
        super().__init__()
        self._items = [dataclasses.replace(it, gold=f"{CANARY}-gold-{k}",
                                           meta={"test": f"assert f() == '{CANARY}-test'", "reference": CANARY})
                       for k, it in enumerate(self._items)]


def reply(ask) -> str:
    if ask.role == "route":
        return "atlas"
    if ask.role in ("rank_pair", "rank_list"):
        return "Answer: A"
    return "Some reasoning.\nAnswer: 0"


def pool() -> Pool:
    members = {name: Scripted(reply, identity=name) for name in ("atlas", "borealis")}
    helpers = {name: Scripted(reply, identity=name) for name in ("judge", "fuser")}
    return Pool(members=members, helpers=helpers, name="scripted", dev_scores={"atlas": 0.6, "borealis": 0.5})


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_no_gold_or_scorer_data_reaches_the_policy(env_id):
    env = gym.make(env_id, task=SecretTask(), collaborators=pool(), split="test")
    seen = []
    obs, info = env.reset(seed=0)
    for _ in range(6):
        seen += [obs, info, env.get_wrapper_attr("pending_ask")]
        obs, reward, terminated, truncated, info = env.step("Some reasoning.\nAnswer: 1")
        if terminated or truncated:
            seen += [obs, info]
            obs, info = env.reset()
    text = json.dumps(seen, default=repr)
    assert "Answer: 1" in text or "policy_asked" in text  # the trace is real
    assert CANARY not in text
