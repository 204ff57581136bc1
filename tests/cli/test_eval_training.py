"""`cgym eval` with a collaborative-training protocol: LOO and exact Shapley with training inside,
the training cost in summary.json, a run killed with SIGKILL that resumes without retraining the
coalitions it finished (and ends with the values of an uninterrupted run), and --save-trained."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import yaml
from conftest import REPO

POOL = {"name": "mixed", "members": [
    {"name": "pico", "backend": "hf", "model": "zoo:tiny/pico"},
    {"name": "nano", "backend": "hf", "model": "zoo:tiny/nano"},
    {"name": "referee", "backend": "sim", "profile": {"skill": 0.5, "judge_skill": 0.95}}]}
SETTINGS = ["train_items=24", "dev_items=4", "max_new_tokens=6", "batch_size=4", "lr=1e-3", "iterations=2"]


def command(pool, out, cache, *extra):
    sets = [arg for s in SETTINGS for arg in ("--set", s)]
    return [sys.executable, "-m", "coalition_gym.cli", "eval", "--pool", str(pool), "--protocol", "sparta", "--task",
            "zoo:arith", "--items", "6", "--estimator", "shapley", "--bootstrap", "20", "--out", str(out),
            "--cache", str(cache), *sets, *extra]


def run(cmd, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_killed_run_resumes_without_retraining_and_matches_an_uninterrupted_one(tmp_path):
    pool = tmp_path / "pool.yaml"
    pool.write_text(yaml.safe_dump(POOL))
    whole = run(command(pool, tmp_path / "whole", tmp_path / "whole-cache", "--save-trained", tmp_path / "saved"),
                tmp_path)
    assert whole.returncode == 0, whole.stderr
    summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert summary["cost"]["trainings"] == 4 and summary["cost"]["reused_trainings"] == 0
    assert summary["cost"]["training_seconds"] > 0 and summary["cost"]["training_generations"] > 0
    assert len(summary["training"]["valued_without_training"]) == 3  # the singletons
    assert "Training inside the game: 4 coalitions trained" in (tmp_path / "whole" / "leaderboard.md").read_text()
    assert (tmp_path / "saved" / "pool.yaml").is_file() and (tmp_path / "saved" / "pico" / "config.json").is_file()

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cache = tmp_path / "cache"
    job = subprocess.Popen(command(pool, tmp_path / "killed", cache), cwd=tmp_path, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not list((cache / "trained").glob("*/training.json")):
        time.sleep(0.02)
    job.send_signal(signal.SIGKILL)
    job.wait()
    finished = len(list((cache / "trained").glob("*/training.json")))
    assert 1 <= finished
    again = run(command(pool, tmp_path / "killed", cache), tmp_path)
    assert again.returncode == 0, again.stderr
    resumed = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert resumed["cost"]["reused_trainings"] == finished
    assert resumed["cost"]["trainings"] == 4 - finished
    assert [m["shapley"] for m in resumed["models"]] == [m["shapley"] for m in summary["models"]]
