import json
import subprocess
import sys

from coalition_gym.cli import main


def test_envs_lists_every_id(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id in ("Debate-v0", "LLMBlender-v0", "SLMMux-v0", "MajorityVote-v0"):
        assert f"coalition_gym/{env_id}" in out


def test_run_prints_the_system_score_and_writes_files(tmp_path, capsys):
    code = main(["run", "coalition_gym/Debate-v0", "--episodes", "30", "--set", "rounds=2",
                 "--members", "atlas,delta", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "system score" in out and "n=30" in out
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 30 and json.loads(lines[0])["coalition"] == ["atlas", "delta"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["protocol"]["rounds"] == 2 and 0.0 <= summary["system_score"] <= 1.0


def test_run_more_episodes_than_items_reuses_items_with_new_seeds(tmp_path):
    assert main(["run", "coalition_gym/MajorityVote-v0", "--episodes", "12", "--size", "5",
                 "--out", str(tmp_path)]) == 0
    records = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 12 and len({(r["item_id"], r["seed"]) for r in records}) == 12


def test_bad_input_gets_a_clear_error(capsys):
    assert main(["run", "coalition_gym/Debat-v0", "--episodes", "2"]) == 2
    assert "Did you mean 'coalition_gym/Debate-v0'" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--pool", "sim:nope"]) == 2
    assert "unknown pool preset" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--set", "rounds"]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["run", "coalition_gym/Debate-v0", "--members", "atlas,atlas"]) == 2
    assert main(["run", "coalition_gym/Debate-v0", "--episodes", "0"]) == 2


def test_demo_shows_the_phenomenon(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "coalition_gym.cli", "demo", "--items", "300",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    debate = next(r for r in summary["protocols"] if r["protocol"] == "debate")
    rows = {m["name"]: m for m in debate["models"]}
    assert rows["atlas"]["solo"] > rows["delta"]["solo"]  # strongest alone ...
    assert rows["delta"]["loo"] > rows["atlas"]["loo"]  # ... but the weakest matters most
    assert rows["delta"]["shapley"] > rows["atlas"]["shapley"]
    assert (tmp_path / "strength.md").exists() and len(summary["seated_policy"]) == 4
    assert (tmp_path / "debate" / "leaderboard.md").exists()
