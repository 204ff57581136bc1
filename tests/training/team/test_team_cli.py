"""`cgym train --policy A --policy B`: K >= 2 policies run the team recipe (team-crl) with `--set` of its settings,
print each seat's test scores and pool line, and refuse what the team path cannot do; one --policy keeps the
single-seat path."""

from __future__ import annotations

import json

import pytest

from coalition_gym.agents.pools import load_pool
from coalition_gym.cli import main
from coalition_gym.cli.parser import build_parser
from coalition_gym.training.reporting import summary_table

TEAM = ["train", "--policy", "zoo:tiny/pico", "--policy", "zoo:tiny/nano", "--task", "zoo:arith", "--protocol",
        "majority_vote", "--collaborators", "sim:demo", "--members", "atlas", "--steps", "1",
        "--set", "eval_items=3", "--set", "test_items=3", "--set", "items_per_step=2", "--set", "group_size=2",
        "--set", "task_kwargs={size: 30}", "--set", "probe_groups=0"]  # pico and nano cannot do arith: the probe
# would refuse the team (tests/training/test_probe_everywhere.py); here the plumbing is tested


def test_two_policies_train_a_team_and_print_each_seats_pool_line(tmp_path, capsys):
    code = main([*TEAM, "--out", str(tmp_path), "--set", "credit=shapley", "--set", "seats=[solver, checker]",
                 "--export", str(tmp_path / "export")])
    out, err = capsys.readouterr()
    assert code == 0, err
    run = tmp_path / "team-crl-seed0"
    report = json.loads((run / "report.json").read_text())
    assert report["credit"] == "shapley" and report["seats"] == ["solver", "checker"] and report["steps_run"] == 1
    assert report["policies"] == {"solver": "zoo:tiny/pico", "checker": "zoo:tiny/nano"}
    assert report["config"]["max_new_tokens"] == 16  # zoo policies: the tiny preset, as for one policy
    for seat in ("solver", "checker"):
        line = next(x for x in out.splitlines() if x.startswith(f"{seat} as a pool member:"))
        assert f"name: {seat}, backend: hf, model: {(run / seat / 'best').resolve()}" in line
        assert f"  {seat} (zoo:tiny/" in out  # its solo / loo / shapley before -> after
    assert "system score on test" in out
    pool = load_pool(str(tmp_path / "export" / "pool.yaml"))  # the team's coalition, ready for cgym eval
    assert pool.member_names == ["atlas", "solver", "checker"] and "cgym eval --pool" in out
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["training"]["methods"] == "team-crl" and set(record["policy_weights"]) == {"solver", "checker"}
    assert "team-crl" not in summary_table(tmp_path)  # a policy table: a team's report is not one of its rows
    # the same command again resumes the finished run (same configuration) instead of refusing it
    assert main([*TEAM, "--out", str(tmp_path), "--set", "credit=shapley", "--set", "seats=[solver, checker]"]) == 0


@pytest.mark.parametrize("extra, message", [
    (["--set", "credit=lo"], "unknown credit mode 'lo'. Did you mean 'loo'"),
    (["--set", "policy=zoo:tiny/pico"], "no training method has a setting 'policy'. Did you mean 'policies'"),
    (["--method", "grpo-indiv"], "trains one policy; with 2 --policy options the team recipes apply: team-crl"),
    (["--reward", "negate"], "'reward' is not a setting of team-crl"),
    (["--set", "shared_base=true"], "one LoRA adapter each: set lora_r > 0"),
])
def test_the_team_path_refuses_with_one_line(tmp_path, capsys, extra, message):
    assert main([*TEAM, "--out", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "team-crl-seed0" / "metrics.jsonl").exists()


def test_one_policy_keeps_the_single_seat_path(monkeypatch, tmp_path):
    from coalition_gym.training import runs

    seen = {}

    def run_methods(methods, root, preset, options, **settings):
        seen.update(methods=methods, preset=preset, **settings)
        return []

    monkeypatch.setattr(runs, "run_methods", run_methods)  # cgym train -> train_runs -> run_methods
    assert main(["train", "--policy", "zoo:tiny/pico", "--out", str(tmp_path)]) == 0
    assert seen["methods"] == ["crl"] and seen["policies"] == ["zoo:tiny/pico"] and seen["preset"] == "tiny"
    assert build_parser().parse_args(["train"]).policy is None  # no --policy: the single-seat defaults


def test_a_team_recipe_with_one_policy_trains_a_team_of_one(tmp_path, capsys):
    """One --policy under the team recipe: the same library function, trainer and layout, one seat named and
    placed as a single policy's (``<run>/policy/``), its leave-one-out credit beside the collaborator."""
    one = TEAM[:3] + TEAM[5:]  # TEAM without its second --policy
    assert one.count("--policy") == 1
    assert main([*one, "--method", "team-crl", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    run = tmp_path / "team-crl-seed0"
    report = json.loads((run / "report.json").read_text())
    assert report["seats"] == ["policy"] and report["credit"] == "loo" and report["steps_run"] == 1
    assert set(report["per_seat"]["policy"]["after"]) == {"solo", "policy_score", "loo", "shapley"}
    assert (run / "policy" / "best" / "coalition_gym.json").is_file() and not (run / "best").exists()
    assert f"team-crl as a pool member: {{name: policy, backend: hf, model: {(run / 'policy' / 'best').resolve()}}}" \
        in capsys.readouterr().out
