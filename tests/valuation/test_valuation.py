"""Estimators against closed-form games, Shapley axioms on protocol games, MC convergence, bad input."""

from math import factorial

import numpy as np
import pytest
from conftest import ListTask

from coalition_gym.agents import AgentProfile, Pool, SimulatedAgent, load_pool
from coalition_gym.envs.protocols import Debate, EpisodeContext, make_protocol
from coalition_gym.envs.protocols.majority_vote import MajorityVote
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import make
from coalition_gym.valuation.estimators import exact_banzhaf, exact_shapley, leave_one_out, sampled_shapley_values, solo
from coalition_gym.valuation.game import CoalitionGame, FunctionGame


def weighted_voting(quota, weights):
    names = [f"p{k}" for k in range(len(weights))]
    w = dict(zip(names, weights))
    return FunctionGame(names, lambda s: float(sum(w[p] for p in s) >= quota))


def close(result, expected):
    np.testing.assert_allclose(result.values, expected, atol=1e-9, rtol=0)


def test_symmetric_majority_game():
    game = weighted_voting(3, [1] * 5)
    close(exact_shapley(game), [0.2] * 5)
    # Banzhaf: a player swings when exactly 2 of the other 4 are in: C(4,2)/2^4
    close(exact_banzhaf(game), [6 / 16] * 5)


def test_weighted_voting_game():
    game = weighted_voting(3, [2, 1, 1])
    close(exact_shapley(game), [2 / 3, 1 / 6, 1 / 6])
    close(exact_banzhaf(game), [3 / 4, 1 / 4, 1 / 4])
    close(leave_one_out(game), [1.0, 0.0, 0.0])


def test_glove_and_shoes_games():
    left, right = {"l"}, {"r1", "r2"}
    glove = FunctionGame(["l", "r1", "r2"], lambda s: float(min(len(s & left), len(s & right))))
    close(exact_shapley(glove), [2 / 3, 1 / 6, 1 / 6])
    close(exact_banzhaf(glove), [3 / 4, 1 / 4, 1 / 4])
    lefts, rights = {"l1", "l2"}, {"r1", "r2"}
    shoes = FunctionGame(["l1", "l2", "r1", "r2"], lambda s: float(min(len(s & lefts), len(s & rights))))
    close(exact_shapley(shoes), [0.5] * 4)


def test_airport_game_matches_littlechild_owen():
    costs = [1.0, 3.0, 6.0, 10.0]
    names = [f"plane{k}" for k in range(4)]
    c = dict(zip(names, costs))
    game = FunctionGame(names, lambda s: -max((c[p] for p in s), default=0.0))
    expected, prev, acc = [], 0.0, 0.0
    for k, cost in enumerate(costs):
        acc += (cost - prev) / (len(costs) - k)
        prev = cost
        expected.append(-acc)
    close(exact_shapley(game), expected)


