from statistics import fmean

import pytest

from coalition_gym.agents import AgentProfile, SimulatedAgent, load_pool
from coalition_gym.agents.base import derive_seed
from coalition_gym.agents.simulated import plausible_wrong_answers
from coalition_gym.errors import BackendError, ConfigError, UnknownNameError
from coalition_gym.scorers.answers import extract_final_answer
from coalition_gym.types import Ask, Item, Message, SamplingParams

ITEMS = [Item(id=f"i{k}", question=f"Q{k}", gold=str(k * 7 % 101)) for k in range(2000)]


def ask(item, seed=0, temperature=0.7, role="answer", **info):
    return Ask("x", (Message("user", item.question),), seed=seed, params=SamplingParams(temperature=temperature),
               role=role, item=item, info=info)


def answers(agent, temperature=0.0, seed=0, items=ITEMS):
    return [extract_final_answer(s.text) for s in agent.generate([ask(i, seed, temperature) for i in items])]


def accuracy(agent, **kw):
    return fmean(a == i.gold for a, i in zip(answers(agent, **kw), ITEMS))


def test_deterministic_for_agent_prompt_and_seed():
    agent = SimulatedAgent(AgentProfile("a", skill=0.5))
    first = agent.generate([ask(i, seed=5) for i in ITEMS[:50]])
    assert first == agent.generate([ask(i, seed=5) for i in ITEMS[:50]])
    assert first != agent.generate([ask(i, seed=6) for i in ITEMS[:50]])


def test_batch_composition_does_not_change_a_reply():
    agent = SimulatedAgent(AgentProfile("a", skill=0.5))
    alone = agent.generate([ask(ITEMS[3], seed=1)])[0]
    batched = agent.generate([ask(i, seed=1) for i in ITEMS[:10]])[3]
    assert alone == batched


def test_skill_sets_accuracy_at_temperature_zero():
    for skill in (0.2, 0.5, 0.8):
        assert accuracy(SimulatedAgent(AgentProfile("a", skill=skill))) == pytest.approx(skill, abs=0.04)


def test_category_skill_and_difficulty():
    agent = SimulatedAgent(AgentProfile("a", skill=0.3, category_skill={"math": 0.9}))
    assert agent.p_knows(Item("x", "q", "1", category="math")) == 0.9
    assert agent.p_knows(Item("x", "q", "1", category="logic")) == 0.3
    assert agent.p_knows(Item("x", "q", "1", difficulty=0.9)) < 0.3 < agent.p_knows(Item("x", "q", "1", difficulty=0.1))


def test_correlated_agents_share_failures_and_wrong_answers():
    def both_wrong_same(p, q):
        a, b = answers(SimulatedAgent(p)), answers(SimulatedAgent(q))
        wrong = [(x, y) for x, y, i in zip(a, b, ITEMS) if x != i.gold and y != i.gold]
        return len(wrong) / len(ITEMS), fmean(x == y for x, y in wrong)

    joint_corr, same_corr = both_wrong_same(AgentProfile("a", 0.6, error_group="g", correlation=0.9),
                                            AgentProfile("b", 0.6, error_group="g", correlation=0.9))
    joint_ind, same_ind = both_wrong_same(AgentProfile("a", 0.6), AgentProfile("b", 0.6))
    assert joint_ind == pytest.approx(0.16, abs=0.04)  # 0.4 * 0.4 when independent
    assert joint_corr > joint_ind + 0.1
    assert same_corr > 0.8 > 0.5 > same_ind


def test_negative_correlation_makes_a_complementary_agent():
    group = SimulatedAgent(AgentProfile("a", 0.6, error_group="g", correlation=0.9))
    comp = SimulatedAgent(AgentProfile("c", 0.6, error_group="g", correlation=-0.6))
    ind = SimulatedAgent(AgentProfile("d", 0.6))
    def rescue(other):
        return fmean(not group.knows(i) and other.knows(i) for i in ITEMS)
    assert rescue(comp) > rescue(ind) + 0.05


def test_sampling_diversity_grows_with_temperature():
    agent = SimulatedAgent(AgentProfile("a", skill=0.4))
    def disagreement(t):
        first, second = answers(agent, t, seed=1), answers(agent, t, seed=2)
        return fmean(x != y for x, y in zip(first, second))
    assert disagreement(0.0) == 0.0
    assert disagreement(0.3) < disagreement(0.7) < disagreement(1.2)


def test_conformity_adopts_the_peer_majority_in_debate():
    stubborn = SimulatedAgent(AgentProfile("s", skill=0.0, conformity=0.0, recognition=0.0))
    follower = SimulatedAgent(AgentProfile("f", skill=0.0, conformity=1.0, recognition=0.0))
    item = ITEMS[1]
    own = stubborn.favourite_wrong_answer(item)
    peers = tuple(x for x in plausible_wrong_answers(item) if x != own)[:1] * 2
    debate = dict(role="debate", own_previous=own, peer_answers=peers)
    assert extract_final_answer(stubborn.reply(ask(item, 3, **debate))) == own
    assert extract_final_answer(follower.reply(ask(item, 3, **debate))) == peers[0]


def test_recognition_adopts_a_correct_peer():
    agent = SimulatedAgent(AgentProfile("r", skill=0.0, conformity=0.0, recognition=1.0))
    item = ITEMS[2]
    reply = agent.reply(ask(item, 0, role="debate", own_previous="x", peer_answers=(item.gold, "y")))
    assert extract_final_answer(reply) == item.gold


def test_format_errors_produce_unparseable_replies():
    agent = SimulatedAgent(AgentProfile("a", skill=0.9, format_error=1.0))
    assert all(a is None for a in answers(agent, items=ITEMS[:20]))


def test_replies_look_like_model_output():
    text = SimulatedAgent(AgentProfile("a")).reply(ask(ITEMS[4]))
    assert "\n" in text and text.splitlines()[-1].startswith("Answer: ")


def test_seeds_never_depend_on_the_coalition():
    assert derive_seed(1, "q", "atlas", 0) == derive_seed(1, "q", "atlas", 0)
    assert derive_seed(1, "q", "atlas", 0) != derive_seed(1, "q", "borealis", 0)
    assert derive_seed(1, "q", "atlas", 0) != derive_seed(1, "q", "atlas", 1)


def test_bad_profiles_and_asks():
    with pytest.raises(ConfigError, match="skill"):
        AgentProfile("a", skill=1.5)
    with pytest.raises(ConfigError, match="correlation"):
        AgentProfile("a", correlation=-2)
    with pytest.raises(BackendError, match="without its item"):
        SimulatedAgent(AgentProfile("a")).generate([Ask("a", (Message("user", "hi"),), seed=0)])


def test_presets_and_unknown_pool():
    pool = load_pool("sim:demo")
    assert pool.member_names == ["atlas", "borealis", "cirrus", "delta"]
    assert set(pool.helpers) == {"judge", "fuser"}
    with pytest.raises(UnknownNameError, match="sim:demo"):
        load_pool("sim:dem")
