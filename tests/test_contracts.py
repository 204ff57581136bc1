"""The contract checks of coalition_gym.envs.testing and coalition_gym.training.testing, run over everything
registered: every protocol, every task name and prefix that has data here, every kind of generator the project
ships, every training recipe (policy, team, coalition) and every answer kind."""

import pytest
from conftest import FIXTURES, ListTask

from coalition_gym.agents.cache import CachedGenerator, GenerationCache
from coalition_gym.agents.pools import WithSampling, load_pool
from coalition_gym.agents.replicas import ReplicaGenerator
from coalition_gym.envs.protocols import PROTOCOLS
from coalition_gym.envs.testing import check_answer_kind, check_generator, check_protocol, check_task
from coalition_gym.scorers.kinds import ANSWER_KINDS
from coalition_gym.scorers.result import unparsed
from coalition_gym.settings_check import setting
from coalition_gym.tasks import TASKS, make
from coalition_gym.tasks.loaders import DataNotFoundError
from coalition_gym.training.recipes import RECIPES
from coalition_gym.training.testing import check_recipe
from coalition_gym.types import Item


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_registered_protocol_keeps_the_contract(name):
    check_protocol(name)


@pytest.mark.parametrize("name", sorted(TASKS) + ["rg/basic_arithmetic", "zoo:reverse", "mix:zoo:arith,zoo:sum"])
def test_every_registered_task_keeps_the_contract(name):
    try:
        task = make(name, size=20) if not name == "humaneval" else make(name, size=10)
    except TypeError:
        task = make(name)
    try:
        check_task(task)
    except DataNotFoundError:
        pytest.skip(f"{name}: no local data on this machine")


def _sim():
    return load_pool("sim:demo").members["atlas"]


GENERATORS = {
    "simulated": _sim,
    "cached": lambda: CachedGenerator(_sim(), GenerationCache(None)),
    "with sampling": lambda: WithSampling(_sim(), temperature=0.3),
    "replicas": lambda: ReplicaGenerator([_sim(), _sim()]),
    "hf zoo model": lambda: load_pool("zoo:tiny").members["pico"],
}


@pytest.mark.parametrize("name", list(GENERATORS))
def test_every_generator_kind_keeps_the_contract(name):
    check_generator(GENERATORS[name]())


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_registered_recipe_keeps_the_contract(name):
    check_recipe(name)


def _items_of_kind(name: str):
    """A few test items of a dataset made of the answer kind ``name`` (the fixtures), else plain items."""
    from coalition_gym.tasks.datasets import SPECS

    spec = next((s for s, spec in SPECS.items() if spec.kind == name), None)
    if spec is None:
        return [Item(id=f"plain/{k}", question=f"What is {k} + 1?", gold=str(k + 1)) for k in range(3)]
    return list(make(spec, held_out=True).items("test"))[:2]


@pytest.mark.parametrize("name", [k for k in ANSWER_KINDS if k != "kernel"] + [
    pytest.param("kernel", marks=pytest.mark.slow)])
def test_every_registered_answer_kind_keeps_the_contract(name, monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(FIXTURES / "datasets"))  # the datasets' fixtures
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    check_answer_kind(name, _items_of_kind(name))


def test_the_recipe_and_answer_kind_checks_catch_a_broken_part():
    from dataclasses import dataclass

    from coalition_gym import AnswerKind, ScoreResult
    from coalition_gym.training.recipes import register_recipe, unregister_recipe

    class BatchDependent(AnswerKind):  # an answer's score must not depend on the rest of the batch
        name = "batch_dependent_test"

        def score(self, answer, item):
            return ScoreResult(1.0, True)

        def score_batch(self, answers, items, context=None):
            return [unparsed() if a is None else ScoreResult(float(len(answers) > 1), True) for a in answers]

    with pytest.raises(AssertionError, match="alone and"):
        check_answer_kind(BatchDependent(), _items_of_kind("plain_test"))

    @dataclass
    class Unchecked:  # bounds declared, never checked
        steps: int = setting(3, ge=1)

    register_recipe("unchecked-test", Unchecked, lambda settings, context: None, kind="team")
    try:
        with pytest.raises(AssertionError, match="steps=0 is below its bound and was accepted"):
            check_recipe("unchecked-test")
    finally:
        unregister_recipe("unchecked-test")


def test_the_checks_catch_a_broken_part():
    from coalition_gym import Generator, Sample

    class BatchDependent(Generator):
        identity = "broken"

        def generate(self, asks):
            return [Sample(text=f"Answer: {len(asks)}") for _ in asks]
    with pytest.raises(AssertionError, match="different sample alone"):
        check_generator(BatchDependent())

    class Leaky(ListTask):
        def items(self, split="test"):
            return self._items  # the same ids in every split
    with pytest.raises(AssertionError, match="is in splits"):
        check_task(Leaky())


class _Overlapping(ListTask):
    """Distinct ids per split, the same questions: a score on test would measure memorised questions."""

    def items(self, split="test"):
        self.check_split(split)
        return [type(it)(id=f"{split}/{it.id}", question=it.question, gold=it.gold, category=it.category)
                for it in self._items]


def test_check_task_refuses_splits_that_share_questions_beyond_the_stated_share():
    with pytest.raises(AssertionError, match="100% of test questions are also train questions"):
        check_task(_Overlapping())
    stated = _Overlapping()
    stated.max_split_overlap = 1.0  # a task with a tiny question space says so, and passes knowingly
    check_task(stated)


def test_the_example_task_keeps_the_contract_and_its_splits_share_no_question():
    from pathlib import Path

    from coalition_gym.plugins import import_module
    from coalition_gym.tasks.base import split_overlap

    module = import_module(str(Path(__file__).resolve().parents[1] / "examples" / "custom_task.py"))
    task = module.VowelCount(size=70)
    check_task(task)
    assert split_overlap(task, "train", "test") == 0.0 and split_overlap(task, "dev", "test") == 0.0


def test_a_task_factory_gets_only_the_options_it_declares():
    from coalition_gym.errors import ConfigError
    from coalition_gym.tasks import TASKS, register_task

    class Sized(ListTask):
        def __init__(self, size: int = 3):
            super().__init__(tuple(str(k) for k in range(size)))

    register_task("contract_sized", Sized)
    try:
        assert len(make("contract_sized", size=5, seed=7).items()) == 5  # seed offered, not declared: dropped
        with pytest.raises(ConfigError, match=r"unknown option\(s\) \['colour'\]; accepted: size"):
            make("contract_sized", colour="red")
    finally:
        del TASKS["contract_sized"]
