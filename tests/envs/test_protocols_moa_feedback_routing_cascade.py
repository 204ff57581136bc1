"""Hand-built cases for Mixture-of-Agents, multi-agent feedback, prompt routing and the cascade; the
generic per-episode cost; the six new environment ids."""

import json

import gymnasium as gym
import pytest
from conftest import ListTask, Recorder, Scripted, answer_text
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

import coalition_gym
from coalition_gym import load_pool, parallel_env
from coalition_gym.cli import main
from coalition_gym.envs.protocols import PROTOCOLS, EpisodeContext, make_protocol
from coalition_gym.envs.runner import run_episodes, run_programs, sample_tokens
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError, EmptyCoalitionError
from coalition_gym.prompts import parse_route
from coalition_gym.tasks import make as make_task
from coalition_gym.types import Sample

NEW_IDS = ["coalition_gym/MixtureOfAgents-v0", "coalition_gym/HeterogeneousSwarms-v0", "coalition_gym/Feedback-v0",
           "coalition_gym/PromptRouting-v0", "coalition_gym/TrainedRouter-v0", "coalition_gym/Cascade-v0"]
NEW_PROTOCOLS = ["mixture_of_agents", "heterogeneous_swarms", "feedback", "prompt_routing", "trained_router",
                 "cascade"]


def run_one(protocol, task, members, backends, dev_scores=None, seed=0, item=0):
    ctx = EpisodeContext(item=task.items()[item], task=task, members=tuple(members), seed=seed,
                         dev_scores=dev_scores or {})
    (outcome,) = run_programs([protocol.start(ctx)], backends)
    return outcome


def by_member(answers):
    """Members answer fixed values; helpers (and roles not listed) answer via ``answers[role]``."""
    return lambda ask: answer_text(answers.get(ask.member, answers.get(ask.role)))


# -- cost accounting -------------------------------------------------------------------------------

class Tokenised(Scripted):
    def generate(self, asks):
        self.calls.append(list(asks))
        return [Sample(text=self.reply(a), token_ids=(1, 2, 3, 4, 5)) for a in asks]


def test_every_outcome_reports_calls_and_tokens(task):
    words = Scripted(lambda ask: "one two\nAnswer: 7")  # 4 whitespace tokens
    out = run_one(make_protocol("debate", rounds=2), task, "ab", {"a": words, "b": words})
    assert out.details["cost"] == {"calls": 4, "tokens": 16}
    ids = Tokenised(lambda ask: "Answer: 7")
    out = run_one(make_protocol("majority_vote"), task, "abc", {m: ids for m in "abc"})
    assert out.details["cost"] == {"calls": 3, "tokens": 15}  # token ids win over word counts
    assert sample_tokens(Sample("a b  c")) == 3 and sample_tokens(Sample("", token_ids=(9,))) == 1


@pytest.mark.parametrize("env_id", list(coalition_gym.ENV_IDS))
def test_gym_and_pz_final_info_report_the_cost(env_id):
    env = gym.make(env_id)
    env.reset(seed=0)
    done, info = False, {}
    while not done:
        _, _, done, _, info = env.step("Answer: 1")
    assert info["cost"]["calls"] >= 1 and info["cost"]["tokens"] >= info["cost"]["calls"]
    assert info["cost"] == info.get("details", {}).get("cost", info["cost"])
    penv = parallel_env(env_id)
    penv.reset(seed=0)
    while penv.agents:
        _, _, _, _, infos = penv.step({a: "Answer: 1" for a in penv.agents})
    assert all(i["cost"]["calls"] >= 1 for i in infos.values())


def test_cost_counts_every_ask_of_a_majority_vote_episode():
    env = gym.make("coalition_gym/MajorityVote-v0")
    env.reset(seed=3)
    _, _, done, _, info = env.step("Answer: 1")
    assert done and info["cost"]["calls"] == 5  # four pool members and the policy


