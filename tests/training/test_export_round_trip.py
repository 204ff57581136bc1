"""A trained policy goes straight into a pool: its checkpoint carries what it needs, and `cgym eval` of
the exported pool replays the trainer's test evaluation number for number."""

from __future__ import annotations

import contextlib
import io
import json
import shlex

import pytest

from coalition_gym.agents.member_settings import read_member_settings
from coalition_gym.agents.pools import load_pool
from coalition_gym.cli import main


def call(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("decoding", ["sampled", "greedy"])
def test_train_export_eval_round_trip_agrees_with_the_trainer(tmp_path, monkeypatch, decoding):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(["train", "--method", "crl", "--policy", "zoo:default/polymath",
                           "--protocol", "majority_vote", "--task", "zoo:reverse", "--collaborators", "sim:split",
                           "--steps", "2", "--force",
                           "--set", "protocol.tie_break=first", "--set", "test_items=40", "--set", "eval_items=8",
                           "--set", f"eval_decoding={decoding}", "--out", "train", "--export", "exported"])
    assert code == 0, err
    best = tmp_path / "train" / "crl-seed0" / "policy" / "best"  # every seat in <run>/<seat>/
    assert f"crl as a pool member: {{name: policy, backend: hf, model: {best}}}" in out
    settings = read_member_settings(best)
    assert settings is not None and (settings.style, settings.max_new_tokens) == ("compact", 16)
    assert settings.provenance["method"] == "crl" and settings.provenance["base_model"] == "zoo:default/polymath"
    assert settings.provenance["base_weights"]["sha256"]

    # the folder alone is a member: no style or token cap added by hand; the last step's folder too
    last = best.parent / "last"
    assert read_member_settings(last).provenance["step"] == 2
    pool = load_pool({"members": [{"name": "mine", "backend": "hf", "model": str(best)},
                                  {"name": "latest", "backend": "hf", "model": str(last)},
                                  {"name": "by_run", "backend": "hf", "model": str(best.parents[1])}]})
    assert pool.styles["mine"] == pool.styles["latest"] == pool.styles["by_run"] == "compact"
    assert pool.members["by_run"].identity == pool.members["mine"].identity  # the run folder names its best/
    assert pool.members["mine"].max_new_tokens == pool.members["latest"].max_new_tokens == 16

    command = shlex.split(next(line.strip() for line in out.splitlines() if line.strip().startswith("cgym eval")))
    code, _, err = call(command[1:] + ["--out", "evaluated", "--bootstrap", "50"])
    assert code == 0, err
    report = json.loads((tmp_path / "train" / "crl-seed0" / "report.json").read_text())
    summary = json.loads((tmp_path / "evaluated" / "summary.json").read_text())
    policy = next(m for m in summary["models"] if m["name"] == "policy")
    assert summary["full_coalition_score"] == pytest.approx(report["collab"]["mean"], abs=1e-12)
    assert policy["solo"] == pytest.approx(report["solo"]["mean"], abs=1e-12)
    assert summary["n_items"] == 40
