"""`cgym train` with no setting options trains a shipped zoo policy in a setting with a learning signal,
picks the CPU preset for zoo policies, and says in its report how much signal the probe found."""

import json

import pytest

from coalition_gym.cli.commands import TRAIN_DEFAULT_LR, TRAIN_DEFAULT_PROTOCOL_SETTINGS, TRAIN_DEFAULTS, train_preset

pytestmark = pytest.mark.slow


def test_the_preset_follows_the_policy():
    assert train_preset("auto", "zoo:default/quill") == "tiny"
    assert train_preset("auto", "/models/qwen-7b") == "paper"
    assert train_preset("paper", "zoo:default/quill") == "paper"  # an explicit preset wins


def test_defaults_train_with_signal(tmp_path, capsys):
    from coalition_gym.cli import main

    code = main(["train", "--steps", "2", "--out", str(tmp_path), "--set", "eval_items=20", "--set", "test_items=20"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["policy_weights"]["source"] == "shipped" and record["policy_weights"]["zoo_model"] == "quill"
    run = record["training"]
    assert run["preset"] == "tiny" and run["policy"] == TRAIN_DEFAULTS["policy"]
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
