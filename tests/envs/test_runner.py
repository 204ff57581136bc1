"""The runner: batching per backend per wave, coalition-independent seeds, failure isolation."""

import pytest
from conftest import ListTask, Scripted, answer_text

from coalition_gym.agents import load_pool
from coalition_gym.envs.protocols import EpisodeContext, make_protocol
from coalition_gym.envs.runner import ProgramFailed, RunStats, run_episodes, run_programs
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import EmptyCoalitionError
from coalition_gym.tasks import make
from coalition_gym.types import Outcome, Sample


def contexts(task, members, n=None):
    return [EpisodeContext(item=it, task=task, members=tuple(members), seed=i)
            for i, it in enumerate(task.items()[:n])]


def test_one_batched_call_per_backend_per_wave():
    task = ListTask([str(i) for i in range(50)])
    a, b = Scripted(lambda k: answer_text("1"), "A"), Scripted(lambda k: answer_text("1"), "B")
    backends = {"m1": a, "m2": a, "m3": b}  # two names share backend A
    stats = RunStats()
    proto = make_protocol("debate", rounds=3)
    outcomes = run_programs([proto.start(c) for c in contexts(task, ["m1", "m2", "m3"])], backends, stats)
    assert all(isinstance(o, Outcome) for o in outcomes)
    assert len(a.calls) == 3 and len(b.calls) == 3  # one call per wave each
    assert all(len(c) == 100 for c in a.calls) and all(len(c) == 50 for c in b.calls)
    assert stats.waves == 3 and stats.backend_calls == 6 and stats.batching_factor == 75


def test_programs_in_different_rounds_share_waves():
    task = ListTask(["1", "2"])
    gen = Scripted(lambda k: answer_text("1"))
    progs = [make_protocol("debate", rounds=3).start(contexts(task, "ab")[0]),
             make_protocol("majority_vote").start(contexts(task, "ab")[1])]
    run_programs(progs, {"a": gen, "b": gen})
    assert [len(c) for c in gen.calls] == [4, 2, 2]


def test_seeds_do_not_depend_on_the_coalition():
    task = make("rg/basic_arithmetic", size=10)
    pool = load_pool("sim:demo")
    seen = {}
    for coalition in (["atlas", "delta"], ["atlas", "borealis", "cirrus"], ["atlas"]):
        rec = Scripted(lambda ask: answer_text("1"))
        run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, {m: rec for m in pool.member_names},
                                             coalition, split=None)), task.items(), seed=4)
        seen[tuple(coalition)] = {(a.item.id, a.seed) for c in rec.calls for a in c
                                  if a.member == "atlas" and a.role != "dev"}  # not the dev-score measuring
    assert len(set(map(frozenset, seen.values()))) == 1


def test_same_member_same_prompt_same_sample_across_coalitions():
    task = make("rg/basic_arithmetic", size=40)
    pool = load_pool("sim:demo")
    proto = make_protocol("slm_mux")

    def atlas_turns(coalition):
        res = run_episodes(System.build(SystemSpec(proto, task, pool.backends(), coalition,
                                                   split=None)), task.items(), seed=1)
        return [[t.text for t in r.outcome.transcript if t.member == "atlas"] for r in res]

    assert atlas_turns(["atlas"]) == atlas_turns(["atlas", "delta"]) == atlas_turns(pool.member_names)


def test_a_failing_ask_loses_only_its_own_program():
    task = ListTask(["1", "2", "3", "4"])

    def reply(ask):
        if ask.item.id == "q2" and ask.member == "b":
            raise RuntimeError("model crashed on this prompt")
        return answer_text(ask.item.gold)

    gen = Scripted(reply)
    results = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, {"a": gen, "b": gen},
                                                   ["a", "b"], split=None)), task.items())
    assert [r.score for r in results] == [1.0, 1.0, 0.0, 1.0]
    assert results[2].error and "model crashed" in results[2].error and results[2].outcome is None
    assert all(r.error is None for i, r in enumerate(results) if i != 2)


