"""One table model, one bundle writer, one Pareto plot: every format of a report renders the same columns, a
report's folder is written by one call, and the plot's PNG and SVG are one drawing."""

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from coalition_gym import System, SystemSpec, load_pool, make_protocol, make_task
from coalition_gym.reports.gain import GainOptions, gain
from coalition_gym.reports.pareto import pareto_front, pareto_plot, points, to_png, to_svg
from coalition_gym.reports.sweep import SweepGrid, SweepReport, run_sweep
from coalition_gym.reports.table import Column, Table
from coalition_gym.result_files import RUN_FILE, Bundle, write_bundle, write_run_record


def _table() -> Table:
    return Table([Column("rank", kind="int"), Column("model"), Column("solo", "solo [95% CI]", "ci"),
                  Column("cost", "tokens/item", "number", ".4g"), Column("change", "rank change", "signed"),
                  Column("vote", "pool vote", "at")],
                 [{"rank": 1, "model": "atlas", "solo": {"value": 0.5, "ci": [0.25, 0.75]}, "cost": 12.5, "change": 2,
                   "vote": {"score": {"value": 0.8, "ci": [0.7, 0.9]}, "cost": {"value": 40.0}, "note": " (n/a)"}},
                  {"rank": 2, "model": "b|c", "solo": None, "cost": None, "change": -1, "vote": None}])


def test_every_format_renders_the_same_columns():
    table = _table()
    md = table.to_markdown()
    assert md[0] == "| rank | model | solo [95% CI] | tokens/item | rank change | pool vote |"
    assert md[2] == "| 1 | atlas | 0.500 [0.250, 0.750] | 12.5 | +2 | 0.800 [0.700, 0.900] @ 40 (n/a) |"
    assert md[3].endswith("| - | - | -1 | - |")
    rows = list(csv.reader(io.StringIO(table.to_csv())))
    assert rows[0] == ["rank", "model", "solo", "solo_ci_low", "solo_ci_high", "cost", "change", "vote", "vote_ci_low",
                       "vote_ci_high", "vote_cost"]
    assert rows[1] == ["1", "atlas", "0.5", "0.25", "0.75", "12.5", "2", "0.8", "0.7", "0.9", "40.0"]
    assert rows[2] == ["2", "b|c", "", "", "", "", "-1", "", "", "", ""]
    page = table.to_html()
    headers = [th.text for th in ET.fromstring(page).iter("th")]
    assert headers == [c.title for c in table.columns]  # HTML adds sorting, never columns
    assert 'data-sort="0.5" class="num">0.500 [0.250, 0.750]</td>' in page  # sorts by the value
    text = table.to_text().splitlines()
    assert text[0].split()[:3] == ["rank", "model", "solo"] and text[1].startswith("   1  atlas")


def test_a_column_kind_is_checked():
    with pytest.raises(ValueError, match="kind 'percent'"):
        Column("x", kind="percent")


def test_one_call_writes_a_folder(tmp_path):
    table = _table()
    drawn = []
    paths = write_bundle(tmp_path / "out", Bundle(
        "thing", record={"command": "cgym thing"}, summary={"x": float("nan")}, markdown="# thing\n", csv=table,
        png=lambda path: (drawn.append(path), path.write_bytes(b"\x89PNG")), html=lambda png: f"<p>{len(png)}</p>",
        results=[{"a": 1}, {"a": 2}], names={"png": "plot.png"}))
    assert {k: p.name for k, p in paths.items()} == {
        "results": "results.jsonl", "json": "thing.json", "run": RUN_FILE, "md": "thing.md", "csv": "thing.csv",
        "png": "plot.png", "html": "thing.html"}
    assert json.loads(paths["json"].read_text()) == {"x": None}  # strict JSON
    assert paths["csv"].read_bytes().decode() == table.to_csv() and paths["html"].read_text() == "<p>4</p>"
    assert len(paths["results"].read_text().splitlines()) == 2 and drawn == [paths["png"]]
    assert write_run_record(tmp_path / "other", {"a": 1}) == tmp_path / "other" / RUN_FILE


def test_the_pareto_plot_is_one_drawing_in_two_formats(tmp_path):
    task, pool = make_task("rg/basic_arithmetic", size=12), load_pool("sim:demo")
    systems = [System.build(SystemSpec(make_protocol(name), task, pool, split="test", n_items=12))
               for name in ("debate", "majority_vote")]
    report = gain(systems, GainOptions(n_boot=50))
    scene = pareto_plot(report)
    svg = ET.fromstring(to_svg(scene))
    ns = "{http://www.w3.org/2000/svg}"
    groups = [g for g in svg.iter(f"{ns}g") if g.get("class") == "point"]
    assert len(groups) == len(points(report)) == sum(g.cls == "point" for g in scene.groups)
    assert sum(g.get("data-front") == "true" for g in groups) == len(pareto_front(points(report)))
    png = to_png(scene, tmp_path / "pareto.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_returns_a_typed_report_and_writes_its_files(tmp_path):
    grid = SweepGrid(["sim:demo"], ["majority_vote"], ["rg/basic_arithmetic"], ["loo"], 12)
    report = run_sweep(grid, tmp_path, log=lambda _: None)
    assert isinstance(report, SweepReport) and list(report.settings) == ["sim:demo / majority_vote"]
    assert json.loads((tmp_path / "sweep_summary.json").read_text())["settings"] == {
        k: s.to_dict() for k, s in report.settings.items()}
    assert (tmp_path / "sweep.md").read_text() == report.markdown()
    assert (tmp_path / "run.json").is_file() and (tmp_path / "sim_demo" / "majority_vote" / "rg_basic_arithmetic"
                                                  / "leaderboard.csv").is_file()
