"""Pairwise Shapley and Banzhaf interactions: exact values against shapiq's ExactComputer (SII = k-SII of
order 2 for pairs, BII; not STII), against hand-computed games, the sampled estimator, the estimator's
registration, and best-team picking. shapiq is the ``bench`` extra; its test is skipped without it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_proxy import noisy_typed_game

from coalition_gym.valuation.estimators import ESTIMATORS, valued_estimators
from coalition_gym.valuation.game import FunctionGame
from coalition_gym.valuation.interactions import (
    SampledSettings,
    exact_interactions,
    interaction_estimator,
    interactions,
    sampled_interactions,
)
from coalition_gym.valuation.teams import best_team, best_team_sentence

PLAYERS = tuple("abcdef")


def table_game(table: np.ndarray, players=PLAYERS) -> FunctionGame:
    """A game from a table of per-item coalition values, rows indexed by bitmask (bit k = players[k])."""
    return FunctionGame(players, lambda c: table[sum(1 << players.index(p) for p in c)], n_items=table.shape[1])


def random_table(n: int, items: int, seed: int) -> np.ndarray:
    table = np.random.default_rng(seed).random((1 << n, items))
    table[0] = 0.0
    return table


def brute_force(table: np.ndarray, n: int, i: int, j: int, index: str) -> float:
    """The textbook definitions, summed coalition by coalition."""
    v = table.mean(axis=1)
    total = 0.0
    others = [k for k in range(n) if k not in (i, j)]
    for size in range(n - 1):
        for s in itertools.combinations(others, size):
            m = sum(1 << k for k in s)
            delta = v[m | 1 << i | 1 << j] - v[m | 1 << i] - v[m | 1 << j] + v[m]
            w = (math.factorial(size) * math.factorial(n - size - 2) / math.factorial(n - 1) if index == "shapley"
                 else 1 / 2 ** (n - 2))
            total += w * delta
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_values_equal_shapiq_sii_ksii_and_bii_not_stii(seed):
    shapiq = pytest.importorskip("shapiq")
    n = 6
    table = random_table(n, 5, seed)
    found = exact_interactions(table_game(table), n_boot=50)
    exact = shapiq.ExactComputer(lambda c: table[(c.astype(int) * (1 << np.arange(n))).sum(axis=1)].mean(axis=1),
                                 n_players=n)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]

    def gap(index: str, mine) -> float:
        theirs = exact(index=index, order=2).dict_values
        return max(abs(theirs[p] - mine.value[p]) for p in pairs)

    assert gap("SII", found.shapley) < 1e-9
    assert gap("k-SII", found.shapley) < 1e-9  # k-SII coincides with SII at its top order
    assert gap("BII", found.banzhaf) < 1e-9
    assert gap("STII", found.shapley) > 1e-3  # Shapley-Taylor is another index


def test_exact_values_equal_the_textbook_sums():
    n = 5
    table = random_table(n, 3, 7)
    found = exact_interactions(table_game(table, PLAYERS[:n]), n_boot=50)
    for i, j in itertools.combinations(range(n), 2):
        assert found.shapley.value[i, j] == pytest.approx(brute_force(table, n, i, j, "shapley"), abs=1e-12)
        assert found.banzhaf.value[i, j] == pytest.approx(brute_force(table, n, i, j, "banzhaf"), abs=1e-12)
        assert found.shapley.value[i, j] == found.shapley.value[j, i]
    assert np.isnan(found.shapley.value.diagonal()).all()


def structured_game(items: int = 80) -> FunctionGame:
    """Per item: a task that needs both c and d (an AND: complementary), one that a or b solves (an OR of
    duplicates: redundant), and one that e solves alone (no interaction)."""
    rng = np.random.default_rng(0)
    kind = rng.integers(3, size=items)

    def value(c: frozenset) -> np.ndarray:
        return np.where(kind == 0, float({"c", "d"} <= c), np.where(kind == 1, float(bool({"a", "b"} & c)),
                                                                     float("e" in c)))
    return FunctionGame(tuple("abcde"), value, n_items=items)


def test_signs_ranking_and_intervals_follow_a_known_structure():
    found = exact_interactions(structured_game(), n_boot=400, seed=0)
    pairs = found.shapley.pairs()
    assert {pairs[0]["a"], pairs[0]["b"]} == {"c", "d"} and pairs[0]["ci"][0] > 0  # complementary
    assert {pairs[-1]["a"], pairs[-1]["b"]} == {"a", "b"} and pairs[-1]["ci"][1] < 0  # redundant
    assert all(abs(p["value"]) < 1e-12 for p in pairs[1:-1])  # no other pair interacts
    for m in (found.shapley, found.banzhaf):
        finite = ~np.isnan(m.value)
        assert (m.ci_low[finite] <= m.value[finite] + 1e-12).all()
        assert (m.value[finite] <= m.ci_high[finite] + 1e-12).all()
    # an AND of two: the Shapley and Banzhaf interaction both equal the share of such items
    share = found.shapley.per_item[[k for k, p in enumerate(itertools.combinations("abcde", 2)) if p == ("c", "d")][0]]
    assert found.shapley["c", "d"] == pytest.approx(share.mean()) == pytest.approx(found.banzhaf["c", "d"])


def test_sampled_interactions_converge_and_stop_like_mc():
    n = 8
    table = random_table(n, 4, 3)
    players = tuple("abcdefgh")
    truth = exact_interactions(table_game(table, players), n_boot=50)
    small = sampled_interactions(table_game(table, players), SampledSettings(tolerance=0, budget=60), n_boot=60)
    assert small.details["coalitions"] <= 60 and small.details["stop_reason"] == "budget" and not small.exact
    large = sampled_interactions(table_game(table, players), SampledSettings(tolerance=0, budget=200), n_boot=60)
    error = lambda r: np.nanmax(np.abs(r.shapley.value - truth.shapley.value))  # noqa: E731
    assert error(large) < error(small)
    covered = (large.shapley.ci_low <= truth.shapley.value) & (truth.shapley.value <= large.shapley.ci_high)
    assert np.nanmean(covered) > 0.7
    full = sampled_interactions(table_game(table, players), SampledSettings(tolerance=0, budget=255), n_boot=60)
    assert full.exact and np.nanmax(np.abs(full.shapley.value - truth.shapley.value)) < 1e-12
    by_generations = sampled_interactions(table_game(table, players),
                                          SampledSettings(tolerance=0, budget_generations=50), n_boot=60)
    assert by_generations.details["stop_reason"] == "budget" and by_generations.details["generations"] >= 50
    loose = sampled_interactions(table_game(table, players), SampledSettings(tolerance=0.5), n_boot=60)
    assert loose.details["stop_reason"] == "tolerance"
    # a budget below 2^n - 1 makes even a small game sampled; none keeps it exact
    assert not interactions(table_game(table, players), SampledSettings(budget=100), n_boot=60).exact
    assert interactions(table_game(table, players), n_boot=60).exact


def test_above_twelve_players_it_samples():
    n = 13
    players = tuple(f"p{k}" for k in range(n))
    weights = np.linspace(0.1, 1.0, n)
    game = FunctionGame(players, lambda c: min(1.0, sum(weights[players.index(p)] for p in c) / 3) ** 2)
    found = interactions(game, SampledSettings(tolerance=0, budget=400), n_boot=50)
    assert not found.exact and found.details["coalitions"] <= 400 and game.coalitions_evaluated <= 401
    assert found.shapley.value.shape == (n, n)


def test_the_estimator_is_registered_in_all_with_its_column():
    assert "interactions" in ESTIMATORS and "interactions" in valued_estimators()
    assert ESTIMATORS["interactions"].field == "interaction"
    result = interaction_estimator(structured_game(), n_boot=100)
    found = result.extras["interactions"]
    n = len(result.players)
    mean = np.nansum(found.shapley.value, axis=1) / (n - 1)
    assert np.allclose(result.values, mean)  # the column: each model's mean Shapley interaction


def test_best_team_is_the_best_evaluated_coalition_and_says_when_it_differs():
    # c and d each know half the items, a and b the same 70%: a and b have the higher Shapley values,
    # but together they are no better than one of them, while only c and d cover everything
    items = 40
    first = np.arange(items) < items // 2
    know_ab = (np.arange(items) >= 6) & (np.arange(items) < 34)  # 70%, not the whole of either half
    knows = {"a": know_ab, "b": know_ab, "c": first, "d": ~first}
    game = FunctionGame(tuple(knows), lambda c: np.any([knows[p] for p in c], axis=0), n_items=items)
    found = exact_interactions(game, n_boot=100)
    team = best_team(game, 2, found.values, found.shapley)
    assert team["exact"] and team["coalitions_compared"] == 6
    assert set(team["best"]["members"]) == {"c", "d"} and team["best"]["value"] == 1.0
    assert team["differ"] == (set(team["top_shapley"]["members"]) != {"c", "d"})
    sentence = best_team_sentence(team)
    assert "Best team of 2: c, d" in sentence
    if team["differ"]:
        assert "interactions inside the teams" in sentence
    fresh = FunctionGame(tuple(knows), lambda c: np.any([knows[p] for p in c], axis=0), n_items=items)
    fresh.evaluate([frozenset("ab")])
    partial = best_team(fresh, 2, found.values)
    assert not partial["exact"] and "evaluated" in best_team_sentence(partial)


def test_sampled_intervals_cover_at_small_budgets_and_report_the_jackknifes_stderr():
    """The sampled interactions' interval: the item bootstrap plus the grouped jackknife's sampling error (the proxy
    refitted on every replicate), at 3n and 5n on a game with saturation and pairwise synergy. Before, the Shapley
    values that come along had the items' interval only, and ``cgym eval --estimator interactions`` above 12
    members printed "mc: stopped at  after None coalitions; largest sampling stderr nan"."""
    from test_sampling import synthetic

    from coalition_gym.valuation.estimators import stop_sentence
    from coalition_gym.valuation.stats import bootstrap_mean

    n = 10
    truth = exact_interactions(synthetic(n), n_boot=10)
    pairs = np.triu_indices(n, 1)
    covered = []
    for budget in (3 * n, 5 * n):
        for seed in range(3):
            found = sampled_interactions(synthetic(n), SampledSettings(tolerance=0, budget=budget), seed=seed,
                                         n_boot=200)
            spread = (found.shapley.ci_high - found.shapley.ci_low)[pairs]
            assert np.all(spread > 0) and found.details["sampling_stderr"] > 0
            # the players' Shapley values that come along (the leaderboard's mc column) say how sampling stopped,
            # and their interval holds the sampling error too, not the items' alone
            values = found.values
            assert stop_sentence(values.extras).startswith(f"stopped at its budget of {budget} coalitions")
            items_only = bootstrap_mean(values.per_item, n_boot=200, seed=seed)
            assert np.all(values.ci_high - values.ci_low > items_only.ci_high - items_only.ci_low)
            for index in ("shapley", "banzhaf"):
                got, exact = getattr(found, index), getattr(truth, index).value
                covered.append(np.mean((got.ci_low[pairs] <= exact[pairs]) & (exact[pairs] <= got.ci_high[pairs])))
    assert np.mean(covered) >= 0.9


def test_the_pair_map_gives_both_indices_as_sums_over_coalitions():
    from coalition_gym.valuation.interactions import exact_pair_values, pair_map

    n, items = 5, 3
    table = np.random.default_rng(1).random((1 << n, items))
    table[0] = 0.0
    bits = np.array([[m >> k & 1 for k in range(n)] for m in range(1, 1 << n)], dtype=float)
    for index in ("shapley", "banzhaf"):
        np.testing.assert_allclose(pair_map(bits, index) @ table[1:], exact_pair_values(table, n, index), atol=1e-12)


def test_the_prediction_estimate_of_the_pairs_is_exact_once_every_coalition_is_known():
    """_pair_parts' prediction takes the known coalitions' values exactly (the proxy fills in only the others):
    with every size enumerated it is the exact value whatever the proxy, as is the difference estimate."""
    from coalition_gym.valuation.interactions import INDICES, _pair_parts
    from coalition_gym.valuation.proxy import cross_fitted
    from coalition_gym.valuation.sampling import Design

    n = 6
    game = noisy_typed_game(n)
    value = {m: game._fn([game.players[k] for k in range(n) if m >> k & 1]) for m in range(1 << n)}
    design = Design(n, set(range(1, n)))
    difference, prediction = _pair_parts(design, cross_fitted(n, design, value.__getitem__))(None)
    exact = exact_interactions(noisy_typed_game(n), n_boot=10)
    truth = np.vstack([getattr(exact, index).per_item for index in INDICES])
    np.testing.assert_allclose(prediction, truth, atol=1e-12)
    np.testing.assert_allclose(difference, truth, atol=1e-9)


def test_sampled_pairs_drop_the_extrapolated_noise_where_the_residual_is_noise():
    """On a game the proxy tracks up to per-coalition noise, the share kappa of the difference estimate's correction
    kept is small (measured: 0 in 8 of these 10 runs at 10n) and is reported per index."""
    shrink = [sampled_interactions(noisy_typed_game(8), SampledSettings(tolerance=0, budget=80), seed=s,
                                   n_boot=20).details["shrink"] for s in range(10)]
    assert set(shrink[0]) == {"shapley", "banzhaf"}
    assert np.mean([k["shapley"] for k in shrink]) < 0.3, shrink


def test_the_stratified_pairs_item_mean_is_the_estimate_from_item_means():
    """A stop rule's bootstrap and the jackknife's replicates estimate from each coalition's item mean
    (``item_mean_table``): the stratified estimate is linear in the values, so that is the per-item estimate's mean;
    and the per-item estimate equals the stratum means written out by hand on a small design."""
    from coalition_gym.valuation.interactions import size_weights, stratified_pairs
    from coalition_gym.valuation.sampling import Design, Unit, item_mean_table

    n = 7
    game = noisy_typed_game(n)
    value = {m: game._fn([game.players[k] for k in range(n) if m >> k & 1]) for m in range(1, 1 << n)}
    value[0] = np.zeros_like(value[1])
    rng = np.random.default_rng(3)
    full = (1 << n) - 1
    units = []
    for size in (2, 3):  # a coalition and its complement per unit, as the samplers draw them
        for m in rng.choice([m for m in range(1, full) if m.bit_count() == size], 4, replace=False):
            units.append(Unit(size, [int(m), full ^ int(m)]))
    design = Design(n, {1, 6}, units)
    per_item = stratified_pairs(design, value.__getitem__, ("shapley", "banzhaf"))
    means = stratified_pairs(design, item_mean_table(design, value.__getitem__), ("shapley", "banzhaf"))
    for got, mean in zip(per_item, means):
        assert mean.shape == (n * (n - 1) // 2, 1)
        np.testing.assert_allclose(got.mean(axis=1), mean[:, 0], atol=1e-13)
    # by hand: w(s) times the stratum means of v(T + ij) - v(T + i) - v(T + j) + v(T), T of size s without i, j
    masks = {m for m in range(1, full) if m.bit_count() in (1, 6)} | {m for u in units for m in u.masks} | {0, full}
    for index, got in zip(("shapley", "banzhaf"), per_item):
        w = size_weights(index, n)
        for k, (i, j) in enumerate(itertools.combinations(range(n), 2)):
            total = 0.0
            for s in range(n - 1):
                def stratum(size, has_i, has_j):
                    seen = [m for m in masks if m.bit_count() == size]
                    picked = [value[m] for m in seen if bool(m >> i & 1) == has_i and bool(m >> j & 1) == has_j]
                    return np.mean(picked or [value[m] for m in seen] or [np.zeros_like(value[0])], axis=0)
                total = total + w[s] * (stratum(s + 2, True, True) - stratum(s + 1, True, False)
                                        - stratum(s + 1, False, True) + stratum(s, False, False))
            np.testing.assert_allclose(got[k], total, atol=1e-12)
