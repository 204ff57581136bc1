"""Shapley from sampled coalitions: exact when the budget allows, budgets spent to the last coalition,
composable stopping rules, intervals that cover, and clear refusals."""

import numpy as np
import pytest

from coalition_gym import load_pool, make_protocol, make_task
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.reports.leaderboard import EvalOptions, choose_shapley_estimator, evaluate
from coalition_gym.valuation import FunctionGame, exact_shapley
from coalition_gym.valuation.estimators import sampled_shapley_values
from coalition_gym.valuation.game import CoalitionGame
from coalition_gym.valuation.sampling import SAMPLERS, Budget, MaxRounds, Tolerance, choose_sampler, sampled_shapley


def synthetic(n: int, items: int = 30, seed: int = 0) -> FunctionGame:
    """A per-item game with saturation and pairwise synergy: not additive, so estimators differ."""
    rng = np.random.default_rng(seed)
    weight = rng.uniform(0.0, 0.6, size=(n, items))
    synergy = rng.uniform(-0.2, 0.3, size=(n, n, items))
    players = [f"p{k}" for k in range(n)]

    def value(coalition):
        idx = [players.index(p) for p in coalition]
        if not idx:
            return np.zeros(items)
        total = weight[idx].sum(axis=0) + sum(synergy[a, b] for a in idx for b in idx if a < b)
        return np.clip(total, 0.0, 1.0)
    return FunctionGame(players, value, n_items=items)


def exact(n: int, seed: int = 0) -> np.ndarray:
    return exact_shapley(synthetic(n, seed=seed), n_boot=10).values


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_budget_that_covers_every_coalition_gives_the_exact_value(sampler):
    result = sampled_shapley(synthetic(6), sampler=sampler, stop=Budget(coalitions=63))
    assert result.exact and result.stop_reason.startswith("exact")
    np.testing.assert_allclose(result.per_item.mean(axis=1), exact(6), atol=1e-12)
    known = synthetic(6)
    exact_shapley(known, n_boot=10)  # every coalition already evaluated: exact, at no cost
    again = sampled_shapley(known, sampler=sampler, stop=Budget(coalitions=20))
    assert again.exact and again.coalitions == 0


@pytest.mark.parametrize("sampler", ["hybrid", "kernel", "stratified"])
@pytest.mark.parametrize("budget", [41, 80, 203])
def test_budgets_are_spent_to_the_last_coalition(sampler, budget):
    game = synthetic(8)
    result = sampled_shapley(game, sampler=sampler, stop=Budget(coalitions=budget), seed=1)
    assert result.coalitions == budget == game.coalitions_evaluated and result.stop_reason == "budget"


def test_more_budget_means_less_error_and_the_default_beats_permutations():
    truth = exact(10)
    def error(sampler, budget):
        return np.mean([np.abs(sampled_shapley(synthetic(10), sampler=sampler, stop=Budget(coalitions=budget),
                                               seed=s, n_boot=50).per_item.mean(axis=1) - truth).mean()
                        for s in range(6)])
    assert error("hybrid", 250) < error("hybrid", 50) / 2
    assert error("hybrid", 100) < error("permutation", 100)
    assert choose_sampler(10, 100) == "proxy"


def test_auto_picks_a_sampler_that_takes_the_pool():
    """Above the proxy sampler's 64 players (it refuses them) auto picks the hybrid, not a refusal."""
    assert (choose_sampler(64, 3200), choose_sampler(65, 3250)) == ("proxy", "hybrid")


def test_intervals_cover_the_exact_value_at_10n():
    truth = exact(10)
    covered = [np.mean((r.ci_low <= truth) & (truth <= r.ci_high))
               for r in (sampled_shapley(synthetic(10), stop=Budget(coalitions=100), seed=s, n_boot=200)
                         for s in range(8))]
    assert np.mean(covered) >= 0.9


def test_stopping_rules_compose():
    game = synthetic(8)
    result = sampled_shapley(game, stop=Budget(generations=60) | MaxRounds(100), seed=0)
    assert result.stop_reason == "budget" and 60 <= result.generations < 60 + 2 * 8 + 1
    assert sampled_shapley(synthetic(8), stop=MaxRounds(2), seed=0).rounds == 2
    loose = sampled_shapley(synthetic(8), stop=Tolerance(0.05) | MaxRounds(200), seed=0)
    assert loose.stop_reason == "tolerance" and loose.sampling_stderr.max() <= 0.06


def test_bad_budgets_and_samplers_are_refused_with_the_minimum():
    with pytest.raises(ConfigError, match="needs at least 11"):
        sampled_shapley(synthetic(10), sampler="kernel", stop=Budget(coalitions=10))
    with pytest.raises(ConfigError, match="needs at least 21"):
        sampled_shapley(synthetic(10), sampler="stratified", stop=Budget(coalitions=15))
    with pytest.raises(ConfigError, match="unknown sampler 'svarm'"):
        sampled_shapley(synthetic(4), sampler="svarm")


def test_the_mc_estimator_reports_its_sampler_and_cost():
    result = sampled_shapley_values(synthetic(8), tolerance=0.0, budget=60, n_boot=50)
    assert result.extras["sampler"] == "proxy" and result.extras["coalitions_used"] == 60
    assert result.extras["stop_reason"] == "budget" and len(result.extras["sampling_stderr"]) == 8
    # the interval on the game's own items: t x the sampling stderr, never narrower than the stderr itself
    halfwidth = result.extras["sampling_halfwidth"]
    assert len(halfwidth) == 8 and all(h >= 1.96 * s for h, s in zip(halfwidth, result.extras["sampling_stderr"]))