def test_shapley_weights_sum_to_one():
    n = 6
    total = sum(factorial(s) * factorial(n - s - 1) / factorial(n) * (factorial(n - 1) // (factorial(s) * factorial(n - 1 - s)))
                for s in range(n))
    assert total == pytest.approx(1.0)


def test_the_shapley_map_gives_the_exact_value_as_a_sum_over_coalitions():
    from coalition_gym.valuation.exact import shapley_map

    n, items = 5, 3
    rng = np.random.default_rng(2)
    table = rng.random((1 << n, items))
    table[0] = 0.0
    players = [f"p{k}" for k in range(n)]
    game = FunctionGame(players, lambda c: table[sum(1 << players.index(p) for p in c)], n_items=items)
    bits = np.array([[m >> k & 1 for k in range(n)] for m in range(1, 1 << n)], dtype=float)
    np.testing.assert_allclose(shapley_map(bits) @ table[1:], exact_shapley(game, n_boot=10).per_item, atol=1e-12)


def demo_game(protocol="majority_vote", pool="sim:demo", items=60, **kw):
    task = make("rg/basic_arithmetic", size=items)
    return CoalitionGame(System.build(SystemSpec(make_protocol(protocol, **kw), task, load_pool(pool), split="test")))


@pytest.mark.parametrize("protocol", ["majority_vote", "debate", "slm_mux", "llm_blender"])
def test_efficiency_and_loo_on_protocol_games(protocol):
    game = demo_game(protocol)
    shap = exact_shapley(game)
    full = game.value(game.players)
    assert shap.values.sum() == pytest.approx(full - 0.0, abs=1e-9)  # v(empty) = 0
    np.testing.assert_allclose(shap.per_item.sum(axis=0), game.per_item(game.players), atol=1e-9)
    loo = leave_one_out(game)
    for p in game.players:
        assert loo[p] == pytest.approx(full - game.value(set(game.players) - {p}), abs=1e-12)
    assert game.coalitions_evaluated == 15  # 2^4 - 1 non-empty coalitions, each evaluated once
    assert (shap.ci_low <= shap.values).all() and (shap.values <= shap.ci_high).all()


def test_symmetry_and_null_player_on_a_protocol_game():
    twin = dict(skill=0.6, error_group="twins", correlation=1.0)
    members = {
        "twin_a": SimulatedAgent(AgentProfile("twin_a", **twin)),
        "twin_b": SimulatedAgent(AgentProfile("twin_b", **twin)),
        "other": SimulatedAgent(AgentProfile("other", skill=0.5)),
        "mute": SimulatedAgent(AgentProfile("mute", skill=0.9, format_error=1.0)),  # never gives an answer
    }
    task = make("rg/basic_arithmetic", size=80)
    game = CoalitionGame(System.build(SystemSpec(MajorityVote(temperature=0.0), task, Pool(members), split="test")))
    shap, banz = exact_shapley(game), exact_banzhaf(game)
    assert shap["twin_a"] == pytest.approx(shap["twin_b"], abs=1e-12)
    assert banz["twin_a"] == pytest.approx(banz["twin_b"], abs=1e-12)
    assert shap["mute"] == pytest.approx(0.0, abs=1e-12) and banz["mute"] == pytest.approx(0.0, abs=1e-12)


def test_permutation_sampling_converges_to_the_exact_value():
    game = demo_game("debate", pool="sim:random-6", items=40, rounds=2)
    exact = exact_shapley(game).values
    replay = FunctionGame(game.players, game.per_item, game.n_items)  # the same values, no re-running
    errors = [np.abs(sampled_shapley_values(replay, tolerance=0.0, sampler="permutation", max_rounds=m, n_boot=200,
                                            seed=3).values - exact).max() for m in (1, 4, 64)]
    assert errors[2] < errors[0] and errors[2] < 0.05
    big = sampled_shapley_values(replay, tolerance=0.0, sampler="permutation", max_rounds=64, n_boot=200, seed=3)
    assert big.values.sum() == pytest.approx(exact.sum(), abs=1e-9)  # every permutation is efficient


def test_permutation_sampling_stops_on_tolerance_and_budget():
    game = demo_game("majority_vote", pool="sim:random-8", items=30)
    tol = sampled_shapley_values(game, tolerance=0.02, sampler="permutation", n_boot=200, seed=0)
    # the stop reads a 60-replicate bootstrap and the result reports a 200-replicate one: they differ by ~1/sqrt(120)
    assert tol.extras["stop_reason"] == "tolerance" and max(tol.extras["sampling_stderr"]) <= 0.02 * 1.2
    capped = demo_game("majority_vote", pool="sim:random-8", items=30)
    res = sampled_shapley_values(capped, tolerance=0.0, sampler="permutation", budget=40, n_boot=200, seed=0)
    assert res.extras["stop_reason"] == "budget" and capped.coalitions_evaluated <= 40
    with pytest.raises(ConfigError, match="too small"):
        sampled_shapley_values(demo_game(pool="sim:random-8", items=5), tolerance=0.0, sampler="permutation",
                               budget=1)


def test_exact_estimators_refuse_more_than_twelve_players():
    game = FunctionGame([f"p{k}" for k in range(13)], lambda s: float(len(s)))
    with pytest.raises(ConfigError, match=r"n=13 > 12.*8191 coalitions.*--exact-limit 13.*mc"):
        exact_shapley(game)
    with pytest.raises(ConfigError, match="n=13"):
        exact_banzhaf(game)
    assert game.coalitions_evaluated == 0  # refused before any work
    assert leave_one_out(game).values == pytest.approx([1.0] * 13)


def test_the_exact_limit_is_a_setting():
    weights = np.arange(1, 14) / 10
    game = FunctionGame([f"p{k}" for k in range(13)], lambda s: sum(weights[int(p[1:])] for p in s) ** 2)
    found = exact_shapley(game, n_boot=10, exact_limit=13)
    # v = (sum w)^2: phi_i = w_i^2 + w_i (W - w_i) (each pair's cross term split evenly)
    close(found, weights ** 2 + weights * (weights.sum() - weights))
    assert game.coalitions_evaluated == 2 ** 13 - 1
    with pytest.raises(ConfigError, match="n=13 > 11.*--exact-limit 13"):
        exact_banzhaf(game, exact_limit=11)


def test_fit_to_pool_takes_the_exact_limit():
    from coalition_gym.valuation.estimators import fit_to_pool

    assert fit_to_pool(["shapley", "loo"], 14, False, exact_limit=14) == (["shapley", "loo"], "")
    with pytest.raises(ConfigError, match="--exact-limit 14"):
        fit_to_pool(["shapley"], 14, False)
    kept, note = fit_to_pool(["shapley", "banzhaf", "loo"], 14, True)
    assert kept == ["loo", "mc"] and "--exact-limit 14" in note


def test_solo_is_the_singleton_value_and_bad_games():
    game = demo_game("debate")
    s = solo(game)
    assert s["atlas"] == pytest.approx(game.value({"atlas"}))
    with pytest.raises(ConfigError, match="zero items"):  # a system with no items of its own
        CoalitionGame(System.build(SystemSpec("debate", ListTask(), "sim:demo", split=None)))
    with pytest.raises(ConfigError, match="twice"):
        CoalitionGame(System.build(SystemSpec(make_protocol("debate"), make("rg/basic_arithmetic", size=3),
                                              load_pool("sim:demo"), ["atlas", "atlas"], split="test")))
    with pytest.raises(ConfigError, match="not players"):
        game.evaluate([{"zeus"}])


class PairDebate(Debate):
    """A protocol defined only for two or more members."""
    min_members = 2


def test_protocol_needing_two_members():
    task = make("rg/basic_arithmetic", size=20)
    game = CoalitionGame(System.build(SystemSpec(PairDebate(rounds=2), task, load_pool("sim:demo"), split="test")))
    shap = exact_shapley(game)
    assert game.value({"atlas"}) == 0.0  # cannot run alone: worth 0, like the empty coalition
    assert shap.values.sum() == pytest.approx(game.value(game.players))
    assert solo(game)["atlas"] > 0.3  # solo strength is measured by a plain single answer instead
    ctx = EpisodeContext(item=task.items()[0], task=task, members=("atlas",), seed=0)
    with pytest.raises(ConfigError, match="at least 2 members"):
        PairDebate().start(ctx)


def test_a_pool_with_duplicate_names_is_refused():
    agent = SimulatedAgent(AgentProfile("a"))
    with pytest.raises(ConfigError, match="'a' more than once"):
        load_pool([("a", agent), ("b", agent), ("a", agent)])
    assert load_pool([("a", agent), ("b", agent)]).member_names == ["a", "b"]


def test_every_computed_estimator_reaches_the_terminal_markdown_and_csv(tmp_path):
    from coalition_gym.reports.leaderboard import EvalOptions, evaluate, format_leaderboard, write_report

    task = make("rg/basic_arithmetic", size=12)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                 split="test")))
    report = evaluate(game, ["loo", "shapley", "banzhaf", "mc"], EvalOptions(n_boot=50))
    write_report(report, tmp_path)
    for text in (format_leaderboard(report), (tmp_path / "leaderboard.md").read_text()):
        assert all(name in text for name in ("loo", "shapley", "banzhaf", "mc_shapley"))
    header = (tmp_path / "leaderboard.csv").read_text().splitlines()[0]
    assert "banzhaf_ci_low" in header and "loo_ci_high" in header and "mc_shapley" in header
