"""Each adversarial profile does what agents/adversaries.py says, measurably; honest pools are unchanged."""

from __future__ import annotations

import pytest

from coalition_gym import System, SystemSpec, make_protocol, make_task, run_episodes
from coalition_gym.agents.adversaries import ADVERSARIES, STYLE_LINE
from coalition_gym.agents.pools import load_pool, pool_from_config
from coalition_gym.agents.simulated import DEFAULT_HELPERS, AgentProfile, SimulatedAgent, adversary_profile
from coalition_gym.errors import ConfigError
from coalition_gym.types import Ask, Message, SamplingParams

TASK = make_task("rg/basic_arithmetic", size=120)
ITEMS = list(TASK.items("test"))


def ask(item, member="x", seed=0, role="answer", messages=(), **info):
    return Ask(member=member, messages=tuple(messages) or (Message("user", item.question),),
               params=SamplingParams(temperature=1.0), seed=seed, role=role, item=item, info=info)


def agent(kind, name="mole"):
    return SimulatedAgent(adversary_profile(kind, name))


def test_format_breaker_replies_never_parse():
    mole = agent("format_breaker")
    replies = [mole.reply(ask(it, seed=s, role=role)) for it in ITEMS[:40] for s in range(3)
               for role in ("answer", "debate", "feedback", "fuse")]
    assert all(TASK.extract(text, ITEMS[0]) is None for text in replies)


def test_confidently_wrong_is_wrong_certain_and_self_consistent():
    mole = agent("confidently_wrong")
    for it in ITEMS[:40]:
        texts = [mole.reply(ask(it, seed=s)) for s in range(5)]
        answers = {TASK.extract(t, it) for t in texts}
        assert len(answers) == 1 and answers != {it.gold}  # one answer at temperature 1, and wrong
        assert all("confidence: 100%" in t for t in texts)
    # SLM-MUX reads self-consistency as confidence: the saboteur's is always the maximum
    results = run_episodes(System.build(SystemSpec(make_protocol("slm_mux", temperature=1.0), TASK, {"mole": mole},
                                                   ["mole"], split=None)), ITEMS[:30], seed=0)
    assert all(r.outcome.details["confidence"]["mole"] == 1.0 and r.score == 0 for r in results)


def test_colluders_share_one_wrong_answer_per_item():
    a, b = agent("colluders", "a"), agent("colluders", "b")
    for it in ITEMS[:40]:
        ans_a, ans_b = TASK.extract(a.reply(ask(it, "a", 1)), it), TASK.extract(b.reply(ask(it, "b", 2)), it)
        assert ans_a == ans_b != it.gold
    # other profiles keep their own wrong answers: they agree with each other far less often
    c, d = agent("confidently_wrong", "c"), agent("confidently_wrong", "d")
    same = sum(TASK.extract(c.reply(ask(it)), it) == TASK.extract(d.reply(ask(it)), it) for it in ITEMS)
    assert same < len(ITEMS) / 2


def _adoption(kind: str) -> float:
    """Fraction of (item, honest member) pairs whose final debate answer is the adversary's answer."""
    pool = load_pool("sim:independent")
    backends = {**pool.backends(), "agent4": agent(kind, "agent4")}
    results = run_episodes(System.build(SystemSpec(make_protocol("debate", rounds=2), TASK, backends, pool.member_names,
                                                   split=None)),
                           ITEMS, seed=0)
    adopted = total = 0
    for r in results:
        item = next(it for it in ITEMS if it.id == r.item_id)
        wrong = backends["agent4"].sabotage_answer(item)
        last = [t for t in r.outcome.transcript if t.round == 1 and t.member != "agent4"]
        adopted += sum(t.answer == wrong for t in last)
        total += len(last)
    return adopted / total


def test_persuader_is_adopted_more_often_than_an_equally_wrong_plain_member():
    persuaded, plain = _adoption("persuader"), _adoption("confidently_wrong")
    assert persuaded > plain + 0.1, (persuaded, plain)