# -- Mixture-of-Agents -----------------------------------------------------------------------------

def test_moa_later_layers_see_references_and_the_aggregator_writes_the_answer(task):
    seen = []

    def reply(ask):
        seen.append(ask)
        if ask.role == "fuse":
            return answer_text("7")
        return answer_text({"a": "7", "b": "5"}[ask.member] if ask.round == 0 else "7")

    gen = Scripted(reply)
    out = run_one(make_protocol("mixture_of_agents", layers=2), task, "ab", {"a": gen, "b": gen, "fuser": gen})
    assert out.answer == "7" and out.details["aggregator"] == "fuser" and len(gen.calls) == 3
    second = [a for a in seen if a.round == 1]
    assert [a.member for a in second] == ["a", "b"]
    prompt = second[0].messages[-1].content
    assert "1. " + answer_text("7") in prompt and "2. " + answer_text("5") in prompt  # all of layer 0
    assert second[0].info == {"own_previous": "7", "peer_answers": ("5",)}
    (agg,) = [a for a in seen if a.role == "fuse"]
    assert agg.member == "fuser" and agg.round == 2 and agg.info["answers"] == ("7", "7")


def test_moa_default_is_one_layer_and_a_coalition_of_one_is_aggregated(task):
    gen = Scripted(by_member({"a": "3", "fuse": "4"}))
    out = run_one(make_protocol("mixture_of_agents"), task, "a", {"a": gen, "fuser": gen})
    assert out.answer == "4" and [len(c) for c in gen.calls] == [1, 1]


def test_moa_without_a_fixed_aggregator_uses_the_best_dev_member(task):
    gen = Scripted(by_member({"a": "1", "b": "2", "fuse": "9"}))
    proto = make_protocol("mixture_of_agents", aggregator=None)
    out = run_one(proto, task, "ab", {"a": gen, "b": gen}, dev_scores={"a": 0.2, "b": 0.7})
    assert out.details["aggregator"] == "b" and gen.calls[-1][0].member == "b"
    assert run_one(proto, task, "ab", {"a": gen, "b": gen}).details["aggregator"] == "a"  # no dev scores
    with pytest.raises(ConfigError, match="layers"):
        make_protocol("mixture_of_agents", layers=0)


# -- multi-agent feedback --------------------------------------------------------------------------

def test_feedback_peers_review_members_refine_and_the_majority_decides(task):
    seen = []

    def reply(ask):
        seen.append(ask)
        if ask.role == "feedback":
            return f"Looks wrong to me.\n{answer_text('7')}"
        if ask.round == 2:
            return answer_text("7" if ask.member != "e" else "3")
        return answer_text({"a": "7", "b": "5", "c": "5", "d": "5", "e": "3"}[ask.member])

    gen = Scripted(reply)
    out = run_one(make_protocol("feedback"), task, "abcde", {m: gen for m in "abcde"})
    assert [len(c) for c in gen.calls] == [5, 15, 5]  # answers, 3 reviews each, refinements
    reviews = [a for a in seen if a.role == "feedback"]
    for member, reviewers in out.details["reviewers"].items():
        assert len(reviewers) == 3 and member not in reviewers
        assert sorted(a.member for a in reviews if a.info["reviewed"] == member) == sorted(reviewers)
    refine = next(a for a in seen if a.round == 2 and a.member == "b")
    assert refine.messages[-2].content == answer_text("5") and "Feedback 3" in refine.messages[-1].content
    assert refine.info == {"own_previous": "5", "peer_answers": ("7", "7", "7")}
    assert out.answer == "7" and out.details["final_rule"] == "majority" and out.details["votes"] == {"7": 4, "3": 1}


