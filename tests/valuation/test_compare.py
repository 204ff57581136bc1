"""`cgym compare`: one table across leaderboard runs, with a note when they measured different things."""

import json

import pytest

from coalition_gym.cli import main
from coalition_gym.errors import ConfigError
from coalition_gym.reports.compare import compare


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    common = ["--items", "8", "--estimator", "loo,shapley", "--bootstrap", "50"]
    for name, extra in {"debate": ["--protocol", "debate"], "vote": ["--protocol", "majority_vote"],
                        "vote_seed3": ["--protocol", "majority_vote", "--seed", "3"],
                        "vote_12": ["--protocol", "majority_vote", "--items", "12"]}.items():
        assert main(["eval", *common, *extra, "--out", str(root / name)]) == 0
    return root


def test_the_same_items_and_seed_compare_without_notes(runs):
    result = compare([runs / "debate", runs / "vote"])
    assert result["notes"] == [] and result["estimators"] == ["loo", "shapley"]
    assert [r["label"] for r in result["runs"]] == ["debate / rg/basic_arithmetic / sim:demo",
                                                    "majority_vote / rg/basic_arithmetic / sim:demo"]
    assert len(result["rows"]) == 8 and set(result["wide"]) == {"atlas", "borealis", "cirrus", "delta"}
    summary = json.loads((runs / "vote" / "summary.json").read_text())
    atlas = next(m for m in summary["models"] if m["name"] == "atlas")
    assert result["wide"]["atlas"]["majority_vote / rg/basic_arithmetic / sim:demo"]["value"] == atlas["shapley"]


def test_runs_that_differ_in_items_or_seed_say_so(runs):
    notes = compare([runs / "vote", runs / "vote_seed3", runs / "vote_12"])["notes"]
    assert any(n.startswith("not comparable on seed") for n in notes)
    assert any(n.startswith("not comparable on items") for n in notes)
    # the same setting twice: folder names keep the labels apart
    labels = [r["label"] for r in compare([runs / "vote", runs / "vote_seed3"])["runs"]]
    assert labels[0].endswith("(vote)") and labels[1].endswith("(vote_seed3)")


def test_cli_writes_markdown_html_and_json(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(runs / "debate"), str(runs / "vote"), "--out", str(out)]) == 0
    assert "| debate / rg/basic_arithmetic / sim:demo | atlas |" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {"compare.md", "compare.html", "compare.json", "run.json"}
    assert "<table class=\"sortable\" id=\"wide\">" in (out / "compare.html").read_text()


def test_bad_folders_are_refused(runs, tmp_path, capsys):
    with pytest.raises(ConfigError, match="at least two"):
        compare([runs / "vote"])
    assert main(["compare", str(runs / "vote"), str(tmp_path)]) == 2
    assert "no summary.json; give folders written by `cgym eval --out`" in capsys.readouterr().err


def test_runs_on_different_weights_say_so(tmp_path):
    """The same member name on other weights (here: one bit of pico's weights flipped, as a rebuild on
    another machine would differ) is named in the notes; the same weights give no note."""
    import shutil

    from coalition_gym.agents.zoo import shipped

    changed = tmp_path / "pico"
    shutil.copytree(shipped.shipped_dir("tiny") / "pico", changed)
    weights = changed / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    common = ["eval", "--protocol", "majority_vote", "--task", "zoo:arith", "--items", "4", "--estimator", "loo",
              "--bootstrap", "20"]
    for name, model in {"a": "zoo:tiny/pico", "b": "zoo:tiny/pico", "c": str(changed)}.items():
        pool = tmp_path / f"{name}.yaml"
        pool.write_text(f"name: p\nmembers:\n  - {{name: pico, backend: hf, model: '{model}'}}\n"
                        "  - {name: atlas, backend: sim, model: sim:demo/atlas}\n"
                        "  - {name: delta, backend: sim, model: sim:demo/delta}\n")
        assert main([*common, "--pool", str(pool), "--out", str(tmp_path / name)]) == 0
    assert compare([tmp_path / "a", tmp_path / "b"])["notes"] == []
    notes = compare([tmp_path / "a", tmp_path / "c"])["notes"]
    assert len(notes) == 1 and notes[0].startswith("pico ran with different weights: sha256 ")
    assert "atlas" not in notes[0]  # simulated members have no weights to differ
