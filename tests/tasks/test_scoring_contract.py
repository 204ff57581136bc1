"""One scoring contract: every task is its items plus an answer kind (parser + rubric), and drivers call
one method, ``Task.score_batch``; ``score`` is a convenience over it, and a task that overrides ``score``
is refused (its rubric is its answer kind)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, ListTask

from coalition_gym import AnswerKind, Item, ScoreResult, Task, register_answer_kind
from coalition_gym.envs.testing import check_task
from coalition_gym.errors import ConfigError
from coalition_gym.scorers.kinds import ANSWER_KINDS, Code
from coalition_gym.tasks import SPECS, make
from coalition_gym.tasks.reasoning_gym import ReasoningGymAnswer, ReasoningGymTask


@pytest.fixture(autouse=True)
def data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("COALITION_GYM_DATA", str(FIXTURES / "datasets"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


class Counted(AnswerKind):
    """A rubric that counts its calls: exact match with the gold."""

    name = "counted_test"

    def __init__(self):
        self.calls = 0

    def score(self, answer: str, item: Item) -> ScoreResult:
        self.calls += 1
        return ScoreResult(float(answer == item.gold), True)


class Words(Task):
    name = "words_test"

    def __init__(self, kind: AnswerKind | str):
        self.answer_kind = kind

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        return [Item(id=f"{split}/{k}", question=f"Say {w}.", gold=w) for k, w in enumerate(("one", "two"))]


@pytest.mark.parametrize("name", ["rg/basic_arithmetic", "zoo:arith", "humaneval", "mix:zoo:arith,humaneval", *SPECS])
def test_every_task_is_composed_of_an_answer_kind(name):
    task = make(name)
    assert isinstance(task.kind, AnswerKind)
    item = task.items("test")[0]
    results = task.score_batch([None, task.extract(f"Answer: {item.gold}", item)], [item, item])
    assert [type(r) for r in results] == [ScoreResult, ScoreResult] and results[0].score == 0.0


def test_kinds_by_task():
    assert make("gsm8k").kind is ANSWER_KINDS["numeric"]
    assert make("humaneval").kind is make("mbpp").kind is ANSWER_KINDS["code"]  # one code kind for both
    assert isinstance(make("rg/basic_arithmetic").kind, ReasoningGymAnswer)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_dataset_fixture_keeps_the_task_contract(name):
    if name == "kernelbench":
        pytest.skip("kernels are timed in the sandbox: tests/tasks/test_task_registry.py (slow)")
    check_task(make(name, held_out=True), splits=("test",))


def test_score_goes_through_score_batch():
    kind = Counted()
    task = Words(kind)
    item = task.items()[0]
    assert task.score("one", item) == 1.0 and task.score("two", item) == 0.0
    assert [r.score for r in task.score_batch(["one", None, "two"], task.items() + [item])] == [1.0, 0.0, 0.0]
    assert kind.calls == 4  # None never reaches the rubric


def test_a_registered_kind_is_named_by_tasks_and_refuses_clashes():
    kind = Counted()
    register_answer_kind("counted_test", kind)
    try:
        register_answer_kind("counted_test", kind)  # the same kind again: fine (a module imported twice)
        task = Words("counted_test")
        assert task.kind is kind and task.score("two", task.items()[1]) == 1.0
        with pytest.raises(ConfigError, match="already registered"):
            register_answer_kind("counted_test", Counted())
        with pytest.raises(ConfigError, match="AnswerKind"):
            register_answer_kind("not_a_kind", lambda a, i: 1.0)  # type: ignore[arg-type]
        with pytest.raises(KeyError, match="unknown answer kind 'counted_tset'.*counted_test"):
            Words("counted_tset").score("one", task.items()[0])
    finally:
        ANSWER_KINDS.pop("counted_test")


def test_a_task_without_an_answer_kind_says_what_to_set():
    class Bare(Task):
        def items(self, split="test"):
            return [Item(id="x", question="?", gold="1")]

    with pytest.raises(ConfigError, match="has no answer kind: set answer_kind"):
        Bare().score_batch(["1"], Bare().items())


def test_a_task_that_overrides_score_is_refused_with_the_answer_kind_to_write():
    with pytest.raises(ConfigError, match="overrides score: a task's rubric is its answer kind"):
        class HalfCredit(ReasoningGymTask):
            def score(self, answer, item):
                return 0.5


def test_a_custom_rubric_under_a_built_in_task_changes_only_the_score():
    class Lenient(AnswerKind):
        def score(self, answer, item):
            return ScoreResult(1.0, True, "anything goes")

    class LenientArithmetic(ReasoningGymTask):
        answer_kind = Lenient()

    plain, lenient = make("rg/basic_arithmetic", size=3), LenientArithmetic("basic_arithmetic", size=3)
    item = lenient.items("test")[0]
    assert lenient.prompt(item) == plain.prompt(item) and lenient.items("test") == plain.items("test")
    assert lenient.score("wrong", item) == 1.0 and plain.score("wrong", item) == 0.0


def test_reasoning_gym_judges_every_answer_but_none():
    task = make("rg/basic_arithmetic", size=3)
    item = task.items("test")[0]
    assert task.score_batch([None, "", item.gold], [item] * 3) == [
        ScoreResult(0.0, False, "no answer"), ScoreResult(0.0, True, ""),  # "": reasoning-gym's own verdict
        ScoreResult(1.0, True, "")]


def test_the_code_kind_runs_each_items_harness():
    mbpp = Item(id="m", question="", gold="", meta={"tests": ("assert f(1) == 2",), "setup": ""})
    stub, check = 'def f(x):\n    """x + 1"""\n', "def check(c):\n    assert c(1) == 2\n"
    humaneval = Item(id="h", question="", gold="", meta={"prompt": stub, "test": check, "entry_point": "f"})
    right, wrong = "def f(x):\n    return x + 1\n", "def f(x):\n    return x\n"
    scores = [r.score for r in Code().score_batch([right, wrong, right, wrong], [mbpp, mbpp, humaneval, humaneval])]
    assert scores == [1.0, 0.0, 1.0, 0.0]


def test_the_default_kind_asks_for_the_answer_line_every_protocol_reads():
    from coalition_gym.prompts import ANSWER_INSTRUCTION, SYSTEM_PROMPT

    item = ListTask().items()[0]
    assert AnswerKind.instruction == ANSWER_INSTRUCTION
    assert [(m.role, m.content) for m in ListTask().prompt(item)] == [
        ("system", SYSTEM_PROMPT), ("user", f"{item.question}\n\n{ANSWER_INSTRUCTION}")]
