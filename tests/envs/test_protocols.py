"""Hand-built cases for each protocol, driven by the runner with scripted generators."""

import pytest
from conftest import Scripted, answer_text

from coalition_gym.envs.protocols import EpisodeContext, make_protocol
from coalition_gym.envs.protocols.voting import plurality
from coalition_gym.envs.runner import run_programs
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError, EmptyCoalitionError, UnknownNameError
from coalition_gym.prompts import parse_pairwise, parse_ranking


def run_one(protocol, task, members, backends, dev_scores=None, seed=0, item=0):
    ctx = EpisodeContext(item=task.items()[item], task=task, members=tuple(members), seed=seed,
                         dev_scores=dev_scores or {})
    (outcome,) = run_programs([protocol.start(ctx)], backends)
    return outcome


def fixed(answers_by_member):
    """Members answer fixed values (a list cycles per call to that member)."""
    counters = {m: 0 for m in answers_by_member}

    def reply(ask):
        value = answers_by_member[ask.member]
        if isinstance(value, list):
            value = value[counters[ask.member] % len(value)]
            counters[ask.member] += 1
        return answer_text(value)
    return reply


# -- voting ----------------------------------------------------------------------------------------

def test_plurality_and_its_tie_rules():
    votes = [("a", "1"), ("b", "2"), ("c", "2"), ("d", "1"), ("e", None)]
    assert plurality(votes, "first")[0] == "1"  # "1" appeared first
    assert plurality(votes, "dev", {"a": 0.1, "b": 0.9})[0] == "2"  # b has the best dev score
    assert plurality(votes, "dev", {})[0] == "1"  # no dev scores: falls back to first
    assert plurality(votes, "first")[1] == {"1": 2, "2": 2}
    draws = {plurality(votes, "random", seed=s)[0] for s in range(40)}
    assert draws == {"1", "2"}
    assert plurality(votes, "random", seed=7) == plurality(list(reversed(votes)), "random", seed=7)
    assert plurality([("a", None)], "first") == (None, {})
    with pytest.raises(ConfigError, match="tie_break"):
        plurality(votes, "coin")


def test_majority_vote(task):
    gen = Scripted(fixed({"a": "7", "b": "7", "c": "3"}))
    out = run_one(make_protocol("majority_vote"), task, "abc", {"a": gen, "b": gen, "c": gen})
    assert out.answer == "7" and out.details["votes"] == {"7": 2, "3": 1}
    assert len(gen.calls) == 1 and len(gen.calls[0]) == 3  # one batched call


def test_majority_vote_tie_by_dev_score(task):
    gen = Scripted(fixed({"a": "1", "b": "2"}))
    proto = make_protocol("majority_vote")
    assert run_one(proto, task, "ab", {"a": gen, "b": gen}, dev_scores={"a": 0.2, "b": 0.8}).answer == "2"
    assert run_one(proto, task, "ab", {"a": gen, "b": gen}).answer == "1"


# -- debate ----------------------------------------------------------------------------------------

def test_debate_rounds_show_peers_and_vote_on_the_last_round(task):
    seen = []

    def reply(ask):
        seen.append(ask)
        if ask.round == 0:
            return answer_text({"a": "7", "b": "5", "c": "5"}[ask.member])
        return answer_text("7")  # everyone is persuaded in round 1

    gen = Scripted(reply)
    out = run_one(make_protocol("debate", rounds=2), task, "abc", {m: gen for m in "abc"})
    assert out.answer == "7" and out.details["rounds"] == 2
    assert len(gen.calls) == 2 and all(len(c) == 3 for c in gen.calls)
    later = [a for a in seen if a.round == 1]
    a_prompt = later[0].messages[-1].content
    assert later[0].member == "a" and "Agent 1" in a_prompt and "Agent 2" in a_prompt
    assert "Answer: 5" in a_prompt and later[0].messages[-2].content == answer_text("7")  # own previous
    assert later[0].info == {"own_previous": "7", "peer_answers": ("5", "5")}
    assert [t.round for t in out.transcript] == [0, 0, 0, 1, 1, 1]


def test_debate_default_is_three_rounds_and_full_history_grows(task):
    gen = Scripted(lambda ask: answer_text("8"))
    out = run_one(make_protocol("debate", history="full"), task, "ab", {"a": gen, "b": gen})
    assert out.details["rounds"] == 3 and len(gen.calls) == 3
    assert len(gen.calls[2][0].messages) == len(gen.calls[1][0].messages) + 2


def test_debate_coalition_of_one_answers_once(task):
    gen = Scripted(lambda ask: answer_text("7"))
    out = run_one(make_protocol("debate"), task, "a", {"a": gen})
    assert out.answer == "7" and out.details["rounds"] == 1 and len(gen.calls) == 1


def test_debate_tie_break_is_deterministic(task):
    gen = Scripted(fixed({"a": "1", "b": "2"}))
    first = run_one(make_protocol("debate", rounds=1, tie_break="random"), task, "ab", {"a": gen, "b": gen}, seed=3)
    again = run_one(make_protocol("debate", rounds=1, tie_break="random"), task, "ab", {"a": gen, "b": gen}, seed=3)
    assert first.answer == again.answer in {"1", "2"}


