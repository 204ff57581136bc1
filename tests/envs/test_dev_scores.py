"""Dev scores are measured per task on its dev split when a protocol needs them (issue 25): ties no longer
go to whoever comes first in the coalition."""

from __future__ import annotations

import json
import warnings

import pytest
from conftest import Scripted, answer_text

from coalition_gym.agents.base import Generator
from coalition_gym.agents.pools import load_pool, pool_from_config
from coalition_gym.envs import dev_scores as dev
from coalition_gym.envs.dev_scores import DevScoreWarning, dev_scores_for, measure_dev_scores, score_key
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.runner import run_episodes
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.reports.leaderboard import evaluate, summary
from coalition_gym.tasks import make as make_task
from coalition_gym.types import SamplingParams
from coalition_gym.valuation.game import CoalitionGame


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A fresh dev-score cache per test (the shipped zoo needs no home)."""
    monkeypatch.setenv("COALITION_GYM_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(dev, "_MEMORY", {})
    return tmp_path / "home"


class Untouchable(Generator):
    """Stands in for a member whose dev score must come from the cache: answering anything fails."""

    stable_identity = True

    def __init__(self, identity: str):
        self.identity = identity

    def generate(self, asks):
        raise AssertionError(f"{self.identity} was asked {len(asks)} questions")


def test_majority_vote_over_the_zoo_on_reverse_follows_quill_not_coalition_order():
    """The issue's case: abacus (first, cannot spell backward) used to win every tie, so the full
    coalition scored near 0 although quill alone scores 1, and abacus's leave-one-out was about -1."""
    pool = load_pool("zoo:default")
    task = make_task("zoo:reverse", size=20)
    report = evaluate(CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, pool, split="test"))),
                      ["loo"])
    game = report.game
    solo = dict(zip(game.players, report.solo.values))
    loo = dict(zip(game.players, report.results["loo"].values))
    assert solo["quill"] == 1.0 and solo["abacus"] == 0.0
    assert game.value(game.players) >= 0.9  # was 0.0 here (0.050 on the run)
    assert loo["abacus"] > -0.1 and loo["quill"] > 0.5  # was -1.0 and 0.0
    recorded = summary(report)["dev_scores"]
    assert recorded["source"] == "measured" and recorded["task"] == "zoo:reverse" and recorded["n_items"] == 20
    assert max(recorded["scores"], key=recorded["scores"].get) == "quill"
    assert report.record["dev_scores"] == recorded  # the run record says it too

    again = dev_scores_for(System.build(SystemSpec(make_protocol("majority_vote"), task, pool,
                                                   split=None)))  # a second run: no generation at all
    assert sorted(again.cached) == sorted(pool.member_names) and again.generated == 0
    assert again.scores == game.dev.scores


def test_a_second_call_reads_the_cache_file_and_generates_nothing(home):
    pool = load_pool("sim:demo")
    task = make_task("rg/basic_arithmetic", size=30)
    first = dev_scores_for(System.build(SystemSpec(make_protocol("debate"), task, pool, split=None)))
    assert first.source == "measured" and first.cached == () and first.generated == 4 * 30
    assert set(first.scores) == set(pool.member_names) and (home / "dev_scores.json").is_file()
    dev._MEMORY.clear()  # a new process: only the file remains
    ghosts = {m: Untouchable(g.identity) for m, g in pool.members.items()}
    again = dev_scores_for(System.build(SystemSpec(make_protocol("debate"), task, pool, split=None)), backends=ghosts)
    assert again.scores == first.scores and sorted(again.cached) == sorted(pool.member_names)
    assert again.generated == 0


def test_the_scores_are_each_members_greedy_dev_accuracy():
    pool = load_pool("sim:specialists")
    task = make_task("rg/basic_arithmetic", size=40)
    found = dev_scores_for(System.build(SystemSpec(make_protocol("majority_vote"), task, pool, split=None)))
    items = task.items("dev")
    for name, gen in pool.members.items():
        asks = [dev.Ask(member=name, messages=tuple(task.prompt(it)), params=SamplingParams(temperature=0.0),
                        seed=dev.derive_seed(dev.DEV_SEED, it.id, "dev-score", 0), role="dev", item=it)
                for it in items]
        replies = gen.generate(asks)
        expected = sum(task.score(task.extract(r.text, it), it) for r, it in zip(replies, items)) / len(items)
        assert found.scores[name] == pytest.approx(expected)


