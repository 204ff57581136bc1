"""Robustness: a hand-checked tiny case, the drag/rescue identity, pairing, seats and adversary checks."""

from __future__ import annotations

import numpy as np
import pytest

from coalition_gym import System, SystemSpec, make_protocol, make_task, run_episodes
from coalition_gym.agents.pools import load_pool
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.reports.robustness import (
    RobustnessOptions,
    adversarial_pool,
    adversary_seats,
    check_adversary,
    robustness,
    summarise,
)

TASK = make_task("rg/basic_arithmetic", size=60)


def test_summarise_matches_a_hand_computation():
    honest = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    adversarial = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    out = summarise(honest, adversarial, np.zeros(5), np.ones(5), n_boot=200)
    assert out["honest"]["value"] == pytest.approx(0.6) and out["adversarial"]["value"] == pytest.approx(0.4)
    assert out["drag"]["value"] == pytest.approx(2 / 5)  # items 2 and 5
    assert out["rescue"]["value"] == pytest.approx(1 / 5)  # item 3
    assert out["effect"]["value"] == pytest.approx(0.2)
    for q in out.values():
        assert q["ci"][0] <= q["value"] <= q["ci"][1]
    assert out["seat_solo"]["ci"] == [1.0, 1.0]


def test_effect_is_drag_minus_rescue_and_honest_is_the_plain_run():
    pool = load_pool("sim:demo")
    items = TASK.items("test")
    systems = [System.build(SystemSpec(make_protocol(name), TASK, pool, split="test"))
               for name in ("majority_vote", "debate")]
    report = robustness(systems, "persuader", RobustnessOptions(seat="delta", n_boot=200))
    for row in report.rows:
        e = row.estimates
        assert e["effect"]["value"] == pytest.approx(e["drag"]["value"] - e["rescue"]["value"])
        assert e["honest"]["value"] - e["adversarial"]["value"] == pytest.approx(e["effect"]["value"])
    # the honest side is exactly the ordinary run with the same seed (paired with the adversarial one)
    plain = run_episodes(System.build(SystemSpec(make_protocol("majority_vote"), TASK, pool.backends(),
                                                 pool.member_names, split=None)), items, seed=0)
    assert report.rows[0].per_item["honest"] == [r.score for r in plain]
    assert report.rows[0].estimates["adversary_solo"]["value"] == 0.0  # a saboteur alone is always wrong
    assert report.to_dict()["most_robust"] in ("majority_vote", "debate")


def test_only_the_adversarys_doing_differs():
    """Members other than the seat draw the same first-round samples in both systems."""
    pool = load_pool("sim:demo")
    report_rows = []
    robustness([System.build(SystemSpec(make_protocol("majority_vote"), TASK, pool, split="test"))], "format_breaker",
               RobustnessOptions(seat="atlas", n_boot=50, record_text=True),
               on_records=lambda p, label, rows: report_rows.append((label, rows)))
    (_, honest), (_, bad) = report_rows
    for h, a in zip(honest, bad):
        keep = lambda row: [t for t in row["turns"] if t["member"] != "atlas"]  # noqa: E731
        assert keep(h) == keep(a)


def test_seats_colluders_take_two_and_a_bad_seat_lists_the_valid_ones():
    coalition = ["atlas", "borealis", "cirrus", "delta"]
    assert adversary_seats(coalition, "persuader") == ["atlas"]
    assert adversary_seats(coalition, "colluders", "delta") == ["delta", "atlas"]
    with pytest.raises(UnknownNameError, match="Known: atlas, borealis, cirrus, delta"):
        adversary_seats(coalition, "persuader", "zeus")
    bad = adversarial_pool(load_pool("sim:demo"), "colluders", ["delta", "atlas"])
    assert {bad.members[s].profile.adversary for s in ("delta", "atlas")} == {"colluders"}
    assert bad.members["cirrus"].profile.adversary is None


def test_adversary_is_a_profile_or_a_model_folder(tmp_path):
    assert check_adversary("judge_targeting") == "profile"
    (tmp_path / "config.json").write_text("{}")
    assert check_adversary(str(tmp_path)) == "model"
    with pytest.raises(ConfigError, match="Profiles: confidently_wrong, persuader"):
        check_adversary(str(tmp_path / "missing"))