# -- LLM-Blender -----------------------------------------------------------------------------------

def blender_backends(candidates, judge_reply, fuse_reply=None):
    member = Scripted(lambda ask: answer_text(candidates[ask.member]))
    judge = Scripted(judge_reply, "judge")
    fuser = Scripted(fuse_reply or (lambda ask: ask.messages[-1].content.split("Candidate 1:\n")[1].split("\n\n")[0]
                                    + "\n" + answer_text(ask.info["answers"][0])), "fuser")
    return {**{m: member for m in candidates}, "judge": judge, "fuser": fuser}, judge, fuser


def prefer_higher(ask):
    """Judge prefers the larger number."""
    a, b = (int(x) for x in ask.info["answers"])
    return "[[A]]" if a > b else "[[B]]"


def test_blender_pairwise_ranking_order_and_top_k(task):
    backends, judge, fuser = blender_backends({"a": "3", "b": "9", "c": "5", "d": "1"}, prefer_higher)
    out = run_one(make_protocol("llm_blender"), task, "abcd", backends)
    assert out.details["ranking"] == ["b", "c", "a", "d"]
    assert out.details["scores"] == {"a": 1.0, "b": 3.0, "c": 2.0, "d": 0.0}
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 6  # every unordered pair, one batched call
    (fuse_ask,) = fuser.calls[0]
    assert fuse_ask.info["answers"] == ("9", "5", "3")  # top-3, best first
    assert out.answer == "9"


def test_blender_unparseable_verdicts_split_the_point(task):
    backends, _, _ = blender_backends({"a": "3", "b": "9"}, lambda ask: "no idea")
    out = run_one(make_protocol("llm_blender"), task, "ab", backends)
    assert out.details["scores"] == {"a": 0.5, "b": 0.5} and out.details["unparsed_verdicts"] == 1
    assert out.details["ranking"] == ["a", "b"]  # tie: coalition order


def test_blender_both_orders_doubles_the_comparisons(task):
    backends, judge, _ = blender_backends({"a": "3", "b": "9", "c": "5"}, prefer_higher)
    out = run_one(make_protocol("llm_blender", both_orders=True), task, "abc", backends)
    assert len(judge.calls[0]) == 6 and out.details["scores"] == {"a": 0.0, "b": 4.0, "c": 2.0}


def test_blender_listwise_and_no_fuser(task):
    backends, judge, fuser = blender_backends({"a": "3", "b": "9", "c": "5"}, lambda ask: "Ranking: [3] > [1]")
    out = run_one(make_protocol("llm_blender", ranking="listwise", fuser=None), task, "abc", backends)
    assert out.details["ranking"] == ["c", "a", "b"]  # b left out: appended
    assert out.answer == "5" and not fuser.calls and len(judge.calls[0]) == 1


def test_blender_coalition_of_one_skips_ranking(task):
    backends, judge, fuser = blender_backends({"a": "7"}, prefer_higher)
    out = run_one(make_protocol("llm_blender"), task, "a", backends)
    assert not judge.calls and len(fuser.calls) == 1 and out.answer == "7"


def test_pairwise_and_ranking_parsers():
    assert parse_pairwise("blah [[A]] then [[B]]") == "B"
    assert parse_pairwise("Response B is better because") == "B"
    assert parse_pairwise(" a. ") == "A"
    assert parse_pairwise("both fine") is None
    assert parse_ranking("Ranking: [2] > [2] > [9] > [1]", 3) == ([1, 0, 2], True)
    assert parse_ranking("I think 3 then 1", 3) == ([2, 0, 1], True)
    assert parse_ranking("no order", 3) == ([0, 1, 2], False)


# -- SLM-MUX ---------------------------------------------------------------------------------------

def test_mux_picks_the_most_self_consistent_member(task):
    gen = Scripted(fixed({"a": ["1", "2", "3"], "b": ["4", "4", "5"], "c": ["6", None, "6"]}))
    out = run_one(make_protocol("slm_mux"), task, "abc", {m: gen for m in "abc"})
    conf = out.details["confidence"]
    assert conf["a"] == pytest.approx(1 / 3) and conf["b"] == pytest.approx(2 / 3) and conf["c"] == 1.0
    assert out.answer == "6" and out.details["chosen"] == "c"
    assert len(gen.calls) == 1 and len(gen.calls[0]) == 9
    assert len({a.seed for a in gen.calls[0]}) == 9  # every sample has its own seed


def test_mux_ties_between_members(task):
    gen = Scripted(fixed({"a": ["1", "1", "2"], "b": ["4", "4", "5"]}))
    proto = make_protocol("slm_mux")
    assert run_one(proto, task, "ab", {"a": gen, "b": gen}).answer == "1"  # coalition order
    gen = Scripted(fixed({"a": ["1", "1", "2"], "b": ["4", "4", "5"]}))
    assert run_one(proto, task, "ab", {"a": gen, "b": gen}, dev_scores={"b": 0.9, "a": 0.1}).answer == "4"


