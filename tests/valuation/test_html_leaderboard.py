"""The HTML leaderboard in a real headless browser (the system's Chromium through Selenium): it loads
without console errors or network requests, its columns sort by value, and it renders a screenshot.
Skipped when Chromium or its driver is absent; .ci/run installs both first."""

import pytest
from conftest import CHROMIUM, DRIVER

from coalition_gym import CoalitionGame, System, SystemSpec, load_pool, make_protocol, make_task
from coalition_gym.reports.leaderboard import EvalOptions, evaluate, write_report

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs chromium and chromedriver "
                                                                    "(apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("leaderboard")
    task = make_task("rg/basic_arithmetic", size=20)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, load_pool("sim:demo"),
                                                 split="test")))
    report = evaluate(game, ["loo", "shapley", "banzhaf"], EvalOptions(n_boot=100))
    write_report(report, out)
    return out / "leaderboard.html", report



def column(driver, index):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
        ".map(r => r.cells[arguments[0]].dataset.sort)", index)


def test_the_page_loads_sorts_and_renders(page, browser, tmp_path):
    path, report = page
    browser.get(path.as_uri())
    assert browser.title.startswith("debate on rg/basic_arithmetic")
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    external = browser.execute_script("return performance.getEntriesByType('resource')"
                                      ".map(e => e.name).filter(n => !n.startsWith('data:'))")
    assert external == []  # self-contained: nothing fetched
    assert browser.execute_script("return document.querySelector('img').naturalWidth") > 100
    headers = browser.execute_script("return Array.from(document.querySelectorAll('#leaderboard th'))"
                                     ".map(h => h.textContent)")
    assert headers == ["rank", "model", "solo [95% CI]", "loo [95% CI]", "shapley [95% CI]",
                       "banzhaf [95% CI]", "ranked by", "rank change"]

    solo_header = browser.find_elements("css selector", "#leaderboard th")[2]
    solo_header.click()  # descending first
    solo = [float(v) for v in column(browser, 2)]
    assert solo == sorted(solo, reverse=True) and solo_header.get_attribute("aria-sort") == "descending"
    expected = sorted(report.game.players, key=lambda p: -report.solo[p])
    assert [m for m in column(browser, 1)][0] == expected[0]
    solo_header.click()
    assert [float(v) for v in column(browser, 2)] == sorted(solo)
    browser.find_elements("css selector", "#leaderboard th")[1].click()  # text column: by name
    assert column(browser, 1) == sorted(report.game.players, reverse=True)

    shot = tmp_path / "leaderboard.png"
    assert browser.save_screenshot(str(shot))
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] > 500 and pixels.shape[1] > 800 and pixels.std() > 0.05  # not a blank page


def test_the_comparison_page_loads_and_its_wide_table_sorts(page, browser, tmp_path):
    from coalition_gym.reports import compare

    path, report = page
    other = tmp_path / "other"
    task = make_task("rg/basic_arithmetic", size=20)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("majority_vote"), task, load_pool("sim:demo"),
                                                 split="test")))
    write_report(evaluate(game, ["loo", "shapley"], EvalOptions(n_boot=100)), other)
    html_file = tmp_path / "compare.html"
    html_file.write_text(compare.page(compare.compare([path.parent, other])))
    browser.get(html_file.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    header = browser.find_elements("css selector", "#wide th")[1]
    header.click()
    values = [float(v) for v in browser.execute_script(
        "return Array.from(document.querySelectorAll('#wide tbody tr')).map(r => r.cells[1].dataset.sort)")]
    assert values == sorted(values, reverse=True) and len(values) == 4
