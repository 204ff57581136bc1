import gymnasium as gym
import numpy as np
import pytest

import coalition_gym  # noqa: F401  (registers the ids)
from coalition_gym.envs.wrappers import DiscreteChoiceWrapper, HashedNgrams
from coalition_gym.errors import ActionError, ConfigError


def forward_env(**kw):
    """LLM-Blender where the policy is the ranker and forwards one candidate (top-1, no fuser)."""
    env = gym.make("coalition_gym/LLMBlender-v0", helper_seat="ranker", ranking="listwise", top_k=1, fuser=None,
                   task_kwargs={"size": 30})
    return DiscreteChoiceWrapper(env, [f"Ranking: [{k}]" for k in range(1, 5)], **kw)


def test_hashed_ngrams_are_deterministic_bounded_and_informative():
    f = HashedNgrams(dim=64)
    a, b = f("Calculate 3 + 4."), f("Calculate 3 + 4.")
    assert a.dtype == np.float32 and a.shape == (64,) and np.array_equal(a, b)
    assert np.abs(a).max() <= 1.0 and np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert not np.array_equal(a, f("Spell this word backward: house"))
    assert not f("").any()


def test_stable_baselines3_check_env_passes():
    from stable_baselines3.common.env_checker import check_env

    check_env(forward_env(), warn=True)


def test_choice_forwards_that_candidate():
    env = forward_env()
    obs, info = env.reset(seed=1)
    answers = env.unwrapped.pending_ask.info["answers"]
    obs, reward, done, _, info = env.step(2)
    assert done and info["system_answer"] == answers[2] and not obs.any()


def test_bad_actions_and_featurizers():
    env = forward_env()
    env.reset(seed=0)
    for bad in (4, -1, 1.5, "2", True):
        with pytest.raises(ActionError):
            env.step(bad)
    with pytest.raises(ConfigError, match="does not fit"):
        wrapped = forward_env(featurizer=lambda text: np.full(8, 3.0, dtype=np.float32))
        wrapped.reset(seed=0)
    with pytest.raises(ConfigError, match="n_choices"):
        DiscreteChoiceWrapper(gym.make("coalition_gym/MajorityVote-v0"), lambda ask: ["a"])


MEMBERS = ["mathy", "wordy", "logician"]


def router_env(split):
    from coalition_gym.tasks import make_mixture

    task = make_mixture("mix:rg/basic_arithmetic,rg/letter_counting,rg/syllogism", size=150)
    env = gym.make("coalition_gym/PromptRouting-v0", task=task, collaborators="sim:specialists",
                   helper_seat="router", split=split)
    return DiscreteChoiceWrapper(env, MEMBERS)


def held_out_score(env, pick, n=240):
    scores = []
    for i, item in enumerate(env.unwrapped.system.items[:n]):
        obs, _ = env.reset(seed=i, options={"item_id": item.id})
        _, reward, done, _, _ = env.step(pick(obs))
        assert done
        scores.append(reward)
    return float(np.mean(scores))


@pytest.mark.slow
def test_ppo_learns_a_router_that_beats_random_and_the_best_single_model():
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", router_env("train"), n_steps=256, batch_size=64, learning_rate=3e-3, gamma=0.0,
                seed=0, verbose=0)
    model.learn(2048)
    test = router_env("test")
    rng = np.random.default_rng(0)
    learned = held_out_score(test, lambda obs: int(model.predict(obs, deterministic=True)[0]))
    random_routing = held_out_score(test, lambda obs: int(rng.integers(len(MEMBERS))))
    best_single = max(held_out_score(test, lambda obs, k=k: k) for k in range(len(MEMBERS)))
    assert learned > random_routing + 0.1 and learned > best_single + 0.1


def test_a_routing_choice_is_not_the_policys_answer():
    env = gym.make("coalition_gym/PromptRouting-v0", helper_seat="router", task_kwargs={"size": 20})
    env.reset(seed=0)
    done, info = False, {}
    while not done:
        _, _, done, _, info = env.step("[[1]]")
    assert info["policy_answer"] is None and info["policy_score"] == 0.0  # "[[1]]" picked a member; it answered nothing