def test_mux_tie_inside_a_member_goes_to_the_first_answer(task):
    gen = Scripted(fixed({"a": ["2", "1", "1", "2"]}))
    out = run_one(make_protocol("slm_mux", samples=4), task, "a", {"a": gen})
    assert out.answer == "2" and out.details["confidence"]["a"] == 0.5


def test_mux_nobody_parses(task):
    gen = Scripted(fixed({"a": [None], "b": [None]}))
    out = run_one(make_protocol("slm_mux"), task, "ab", {"a": gen, "b": gen})
    assert out.answer is None and out.details["confidence"] == {"a": 0.0, "b": 0.0}


# -- shared rules ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["debate", "llm_blender", "slm_mux", "majority_vote"])
def test_empty_and_duplicate_coalitions_are_refused(name, task):
    proto = make_protocol(name)
    ctx = EpisodeContext(item=task.items()[0], task=task, members=(), seed=0)
    with pytest.raises(EmptyCoalitionError, match="empty"):
        proto.start(ctx)
    with pytest.raises(ConfigError, match="twice"):
        proto.start(EpisodeContext(item=task.items()[0], task=task, members=("a", "a"), seed=0))


def test_protocol_settings_are_validated():
    with pytest.raises(UnknownNameError, match="debate"):
        make_protocol("debat")
    with pytest.raises(ConfigError, match="no setting 'round'"):
        make_protocol("debate", round=2)
    for bad in ({"rounds": 0}, {"history": "all"}, {"temperature": -1}, {"tie_break": "coin"}):
        with pytest.raises(ConfigError):
            make_protocol("debate", **bad)
    with pytest.raises(ConfigError):
        make_protocol("slm_mux", samples=0)
    with pytest.raises(ConfigError):
        make_protocol("llm_blender", ranking="tournament")


def test_helper_cannot_be_a_member(task):
    proto = make_protocol("llm_blender")
    with pytest.raises(ConfigError, match="helper"):
        proto.start(EpisodeContext(item=task.items()[0], task=task, members=("a", "judge"), seed=0))


def test_every_role_a_protocol_uses_is_in_the_role_vocabulary():
    """Roles are the contract between protocols, simulated agents and drivers: each one a protocol
    yields is a Role, and exactly the helper roles are excluded from a seat's own answer."""
    from coalition_gym import load_pool, make_task
    from coalition_gym.envs.protocols import PROTOCOLS
    from coalition_gym.envs.testing import run_one_program
    from coalition_gym.types import HELPER_ROLES, Role

    pool = load_pool("sim:demo")
    task = make_task("rg/basic_arithmetic", size=2)
    item = task.items("test")[0]
    seen = set()
    for name in PROTOCOLS:  # coalition training's judges: test_collaborative
        system = System.build(SystemSpec(make_protocol(name), task, pool, split=None), dev_scores=pool.dev_scores)
        system.prepare()
        protocol, ctx = system.protocol, system.context(item, 1)
        asks, _ = run_one_program(protocol, ctx, pool.backends())
        seen |= {a.role for a in asks}
    assert seen <= {r.value for r in Role}, seen - {r.value for r in Role}
    assert {r for r in Role if r.is_helper} == HELPER_ROLES and not Role.DEBATE.is_helper


def test_an_ask_refuses_an_info_key_its_role_does_not_define():
    from coalition_gym.types import ROLE_INFO, Ask, Message, Role

    assert set(ROLE_INFO) == {r.value for r in Role}
    Ask("m", (Message("user", "q"),), seed=1, role="debate", info={"peer_answers": ("3",), "own_previous": "4"})
    Ask("m", (Message("user", "q"),), seed=1, role="route", info={"candidates": ("a",), "rollout": 2})
    Ask("m", (Message("user", "q"),), seed=1, role="my_own_role", info={"anything": 1})  # unchecked
    with pytest.raises(ConfigError, match="role 'debate' has no info key 'peer_answer'"):
        Ask("m", (Message("user", "q"),), seed=1, role="debate", info={"peer_answer": ("3",)})


def test_a_rounds_followups_at_once_are_each_members_followup():
    """debate_followups labels and clips each text once per round; member k must still read exactly the
    debate_followup of everyone else's texts in order (the generation cache keys on the prompt)."""
    from coalition_gym.prompts import MAX_CANDIDATE_CHARS, debate_followup, debate_followups

    texts = ["12", "", "long " * (MAX_CANDIDATE_CHARS // 4), "Answer: 7\nsure", "12"]
    styles = ["compact", "full", "full", "compact", "full"]
    together = debate_followups(texts, styles)
    for k, style in enumerate(styles):
        assert together[k] == debate_followup(texts[:k] + texts[k + 1:], style)
    assert debate_followups(["alone"], ["full"]) == [debate_followup([], "full")]
