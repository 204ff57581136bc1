import pytest

from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.tasks import make, task_names


def test_reasoning_gym_items_are_deterministic_and_scored():
    task = make("rg/basic_arithmetic", size=20, seed=3)
    again = make("rg/basic_arithmetic", size=20, seed=3)
    items = task.items("test")
    assert [i.question for i in items] == [i.question for i in again.items("test")]
    assert len(items) == 20 and task.category == "arithmetic"
    assert all(task.score(i.gold, i) == 1.0 for i in items)
    assert task.score(None, items[0]) == 0.0
    assert task.score("definitely wrong", items[0]) < 1.0


def test_splits_are_generated_from_different_seeds():
    task = make("rg/basic_arithmetic", size=30)
    test_q = [i.question for i in task.items("test")]
    assert test_q != [i.question for i in task.items("dev")]
    assert test_q != [i.question for i in task.items("train")]
    assert task.items("dev")[0].id.startswith("rg/basic_arithmetic/dev/")


def test_gsm_symbolic_runs_offline():
    task = make("rg/gsm_symbolic", size=3)
    item = task.items("test")[0]
    assert task.score(task.extract(f"so...\nAnswer: {item.gold}"), item) == 1.0


def test_unknown_task_and_dataset_suggest_names():
    with pytest.raises(UnknownNameError, match="basic_arithmetic"):
        make("rg/basic_arithmetik")
    with pytest.raises(UnknownNameError, match="unknown task"):
        make("gsm8k-from-nowhere")
    assert "rg/basic_arithmetic" in task_names()


def test_bad_split_and_size():
    task = make("rg/basic_arithmetic", size=2)
    with pytest.raises(ConfigError, match="split"):
        task.items("validation")
    with pytest.raises(ConfigError, match="size"):
        make("rg/basic_arithmetic", size=0)
    with pytest.raises(ConfigError, match="config"):
        make("rg/basic_arithmetic", size=2, config={"no_such_option": 1}).items("test")


def test_mixture_and_zoo_task_names():
    mix = make("mix:rg/basic_arithmetic,rg/syllogism", size=4)
    items = mix.items("test")
    assert len(items) == 8 and [it.category for it in items[:2]] == ["arithmetic", "logic"]
    assert all(mix.score(it.gold, it) == 1.0 for it in items)
    with pytest.raises(ConfigError, match="at least two"):
        make("mix:rg/basic_arithmetic", size=2)
    assert make("zoo:arith", size=3).items("test")[0].question.startswith("Calculate")


def test_a_task_is_called_by_the_name_it_was_made_with():
    arith, plain = make("zoo:arith", size=3), make("rg/basic_arithmetic", size=3)
    assert arith.name == "zoo:arith" and plain.name == "rg/basic_arithmetic"
    assert arith.items("test")[0].id == "zoo:arith/test/0"  # ids never collide with the plain dataset's
    mixed = make("mix:zoo:arith,zoo:sum", size=4)
    assert mixed.name == "mix:zoo:arith,zoo:sum"
    assert {it.id.split("/")[0] for it in mixed.items("test")} == {"zoo:arith", "zoo:sum"}


def test_a_mixture_scores_each_part_in_one_batch():
    """Each part of a mixture gets its own items in a single score_batch call (code parts run in parallel)."""
    mixed = make("mix:zoo:arith,zoo:reverse", size=4)
    items = mixed.items("test")
    calls = []
    for part in mixed.parts:
        original = part.score_batch

        def counting(answers, its, _original=original, _name=part.name):
            calls.append((_name, len(answers)))
            return _original(answers, its)
        part.score_batch = counting
    results = mixed.score_batch([it.gold for it in items], items)
    assert [r.score for r in results] == [1.0] * len(items)
    assert sorted(calls) == [("zoo:arith", 4), ("zoo:reverse", 4)]