def test_feedback_summariser_is_the_best_dev_member_or_a_fixed_helper(task):
    gen = Scripted(by_member({"a": "1", "b": "2", "fuser": "8"}))
    out = run_one(make_protocol("feedback"), task, "ab", {"a": gen, "b": gen}, dev_scores={"a": 0.9, "b": 0.1})
    assert out.details["final_rule"] == "summariser:a" and gen.calls[-1][0].role == "fuse"
    assert out.answer == "1" and len(gen.calls) == 4
    out = run_one(make_protocol("feedback", summariser="fuser"), task, "ab", {"a": gen, "b": gen, "fuser": gen})
    assert out.answer == "8" and out.details["final_rule"] == "summariser:fuser"


def test_feedback_reviewer_choice_is_stable_and_a_coalition_of_one_answers_once(task):
    proto = make_protocol("feedback", reviewers=2)
    ctx = lambda members: EpisodeContext(item=task.items()[0], task=task, members=tuple(members), seed=4)  # noqa: E731
    assert proto.reviewers_of(ctx("abcdef"), "a") == proto.reviewers_of(ctx("fedcba"), "a")  # order-free
    gen = Scripted(by_member({"a": "7"}))
    out = run_one(make_protocol("feedback"), task, "a", {"a": gen})
    assert out.answer == "7" and len(gen.calls) == 1 and out.details["final_rule"] == "alone"


# -- prompt routing --------------------------------------------------------------------------------

SPECIALTIES = {"mathy": "arithmetic and algebra", "wordy": "ciphers and string puzzles", "logician": "logic puzzles"}


def keyword_router(ask):
    """A scripted router: the specialist whose description matches the question's topic."""
    question = ask.messages[-1].content.split("Team members:")[0]
    topic = "arithmetic" if "Calculate" in question else "ciphers" if "cipher" in question else "logic"
    listing = ask.messages[-1].content.split("Team members:\n")[1].split("\n\n")[0].splitlines()
    number = next(line[1] for line in listing if topic in line)
    return f"The best fit is member {number}.\n[[{number}]]"


def test_prompt_routing_picks_the_specialist():
    task = ListTask(["7", "8", "9"])
    questions = ["Calculate 3 + 4.", "Decrypt this Caesar cipher: KHOOR", "Is the syllogism valid? logic"]
    task._items = [type(it)(id=it.id, question=q, gold=it.gold) for it, q in zip(task._items, questions)]
    router = Scripted(keyword_router, "judge")
    members = Scripted(lambda ask: answer_text(ask.member))
    proto = make_protocol("prompt_routing", descriptions=SPECIALTIES)
    backends = {"judge": router, **{m: members for m in SPECIALTIES}}
    chosen = [run_one(proto, task, list(SPECIALTIES), backends, item=k).details["chosen"] for k in range(3)]
    assert chosen == ["mathy", "wordy", "logician"]
    assert all(len(c) == 1 for c in router.calls) and all(len(c) == 1 for c in members.calls)  # one member answers
    assert "mathy: arithmetic and algebra" in router.calls[0][0].messages[-1].content


def test_prompt_routing_fallbacks_and_a_coalition_of_one(task):
    router = Scripted(lambda ask: "I cannot decide.", "judge")
    gen = Scripted(lambda ask: answer_text(ask.member))
    backends = {"judge": router, **{m: gen for m in "abc"}}
    out = run_one(make_protocol("prompt_routing"), task, "abc", backends, dev_scores={"b": 0.9, "a": 0.1})
    assert (out.details["chosen"], out.details["routed_by"], out.details["cost"]["calls"]) == ("b", "fallback", 2)
    assert run_one(make_protocol("prompt_routing", fallback="first"), task, "cab", backends).details["chosen"] == "c"
    drawn = {run_one(make_protocol("prompt_routing"), task, "abc", backends, seed=s).details["chosen"]
             for s in range(30)}
    assert drawn == {"a", "b", "c"}  # no dev scores: a seeded draw
    same = [run_one(make_protocol("prompt_routing", fallback="random"), task, order, backends, seed=5).answer
            for order in ("abc", "cba")]
    assert same[0] == same[1]  # the draw ignores coalition order
    before = len(router.calls)
    out = run_one(make_protocol("prompt_routing"), task, "a", backends)
    assert out.details["routed_by"] == "alone" and len(router.calls) == before
    with pytest.raises(ConfigError, match="fallback"):
        make_protocol("prompt_routing", fallback="coin")


