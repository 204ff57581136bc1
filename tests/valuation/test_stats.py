"""Small-sample statistics: permutation correlations, Benjamini-Hochberg, rescue/drag, item bootstrap."""

import itertools
import math

import numpy as np
import pytest

from coalition_gym.errors import ConfigError
from coalition_gym.valuation.stats import (
    Correlation,
    RescueDrag,
    benjamini_hochberg,
    bootstrap_mean,
    pearson,
    rankdata,
    rescue_drag,
    satterthwaite_df,
    spearman,
    summarise_settings,
    t_quantile_975,
)


def ranks_no_ties(a):
    return np.argsort(np.argsort(a)).astype(float) + 1


# ----------------------------------------------------------------------------- correlation statistics


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 12, 30])
def test_pearson_statistic_matches_corrcoef(n):
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=n), rng.normal(size=n)
    r = pearson(x, y, n_resamples=200)
    assert r.statistic == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert r.n == n and r.method == ("exact" if n <= 8 else "permutation")
    assert 0.0 < r.p_value <= 1.0


@pytest.mark.parametrize("n", [3, 6, 10, 25])
def test_spearman_is_pearson_on_ranks(n):
    rng = np.random.default_rng(100 + n)
    x, y = rng.normal(size=n), rng.exponential(size=n)
    rho = spearman(x, y, n_resamples=200)
    expected = np.corrcoef(ranks_no_ties(x), ranks_no_ties(y))[0, 1]
    assert rho.statistic == pytest.approx(expected, abs=1e-12)


def test_rankdata_averages_ties():
    assert rankdata([3, 1, 3, 2]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert rankdata([5, 5, 5]).tolist() == [2.0, 2.0, 2.0]
    assert rankdata([0.2, 0.1, 0.2, 0.2, 0.0]).tolist() == [4.0, 2.0, 4.0, 4.0, 1.0]


def test_spearman_with_ties_uses_average_ranks():
    x, y = [1, 2, 2, 3, 4], [10, 20, 30, 30, 50]
    expected = np.corrcoef([1, 2.5, 2.5, 4, 5], [1, 2, 3.5, 3.5, 5])[0, 1]
    assert spearman(x, y).statistic == pytest.approx(expected, abs=1e-12)


def test_spearman_is_one_for_any_monotone_relation():
    x = np.arange(1.0, 6.0)
    rho = spearman(x, np.exp(x))
    assert rho.statistic == pytest.approx(1.0)
    assert rho.p_value == pytest.approx(2 / 120)  # only the identity and the reversal reach |rho| = 1
    assert pearson(x, np.exp(x)).statistic < 0.99


# ----------------------------------------------------------------------------- exact p-values


def test_exact_p_n3_perfect_correlation():
    r = pearson([1, 2, 3], [1, 2, 3])
    assert r == Correlation(statistic=pytest.approx(1.0), p_value=pytest.approx(1 / 3), n=3, method="exact")
    assert r.p_value == 2 / 6


def test_exact_p_n4_perfectly_monotone():
    for result in (pearson([1, 2, 3, 4], [10, 20, 30, 40]), spearman([1, 2, 3, 4], [1, 4, 9, 16])):
        assert result.method == "exact"
        assert result.p_value == 2 / 24
    neg = pearson([1, 2, 3, 4], [4, 3, 2, 1])  # two-sided: a perfect negative is as extreme
    assert neg.statistic == pytest.approx(-1.0) and neg.p_value == 2 / 24


def test_exact_p_n5_by_hand_and_differs_from_t_test():
    # r = 1 - sum(d^2)/20 for rank data with n = 5; r_obs = 0.9 (one adjacent swap).
    # |r| >= 0.9  <=>  sum(d^2) <= 2 (identity + 4 adjacent swaps) or >= 38 (their 5 reversals): 10 of 120.
    x, y = [1, 2, 3, 4, 5], [1, 2, 3, 5, 4]
    r = pearson(x, y)
    assert r.statistic == pytest.approx(0.9)
    assert r.p_value == pytest.approx(10 / 120, abs=1e-15)

    # The naive asymptotic test: t = r sqrt((n-2)/(1-r^2)) with n-2 = 3 degrees of freedom, whose CDF is
    # F(t) = 1/2 + (theta + sin(theta) cos(theta)) / pi with theta = atan(t / sqrt(3)).
    t = r.statistic * math.sqrt(3 / (1 - r.statistic ** 2))
    theta = math.atan(t / math.sqrt(3))
    p_t = 2 * (1 - (0.5 + (theta + math.sin(theta) * math.cos(theta)) / math.pi))
    assert p_t == pytest.approx(0.0374, abs=5e-4)
    assert abs(r.p_value - p_t) > 0.04


def test_exact_matches_brute_force_enumeration_with_ties():
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 3, size=7).astype(float), rng.normal(size=7)
    x[0], x[1] = 0.0, 2.0  # not constant
    r_obs = abs(np.corrcoef(x, y)[0, 1])
    count = sum(abs(np.corrcoef(x, y[list(p)])[0, 1]) >= r_obs - 1e-12 for p in itertools.permutations(range(7)))
    assert pearson(x, y).p_value == pytest.approx(count / math.factorial(7), abs=1e-15)