def test_auto_picks_exact_when_coalitions_are_free_in_generations_and_sampling_when_not():
    task = make_task("rg/basic_arithmetic", size=10)
    vote = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:random-10"),
                                                 split="test")))
    choice = choose_shapley_estimator(vote)
    assert choice["chose"] == "shapley" and choice["generations_per_new_coalition"] == 0
    debate = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, load_pool("sim:random-10"),
                                                   split="test")))
    choice = choose_shapley_estimator(debate, budget_generations=2000)
    assert choice["chose"] == "mc" and "generation budget" in choice["why"]
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:random-8"),
                                                 split="test")))
    report = evaluate(game, ["auto"], EvalOptions(n_boot=50))
    assert "shapley" in report.results and report.auto["chose"] == "shapley"


def test_the_intervals_bootstrap_draws_one_unit_fewer_per_group():
    """Rao-Wu: m - 1 draws from a group of m units make the bootstrap variance of a group mean unbiased (m draws
    give (m - 1) / m of it); the single units pooled as one group get the same."""
    from coalition_gym.valuation.sampling import Design, Unit, _bootstrap_groups, _resample_units

    design = Design(8, {1, 7}, [Unit(2, [3, 252]), Unit(2, [5, 250]), Unit(2, [6, 249]), Unit(3, [7, 248]),
                                Unit(4, [15, 240])])
    groups = _bootstrap_groups(design)
    assert sorted(len(g) for g in groups) == [2, 3]
    rng = np.random.default_rng(0)
    assert len(_resample_units(design, rng, rescaled=True)) == 3
    assert len(_resample_units(design, rng)) == 5


class UnitMean:
    """A stand-in estimate: per group of units (by stratum), the mean of its units' numbers, summed over groups;
    linear in the units, so the delete-one jackknife gives the textbook variance."""

    def __init__(self, number: dict[int, float]):
        self.number, self.calls = number, 0

    def estimate(self, units):
        self.calls += 1
        by_stratum: dict[int, list[float]] = {}
        for u in units:
            by_stratum.setdefault(u.stratum, []).append(self.number[u.masks[0]])
        return np.array([[sum(np.mean(v) for v in by_stratum.values())]])


def test_the_sampling_variance_is_a_grouped_jackknife_with_satterthwaite_degrees_of_freedom():
    from coalition_gym.valuation.sampling import JACKKNIFE_BLOCKS, Design, Unit, _bootstrap_groups, grouped_jackknife

    rng = np.random.default_rng(0)
    flat = rng.normal(size=4)  # group 2: four units
    spread = 10 * rng.normal(size=6)  # group 3: six units that carry almost all of the variance
    units = [Unit(2, [1 << k]) for k in range(4)] + [Unit(3, [1 << (4 + k)]) for k in range(6)]
    number = {1 << k: float(x) for k, x in enumerate(np.concatenate([flat, spread]))}
    design = Design(10, set(), units)
    variance, df = grouped_jackknife(UnitMean(number).estimate, _bootstrap_groups(design), 1, rng)
    parts = np.array([flat.var(ddof=1) / 4, spread.var(ddof=1) / 6])  # each group mean's textbook variance
    np.testing.assert_allclose(variance, [parts.sum()])
    np.testing.assert_allclose(df, [parts.sum() ** 2 / (parts[0] ** 2 / 3 + parts[1] ** 2 / 5)])
    assert 5 <= df[0] < 5.1  # about the six units' five, not the eight of units minus groups
    # a group larger than the block count costs one re-solve per block (and one for the full estimate), and keeps
    # blocks - 1 degrees of freedom
    big = Design(10, set(), [Unit(2, [k]) for k in range(1, 3 * JACKKNIFE_BLOCKS + 1)])
    sampler = UnitMean({k: float(x) for k, x in enumerate(rng.normal(size=3 * JACKKNIFE_BLOCKS + 1))})
    _, df = grouped_jackknife(sampler.estimate, _bootstrap_groups(big), 1, rng)
    assert sampler.calls == JACKKNIFE_BLOCKS + 1 and df[0] == JACKKNIFE_BLOCKS - 1


def test_the_jackknife_measures_its_replicates_from_the_full_estimate():
    """An estimate that falls back to one value whenever a unit is missing (as a stratum left empty falls back to
    its size's mean): every replicate agrees with every other, none with the full estimate. Their spread about
    their own mean is zero; about the full estimate it is what deleting a unit does."""
    from coalition_gym.valuation.sampling import Design, Unit, _bootstrap_groups, grouped_jackknife

    units = [Unit(2, [1]), Unit(2, [2]), Unit(2, [4])]

    def estimate(replicate):
        return np.array([[1.0 if len(replicate) == len(units) else 0.0]])

    variance, df = grouped_jackknife(estimate, _bootstrap_groups(Design(8, set(), units)), 1,
                                     np.random.default_rng(0))
    np.testing.assert_allclose(variance, [2 / 3 * 3 * 1.0])
    assert df[0] == 2