def test_parse_route():
    members = ["atlas", "borealis", "cirrus"]
    assert parse_route("I pick [[2]]", members) == 1
    assert parse_route("[[7]] no, [[3]]", members) == 2
    assert parse_route("Model 1 is best", members) == 0
    assert parse_route(" 3. ", members) == 2
    assert parse_route("Borealis should answer, not atlas... actually Cirrus", members) == 2
    assert parse_route("Answer: 2", members) is None  # a bare answer line is not a routing decision
    assert parse_route("no idea", members) is None


# -- cascade ---------------------------------------------------------------------------------------

def test_cascade_stops_early_when_the_first_member_is_confident(task):
    gen = Scripted(by_member({"a": "7", "b": "8", "c": "9"}))
    out = run_one(make_protocol("cascade"), task, "abc", {m: gen for m in "abc"})
    assert out.answer == "7" and out.details["stopped_at"] == "a" and out.details["escalations"] == 0
    assert len(gen.calls) == 1 and [a.member for a in gen.calls[0]] == ["a"] * 3
    assert out.details["cost_spent"] == 3.0 and out.details["cost"]["calls"] == 3


def test_cascade_escalates_in_cost_order_until_confident(task):
    counters = {}

    def reply(ask):
        counters[ask.member] = counters.get(ask.member, 0) + 1
        if ask.member == "c":  # cheapest, but unsure
            return answer_text(str(counters["c"]))
        return answer_text({"a": "5", "b": "6"}[ask.member])

    gen = Scripted(reply)
    proto = make_protocol("cascade", costs={"c": 1, "b": 2, "a": 10})
    out = run_one(proto, task, "abc", {m: gen for m in "abc"})
    assert out.details["order"] == ["c", "b", "a"] and out.details["stopped_at"] == "b" and out.answer == "6"
    assert out.details["confidence"] == {"c": pytest.approx(1 / 3), "b": 1.0}
    assert out.details["cost_spent"] == 3 * 1 + 3 * 2 and len(gen.calls) == 2
    assert [a.round for a in gen.calls[1]] == [1, 1, 1]


def test_cascade_nobody_confident_takes_the_last_member_and_one_member_votes(task):
    gen = Scripted(lambda ask: answer_text(["1", "1", "2"][ask.seed % 3]))
    ctr = {"n": 0}

    def varied(ask):
        ctr["n"] += 1
        return answer_text("4" if ctr["n"] % 3 else "5")

    out = run_one(make_protocol("cascade"), task, "ab", {m: Scripted(varied) for m in "ab"})
    assert out.details["stopped_at"] == "b" and out.answer == "4" and out.details["escalations"] == 1
    out = run_one(make_protocol("cascade", samples=1), task, "a", {"a": gen})
    assert out.details["confidence"]["a"] == 1.0
    with pytest.raises(ConfigError, match="threshold"):
        make_protocol("cascade", threshold=0)


def test_cascade_seeds_do_not_depend_on_the_member_rank(task):
    gen = Scripted(lambda ask: answer_text(str(ask.seed % 2)))
    run_one(make_protocol("cascade"), task, "ab", {"a": gen, "b": gen})
    run_one(make_protocol("cascade", costs={"b": 0}), task, "ab", {"a": gen, "b": gen})
    seeds = {}
    for call in gen.calls:
        for ask in call:
            seeds.setdefault(ask.member, set()).add(ask.seed)
    assert all(len(s) == 3 for s in seeds.values())  # the same three seeds at rank 0 or 1


# -- properties shared by the new protocols --------------------------------------------------------