# ----------------------------------------------------------------------------- permutation mode (n > 8)


def test_permutation_mode_approximates_full_enumeration_n9():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=9), rng.normal(size=9)
    y = y + 0.6 * x
    xc, yc = x - x.mean(), y - y.mean()
    perms = np.array(list(itertools.permutations(range(9))))
    r_all = np.abs(yc[perms] @ xc) / math.sqrt((xc @ xc) * (yc @ yc))
    r_obs = abs(np.corrcoef(x, y)[0, 1])
    exact = np.count_nonzero(r_all >= r_obs - 1e-12) / len(perms)
    result = pearson(x, y, n_resamples=20000, seed=1)
    assert result.method == "permutation"
    assert result.p_value == pytest.approx(exact, abs=0.01)


def test_permutation_p_uses_plus_one_correction_and_is_seeded():
    x = np.arange(10.0)
    r = pearson(x, 2 * x + 1, n_resamples=999, seed=0)
    assert r.statistic == pytest.approx(1.0)
    assert r.p_value == 1 / 1000  # no random permutation of 10 reaches |r| = 1; never 0
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=10), rng.normal(size=10)
    assert pearson(a, b, n_resamples=500, seed=4) == pearson(a, b, n_resamples=500, seed=4)
    assert {pearson(a, b, n_resamples=500, seed=s).p_value for s in range(5)} != {pearson(a, b).p_value}


def test_permutation_p_is_roughly_uniform_under_independence():
    ps = []
    for s in range(200):
        rng = np.random.default_rng(1000 + s)
        ps.append(pearson(rng.normal(size=10), rng.normal(size=10), n_resamples=199, seed=s).p_value)
    ps = np.array(ps)
    assert 0.35 <= ps.mean() <= 0.65
    assert 0.05 <= np.mean(ps <= 0.2) <= 0.35  # not piled at 1 or at 0


# ----------------------------------------------------------------------------- correlation edge cases


@pytest.mark.parametrize("func", [pearson, spearman])
def test_constant_input_gives_nan_and_p_one(func):
    for n in (3, 10):
        r = func([2.0] * n, list(range(n)))
        assert math.isnan(r.statistic) and r.p_value == 1.0 and r.n == n
        r = func(list(range(n)), [0.1] * n)
        assert math.isnan(r.statistic) and r.p_value == 1.0


@pytest.mark.parametrize("func", [pearson, spearman])
@pytest.mark.parametrize("x, y, match", [
    ([1, 2], [1, 2], "at least 3 paired values, got 2"),
    ([], [], "at least 3 paired values, got 0"),
    ([1, 2, 3], [1, 2, 3, 4], "same length.*3 and 4"),
    ([1, float("nan"), 3], [1, 2, 3], "NaN.*index 1"),
    ([1, 2, 3], [1, 2, float("inf")], "finite"),
    ([[1, 2], [3, 4]], [1, 2], "1-D"),
    (["a", "b", "c"], [1, 2, 3], "numbers"),
])
def test_correlation_bad_inputs(func, x, y, match):
    with pytest.raises(ConfigError, match=match):
        func(x, y)


@pytest.mark.parametrize("kwargs", [{"n_resamples": 0}, {"n_resamples": 2.5}, {"seed": -1}, {"seed": True}])
def test_correlation_bad_options(kwargs):
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        pearson([1, 2, 3, 4], [2, 1, 4, 3], **kwargs)


# ----------------------------------------------------------------------------- Benjamini-Hochberg


def test_bh_all_rejected():
    rejected, adjusted = benjamini_hochberg([0.01, 0.04, 0.03, 0.005], alpha=0.05)
    assert rejected == [True, True, True, True]
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4p/k = 0.02, 0.02, 0.04, 0.04 (already monotone)
    assert adjusted == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_bh_some_rejected_with_known_adjusted_values():
    # sorted 0.005, 0.011, 0.02, 0.045, 0.13 against i*0.01: the first three pass, 0.045 > 0.04 fails.
    rejected, adjusted = benjamini_hochberg([0.045, 0.005, 0.13, 0.02, 0.011], alpha=0.05)
    assert rejected == [False, True, False, True, True]
    assert adjusted == pytest.approx([0.05625, 0.025, 0.13, 0.1 / 3, 0.0275])