def test_the_cache_key_changes_with_member_task_split_style_and_items():
    task = make_task("rg/basic_arithmetic", size=5)
    params = SamplingParams(temperature=0.0, max_new_tokens=512)
    base = score_key("sim:a:1", "chat", task, "dev", task.items("dev"), params)
    other_seed = make_task("rg/basic_arithmetic", size=5, seed=1)
    variants = [score_key("sim:a:2", "chat", task, "dev", task.items("dev"), params),  # another member
                score_key("sim:a:1", "compact", task, "dev", task.items("dev"), params),  # another prompt style
                score_key("sim:a:1", "chat", task, "train", task.items("train"), params),  # another split
                score_key("sim:a:1", "chat", other_seed, "dev", other_seed.items("dev"), params),  # other items
                score_key("sim:a:1", "chat", task, "dev", task.items("dev")[:3], params),  # fewer items
                score_key("sim:a:1", "chat", make_task("rg/chain_sum", size=5), "dev",
                          make_task("rg/chain_sum", size=5).items("dev"), params),  # another task
                score_key("sim:a:1", "chat", task, "dev", task.items("dev"), SamplingParams(0.0, max_new_tokens=8))]
    assert base == score_key("sim:a:1", "chat", make_task("rg/basic_arithmetic", size=5), "dev",
                             make_task("rg/basic_arithmetic", size=5).items("dev"), params)
    assert len({base, *variants}) == len(variants) + 1


def test_another_task_is_measured_anew_per_task_not_per_pool():
    pool = load_pool("sim:specialists")
    arith = dev_scores_for(System.build(SystemSpec(make_protocol("debate"), make_task("rg/basic_arithmetic", size=20),
                                                   pool, split=None)))
    words = dev_scores_for(System.build(SystemSpec(make_protocol("debate"), make_task("rg/spell_backward", size=20),
                                                   pool, split=None)))
    assert arith.cached == () and words.cached == () and arith.scores != words.scores


def test_a_protocol_that_needs_no_dev_scores_measures_nothing():
    pool = load_pool("sim:demo")
    ghosts = {m: Untouchable(g.identity) for m, g in pool.members.items()}
    task = make_task("rg/basic_arithmetic", size=5)
    for proto in (make_protocol("majority_vote", tie_break="first"), make_protocol("debate", tie_break="random"),
                  make_protocol("llm_blender"), make_protocol("mixture_of_agents"),
                  make_protocol("feedback", summariser="fuser"), make_protocol("prompt_routing", fallback="random"),
                  make_protocol("cascade"), make_protocol("trained_router")):
        assert not proto.needs_dev_scores(), proto.name
        found = dev_scores_for(System.build(SystemSpec(proto, task, pool, split=None)), backends=ghosts)
        assert found.source == "not needed" and found.scores == {}
    needing = [make_protocol("majority_vote"), make_protocol("debate"), make_protocol("slm_mux"),
               make_protocol("mixture_of_agents", aggregator=None), make_protocol("feedback"),
               make_protocol("prompt_routing")]
    assert all(p.needs_dev_scores() for p in needing)
    from coalition_gym.training.collaborative import make_coalition_settings

    assert not make_coalition_settings("sparta").evaluation.needs_dev_scores()
    assert make_coalition_settings("multiagent_finetuning").evaluation.needs_dev_scores()


def test_explicit_pool_dev_scores_win_and_nothing_is_measured():
    pool = pool_from_config({"members": [{"name": "a", "backend": "sim"}, {"name": "b", "backend": "sim"}],
                             "dev_scores": {"a": 0.2, "b": 0.9}})
    pool.members = {m: Untouchable(g.identity) for m, g in pool.members.items()}
    found = dev_scores_for(System.build(SystemSpec(make_protocol("majority_vote"),
                                                   make_task("rg/basic_arithmetic", size=5), pool, split=None)))
    assert found.source == "explicit" and found.scores == {"a": 0.2, "b": 0.9}
    assert found.record() == {"source": "explicit", "scores": {"a": 0.2, "b": 0.9}}


