"""The vector env: batched collaborator calls across sub-envs, same results as single envs, autoreset."""

import gymnasium as gym
import numpy as np
import pytest

import coalition_gym
from coalition_gym.envs.vector_env import CollaborationVectorEnv
from coalition_gym.errors import ActionError, ConfigError


def run_to_end(env, actions):
    obs, infos = env.reset(seed=0)
    done = np.zeros(env.num_envs, dtype=bool)
    rewards = np.zeros(env.num_envs)
    while not done.all():
        obs, r, term, trunc, infos = env.step(actions(obs))
        rewards = np.where(term & ~done, r, rewards)
        done |= term
    return rewards


@pytest.mark.parametrize("env_id", list(coalition_gym.ENV_IDS))
def test_make_vec_builds_the_batched_env(env_id):
    env = gym.make_vec(env_id, num_envs=3, task_kwargs={"size": 20})
    assert isinstance(env.unwrapped, CollaborationVectorEnv)
    obs, infos = env.reset(seed=1)
    assert len(obs) == 3 and all(isinstance(o, str) for o in obs)
    assert env.observation_space.contains(obs)
    rewards = run_to_end(env, lambda o: tuple("Answer: 1" for _ in o))
    assert ((0 <= rewards) & (rewards <= 1)).all()


def test_one_backend_call_per_wave_across_sub_envs():
    calls = {}
    for n in (1, 8):
        env = CollaborationVectorEnv(num_envs=n, protocol="debate", rounds=3)
        run_to_end(env, lambda o: tuple("Answer: 2" for _ in o))
        calls[n] = env.stats
    # the same number of backend calls per wave, n times as many asks in each
    assert calls[8].backend_calls == calls[1].backend_calls
    assert calls[8].batching_factor == pytest.approx(8 * calls[1].batching_factor)


def test_sub_envs_match_single_envs():
    vec = CollaborationVectorEnv(num_envs=4, protocol="llm_blender")
    obs, infos = vec.reset(seed=3)
    items = [vec._contexts[i].item.id for i in range(4)]
    seeds = [vec._contexts[i].seed for i in range(4)]
    _, rewards, term, _, vinfo = vec.step(tuple("Answer: 7" for _ in obs))
    assert term.all()
    for i in range(4):
        single = coalition_gym.CollaborationEnv(protocol="llm_blender")
        single.reset(options={"item_id": items[i], "episode_seed": seeds[i]})
        _, r, done, _, info = single.step("Answer: 7")
        assert done and r == rewards[i] and info["system_answer"] == vinfo["system_answer"][i]


def test_next_step_autoreset():
    env = CollaborationVectorEnv(num_envs=2, protocol="majority_vote")
    env.reset(seed=0)
    _, r, term, _, _ = env.step(("Answer: 1", "Answer: 2"))
    assert term.all()
    obs, r2, term2, _, infos = env.step((None, None))  # actions are ignored while resetting
    assert not term2.any() and (r2 == 0).all() and all(obs) and infos["policy_asked"].all()


def test_bad_input():
    env = CollaborationVectorEnv(num_envs=2, protocol="majority_vote")
    with pytest.raises(ActionError):
        env.step(("a", "b"))
    env.reset(seed=0)
    with pytest.raises(ActionError, match="2 sub-environments"):
        env.step(("a",))
    with pytest.raises(ActionError, match="str"):
        env.step(("a", 3))
    with pytest.raises(ConfigError):
        CollaborationVectorEnv(num_envs=0)


def test_ending_sub_episodes_are_scored_in_one_batch():
    """Every sub-episode that ends in a step has its system answer and the policy's own answer scored in one
    task.score_batch call (execution-based tasks run them together), with the same scores as one at a time."""
    env = CollaborationVectorEnv(num_envs=4, protocol="majority_vote", task_kwargs={"size": 20})
    task = env.template.system.task
    batches = []
    original = type(task).score_batch

    def counting(self, answers, items):
        batches.append(len(answers))
        return original(self, answers, items)

    env.reset(seed=0)
    type(task).score_batch = counting
    try:
        _, rewards, terminated, _, infos = env.step(tuple("Answer: 1" for _ in range(4)))
    finally:
        type(task).score_batch = original
    assert terminated.all() and batches == [8]  # 4 system answers + 4 own answers, one call
    for i in range(4):
        item = env.template.system.item(infos["item_id"][i])
        alone = original(task, ["1"], [item])[0].score
        assert infos["policy_score"][i] == alone