def test_bad_backends_and_programs_are_recorded_not_raised():
    task = ListTask(["1", "2"])

    class Short(Scripted):
        def generate(self, asks):
            return [Sample("x")]  # always one sample, whatever was asked

    system = System.build(SystemSpec("majority_vote", task, {"a": Short(None)}, split=None))
    results = run_episodes(system.replace(members=("a", "b")), task.items())  # b: a member no backend answers
    assert all(r.error for r in results)
    assert "no backend is bound to 'b'" in results[0].error or "returned" in results[0].error

    def broken():
        yield []
        raise ValueError("bug in a protocol")

    def fine():
        return Outcome("1", "", ())
        yield

    (bad, good) = run_programs([broken(), fine()], {})
    assert isinstance(bad, ProgramFailed) and "bug in a protocol" in str(bad)
    assert isinstance(good, Outcome)


def test_unparseable_answers_score_zero_and_are_recorded():
    task = ListTask(["1"])
    gen = Scripted(lambda ask: "I refuse to give a final answer here.")
    (r,) = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, {"a": gen}, ["a"],
                                                split=None)), task.items())
    assert r.score == 0.0 and r.answer is None and not r.parsed and r.error is None
    assert r.to_dict()["transcript"][0]["text"].startswith("I refuse")


def test_empty_coalition_is_refused_by_run_episodes():
    task = ListTask(["1"])
    with pytest.raises(EmptyCoalitionError):
        run_episodes(System.build(SystemSpec(make_protocol("debate"), task, {}, [], split=None)), task.items())


def test_runs_are_deterministic():
    task = make("rg/basic_arithmetic", size=30)
    pool = load_pool("sim:demo")
    for name in ("debate", "llm_blender", "slm_mux", "majority_vote"):
        first = run_episodes(System.build(SystemSpec(make_protocol(name), task, pool.backends(), pool.member_names,
                                                     split=None)),
                             task.items(), seed=9)
        again = run_episodes(System.build(SystemSpec(make_protocol(name), task, pool.backends(), pool.member_names,
                                                     split=None)),
                             task.items(), seed=9)
        assert [r.to_dict() for r in first] == [r.to_dict() for r in again]
        other = run_episodes(System.build(SystemSpec(make_protocol(name), task, pool.backends(), pool.member_names,
                                                     split=None)),
                             task.items(), seed=10)
        assert [r.to_dict() for r in first] != [r.to_dict() for r in other]


def test_episodes_are_scored_in_one_batch():
    class Counting(ListTask):
        batches = []

        def score_batch(self, answers, items):
            self.batches.append(len(answers))
            return super().score_batch(answers, items)

    task = Counting(["1", "2", "3"])
    gen = Scripted(lambda ask: answer_text(ask.item.gold))
    results = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), task, {"a": gen}, ["a"],
                                                   split=None)), task.items())
    assert task.batches == [3] and [r.score for r in results] == [1.0, 1.0, 1.0]


def test_progress_hears_each_backend_calls_generations_before_any_episode_ends():
    """A long wave (20,000 debates over 64 members run minutes before any ends) moves the progress bar's
    generations after every backend call: on_progress(0, made) per call, then (1, 0) per finished episode."""
    from coalition_gym.agents.cache import GenerationCache
    from coalition_gym.envs.executors import run_cached

    task = ListTask([str(i) for i in range(5)])
    a, b = Scripted(lambda k: answer_text("1"), "A"), Scripted(lambda k: answer_text("1"), "B")
    heard: list[tuple[int, int]] = []
    outcomes, counts = run_cached(make_protocol("debate", rounds=3), contexts(task, ["m1", "m2"]),
                                  {"m1": a, "m2": b}, GenerationCache(), lambda e, g: heard.append((e, g)))
    assert all(isinstance(o, Outcome) for o in outcomes)
    calls = [h for h in heard if h[0] == 0]
    assert calls == [(0, 5)] * 6  # two backends x three rounds, five Asks each
    assert heard[:6] == calls and heard[6:] == [(1, 0)] * 5  # episodes end in the last wave
    assert sum(g for _, g in heard) == counts.generations == 30
