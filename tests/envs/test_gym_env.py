import gymnasium as gym
import pytest
from conftest import answer_text
from gymnasium.utils.env_checker import check_env

import coalition_gym
from coalition_gym.envs import CollaborationEnv, protocol_of
from coalition_gym.errors import ActionError, ConfigError, EpisodeStateError, UnknownNameError

ENV_IDS = list(coalition_gym.ENV_IDS)


def play(env, policy, seed):
    obs, info = env.reset(seed=seed)
    rewards, infos, done = [], [info], False
    while not done:
        obs, reward, done, truncated, info = env.step(policy(obs, info))
        rewards.append(reward)
        infos.append(info)
        assert not truncated
    return rewards, infos


def gold_policy(env):
    return lambda obs, info: answer_text(env.unwrapped._ctx.item.gold)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_passes(env_id):
    env = gym.make(env_id, task_kwargs={"size": 20})
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_with_defaults_works_offline_and_rewards_the_system(env_id):
    env = gym.make(env_id)
    rewards, infos = play(env, gold_policy(env), seed=1)
    final, first = infos[-1], infos[0]
    assert all(r == 0.0 for r in rewards[:-1]) and rewards[-1] == final["system_score"]
    assert {"system_answer", "transcript", "item_id", "parsed", "cost"} <= set(final)
    if first["policy_asked"]:
        assert final["policy_score"] == 1.0 and final["policy_answer"] == env.unwrapped._ctx.item.gold
        assert any(t["member"] == "policy" for t in final["transcript"])
        assert first["messages"][-1]["role"] == "user"
    else:  # routing and cascades may never ask the policy: the first step ends the episode
        assert len(rewards) == 1 and final["policy_answer"] is None
    assert isinstance(env.observation_space.sample(), str)


def test_observation_is_the_policy_prompt_and_peers_appear_in_later_rounds():
    env = gym.make("coalition_gym/Debate-v0", rounds=2)
    obs, info = env.reset(seed=0)
    assert env.unwrapped._ctx.item.question in obs and info["round"] == 0
    obs, reward, done, _, info = env.step("Answer: 12345")
    assert not done and info["round"] == 1 and "Agent 1" in obs and "Answer: 12345" in obs  # own previous reply
    obs, reward, done, _, info = env.step("Answer: 12345")
    assert done and info["policy_answer"] == "12345" and info["policy_score"] == 0.0


def test_same_seed_same_episode():
    def transcript(seed):
        env = gym.make("coalition_gym/LLMBlender-v0")
        return play(env, lambda o, i: "Answer: 3", seed)[1][-1]["transcript"]
    assert transcript(5) == transcript(5)
    assert transcript(5) != transcript(6)


def test_mux_asks_the_policy_for_each_sample():
    env = gym.make("coalition_gym/SLMMux-v0", samples=4)
    rewards, infos = play(env, lambda o, i: "Answer: 1", seed=0)
    assert len(rewards) == 4 and infos[-1]["details"]["confidence"]["policy"] == 1.0


def test_unicode_action_and_unparseable_answer_are_recorded():
    env = gym.make("coalition_gym/MajorityVote-v0")
    env.reset(seed=2)
    assert env.action_space.contains("答案：四十二 🤖 — no final line")
    _, reward, done, _, info = env.step("答案：四十二 🤖 — no final line at all here")
    assert done and info["policy_answer"] is None and info["policy_score"] == 0.0
    assert info["transcript"][-1]["answer"] is None


def test_bad_actions_and_order_errors():
    env = gym.make("coalition_gym/MajorityVote-v0", disable_env_checker=True).unwrapped
    with pytest.raises(EpisodeStateError, match="reset"):
        env.step("Answer: 1")
    env.reset(seed=0)
    with pytest.raises(ActionError, match="str"):
        env.step(42)
    with pytest.raises(ActionError, match="max_action_chars"):
        env.step("x" * (env.action_space.max_length + 1))
    env.step("Answer: 1")
    with pytest.raises(EpisodeStateError, match="ended"):
        env.step("Answer: 1")