def test_honest_agents_with_zero_persuadability_ignore_the_persuader():
    item = ITEMS[0]
    text = agent("persuader").reply(ask(item))
    shown = [Message("user", item.question), Message("assistant", "I get 1.\nAnswer: 1"),
             Message("user", f"Agent 1: {text}")]
    wrong = agent("persuader").sabotage_answer(item)
    for p, expect_some in ((0.0, False), (1.0, True)):
        honest = SimulatedAgent(AgentProfile("h", skill=0.0, persuadability=p, conformity=0.0, recognition=0.0))
        answers = [TASK.extract(honest.reply(ask(item, "h", s, "debate", shown, own_previous="1",
                                                 peer_answers=(wrong,))), item) for s in range(40)]
        assert (wrong in answers) is expect_some


def test_judge_targeting_is_preferred_by_the_simulated_ranker_over_a_correct_answer():
    judge = SimulatedAgent(DEFAULT_HELPERS["judge"])
    mole = agent("judge_targeting")
    wins = {}
    for styled in (True, False):
        count = 0
        for it in ITEMS:
            wrong = mole.sabotage_answer(it)
            bad = mole.reply(ask(it)) if styled else f"I get {wrong}.\nAnswer: {wrong}"
            good = f"I get {it.gold}.\nAnswer: {it.gold}"
            verdict = judge.reply(ask(it, "judge", role="rank_pair", answers=(wrong, it.gold),
                                      messages=[Message("user", f"Response A:\n{bad}\n\nResponse B:\n{good}")]))
            count += verdict.endswith("[[A]]")
        wins[styled] = count / len(ITEMS)
    assert STYLE_LINE in mole.reply(ask(ITEMS[0]))
    assert wins[True] > wins[False] + 0.2, wins  # style_bias 0.5 on top of judge_skill 0.8


def test_style_bias_changes_nothing_on_honest_candidates():
    """The default judge got a style_bias; its verdicts on honest text are those of the old judge."""
    biased = SimulatedAgent(DEFAULT_HELPERS["judge"])
    plain = SimulatedAgent(AgentProfile("judge", skill=0.5, judge_skill=0.8))
    for it in ITEMS[:30]:
        a = ask(it, "judge", seed=3, role="rank_list", answers=(it.gold, "1", "2"),
                messages=[Message("user", "[1]\nAnswer: x\n\n[2]\nAnswer: 1")])
        assert biased.reply(a) == plain.reply(a)
    assert biased.identity != plain.identity  # but the cache tells them apart


def test_pool_files_seat_adversaries_next_to_honest_members(tmp_path):
    pool = pool_from_config({"members": [{"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"},
                                         {"name": "mole", "backend": "sim", "profile": "persuader"},
                                         {"name": "c2", "backend": "sim", "profile": {"adversary": "colluders"}}]})
    assert pool.members["mole"].profile.adversary == "persuader"
    assert pool.members["c2"].profile.adversary == "colluders"
    with pytest.raises(ConfigError, match="confidently_wrong, persuader, colluders, format_breaker, judge_targeting"):
        pool_from_config({"members": [{"name": "m", "backend": "sim", "profile": "saboteur"}]})
    with pytest.raises(ConfigError, match="adversary='saboteur'; use one of confidently_wrong"):
        pool_from_config({"members": [{"name": "m", "backend": "sim", "profile": {"adversary": "saboteur"}}]})
    file = tmp_path / "pool.yaml"
    file.write_text("members:\n  - {name: atlas, backend: sim, model: sim:demo/atlas}\n"
                    "  - {name: mole, backend: sim, profile: format_breaker}\n")
    assert load_pool(str(file)).members["mole"].profile.adversary == "format_breaker"


def test_every_profile_is_documented_and_built():
    import coalition_gym.agents.adversaries as module

    for kind in ADVERSARIES:
        assert f"``{kind}``" in module.__doc__
        assert adversary_profile(kind, "m").adversary == kind
    with pytest.raises(ConfigError, match="use one of confidently_wrong"):
        adversary_profile("nope", "m")
