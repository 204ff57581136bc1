"""`cgym robustness` end to end: every output file, the verdict, and a trained adversary seated by path."""

import json

import pytest

from coalition_gym.cli import main

OUTPUTS = ("robustness.json", "robustness.md", "robustness.csv", "robustness.png", "robustness.html", "run.json",
           "results.jsonl")


def test_robustness_writes_every_output(tmp_path, capsys):
    out = tmp_path / "rob"
    code = main(["robustness", "--adversary", "colluders", "--seat", "delta", "--protocols",
                 "majority_vote,llm_blender", "--items", "30", "--bootstrap", "200", "--out", str(out)])
    assert code == 0
    assert all((out / name).is_file() for name in OUTPUTS)
    data = json.loads((out / "robustness.json").read_text())
    assert data["seats"] == ["delta", "atlas"] and data["adversary"] == "colluders"
    assert {p["protocol"] for p in data["protocols"]} == {"majority_vote", "llm_blender"}
    for p in data["protocols"]:
        assert p["effect"]["value"] == pytest.approx(p["drag"]["value"] - p["rescue"]["value"])
        assert len(data["per_item"][p["protocol"]]["honest"]) == 30
    assert data["run"]["command"].startswith("cgym robustness")
    text = capsys.readouterr().out
    assert "Most robust:" in text and "least robust:" in text
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 2 * 30  # protocols x {honest, adversarial} x items
    # refuses to overwrite without --overwrite
    assert main(["robustness", "--adversary", "persuader", "--items", "5", "--out", str(out)]) == 2


@pytest.mark.slow
def test_a_negate_trained_checkpoint_is_seated_by_path(tmp_path):
    train = tmp_path / "train"
    assert main(["train", "--method", "crl", "--reward", "negate", "--preset", "tiny", "--policy", "zoo:tiny/pico",
                 "--task", "zoo:arith", "--protocol", "majority_vote", "--collaborators", "sim:split", "--steps", "2",
                 "--set", "eval_every=2", "--set", "eval_items=8", "--set", "test_items=8", "--force",
                 "--out", str(train)]) == 0
    config = json.loads((train / "crl-seed0" / "config.json").read_text())
    assert config["reward"] == "negate"
    run = train / "crl-seed0"  # the run folder names its one seat's best/ (<run>/policy/best)
    out = tmp_path / "rob"
    assert main(["robustness", "--pool", "sim:split", "--task", "zoo:arith", "--protocols", "majority_vote",
                 "--adversary", str(run), "--seat", "ben", "--items", "10", "--out", str(out)]) == 0
    data = json.loads((out / "robustness.json").read_text())
    assert data["adversary"] == str(run) and data["seats"] == ["ben"]
    record = json.loads((out / "run.json").read_text())
    assert record["robustness"]["adversary"] == str(run)