def test_unknown_names_get_suggestions():
    with pytest.raises(gym.error.NameNotFound, match="Did you mean: `Debate`"):
        gym.make("coalition_gym/Debat-v0")
    with pytest.raises(UnknownNameError, match="Debate-v0"):
        protocol_of("coalition_gym/Debat-v0")
    with pytest.raises(UnknownNameError, match="basic_arithmetic"):
        gym.make("coalition_gym/Debate-v0", task="rg/basic_arithmatic")
    with pytest.raises(UnknownNameError, match="sim:demo"):
        gym.make("coalition_gym/Debate-v0", collaborators="sim:demoo")
    with pytest.raises(UnknownNameError, match="atlas"):
        gym.make("coalition_gym/Debate-v0", members=["atlass"])
    with pytest.raises(ConfigError, match="no setting"):
        gym.make("coalition_gym/Debate-v0", roundz=2)


def test_policy_name_clash_and_missing_helper():
    with pytest.raises(ConfigError, match="clashes"):
        CollaborationEnv(policy_name="atlas")
    with pytest.raises(ConfigError, match="helper 'oracle'"):
        CollaborationEnv(protocol="llm_blender", ranker="oracle")


def test_alone_the_policy_is_a_coalition_of_one():
    env = CollaborationEnv(protocol="debate", members=[])
    rewards, infos = play(env, lambda o, i: answer_text(env._ctx.item.gold), seed=0)
    assert len(rewards) == 1 and rewards[-1] == 1.0 and infos[-1]["details"]["rounds"] == 1


def test_reset_options_pick_the_item():
    env = CollaborationEnv(protocol="majority_vote")
    item = env.system.items[7]
    env.reset(seed=0, options={"item_id": item.id})
    assert env._ctx.item == item
    with pytest.raises(UnknownNameError):
        env.reset(options={"item_id": "nope"})


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pending_ask_shows_no_gold_answer_or_scorer_data(env_id):
    env = gym.make(env_id, task_kwargs={"size": 20})
    env.reset(seed=3)
    ask = env.get_wrapper_attr("pending_ask")  # Gymnasium 1.x: wrappers do not forward attributes
    if ask is None:  # this protocol did not ask the policy first
        return
    assert env.unwrapped._ctx.item.gold  # the episode has one...
    assert ask.item.gold == "" and dict(ask.item.meta) == {}  # ...the policy does not see it
    assert ask.item.question  # the question itself stays


def test_environments_train_on_the_train_split_and_evaluate_on_test_when_told():
    from coalition_gym import parallel_env

    env = gym.make("coalition_gym/Debate-v0", task_kwargs={"size": 10})
    assert {it.id.split("/")[-2] for it in env.unwrapped.system.items} == {"train"}
    assert env.reset(seed=0)[1]["item_id"].split("/")[-2] == "train"
    test = gym.make("coalition_gym/Debate-v0", task_kwargs={"size": 10}, split="test")
    assert test.reset(seed=0)[1]["item_id"].split("/")[-2] == "test"
    assert {it.id.split("/")[-2] for it in parallel_env().system.items} == {"train"}
    with pytest.raises(ConfigError, match="held out.*split='test'"):
        gym.make("coalition_gym/MajorityVote-v0", task="humaneval", task_kwargs={"size": 2})
    assert gym.make("coalition_gym/MajorityVote-v0", task="humaneval", task_kwargs={"size": 2}, split="test")


def test_a_member_failing_in_the_seats_wave_ends_the_episode_without_asking_the_seat():
    """The wave that asks the policy fails on a frozen member: the seat is no longer 'asked' (its Ask belongs to a
    failed episode), and the next step ends the episode with the failure and reward 0, not a state error."""
    from coalition_gym.agents.base import Generator
    from coalition_gym.agents.pools import load_pool
    from coalition_gym.errors import BackendError

    class Broken(Generator):
        identity = "broken"

        def generate(self, asks):
            raise BackendError("the member's server is down")

    pool = load_pool({"broken": Broken(), "atlas": load_pool("sim:demo").members["atlas"]})
    env = CollaborationEnv(protocol="majority_vote", task="zoo:arith", task_kwargs={"size": 20}, collaborators=pool)
    obs, info = env.reset(seed=0)
    assert obs == "" and info["policy_asked"] is False
    _, reward, done, _, info = env.step("Answer: 1")
    assert done and reward == 0.0 and "server is down" in info["error"]
