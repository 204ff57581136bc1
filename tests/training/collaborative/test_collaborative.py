"""Sparta alignment and multi-agent finetuning: their parts (DPO loss, reputations, duels, judging,
debate data) and the coalition game with training inside (trainings per estimator, resume, export,
the originals untouched, bad inputs)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from coalition_gym.agents.pools import load_pool
from coalition_gym.agents.simulated import AgentProfile, SimulatedAgent
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.tasks import make as make_task
from coalition_gym.training.collaborative import TrainedCoalitionGame, make_coalition_settings
from coalition_gym.training.collaborative.finetuning import debate_examples
from coalition_gym.training.collaborative.judging import parse_score
from coalition_gym.training.collaborative.reputation import Reputations
from coalition_gym.training.collaborative.sparta import deal_duels
from coalition_gym.training.losses import dpo_loss
from coalition_gym.types import Ask, Item, Outcome, Sample
from coalition_gym.valuation.estimators import ESTIMATORS

MIXED = {"name": "mixed", "members": [
    {"name": "pico", "backend": "hf", "model": "zoo:tiny/pico"},
    {"name": "nano", "backend": "hf", "model": "zoo:tiny/nano"},
    {"name": "referee", "backend": "sim", "profile": {"skill": 0.5, "judge_skill": 0.95}}]}
FAST = dict(train_items=6, dev_items=4, max_new_tokens=6, batch_size=4, lr=1e-3)


@pytest.fixture(scope="module")
def pool():
    return load_pool(MIXED)


@pytest.fixture(scope="module")
def task():
    return make_task("zoo:arith", size=8)


def game(pool, task, name="sparta", train_dir=None, **settings):
    recipe = make_coalition_settings(name, **{**FAST, "iterations": 2 if name == "sparta" else 1, **settings})
    system = System.build(SystemSpec(recipe.evaluation, task, pool, split="test", n_items=6))
    return TrainedCoalitionGame(recipe, system, train_dir=train_dir)


# -- parts ---------------------------------------------------------------------------------------

def test_dpo_loss_by_hand_and_bad_inputs():
    c, r = torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -1.0])
    rc, rr = torch.tensor([-1.5, -2.0]), torch.tensor([-2.0, -2.0])
    out = dpo_loss(c, r, rc, rr, beta=0.5)
    margins = [0.5 * ((-1 + 1.5) - (-3 + 2)), 0.5 * ((-2 + 2) - (-1 + 2))]
    expected = sum(-math.log(1 / (1 + math.exp(-m))) for m in margins) / 2
    assert float(out.loss) == pytest.approx(expected, rel=1e-6)
    assert out.accuracy == 0.5
    with pytest.raises(ConfigError, match="beta"):
        dpo_loss(c, r, rc, rr, beta=0.0)
    with pytest.raises(ConfigError, match="one length"):
        dpo_loss(c, r[:1], rc, rr)


def test_reputation_update_by_hand():
    reps = Reputations(["a", "b", "c"])
    reps.update("a", "b", 2.0)  # a's response scored 2 points higher
    k, gap = 10.0, 0.01  # equal reputations: the expected gap is 0, so epsilon applies
    delta = k * 2.0 * math.tanh(0.5) * gap / 20.0
    assert reps.score["a"] == pytest.approx(100 + delta)
    assert reps.score["b"] == pytest.approx(100 - delta)
    assert reps.score["c"] == 100.0
    assert reps.k == pytest.approx(10.0 * 0.9 ** 0.1)
    judged = reps.weighted_difference({"c": (8.0, 3.0)})
    assert judged == pytest.approx(5.0)
    assert reps.weighted_difference({}) is None


def test_opponent_is_closest_in_reputation_unless_random():
    reps = Reputations(["a", "b", "c", "d"], score={"a": 100.0, "b": 130.0, "c": 101.0, "d": 60.0})
    rng = random.Random(0)
    assert {reps.opponent("a", rng, 0.0, 1) for _ in range(20)} == {"c"}
    assert {reps.opponent("a", rng, 1.0, 1) for _ in range(200)} == {"b", "c", "d"}


def test_duels_deal_each_member_once_per_round_and_never_against_itself():
    reps = Reputations(["a", "b", "c"])
    duels = deal_duels(["a", "b", "c"], 7, reps, random.Random(1), 0.2, 3)
    assert [k for k, _, _ in duels] == list(range(7))
    for start in (0, 3):  # two full rounds of three
        assert sorted(first for _, first, _ in duels[start:start + 3]) == ["a", "b", "c"]
    assert all(first != other for _, first, other in duels)


def test_judge_scores_parse_and_the_simulated_judge_prefers_right_answers():
    assert parse_score('{"score": 8}') == 8.0
    assert parse_score("Score: 3, not great") == 3.0
    assert parse_score("I'd say 7/10") == 7.0
    assert parse_score("eleven out of ten") is None and parse_score('{"score": 11}') is None
    judge = SimulatedAgent(AgentProfile("j", judge_skill=0.9))
    item = Item("q1", "What is 2+2?", "4")
    scores = {ans: [parse_score(judge.reply(Ask("j", (), seed=s, role="judge", item=item, info={"answers": (ans,)})))
                    for s in range(200)] for ans in ("4", "5")}
    assert np.mean(scores["4"]) > np.mean(scores["5"]) + 3


def test_debate_examples_keep_turns_that_agree_with_the_majority():
    item = Item("q", "2+2?", "4")
    task = make_task("zoo:arith", size=2)

    def turn(member, round_, answer):
        return Ask(member, (), seed=0, round=round_, item=item), Sample(text=f"Answer: {answer}")

    turns = [turn("a", 0, "4"), turn("a", 1, "4"), turn("b", 0, "5"), turn("b", 1, "4"), turn("c", 0, "5"),
             turn("c", 1, "5")]
    task.extract = lambda text, it: text.split(": ")[1]  # noqa: E731 - the test's own answer format
    out = debate_examples(task, [Outcome("4", "", ())], [item], turns, fixed_weight=0.8)
    assert [(e.ask.round, e.weight) for e in out["a"]] == [(0, 1.0), (1, pytest.approx(0.2))]  # stayed right
    assert [(e.ask.round, e.weight) for e in out["b"]] == [(1, 0.8)]  # fixed its first answer
    assert "c" not in out  # never agreed


# -- the game ------------------------------------------------------------------------------------

def test_sparta_trains_copies_judged_by_a_simulated_member(pool, task):
    before = {n: {k: v.clone() for k, v in pool.members[n].model.state_dict().items()} for n in ("pico", "nano")}
    g = game(pool, task)
    value = g.value(g.players)
    record = g.trained[frozenset(g.players)].record
    assert record["judging"]["modes"] == {"pico": "likelihood", "nano": "likelihood", "referee": "prompt"}
    first = record["iterations"][0]
    assert first["pairs"] + first["ties_dropped"] + first["unjudged"] == first["duels"] == FAST["train_items"]
    assert set(first["updates"]) == {"pico", "nano"}  # the simulated member judges but is not trained
    assert "referee" in record["frozen"]
    assert record["selected"]["member"] in ("pico", "nano") and 0.0 <= value <= 1.0
    for n in ("pico", "nano"):  # the pool's models are untouched
        after = pool.members[n].model.state_dict()
        assert all(torch.equal(before[n][k], after[k]) for k in after)
    trained = g.trained[frozenset(g.players)].members[record["selected"]["member"]].model.state_dict()
    original = before[record["selected"]["member"]]
    assert any(not torch.equal(original[k], trained[k]) for k in trained)


def test_a_pair_has_no_judge_so_sparta_records_why_and_answers_with_the_best_untrained(pool, task):
    g = game(pool, task)
    g.value(["pico", "nano"])
    record = g.trained[frozenset({"pico", "nano"})].record
    assert all(it["no_training"].startswith("no preference pairs: no member outside a duel") for it in
               record["iterations"])
    assert record["selected"]["iteration"] is None and "no iteration produced" in record["selected"]["why"]


def test_trainings_per_estimator_and_resume_without_retraining(pool, task, tmp_path):
    g = game(pool, task, train_dir=tmp_path)
    ESTIMATORS["loo"](g, n_boot=10)
    assert g.cost.trainings == 4 and g.cost.reused == 0  # the full coalition and its three pairs
    ESTIMATORS["shapley"](g, n_boot=10)
    assert g.cost.trainings == 4  # singletons are worth 0 without training (they cannot duel)
    assert len(g.notes) == 3 and all("at least 2 members" in why for why in g.notes.values())
    again = game(pool, task, train_dir=tmp_path)
    ESTIMATORS["shapley"](again, n_boot=10)
    assert again.cost.trainings == 0 and again.cost.reused == 4
    for c in g.trained:
        assert np.array_equal(again.per_item(c), g.per_item(c))


def test_multiagent_finetuning_and_export_as_a_pool(pool, task, tmp_path):
    g = game(pool, task, name="multiagent_finetuning")
    value = g.value(g.players)
    record = g.trained[frozenset(g.players)].record
    assert record["iterations"][0]["debates"] == FAST["train_items"]
    assert set(record["iterations"][0]["updates"]) | set(record["iterations"][0]["not_trained"]) == {"pico", "nano"}
    path = g.export(g.players, tmp_path / "trained")
    saved = load_pool(str(path))
    assert saved.member_names == ["pico", "nano", "referee"]
    rows = g.records[frozenset(g.players)]
    assert 0.0 <= value <= 1.0 and rows[0]["coalition"] == ["pico", "nano", "referee"]


def test_bad_inputs_are_refused_before_any_training(task):
    sims = load_pool("sim:demo")
    with pytest.raises(ConfigError, match="no member of pool 'sim:demo' has trainable weights"):
        game(sims, task)
    with pytest.raises(ConfigError, match="judge="):
        make_coalition_settings("sparta", judge="oracle")
    with pytest.raises(ConfigError, match="iterations=0"):
        make_coalition_settings("multiagent_finetuning", iterations=0)
    with pytest.raises(UnknownNameError, match="unknown protocol .sparta."):  # the environments know protocols only
        import gymnasium as gym

        import coalition_gym  # noqa: F401
        from coalition_gym.envs.system import System, SystemSpec
        System.build(SystemSpec("sparta", "zoo:arith", "sim:demo"))
    with pytest.raises(UnknownNameError, match="unknown protocol .sparta."):
        make_protocol("sparta")
    assert not any("sparta" in env_id.lower() for env_id in gym.registry if env_id.startswith("coalition_gym/"))


@pytest.mark.parametrize("name", ["sparta", "multiagent_finetuning"])
def test_every_coalition_recipe_keeps_the_contract(name):
    from coalition_gym.training.recipes import recipe_names
    from coalition_gym.training.testing import check_coalition_recipe

    assert name in recipe_names("coalition")
    check_coalition_recipe(name)
