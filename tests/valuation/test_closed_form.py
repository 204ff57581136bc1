"""Exact Shapley values without enumeration (valuation.closed_form) against enumeration, and the structures
read off real protocols against the protocols' own coalition games."""

import numpy as np
import pytest

from coalition_gym.agents import load_pool
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import make
from coalition_gym.valuation.closed_form import PluralityGame, PriorityGame, structured_game
from coalition_gym.valuation.estimators import exact_shapley
from coalition_gym.valuation.game import CoalitionGame


def names(n):
    return [f"p{k:02d}" for k in range(n)]


@pytest.mark.parametrize("n", [1, 5, 13])
def test_the_priority_closed_form_is_the_enumerated_value(n):
    rng = np.random.default_rng(n)
    items = 4
    order = np.stack([rng.permutation(n) for _ in range(items)])
    game = PriorityGame(names(n), order, rng.uniform(size=(n, items)).round(1))  # ties in scores too
    truth = exact_shapley(game, n_boot=10, exact_limit=13).per_item
    np.testing.assert_allclose(game.exact(), truth, atol=1e-12)


@pytest.mark.parametrize("n", [3, 9, 14])
def test_the_plurality_sum_over_counts_is_the_enumerated_value(n):
    rng = np.random.default_rng(n)
    items, k = 3, 4
    labels = rng.integers(-1, k, size=(n, items))  # -1 abstains
    scores = rng.uniform(size=(items, k)).round(2)
    game = PluralityGame(names(n), labels, scores, lambda x, tied: tied[(x + len(tied)) % len(tied)])
    truth = exact_shapley(game, n_boot=10, exact_limit=14).per_item
    np.testing.assert_allclose(game.exact(), truth, atol=1e-12)
    assert game.exact()[labels[:, 0] < 0, 0] == pytest.approx(0.0)  # an abstainer adds nothing


def system(protocol, pool="sim:random-8", items=12, **settings):
    task = make("rg/basic_arithmetic", size=items)
    return System.build(SystemSpec(make_protocol(protocol, **settings), task, load_pool(pool), split="test"))


@pytest.mark.parametrize("protocol, settings", [("majority_vote", {"tie_break": "random"}), ("slm_mux", {}),
                                                ("slm_mux", {"tie_break": "first"}),
                                                ("cascade", {"threshold": 0.67}), ("trained_router", {})])
def test_the_structure_read_off_a_protocol_is_its_coalition_game(protocol, settings):
    built = system(protocol, **settings)
    real = CoalitionGame(built)
    structured = structured_game(built)
    n = len(real.players)
    bits = (np.arange(1, 1 << n)[:, None] >> np.arange(n)[None, :]) & 1
    coalitions = [frozenset(p for p, b in zip(real.players, row) if b) for row in bits]
    real.evaluate(coalitions)
    real_values = np.stack([real.per_item(c) for c in coalitions])
    np.testing.assert_array_equal(structured.values(bits.astype(bool)), real_values)
    np.testing.assert_allclose(structured.exact(), exact_shapley(real, n_boot=10).per_item, atol=1e-12)


def test_other_protocols_and_tie_rules_are_refused():
    with pytest.raises(ConfigError, match="structured_game reads.*'debate'"):
        structured_game(system("debate"))
    with pytest.raises(ConfigError, match="tie_break 'dev'"):
        structured_game(system("majority_vote"))
