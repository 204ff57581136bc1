"""gain.html: the gain table and the Pareto plot (inline SVG, one element per protocol and baseline, error
bars on both axes), checked as markup and in a real headless browser (the system's Chromium through
Selenium, as the leaderboard page is; the browser test is skipped without Chromium and its driver)."""

import re

import pytest

from coalition_gym import System, SystemSpec, load_pool, make_protocol, make_task
from coalition_gym.reports import gain_files
from coalition_gym.reports.gain import GainOptions, gain
from coalition_gym.reports.pareto import nice_ticks, pareto_front, points

PROTOCOLS = ("debate", "majority_vote", "slm_mux")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COALITION_GYM_HOME", str(home))  # the dev-score cache stays in the test
        task, pool = make_task("rg/basic_arithmetic", size=30), load_pool("sim:demo")
        systems = [System.build(SystemSpec(make_protocol(name), task, pool, split="test",
                                           n_items=30)) for name in PROTOCOLS]
        report = gain(systems, GainOptions(n_boot=200))
    out = tmp_path_factory.mktemp("gain")
    paths = gain_files.write(report, out, {"command": "test"})
    return paths["html"], report


def test_the_page_holds_the_table_and_one_svg_point_per_system(written):
    path, report = written
    text = path.read_text()
    pts = points(report)
    assert len(pts) == len(PROTOCOLS) + len(report.baselines)  # every protocol and every distinct baseline
    assert text.count('<g class="point"') == len(pts)
    assert text.count('class="ybar"') == text.count('class="xbar"') == len(pts)  # error bars on both axes
    kinds = re.findall(r'<g class="point" data-label="[^"]*" data-kind="([a-z_]+)"', text)
    assert kinds.count("protocol") == len(PROTOCOLS) and len(kinds) == len(pts)
    gain_table = text.split('id="gain"', 1)[1].split("</table>", 1)[0]
    assert gain_table.count('<tr><td data-sort="') == len(PROTOCOLS)
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch


def test_nice_ticks_cover_the_range():
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    ticks = nice_ticks(0, 143.7)
    assert ticks[0] == 0 and ticks[-1] >= 143.7 and len(ticks) <= 8



def test_the_pareto_plot_renders_in_the_browser_and_the_table_sorts(written, browser, tmp_path):
    path, report = written
    browser.get(path.as_uri())
    assert browser.title.startswith("Gain over cost-matched baselines: pool sim:demo")
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    external = browser.execute_script("return performance.getEntriesByType('resource')"
                                      ".map(e => e.name).filter(n => !n.startsWith('data:'))")
    assert external == []

    # the plot: drawn, one visible point per protocol and baseline, placed by cost and score
    box = browser.execute_script("var b = document.querySelector('svg#pareto').getBoundingClientRect();"
                                 "return [b.width, b.height];")
    assert box[0] > 500 and box[1] > 300
    drawn = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg#pareto g.point')).map(function (g) {"
        "  var m = g.querySelector('.marker').getBoundingClientRect();"
        "  var y = g.querySelector('.ybar').getBoundingClientRect();"
        "  return {label: g.dataset.label, kind: g.dataset.kind, cost: parseFloat(g.dataset.cost),"
        "          score: parseFloat(g.dataset.score), x: m.left + m.width / 2, y: m.top + m.height / 2,"
        "          w: m.width, bar: y.height, tip: g.querySelector('title').textContent}; })")
    pts = points(report)
    assert sorted(d["label"] for d in drawn) == sorted(p["label"] for p in pts)
    assert {d["kind"] for d in drawn} == {"protocol", "best_single", "self_consistency", "pool_vote"}
    assert all(d["w"] > 4 for d in drawn)  # the markers are on screen
    assert any(d["bar"] > 10 for d in drawn)  # score CIs drawn as bars
    by_cost = sorted(drawn, key=lambda d: d["cost"])
    assert all(a["x"] <= b["x"] + 1e-6 for a, b in zip(by_cost, by_cost[1:]))  # x grows with cost
    by_score = sorted(drawn, key=lambda d: d["score"])
    assert all(a["y"] >= b["y"] - 1e-6 for a, b in zip(by_score, by_score[1:]))  # higher score drawn higher
    debate = next(d for d in drawn if d["label"] == "debate")
    assert "score" in debate["tip"] and "tokens/item" in debate["tip"]
    front = browser.execute_script("var f = document.querySelector('svg#pareto polyline.front');"
                                   "return f ? f.points.numberOfItems : 0")
    assert front == len(pareto_front(pts))

    # the table sorts by gain, numerically
    headers = browser.find_elements("css selector", "#gain th")
    names = [h.text for h in headers]
    gain_header = headers[names.index("gain [95% CI]")]
    gain_header.click()
    values = [float(v) for v in browser.execute_script(
        "return Array.from(document.querySelectorAll('#gain tbody tr')).map(r => r.cells[arguments[0]].dataset.sort)",
        names.index("gain [95% CI]"))]
    assert values == sorted(values, reverse=True) and len(values) == len(PROTOCOLS)

    shot = tmp_path / "gain.png"
    assert browser.save_screenshot(str(shot))
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] > 500 and pixels.std() > 0.05