@pytest.mark.parametrize("name", NEW_PROTOCOLS)
def test_seeds_never_depend_on_the_coalition(name):
    pool = load_pool("sim:demo")
    task = make_task("rg/basic_arithmetic", size=12)
    seen = {}
    for coalition in (["atlas", "delta"], ["atlas", "borealis", "cirrus", "delta"], ["atlas"]):
        backends = {n: Recorder(g) for n, g in pool.backends().items()}
        run_episodes(System.build(SystemSpec(make_protocol(name), task, backends, coalition,
                                             split=None)), task.items(), seed=2)
        asked = {}
        for rec in backends.values():
            for ask in (a for c in rec.calls for a in c):
                # a review is keyed by whose answer it reads (as LLM-Blender keys pairs), not only the text
                key = (ask.member, ask.item.id, ask.messages, ask.info.get("reviewed"))
                asked.setdefault(key, set()).add(ask.seed)
        for key, seeds in asked.items():
            assert seen.setdefault(key, seeds) == seeds, key[:2]


@pytest.mark.parametrize("name", NEW_PROTOCOLS)
def test_empty_coalition_refused_and_coalition_of_one_runs(name, task):
    proto = make_protocol(name)
    with pytest.raises(EmptyCoalitionError):
        proto.start(EpisodeContext(item=task.items()[0], task=task, members=(), seed=0))
    pool = load_pool("sim:demo")
    results = run_episodes(System.build(SystemSpec(proto, make_task("rg/basic_arithmetic", size=10), pool.backends(),
                                                   ["delta"], split=None)), make_task(
        "rg/basic_arithmetic", size=10).items())
    assert all(r.error is None and r.outcome.details["cost"]["calls"] >= 1 for r in results)


# -- environments ----------------------------------------------------------------------------------

def test_cgym_envs_lists_all_ten_methods(capsys):
    """Ten episodic methods have env ids; the two collaborative-training methods train their members
    and have none."""
    assert main(["envs"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    from coalition_gym.training.recipes import recipe_names

    assert len(lines) == 10 == len(PROTOCOLS)  # coalition training is no protocol: no env id
    assert sorted(recipe_names("coalition")) == ["multiagent_finetuning", "sparta"]
    assert not any("sparta" in line.lower() or "finetuning" in line.lower() for line in lines)
    assert all(any(line.startswith(env_id) for line in lines) for env_id in NEW_IDS)


@pytest.mark.parametrize("env_id", NEW_IDS)
def test_new_ids_pass_the_gymnasium_and_pettingzoo_checks(env_id):
    check_env(gym.make(env_id, task_kwargs={"size": 20}).unwrapped, skip_render_check=True)
    parallel_api_test(parallel_env(env_id), num_cycles=50)


@pytest.mark.parametrize("env_id", NEW_IDS)
def test_a_gold_policy_episode_rewards_the_system(env_id):
    """Routing and cascades may never ask the policy: then the episode ends on the first step."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=1)
    gold = env.unwrapped._ctx.item.gold
    rewards, done = [], False
    while not done:
        obs, reward, done, _, final = env.step(answer_text(gold))
        rewards.append(reward)
    assert all(r == 0.0 for r in rewards[:-1]) and rewards[-1] == final["system_score"]
    if info["policy_asked"]:
        assert any(t["member"] == "policy" for t in final["transcript"])
        assert final["policy_score"] == 1.0 and final["policy_answer"] == gold
    else:
        assert len(rewards) == 1 and final["policy_answer"] is None
        assert all(t["member"] != "policy" for t in final["transcript"])


@pytest.mark.parametrize("name", NEW_PROTOCOLS)
def test_cgym_eval_runs_each_new_protocol(name, tmp_path, capsys):
    out = tmp_path / name
    assert main(["eval", "--protocol", name, "--items", "10", "--estimator", "loo", "--bootstrap", "50",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == name and summary["failed_episodes"] == 0
    assert summary["pool"] == ["atlas", "borealis", "cirrus", "delta"]
