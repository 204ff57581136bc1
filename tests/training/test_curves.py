"""Training shows its curves (issue 41, item 9): ``cgym train`` writes ``curves.png`` (dev score, reward and
informative groups per step; Base as a line) for a single seat and a team and names it in its summary, and
``--report-to`` sends the metrics to TensorBoard, wandb or trackio; a missing package is one line, exit 2,
before any training."""

import importlib.machinery
import sys
import types

import pytest

from coalition_gym.training.curves import Curves, plot_curves
from coalition_gym.training.reporting import MetricsLog

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_curves_have_a_line_per_method_and_seat(tmp_path):
    rows = [{"step": 0, "probe": {}}, {"step": 0, "dev_score": 0.5}, {"step": 1, "reward_mean": 0.2,
            "informative_groups": 0.5, "a/informative_groups": 0.25, "b/informative_groups": 0.0},
            {"step": 2, "reward_mean": 0.4, "dev_score": 0.6, "a/informative_groups": 0.5}]
    assert Curves("crl", rows).series("dev_score") == [("crl", [0, 2], [0.5, 0.6])]
    team = Curves("team-crl", rows, ["a", "b"])
    assert [s[0] for s in team.series("informative_groups")] == ["team-crl a", "team-crl b"]
    path = plot_curves([Curves("crl", rows), team], tmp_path / "curves.png", base=0.55)
    assert path.read_bytes().startswith(PNG)


def test_cgym_train_writes_curves_and_its_summary_names_them(tmp_path, capsys):
    from coalition_gym.cli import main

    out = tmp_path / "runs"
    assert main(["train", "--method", "base", "--policy", "zoo:tiny/pico", "--task", "zoo:arith", "--steps", "1",
                 "--set", "eval_items=2", "--set", "test_items=2", "--out", str(out)]) == 0
    assert (out / "curves.png").read_bytes().startswith(PNG)
    said = f"curves (dev score, reward and informative groups per step): {out / 'curves.png'}"
    assert said in capsys.readouterr().out and said in (out / "summary.md").read_text()


@pytest.mark.slow
def test_a_team_run_writes_its_curves(tmp_path, capsys):
    from coalition_gym.cli import main

    out = tmp_path / "team"
    assert main(["train", "--policy", "zoo:tiny/pico", "--policy", "zoo:tiny/nano", "--task", "zoo:arith",
                 "--steps", "1", "--set", "eval_items=2", "--set", "test_items=2", "--set", "items_per_step=2",
                 "--set", "group_size=2", "--set", "probe_groups=0", "--out", str(out)]) == 0
    png = out / "team-crl-seed0" / "curves.png"
    said = capsys.readouterr().out
    assert png.read_bytes().startswith(PNG) and f"per step): {png}" in said
    assert "verdict team-crl: system score on test" in said and "the untrained team" in said  # item 5, a team


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb", "trackio"])
def test_a_missing_tracker_is_one_line_and_exit_2_before_training(tracker, tmp_path, capsys, monkeypatch):
    import importlib.util

    from coalition_gym.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == tracker else real(name, *a))
    assert main(["train", "--report-to", tracker, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"cgym: error: --report-to {tracker} needs the {tracker} package: pip install {tracker}"
    assert not any(tmp_path.iterdir())  # nothing ran


def test_report_to_sends_every_numeric_metric_to_the_tracker(tmp_path, monkeypatch):
    logged, started = [], {}
    fake = types.ModuleType("trackio")
    fake.__spec__ = importlib.machinery.ModuleSpec("trackio", None)
    fake.init = lambda **kw: started.update(kw)
    fake.log = lambda numbers, step: logged.append((step, numbers))
    monkeypatch.setitem(sys.modules, "trackio", fake)
    log = MetricsLog(tmp_path / "crl-seed0", "trackio", {"lr": 1e-4})
    (tmp_path / "crl-seed0").mkdir()
    log.write({"step": 3, "reward_mean": 0.5, "best": True, "dev_ci": [0.1, 0.2], "dev_score": 0.7})
    assert started == {"project": "coalition-gym", "name": "crl-seed0", "config": {"lr": 1e-4}}
    assert logged == [(3, {"reward_mean": 0.5, "dev_score": 0.7})]
    assert log.rows()[0]["reward_mean"] == 0.5