def test_bh_is_step_up_not_step_down():
    # 0.04 > 2 * 0.05/3 fails on its own, but 0.045 <= 0.05 passes, so everything below it is rejected too.
    rejected, adjusted = benjamini_hochberg([0.04, 0.01, 0.045])
    assert rejected == [True, True, True]
    assert adjusted == pytest.approx([0.045, 0.03, 0.045])  # 3*0.04/2 = 0.06 pulled down to 0.045


def test_bh_none_rejected_monotone_and_capped():
    p = [0.9, 0.2, 1.0, 0.5, 0.07]
    rejected, adjusted = benjamini_hochberg(p, alpha=0.05)
    assert rejected == [False] * 5
    assert all(0 <= a <= 1 for a in adjusted)
    order = np.argsort(p)
    assert np.all(np.diff(np.array(adjusted)[order]) >= 0)
    assert all(a >= q for a, q in zip(adjusted, p))
    assert adjusted == pytest.approx([1.0, 0.5, 1.0, 0.8333333333, 0.35])
    assert benjamini_hochberg([]) == ([], [])
    assert benjamini_hochberg([0.03], alpha=0.05) == ([True], [0.03])


@pytest.mark.parametrize("p, alpha, match", [
    ([0.1, 1.2], 0.05, r"\[0, 1\].*1.2 at index 1"),
    ([-0.01], 0.05, r"\[0, 1\]"),
    ([float("nan")], 0.05, "NaN"),
    ([0.1], 0.0, "alpha.*between 0 and 1"),
    ([0.1], 1.0, "alpha.*between 0 and 1"),
    ([0.1], -0.5, "alpha"),
])
def test_bh_bad_inputs(p, alpha, match):
    with pytest.raises(ConfigError, match=match):
        benjamini_hochberg(p, alpha)


def test_summarise_settings():
    p = {"math/debate": 0.045, "math/vote": 0.005, "qa/debate": 0.13, "qa/vote": 0.02, "code/vote": 0.011}
    s = summarise_settings(p)
    assert list(s["settings"]) == list(p)
    assert s["settings"]["math/vote"] == {"p_value": 0.005, "adjusted_p": pytest.approx(0.025), "significant": True}
    assert s["settings"]["qa/debate"]["significant"] is False
    assert (s["significant"], s["not_significant"], s["total"]) == (3, 2, 5)
    assert s["sentence"] == ("in 2 of 5 settings the solo-vs-compositional correlation is not significant "
                             "after Benjamini-Hochberg (alpha=0.05)")
    one = summarise_settings({"only": 0.5}, alpha=0.1)
    assert one["sentence"].startswith("in 1 of 1 setting the") and "(alpha=0.1)" in one["sentence"]
    with pytest.raises(ConfigError, match="non-empty mapping"):
        summarise_settings({})
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        summarise_settings({"a": 2.0})


# ----------------------------------------------------------------------------- rescue / drag


def test_rescue_drag_hand_example():
    model = [1, 0, 0, 1, 1, 0]
    system = [1, 1, 0, 0, 1, 1]
    assert rescue_drag(model, system) == RescueDrag(rescue=2 / 6, drag=1 / 6, n_items=6)
    # threshold is inclusive: 0.5 counts as right at threshold 0.5
    assert rescue_drag([0.4, 0.5, 0.9], [0.5, 0.2, 0.6], threshold=0.5) == RescueDrag(1 / 3, 1 / 3, 3)
    assert rescue_drag([1, 1], [1, 1]) == RescueDrag(0.0, 0.0, 2)