def test_a_held_out_task_falls_back_with_a_warning_and_says_why():
    task = make_task("humaneval", size=2)
    with pytest.warns(DevScoreWarning, match="held out"):
        found = dev_scores_for(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                       split=None)))
    assert found.source == "unavailable" and found.scores == {} and "held out" in found.record()["why"]


def test_backends_without_a_stable_identity_are_measured_but_never_cached(home, task):
    right = Scripted(lambda ask: answer_text(ask.item.gold))
    wrong = Scripted(lambda ask: answer_text("0"))  # the same identity, "scripted": it must not share a score
    backends = {"right": right, "wrong": wrong}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = measure_dev_scores(task, backends, ["wrong", "right"])
    assert found.scores == {"wrong": 0.0, "right": 1.0}
    assert not (home / "dev_scores.json").exists()
    results = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, backends, ["wrong", "right"],
                                                   split=None)),
                           task.items())
    assert [r.score for r in results] == [1.0, 1.0, 1.0]  # a 1-1 tie goes to the better member on dev
    first = run_episodes(System.build(SystemSpec(make_protocol("majority_vote", tie_break="first"), task, backends,
                                                 ["wrong", "right"], split=None)), task.items())
    assert [r.score for r in first] == [0.0, 0.0, 0.0]


def test_the_gym_env_and_the_game_read_measured_scores():
    import gymnasium as gym

    env = gym.make("coalition_gym/MajorityVote-v0", collaborators="sim:demo", task="rg/basic_arithmetic",
                   task_kwargs={"size": 10})
    found = env.unwrapped.dev_scores
    assert found.source == "measured" and set(found.scores) == set(load_pool("sim:demo").member_names)
    assert "policy" not in found.scores  # a seat is never asked dev items
    pool = load_pool("sim:demo")
    task = make_task("rg/basic_arithmetic", size=10)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=1), task, pool, split="test")))
    assert game.dev.scores == found.scores  # same members, task and settings: the same (cached) scores
    assert sorted(game.dev.cached) == sorted(pool.member_names)


def test_the_cache_file_is_plain_json_with_what_each_score_is_about(home):
    pool = load_pool("sim:independent")
    dev_scores_for(System.build(SystemSpec(make_protocol("debate"), make_task("rg/basic_arithmetic", size=8), pool,
                                           split=None)))
    data = json.loads((home / "dev_scores.json").read_text())
    assert data["version"] == dev.CACHE_VERSION
    entries = list(data["entries"].values())
    assert len(entries) == 4 and {e["task"] for e in entries} == {"rg/basic_arithmetic"}
    assert {e["identity"] for e in entries} == {g.identity for g in pool.members.values()}
    assert all(e["n_items"] == 8 and e["split"] == "dev" for e in entries)


def test_which_backends_keep_their_scores_across_runs():
    from coalition_gym.agents.hf import HFGenerator
    from coalition_gym.agents.pools import WithSampling

    pool = load_pool("zoo:tiny")
    folder = pool.members["pico"]
    assert dev.fingerprinted(folder) and dev.fingerprinted(WithSampling(folder, temperature=0.5))
    loaded = HFGenerator(folder.model, folder.tokenizer)  # a model object (a trainer's): its identity is generic
    assert not dev.fingerprinted(loaded)
    assert dev.fingerprinted(HFGenerator(folder.model, folder.tokenizer, identity="hf:pico@step-40"))
    assert dev.fingerprinted(load_pool("sim:demo").members["atlas"]) and not dev.fingerprinted(Scripted(str))


def test_an_adversary_inherits_its_seats_dev_score():
    """Robustness compares a system with its seat honest and turned: the protocol's knowledge (the seat's dev
    score, measured honest) stays the same, so the effect is the adversary's text alone. Measured on its
    own dev answers, a confidently wrong atlas would lose every slm_mux tie and look harmless."""
    from coalition_gym.reports.robustness import RobustnessOptions, robustness

    task = make_task("rg/basic_arithmetic", size=40)
    system = System.build(SystemSpec(make_protocol("slm_mux"), task, load_pool("sim:demo"), split="test"))
    report = robustness([system], "confidently_wrong", RobustnessOptions(n_boot=50))
    assert report.rows[0].estimates["effect"]["value"] > 0.4
