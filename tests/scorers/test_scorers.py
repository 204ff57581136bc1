"""Scorers: multiple-choice letters, boxed/numeric/symbolic math, token F1, nDCG@k, kernels, bad input."""

from __future__ import annotations

import pytest

from coalition_gym.scorers.choice import extract_choice, score_choice
from coalition_gym.scorers.code import extract_code
from coalition_gym.scorers.kernels import KernelConfig, score_kernels, speedup_score
from coalition_gym.scorers.mathematics import boxed_match, extract_boxed, numeric_match, parse_number, score_math
from coalition_gym.scorers.ranking import ndcg_at_k, parse_ranking, score_ranking
from coalition_gym.scorers.result import ScoreResult
from coalition_gym.scorers.text import score_exact, score_f1, token_f1


@pytest.mark.parametrize("text, expected", [
    ("The answer is (C)", "C"),
    ("**C**", "C"),
    ("C)", "C"),
    ("C) because the others are wrong", "C"),
    ("Answer: C. Option A is wrong because ...", "C"),
    ("I first thought B.\n\nFinal answer: **D**", "D"),
    ("so \\boxed{B}", "B"),
    ("The correct option is B", "B"),
    ("My answer would be: (A) Paris", "A"),
    ("Answer: c", "C"),
    ("Reasoning ...\n\nB", "B"),
    ("(D)", "D"),
    ("Answer: [B]", "B"),
    ("the answer is the mitochondria (B)", "B"),
])
def test_multiple_choice_phrasings(text, expected):
    assert extract_choice(text) == expected


@pytest.mark.parametrize("text", [
    "The answer is A or C",  # hedging over several letters is unparseable
    "Answer: A, C",
    "Answer: B and D",
    "A cell is the unit of life.",  # the article, not option A
    "Answer: I think it is hard",  # the pronoun
    "Answer: E",  # not an option of a 4-option item
    "", None, "   ",
])
def test_multiple_choice_unparseable(text):
    assert extract_choice(text) is None


def test_multiple_choice_by_option_text_and_ten_options():
    options = ["Nucleus", "Mitochondria", "Ribosome", "Golgi"]
    assert extract_choice("Answer: mitochondria", options=options) == "B"
    assert extract_choice("Answer: J", n_options=10) == "J"
    assert score_choice("b", "B").score == 1.0 and score_choice("C", "B").score == 0.0
    assert score_choice(None, "B").parsed is False


def test_math_boxed_numeric_and_equivalence():
    assert extract_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("no box\nAnswer: 7") == "7"
    assert score_math("0.5", "\\frac{1}{2}").score == 1.0
    assert score_math("2\\sqrt{2}", "\\sqrt{8}").score == 1.0
    assert score_math("\\dfrac{3}{4}", "\\frac{3}{4}").reason == "exact match"
    assert score_math("3", "4").score == 0.0
    assert boxed_match("\\left( 1, 2 \\right)", "(1,2)").score == 1.0
    assert numeric_match("1,234.0", "1234").score == 1.0
    assert numeric_match("1234.05", "1234", rel_tol=1e-4).score == 1.0
    assert numeric_match("1300", "1234").score == 0.0
    assert numeric_match("45%", "45").score == 1.0
    assert numeric_match("twelve", "12").parsed is False
    assert parse_number("-3/4") == -0.75 and parse_number("\\frac{1}{8}") == 0.125 and parse_number("1/0") is None


def test_token_f1_and_exact():
    assert token_f1("The cat sat", "a cat sat down") == pytest.approx(0.8)
    assert score_f1("Paris", ["London", "paris."]).score == 1.0
    assert score_f1("", "x").parsed is False
    assert score_exact("The Answer.", "answer").score == 1.0


def test_ndcg_unmatched_invented_and_repeated_items_gain_nothing():
    rel = {"TP53": 3.0, "KRAS": 2.0, "EGFR": 1.0, "MYC": 0.0}
    assert ndcg_at_k(["TP53", "KRAS", "EGFR"], rel, k=3) == pytest.approx(1.0)
    invented = ndcg_at_k(["MADEUP1", "TP53", "KRAS"], rel, k=3)
    assert 0 < invented < 1
    assert ndcg_at_k(["MADEUP1", "MADEUP2"], rel, k=2) == 0.0
    assert ndcg_at_k(["TP53", "TP53", "TP53"], rel, k=3) == ndcg_at_k(["TP53", "X1", "X2"], rel, k=3)
    assert ndcg_at_k(["tp53", "kras", "egfr"], rel, k=3) == pytest.approx(1.0)  # symbols are case-blind
    random_like = ndcg_at_k(["MYC", "EGFR", "KRAS", "TP53"], rel, k=4, adjusted=True)
    assert random_like == 0.0  # worse than chance clamps at 0
    assert ndcg_at_k(["TP53", "KRAS", "EGFR", "MYC"], rel, k=4, adjusted=True) == pytest.approx(1.0)
    assert parse_ranking("1. tp53\n2) KRAS\n- egfr\n* TP53\nnot a gene symbol") == ["TP53", "KRAS", "EGFR"]
    assert score_ranking("", rel).parsed is False
    with pytest.raises(ValueError):
        ndcg_at_k(["A"], rel, k=0)