@pytest.mark.parametrize("model, system, kwargs, match", [
    ([1, 0], [1], {}, "same length.*2 and 1"),
    ([], [], {}, "at least 1 item"),
    ([1, float("nan")], [1, 0], {}, "NaN"),
    ([1, 0], [1, 0], {"threshold": float("nan")}, "threshold"),
])
def test_rescue_drag_bad_inputs(model, system, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        rescue_drag(model, system, **kwargs)


# ----------------------------------------------------------------------------- bootstrap


def test_bootstrap_constant_rows_and_single_item():
    res = bootstrap_mean([[0.1] * 7, [3.0] * 7], n_boot=300)
    assert res.mean.tolist() == [0.1, 3.0]
    assert res.stderr.tolist() == [0.0, 0.0]
    assert res.ci_low.tolist() == [0.1, 3.0] and res.ci_high.tolist() == [0.1, 3.0]
    one = bootstrap_mean([[0.25], [-1.5], [0.1]])
    assert one.mean.tolist() == [0.25, -1.5, 0.1]
    assert one.stderr.tolist() == [0.0, 0.0, 0.0]
    assert one.ci_low.tolist() == one.mean.tolist() == one.ci_high.tolist()


def test_bootstrap_stderr_close_to_analytic_and_ci_contains_mean():
    rng = np.random.default_rng(0)
    data = rng.normal(loc=[[0.0], [1.0], [5.0]], scale=[[1.0], [0.3], [2.0]], size=(3, 400))
    res = bootstrap_mean(data, n_boot=2000, seed=0)
    assert res.mean == pytest.approx(data.mean(axis=1), abs=1e-12)
    assert res.stderr == pytest.approx(data.std(axis=1) / math.sqrt(400), rel=0.1)
    assert np.all(res.ci_low < res.mean) and np.all(res.mean < res.ci_high)
    assert res.ci_high - res.ci_low == pytest.approx(2 * 1.96 * res.stderr, rel=0.15)
    narrow = bootstrap_mean(data, n_boot=2000, seed=0, confidence=0.5)
    assert np.all(narrow.ci_high - narrow.ci_low < res.ci_high - res.ci_low)


def test_bootstrap_resamples_with_replacement():
    # two items 0 and 1: bootstrap means of 2 draws have variance 0.25 / 2
    res = bootstrap_mean([[0.0, 1.0]], n_boot=4000, seed=2)
    assert res.stderr[0] == pytest.approx(math.sqrt(0.125), rel=0.05)
    assert (res.ci_low[0], res.ci_high[0]) == (0.0, 1.0)


def test_bootstrap_stderr_is_ddof1_and_ci_is_linear_percentile():
    # With two bootstrap means b1 < b2, the linear-interpolation percentiles are b1 + 0.025 (b2 - b1) and
    # b2 - 0.025 (b2 - b1), and the ddof=1 standard deviation is (b2 - b1) / sqrt(2).
    data = np.random.default_rng(9).normal(size=(1, 20))
    res = bootstrap_mean(data, n_boot=2, seed=0)
    spread = (res.ci_high[0] - res.ci_low[0]) / 0.95
    assert spread > 0
    assert res.stderr[0] == pytest.approx(spread / math.sqrt(2), rel=1e-9)


def test_bootstrap_is_seeded_and_shares_item_indices_across_players():
    rng = np.random.default_rng(5)
    row = rng.exponential(size=30)
    res = bootstrap_mean(np.vstack([row, row, row + 10.0]), n_boot=500, seed=3)
    again = bootstrap_mean(np.vstack([row, row, row + 10.0]), n_boot=500, seed=3)
    for a, b in zip(res, again):
        assert np.array_equal(a, b)
    assert res.stderr[0] == res.stderr[1]
    assert res.stderr[2] == pytest.approx(res.stderr[0], rel=1e-9)
    assert res.ci_low[2] == pytest.approx(res.ci_low[0] + 10.0)
    other = bootstrap_mean(row[None, :], n_boot=500, seed=4)
    assert other.stderr[0] != res.stderr[0]


@pytest.mark.parametrize("data, kwargs, match", [
    (np.empty((0, 5)), {}, "at least 1 player and 1 item"),
    (np.empty((2, 0)), {}, "at least 1 player and 1 item"),
    ([1.0, 2.0], {}, "2-D"),
    (np.ones((2, 2, 2)), {}, "2-D"),
    ([[1.0, float("nan")]], {}, "NaN"),
    ([[1.0, 2.0]], {"n_boot": 1}, "n_boot.*>= 2"),
    ([[1.0, 2.0]], {"seed": -3}, "seed"),
    ([[1.0, 2.0]], {"confidence": 1.0}, "confidence.*between 0 and 1"),
    ([[1.0, 2.0]], {"confidence": 0}, "confidence"),
])
def test_bootstrap_bad_inputs(data, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        bootstrap_mean(data, **kwargs)


# -- what reports print --------------------------------------------------------------------------------------------


def test_p_values_are_never_printed_as_zero_and_ties_share_a_rank():
    from coalition_gym.valuation.stats import format_p, shared_ranks

    assert format_p(0.0) == "< 0.0001" and format_p(5e-5) == "< 0.0001" and format_p(0.01234) == "0.0123"
    assert format_p(None) == "undefined" and format_p(float("nan")) == "undefined"
    assert shared_ranks([0.5, 0.7, 0.7, 0.1]) == [3, 1, 1, 4]


def test_undefined_correlations_say_so_and_permutations_follow_the_seed():
    from coalition_gym.reports.leaderboard import correlate

    flat = correlate([0.5, 0.5, 0.5, 0.5], [0.1, 0.2, 0.3, 0.4])
    assert flat["spearman"] is None and flat["spearman_p"] is None and "solo scores are all equal" in flat["method"]
    x = [0.1, 0.5, 0.2, 0.9, 0.4, 0.3, 0.8, 0.6, 0.7, 0.05]
    y = [0.2, 0.1, 0.4, 0.3, 0.6, 0.5, 0.8, 0.7, 0.05, 0.9]
    a, b = correlate(x, y, seed=1), correlate(x, y, seed=2)
    assert a["method"] == "permutation" and a["spearman_p"] != b["spearman_p"]
    assert correlate(x, y, seed=1) == a


def test_result_files_are_strict_json(tmp_path):
    import json

    from coalition_gym.result_files import JsonLines, write_json

    write_json(tmp_path / "a.json", {"r": float("nan"), "xs": [1.0, float("inf")]})
    with JsonLines(tmp_path / "b.jsonl") as lines:
        lines.write({"r": float("-inf")})

    def refuse(constant):
        raise ValueError(constant)
    assert json.loads((tmp_path / "a.json").read_text(), parse_constant=refuse) == {"r": None, "xs": [1.0, None]}
    assert json.loads((tmp_path / "b.jsonl").read_text(), parse_constant=refuse) == {"r": None}


def test_a_sweep_leaves_undefined_settings_out_of_the_count_and_says_so(tmp_path):
    from coalition_gym.reports.sweep import SweepGrid, run_sweep

    grid = SweepGrid(["sim:demo", "sim:random-2"], ["majority_vote"], ["rg/basic_arithmetic"], ["loo"], 20)
    report = run_sweep(grid, tmp_path, log=lambda _: None)
    summary = report.summary
    assert summary["undefined"] == ["sim:random-2 / majority_vote"]
    # sim:demo's 4 models on one task: no test could reach alpha (smallest p 2/4!), left out too, and said so
    assert list(summary["too_few"]) == ["sim:demo / majority_vote"] and "total" not in summary
    assert "1 setting left out, correlation undefined" in summary["sentence"]
    assert "1 setting left out, too few observations" in summary["sentence"]
    assert "| sim:random-2 / majority_vote | 2 | undefined | undefined | n/a |" in (tmp_path / "sweep.md").read_text()


@pytest.mark.parametrize("df,quantile", [(1, 12.7062), (3, 3.1824), (5, 2.5706), (8, 2.3060), (12, 2.1788),
                                         (30, 2.0423), (120, 1.9799), (math.inf, 1.9600)])
def test_the_t_quantile_matches_the_table(df, quantile):
    assert t_quantile_975(df) == pytest.approx(quantile, abs=5e-4)


def test_the_t_quantile_rounds_fractional_degrees_of_freedom_down_but_not_round_off():
    """Satterthwaite's df are fractional: 2.5 is taken as 2 (conservative), but 1.9999999999999987 (a sum
    that is 2 in exact arithmetic) is 2 (4.30), not 1 (12.71)."""
    assert t_quantile_975(2 - 1.3e-15) == pytest.approx(4.3027, abs=5e-4)
    assert t_quantile_975(2.5) == pytest.approx(4.3027, abs=5e-4)
    assert t_quantile_975(4.999) == pytest.approx(2.7764, abs=5e-4)


def test_the_t_quantile_is_nan_without_degrees_of_freedom():
    assert math.isnan(t_quantile_975(0))


def test_satterthwaite_degrees_of_freedom():
    """Equal components add their degrees of freedom; a sum carried by one group has that group's; a zero sum
    has nothing to be uncertain about; the formula matches its textbook value on an uneven pair."""
    np.testing.assert_allclose(satterthwaite_df([[1.0], [1.0], [1.0]], [4, 4, 4]), [12.0])
    np.testing.assert_allclose(satterthwaite_df([[2.0, 0.0], [0.0, 0.0]], [3, 9]), [3.0, np.inf])
    v, d = np.array([1.0, 3.0]), np.array([2, 10])
    np.testing.assert_allclose(satterthwaite_df(v[:, None], d), [16 / (1 / 2 + 9 / 10)])
    with pytest.raises(ConfigError, match="at least 1"):
        satterthwaite_df([[1.0], [1.0]], [0, 3])
