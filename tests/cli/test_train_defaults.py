"""`cgym train` with no setting options trains a shipped zoo policy in a setting with a learning signal,
picks the CPU preset for zoo policies, and says in its report how much signal the probe found."""

import json

import pytest

from coalition_gym.training.config import DEFAULT_POLICY_LR as TRAIN_DEFAULT_LR
from coalition_gym.training.config import DEFAULT_PROTOCOL_SETTINGS as TRAIN_DEFAULT_PROTOCOL_SETTINGS
from coalition_gym.training.config import DEFAULT_RUN as TRAIN_DEFAULTS
from coalition_gym.training.config import preset_for

pytestmark = pytest.mark.slow


def test_the_preset_follows_the_policy():
    assert preset_for("auto", ["zoo:default/quill"]) == "tiny"
    assert preset_for("auto", ["/models/qwen-7b"]) == "paper"
    assert preset_for("auto", ["zoo:default/quill", "/models/qwen-7b"]) == "paper"  # a team: every policy a zoo one
    assert preset_for("paper", ["zoo:default/quill"]) == "paper"  # an explicit preset wins


def test_cgym_train_and_the_librarys_default_run_are_the_same_run(tmp_path):
    from coalition_gym.cli import main
    from coalition_gym.training.trainer import RunOptions, run_methods

    small = {"steps": 1, "eval_items": 4, "test_items": 4}
    assert main(["train", "--method", "base", "--out", str(tmp_path / "cli"),
                 *[f"--set={k}={v}" for k, v in small.items()]]) == 0
    run_methods(["base"], tmp_path / "library", options=RunOptions(progress=False), **small)
    cli, library = (json.loads((tmp_path / side / "base-seed0" / "config.json").read_text())
                    for side in ("cli", "library"))
    assert cli == library and cli["policies"] == TRAIN_DEFAULTS["policies"] and cli["lr"] == TRAIN_DEFAULT_LR


def test_defaults_train_with_signal(tmp_path, capsys):
    from coalition_gym.cli import main

    code = main(["train", "--steps", "2", "--out", str(tmp_path), "--set", "eval_items=20", "--set", "test_items=20"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["policy_weights"]["source"] == "shipped" and record["policy_weights"]["zoo_model"] == "quill"
    run = record["training"]
    assert run["preset"] == "tiny" and run["policies"] == TRAIN_DEFAULTS["policies"]
    assert run["protocol_settings"] == TRAIN_DEFAULT_PROTOCOL_SETTINGS
    report = json.loads((tmp_path / "crl-seed0" / "report.json").read_text())
    assert report["probe"]["informative_groups"] > 0  # the defaults give C-RL something to learn from
    assert report["policy_weights"]["source"] == "shipped" and len(report["policy_weights"]["sha256"]) == 64
    assert report["steps_run"] == 2 and report["config"]["lr"] == TRAIN_DEFAULT_LR


def test_a_given_protocol_drops_the_default_protocol_settings(tmp_path):
    from coalition_gym.cli import main

    assert main(["train", "--method", "base", "--protocol", "majority_vote", "--task", "zoo:arith", "--out",
                 str(tmp_path), "--set", "eval_items=4", "--set", "test_items=4"]) == 0
    run = json.loads((tmp_path / "run.json").read_text())["training"]
    assert "protocol_settings" not in run and run["protocol"] == "majority_vote"
    assert run["lr"] == TRAIN_DEFAULT_LR  # the default policy keeps its rate; a policy of yours gets the preset's