def test_code_extraction_rule():
    assert extract_code("text\n```python\nx = 1\n```\nmore\n```python\ny = 2\n```") == "y = 2\n"
    assert extract_code("```\nz = 3\n```") == "z = 3\n"
    assert extract_code("    return a + b") == "    return a + b\n"
    assert extract_code("I do not know.") is None
    assert extract_code(None) is None


BAD_INPUTS = [None, "", "   ", "x" * 2_000_000, b"\xff\xfe\xfd Answer: B", "Answer: \udcff", 12345, ["A"]]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_bad_input_never_crashes_and_stays_in_range(bad):
    results = [score_math(bad, "1"), numeric_match(bad, "1"), boxed_match(bad, "1"), score_f1(bad, "a b"),
               score_exact(bad, "a"), score_ranking(bad, {"A": 1.0}), score_choice(extract_choice(bad), "B")]
    for result in results:
        assert isinstance(result, ScoreResult) and 0.0 <= result.score <= 1.0
    if bad in (None, "", "   "):
        assert all(not r.parsed for r in results)
    extract_code(bad)
    extract_boxed(bad)


def test_non_utf8_bytes_are_read_leniently():
    assert extract_choice(b"\xff\xfe reasoning\nAnswer: B") == "B"
    assert score_math(b"0.5", "0.5").score == 1.0
    assert 0.0 <= score_math(b"\xff\xfe\x00", "0.5").score <= 1.0


def test_score_result_range_is_enforced():
    with pytest.raises(ValueError):
        ScoreResult(1.5, True)


KERNEL_REF = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return [2.0]
'''


@pytest.mark.slow
def test_kernel_scoring_correctness_speed_and_cheats():
    same = KERNEL_REF.replace("class Model", "class ModelNew")
    wrong = same.replace("torch.relu(x) * self.scale", "x * self.scale")
    slow = same.replace("return torch.relu(x) * self.scale",
                        "import time\n        time.sleep(0.02)\n        return torch.relu(x) * self.scale")
    cheat = same.replace("import torch\n", "import torch, time\ntime.perf_counter = lambda: 0.0\n"
                                           "torch.allclose = lambda *a, **k: True\n", 1).replace(
        "torch.relu(x) * self.scale", "x * 0")
    shape = same.replace("torch.relu(x) * self.scale", "x.sum()")
    # reaching into the harness's frames for the expected outputs: a different process now
    snoop = same.replace("return torch.relu(x) * self.scale",
                         "import sys\n        f = sys._getframe()\n        while f is not None:\n"
                         "            for v in f.f_locals.values():\n"
                         "                if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):\n"
                         "                    v[:] = [t * 0 for t in v]\n"
                         "            f = f.f_back\n        return x * 0")
    config = KernelConfig(n_timing=3, warmup=1)
    results = score_kernels([(KERNEL_REF, same), (KERNEL_REF, wrong), (KERNEL_REF, slow), (KERNEL_REF, cheat),
                             (KERNEL_REF, shape), (KERNEL_REF, None), (KERNEL_REF, "raise RuntimeError('x')"),
                             (KERNEL_REF, snoop)], config=config)
    scores = [r.score for r in results]
    assert 0 < scores[0] < 1 and results[0].details["speedup"] > 0
    assert scores[1] == 0.0 and "differs" in results[1].reason
    assert 0 < scores[2] < scores[0]  # correct but slower scores less
    assert scores[3] == 0.0  # patching torch.allclose / the clock after the harness took them fails
    assert scores[4] == 0.0 and "shape" in results[4].reason
    assert scores[5] == 0.0 and not results[5].parsed
    assert scores[6] == 0.0
    assert scores[7] == 0.0 and "differs" in results[7].reason
    assert results[0].details["repetitions"] >= 1  # fast kernels are timed in repeated calls


def test_speedup_score_grows_with_speedup():
    values = [speedup_score(s) for s in (0.0, 0.5, 1.0, 2.0, 9.0, 1000.0)]
    assert values == sorted(values) and values[0] == 0.0 and values[2] == 0.5 and values[-1] < 1.0
    assert values[4] == pytest.approx(0.9)


@pytest.mark.gpu
def test_kernel_scoring_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    same = KERNEL_REF.replace("class Model", "class ModelNew")
    result = score_kernels([(KERNEL_REF, same)], config=KernelConfig(device="cuda", n_timing=5))[0]
    assert 0 < result.score < 1 and result.details["device"].startswith("cuda")


def test_kernel_limits_follow_where_the_program_will_run(monkeypatch):
    import torch

    from coalition_gym.scorers.kernels import KERNEL_LIMITS_CPU, KERNEL_LIMITS_GPU, KernelConfig, kernel_limits

    assert kernel_limits(KernelConfig(device="cuda")) is KERNEL_LIMITS_GPU
    assert kernel_limits(KernelConfig(device="cpu")) is KERNEL_LIMITS_CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # an H200 machine, as the default sees it
    assert kernel_limits(KernelConfig()) is KERNEL_LIMITS_GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert kernel_limits(KernelConfig()) is KERNEL_LIMITS_CPU
