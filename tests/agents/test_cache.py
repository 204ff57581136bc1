"""The generation cache: sharing, persistence, corruption and resuming after SIGKILL."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import TESTS as HERE  # noqa: E402  (resume_job.py lives there)
from conftest import Scripted

from coalition_gym.agents import load_pool
from coalition_gym.agents.cache import CachedGenerator, CacheWarning, GenerationCache, ask_key
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.tasks import make
from coalition_gym.types import Ask, Message, Sample, SamplingParams
from coalition_gym.valuation.estimators import exact_shapley
from coalition_gym.valuation.game import CoalitionGame


def an_ask(content="hi", seed=1, temperature=0.7):
    return Ask("m", (Message("user", content),), seed=seed, params=SamplingParams(temperature=temperature))


def test_keys_cover_identity_prompt_params_and_seed():
    base = ask_key("model-a", an_ask())
    assert base == ask_key("model-a", an_ask())
    assert len({base, ask_key("model-b", an_ask()), ask_key("model-a", an_ask("bye")),
                ask_key("model-a", an_ask(seed=2)), ask_key("model-a", an_ask(temperature=0.1))}) == 5


def test_cached_generator_dedupes_and_persists(tmp_path):
    inner = Scripted(lambda a: f"reply to {a.messages[0].content} {a.seed}")
    cache = GenerationCache(tmp_path / "c.sqlite")
    gen = CachedGenerator(inner, cache)
    out = gen.generate([an_ask("x"), an_ask("x"), an_ask("y")])
    assert [s.text for s in out] == ["reply to x 1", "reply to x 1", "reply to y 1"]
    assert len(inner.calls) == 1 and len(inner.calls[0]) == 2  # one batch of the unique misses
    assert (gen.misses, gen.hits) == (2, 1)
    cache.close()
    reopened = CachedGenerator(Scripted(lambda a: "fresh"), GenerationCache(tmp_path / "c.sqlite"))
    assert reopened.generate([an_ask("y")])[0].text == "reply to y 1" and reopened.misses == 0


def test_samples_keep_token_ids_and_logprobs(tmp_path):
    cache = GenerationCache(tmp_path / "c.sqlite")
    cache.put_many([("k", "id", Sample("t", (1, 2), (-0.5, -0.25), "length"))])
    cache.close()
    assert GenerationCache(tmp_path / "c.sqlite").get_many(["k"])["k"] == Sample("t", (1, 2), (-0.5, -0.25), "length")


def test_corrupted_cache_file_is_reported_and_the_run_continues(tmp_path):
    path = tmp_path / "broken.sqlite"
    path.write_bytes(b"this is not an sqlite database" * 100)
    with pytest.warns(CacheWarning, match="continuing without it"):
        cache = GenerationCache(path)
    assert cache.status.startswith("disabled")
    task = make("rg/basic_arithmetic", size=10)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                 split="test"), cache=cache))
    assert exact_shapley(game).values.sum() == pytest.approx(game.value(game.players))


def test_a_corrupted_entry_is_regenerated(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = GenerationCache(path)
    key = ask_key("scripted", an_ask())
    cache.put_many([(key, "scripted", Sample("old"))])
    cache.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE generations SET sample = '{broken' WHERE key = ?", (key,))
    gen = CachedGenerator(Scripted(lambda a: "regenerated"), GenerationCache(path))
    with pytest.warns(CacheWarning, match="unreadable cache entry"):
        assert gen.generate([an_ask()])[0].text == "regenerated"


def test_coalitions_share_first_round_generations():
    task = make("rg/basic_arithmetic", size=25)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                 split="test")))
    exact_shapley(game)
    assert game.generations == 4 * 25  # each member answers each item once, for all 15 coalitions
    assert game.cache_hits == game.stats.asks - game.generations


def test_the_memory_layer_keeps_the_most_recently_used_generations_up_to_its_size(tmp_path):
    entry = 320 + len("k0") + sys.getsizeof("reply")  # what one entry is counted as
    cache = GenerationCache(None, memory_bytes=3 * entry)
    cache.put_many([(f"k{i}", "m", Sample("reply")) for i in range(3)])
    assert set(cache.get_many(["k0"])) == {"k0"}  # k0 used again: k1 is now the oldest
    cache.put_many([("k3", "m", Sample("reply"))])
    assert set(cache.get_many(["k0", "k1", "k2", "k3"])) == {"k0", "k2", "k3"}
    unbounded = GenerationCache(None, memory_bytes=None)
    unbounded.put_many([(f"k{i}", "m", Sample("reply")) for i in range(100)])
    assert len(unbounded.get_many([f"k{i}" for i in range(100)])) == 100
    on_disk = GenerationCache(tmp_path / "c.sqlite", memory_bytes=entry)
    on_disk.put_many([(f"k{i}", "m", Sample(f"reply {i}")) for i in range(5)])
    assert len(on_disk._memory) == 1  # the file keeps what memory let go
    assert {k: s.text for k, s in on_disk.get_many(["k0", "k4"]).items()} == {"k0": "reply 0", "k4": "reply 4"}


def test_a_game_with_a_small_memory_layer_gets_the_same_values():
    """Simulated members are deterministic in prompt and seed: an entry let go is generated again, the same."""
    task = make("rg/basic_arithmetic", size=12)
    spec = SystemSpec(make_protocol("debate", rounds=2), task, load_pool("sim:demo"), split="test")
    values, generations = [], []
    for memory_bytes in (None, 2000):
        game = CoalitionGame(System.build(spec, cache=GenerationCache(None, memory_bytes=memory_bytes)),
                             max_programs=12)  # a coalition at a time: what they share comes from the cache
        values.append(exact_shapley(game).values)
        generations.append(game.generations)
    assert values[0] == pytest.approx(values[1], abs=0)
    assert generations[1] > generations[0]  # the small layer let shared answers go, so some were made again


def run_job(cache, out, delay):
    return subprocess.Popen([sys.executable, str(HERE / "resume_job.py"), str(cache), str(out), str(delay)],
                            env={**os.environ, "PYTHONPATH": str(HERE.parent)})


def rows(path):
    try:
        with sqlite3.connect(path, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_identical_numbers(tmp_path):
    ref = run_job(tmp_path / "ref.sqlite", tmp_path / "ref.json", 0.0)
    assert ref.wait(timeout=120) == 0
    reference = json.loads((tmp_path / "ref.json").read_text())

    cache = tmp_path / "killed.sqlite"
    job = run_job(cache, tmp_path / "killed.json", 0.02)
    deadline = time.time() + 120
    while rows(cache) < reference["generations"] // 3 and time.time() < deadline and job.poll() is None:
        time.sleep(0.01)
    os.kill(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    done_before = rows(cache)
    assert 0 < done_before < reference["generations"], "the kill should land mid-run"
    assert not (tmp_path / "killed.json").exists()

    again = run_job(cache, tmp_path / "resumed.json", 0.0)
    assert again.wait(timeout=120) == 0
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    assert resumed["shapley"] == reference["shapley"] and resumed["loo"] == reference["loo"]
    # nothing finished is redone (the cache also holds the dev answers measured before the first episode)
    assert resumed["generations"] == reference["generations"] - (done_before - reference["dev_generations"])
