"""A coalition game's episode records live in a temporary file, not in memory, and read back whole."""

import math

import pytest

from coalition_gym.agents import load_pool
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.tasks import make
from coalition_gym.valuation.episode_records import EpisodeRecords
from coalition_gym.valuation.estimators import leave_one_out
from coalition_gym.valuation.game import CoalitionGame


def test_records_read_back_as_written_and_failures_are_counted_as_they_arrive():
    store = EpisodeRecords()
    ab, a = frozenset({"a", "b"}), frozenset({"a"})
    rows = [{"coalition": ["a", "b"], "error": None, "score": 1.0, "turns": [{"text": "é \n x"}]},
            {"coalition": ["a", "b"], "error": "backend down", "score": float("nan"), "turns": []}]
    store[ab] = rows
    store[a] = []
    assert store[a] == [] and len(store) == 2 and set(store) == {ab, a}
    back = store[ab]
    assert back[0] == rows[0] and math.isnan(back[1]["score"]) and back[1]["error"] == "backend down"
    assert (store.failures.episodes, store.failures.failed) == (2, 1)
    with pytest.raises(ValueError, match="already stored"):
        store[ab] = rows  # counted twice otherwise
    with pytest.raises(KeyError):
        store[frozenset({"b"})]


def test_a_game_keeps_its_records_in_the_store():
    spec = SystemSpec(make_protocol("debate", rounds=2), make("rg/basic_arithmetic", size=6), load_pool("sim:demo"),
                      split="test")
    game = CoalitionGame(System.build(spec))
    leave_one_out(game)
    assert isinstance(game.records, EpisodeRecords)
    full = game.records[frozenset(game.players)]
    assert [r["item_id"] for r in full] == [it.id for it in game.items]
    assert [r["score"] for r in full] == list(game.per_item(frozenset(game.players)))
    assert all(r["turns"] and "text" in r["turns"][0] for r in full)
    assert game.failure_summary().episodes == sum(len(rows) for rows in game.records.values())


def test_a_game_runs_its_coalitions_in_chunks_bounded_by_episodes_times_members():
    spec = SystemSpec(make_protocol("debate", rounds=2), make("rg/basic_arithmetic", size=6), load_pool("sim:demo"),
                      split="test")
    whole = CoalitionGame(System.build(spec))
    chunked = CoalitionGame(System.build(spec), max_member_episodes=6 * 5)
    coalitions = [frozenset(whole.players), frozenset(whole.players[:2]), frozenset(whole.players[2:]),
                  frozenset(whole.players[:1])]
    assert [len(chunk) for chunk in chunked._chunks(coalitions)] == [1, 3]  # 6 items x (4); 6 x (2 + 2 + 1) = 30
    assert [len(chunk) for chunk in whole._chunks(coalitions)] == [4]
    assert [len(chunk) for chunk in CoalitionGame(System.build(spec), max_programs=6)._chunks(coalitions)] == [1] * 4
    for c in coalitions:
        assert list(chunked.per_item(c)) == list(whole.per_item(c))
