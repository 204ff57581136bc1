"""Answer kinds: one parser + rubric object per kind of answer, referenced by name from dataset specs."""

from coalition_gym.scorers.kinds import ANSWER_KINDS, ScoringContext
from coalition_gym.tasks.datasets import SPECS
from coalition_gym.types import Item


def test_every_dataset_names_a_registered_kind():
    assert {spec.kind for spec in SPECS.values()} <= set(ANSWER_KINDS)


def test_parsers_and_rubrics_per_kind():
    ctx = ScoringContext(n_options=4)
    choice = ANSWER_KINDS["choice"]
    item = Item(id="q", question="Which?", gold="B", choices=("x", "y", "z", "w"))
    assert choice.question(item).splitlines()[-2:] == ["C) z", "D) w"]
    assert choice.extract("I think (B).\nAnswer: B", item, ctx) == "B"
    assert choice.score_one("B", item).score == 1.0 and choice.score_one("A", item).score == 0.0
    math = ANSWER_KINDS["math"]
    assert math.extract("so \\boxed{\\frac{1}{2}}", None, ctx) == "\\frac{1}{2}"
    assert math.score_one("0.5", Item(id="m", question="", gold="\\frac{1}{2}")).score == 1.0
    exact = ANSWER_KINDS["exact"]
    assert exact.score_one("(C)", Item(id="e", question="", gold="(C)")).score == 1.0
    assert ANSWER_KINDS["theoremqa"].score_one("yes", Item(id="t", question="", gold="True",
                                                             meta={"answer_type": "bool"})).score == 1.0


def test_a_rubric_never_raises_and_unreadable_answers_score_zero():
    for kind in ("choice", "math", "numeric", "theoremqa", "exact", "f1"):
        rubric = ANSWER_KINDS[kind]
        assert rubric.score_one(None, Item(id="x", question="", gold="1")).parsed is False
        result = rubric.score_one("\x00" * 10000, Item(id="x", question="", gold="1"))
        assert 0.0 <= result.score <= 1.0


def test_a_kind_is_a_parser_and_a_rubric_that_see_the_item():
    from coalition_gym.scorers.kinds import resolve_answer_kind

    numeric = resolve_answer_kind("numeric")
    item = Item(id="n", question="", gold="42")
    answer = numeric.extract("so 40 + 2\nAnswer: 42", item)  # the task lends no context: defaults
    assert answer == "42" and numeric.score_batch([answer, None], [item, item])[0].score == 1.0
    assert resolve_answer_kind(numeric) is numeric
