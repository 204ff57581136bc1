import pytest

from coalition_gym.scorers.answers import extract_final_answer, last_boxed, normalize_answer


@pytest.mark.parametrize("text, expected", [
    ("Reasoning...\nAnswer: 42", "42"),
    ("Answer: 3\nwait, no.\nFinal answer: 4", "4"),
    ("so we get \\boxed{\\frac{1}{2}} in the end", "\\frac{1}{2}"),
    ("The answer is -7.", "-7"),
    ("Answer: **12.0**", "12"),
    ("Answer: $5$.", "5"),
    ("Answer: 1,234", "1234"),
    ("  17  ", "17"),  # compact prompts: the reply is the answer alone
    ("Answer: 12586100868344725", "12586100868344725"),  # long integers stay exact
    ("answer: noremopyh", "noremopyh"),
])
def test_extracts_the_final_answer(text, expected):
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "I am not sure.", "I could not finish the computation because it is long.\nSorry.",
                                  "Answer:   ", "x" * 200])
def test_unparseable_replies_give_none(text):
    assert extract_final_answer(text) is None


def test_boxed_handles_nested_braces():
    assert last_boxed("a \\boxed{x^{2}} b \\boxed{\\sqrt{y_{1}}}") == "\\sqrt{y_{1}}"
    assert last_boxed("\\boxed{unclosed") is None


def test_normalize_numbers_and_wrappers():
    assert normalize_answer(" -4.0 ") == "-4"
    assert normalize_answer("0.50") == "0.5"
    assert normalize_answer("`hello   world`") == "hello world"
    assert normalize_answer("+007") == "7"
