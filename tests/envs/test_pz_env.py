import pytest
from conftest import answer_text
from pettingzoo.test import parallel_api_test

import coalition_gym
from coalition_gym import parallel_env
from coalition_gym.errors import ActionError, ConfigError, EpisodeStateError


@pytest.mark.parametrize("env_id", list(coalition_gym.ENV_IDS))
def test_parallel_api(env_id):
    parallel_api_test(parallel_env(env_id), num_cycles=50)


def test_every_member_is_an_agent_and_shares_the_system_reward():
    env = parallel_env("coalition_gym/Debate-v0", rounds=2)
    obs, infos = env.reset(seed=0)
    assert env.agents == ["atlas", "borealis", "cirrus", "delta"]
    gold = env._ctx.item.gold
    steps = 0
    while env.agents:
        actions = {a: answer_text(gold) for a in env.agents}
        obs, rewards, terms, truncs, infos = env.step(actions)
        steps += 1
    assert steps == 2 and set(rewards.values()) == {1.0} and all(terms.values())
    assert all(i["policy_score"] == 1.0 for i in infos.values())


def test_only_asked_agents_act_and_samples_come_one_per_step():
    env = parallel_env("coalition_gym/SLMMux-v0", samples=2, automated=["cirrus", "delta"])
    obs, infos = env.reset(seed=1)
    assert env.agents == ["atlas", "borealis"] and all(i["asked"] for i in infos.values())
    env.step({"atlas": "Answer: 1", "borealis": "Answer: 2"})
    obs, rewards, terms, _, infos = env.step({"atlas": "Answer: 1", "borealis": "Answer: 3"})
    assert all(terms.values())
    details = infos["atlas"]["details"]
    assert details["confidence"]["atlas"] == 1.0 and details["confidence"]["borealis"] == 0.5


def test_blender_helpers_are_not_agents():
    env = parallel_env("coalition_gym/LLMBlender-v0")
    env.reset(seed=0)
    assert "judge" not in env.possible_agents and "fuser" not in env.possible_agents
    obs, rewards, terms, _, infos = env.step({a: "Answer: 4" for a in env.agents})
    assert all(terms.values()) and any(t["role"] == "fuse" for t in infos["atlas"]["transcript"])


def test_bad_actions_and_order():
    env = parallel_env("coalition_gym/MajorityVote-v0")
    with pytest.raises(EpisodeStateError):
        env.step({})
    env.reset(seed=0)
    with pytest.raises(ActionError, match="no action"):
        env.step({"atlas": "Answer: 1"})
    with pytest.raises(ActionError, match="str"):
        env.step({a: 1 for a in env.agents})
    env.step({a: "Answer: 1" for a in env.agents})
    with pytest.raises(EpisodeStateError, match="ended"):
        env.step({a: "Answer: 1" for a in env.possible_agents})
    with pytest.raises(ConfigError, match="automated"):
        parallel_env("coalition_gym/MajorityVote-v0", automated=["nobody"])


def test_same_seed_same_episode():
    def run(seed):
        env = parallel_env("coalition_gym/Debate-v0", rounds=2)
        obs, _ = env.reset(seed=seed)
        first = dict(obs)
        while env.agents:
            _, _, _, _, infos = env.step({a: "Answer: 5" for a in env.agents})
        return first, infos["atlas"]["transcript"]
    assert run(3) == run(3)
