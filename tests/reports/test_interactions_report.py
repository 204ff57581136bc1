"""The interactions in a leaderboard's files: summary.json (strict JSON), interactions.png, the interactive
heatmap in leaderboard.html (in a real headless browser when Chromium is there), the sentence, `cgym eval
--estimator interactions --best-team K` and `cgym compare` side by side."""

from __future__ import annotations

import json

import pytest

from coalition_gym import CoalitionGame, System, SystemSpec, load_pool, make_protocol, make_task
from coalition_gym.cli import main
from coalition_gym.reports import compare
from coalition_gym.reports.leaderboard import EvalOptions, evaluate, write_report


def strict(path):
    def refuse(constant):
        raise AssertionError(f"{path} is not strict JSON: {constant}")
    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("interactions")
    argv = ["eval", "--estimator", "interactions", "--pool", "sim:demo", "--protocol", "majority_vote",
            "--items", "40", "--bootstrap", "200", "--best-team", "2", "--out", str(out / "mv")]
    assert main(argv) == 0
    return out / "mv"


def test_eval_writes_the_matrix_with_cis_the_png_and_the_heatmap(run, capsys):
    summary = strict(run / "summary.json")
    found = summary["interactions"]
    players = summary["pool"]
    n = len(players)
    assert found["players"] == players and found["exact"] is True
    for index in ("shapley", "banzhaf"):
        part = found[index]
        assert [len(row) for row in part["value"]] == [n] * n
        assert all(part["value"][k][k] is None for k in range(n))  # undefined diagonal: null, not NaN
        for i in range(n):
            for j in range(n):
                if i != j:
                    assert part["ci_low"][i][j] <= part["value"][i][j] <= part["ci_high"][i][j]
                    assert part["value"][i][j] == part["value"][j][i]
    assert len(found["pairs"]) == n * (n - 1) // 2
    assert found["most_complementary"] == max(found["pairs"], key=lambda p: p["shapley"])
    assert found["most_redundant"] == min(found["pairs"], key=lambda p: p["shapley"])
    best = found["most_complementary"]
    assert f"{best['a']} + {best['b']}" in found["sentence"] and f"[{best['shapley_ci'][0]:+.3f}" in found["sentence"]
    assert found["sentence"] in (run / "leaderboard.md").read_text()
    assert all("interaction" in m and "interaction_ci" in m for m in summary["models"])
    png = (run / "interactions.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    page = (run / "leaderboard.html").read_text()
    assert page.count('<td class="pair num"') == n * (n - 1) and 'id="interaction-detail"' in page
    assert 'data-banzhaf="' in page and "button" in page


def test_best_team_is_reported_next_to_the_top_k_by_shapley(run):
    summary = strict(run / "summary.json")
    team = summary["best_team"]
    assert team["k"] == 2 and team["exact"] and team["coalitions_compared"] == 6
    assert len(team["best"]["members"]) == 2 and len(team["top_shapley"]["members"]) == 2
    assert team["best"]["value"] >= team["top_shapley"]["value"]
    shapley = summary["interactions"]["shapley_values"]
    top = sorted(shapley, key=lambda p: -shapley[p]["value"])[:2]
    assert set(team["top_shapley"]["members"]) == set(top) and team["ranked_by"] == "shapley"
    assert team["differ"] == (set(team["best"]["members"]) != set(top))
    assert team["sentence"].startswith("Best team of 2:") and team["sentence"] in (run / "leaderboard.md").read_text()


def test_compare_shows_the_matrices_side_by_side(run, tmp_path):
    other = tmp_path / "debate"
    task = make_task("rg/basic_arithmetic", size=30)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, load_pool("sim:demo"),
                                                 split="test")))
    write_report(evaluate(game, ["interactions", "loo"], EvalOptions(n_boot=100)), other)
    result = compare.compare([run, other])
    assert len(result["interactions"]) == 2
    text = compare.markdown(result)
    assert "Pairwise Shapley interactions side by side" in text
    assert "| atlas + borealis |" in text
    page = compare.page(result)
    assert 'id="interactions-compare"' in page and 'id="interactions-1"' in page and 'id="interactions-2"' in page


def test_the_heatmap_is_interactive_in_a_browser(run, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    driver = browser
    driver.get((run / "leaderboard.html").as_uri())
    assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    cells = driver.find_elements("css selector", "#interactions td.pair")
    assert len(cells) == 12
    summary = strict(run / "summary.json")
    first = cells[0]
    a, b = first.get_attribute("data-a"), first.get_attribute("data-b")
    i, j = summary["pool"].index(a), summary["pool"].index(b)
    assert first.text == f"{summary['interactions']['shapley']['value'][i][j]:+.3f}"
    ActionChains(driver).move_to_element(first).perform()  # hover shows the pair, its value and CI
    detail = driver.find_element("id", "interaction-detail").text
    low = summary["interactions"]["shapley"]["ci_low"][i][j]
    assert detail.startswith(f"{a} + {b}: shapley interaction") and f"[{low:+.3f}," in detail
    driver.find_element("css selector", 'button[data-index="banzhaf"]').click()
    assert first.text == f"{summary['interactions']['banzhaf']['value'][i][j]:+.3f}"
    pressed = driver.find_element("css selector", 'button[data-index="banzhaf"]').get_attribute("aria-pressed")
    assert pressed == "true"
    first.click()
    assert "banzhaf interaction" in driver.find_element("id", "interaction-detail").text
    colors = {c.value_of_css_property("background-color") for c in cells}
    assert len(colors) > 2  # a heatmap, not a plain table


def test_a_team_larger_than_the_pool_is_refused_before_any_work(tmp_path, capsys):
    assert main(["eval", "--best-team", "5", "--estimator", "loo", "--items", "5", "--out", str(tmp_path / "x")]) == 2
    assert "--best-team 5: a team has at most 4 members" in capsys.readouterr().err
    assert not (tmp_path / "x" / "summary.json").exists()


def test_a_lone_member_has_no_pair(tmp_path):
    """`all` on a one-member pool skips the interactions; asking for them by name is refused in one line."""
    from coalition_gym.cli import main

    pool = tmp_path / "one.yaml"
    pool.write_text("name: one\nmembers:\n  - {name: atlas, backend: sim, model: sim:demo/atlas}\n")
    common = ["eval", "--pool", str(pool), "--protocol", "majority_vote", "--items", "5", "--bootstrap", "20"]
    assert main([*common, "--estimator", "all", "--out", str(tmp_path / "all")]) == 0
    assert main([*common, "--estimator", "interactions", "--out", str(tmp_path / "named")]) == 2
