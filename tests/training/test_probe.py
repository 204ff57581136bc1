"""Training never trains nothing silently: the probe before the first update, its diagnosis, --force,
and the last step always evaluated."""

import json

import pytest

from coalition_gym.training.config import make_config
from coalition_gym.training.probe import NoSignalError, ProbeResult, ProbeSetting, diagnose
from coalition_gym.training.trainer import Trainer

pytestmark = pytest.mark.slow


def config(method="crl", **kw):
    base = dict(policies=["zoo:tiny/pico"], task="zoo:reverse", task_kwargs={"size": 40}, steps=2, eval_every=25,
                eval_items=4, test_items=4, items_per_step=2, group_size=4, collaborators="sim:split",
                protocol="majority_vote", probe_groups=4)
    base.update(kw)
    return make_config(method, preset="tiny", **base)


def test_a_policy_that_cannot_solve_the_task_is_refused_before_any_update(tmp_path):
    trainer = Trainer(config(), out=tmp_path)  # pico never spells a word backward
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(NoSignalError, match=r"no informative group.*cannot solve the task.*--force"):
        trainer.fit(progress=False)
    assert all((before[k] == v).all() for k, v in trainer.model.state_dict().items())
    assert trainer.state.step == 0 and trainer.state.probe["informative_groups"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["probe"]["groups"] == 4 and rows[0]["probe"]["group_size"] == 4


def test_force_trains_anyway_and_the_report_keeps_the_probe(tmp_path):
    lines = []
    trainer = Trainer(config(), out=tmp_path, log=lines.append)
    trainer.fit(progress=False, force=True)
    assert trainer.state.step == 2
    assert any(line.startswith("warning: crl would train nothing") and "Training anyway" in line for line in lines)
    assert trainer.report()["probe"]["informative_groups"] == 0.0


def test_the_last_step_is_evaluated_so_a_short_run_can_select_it(tmp_path):
    trainer = Trainer(config(steps=3, eval_every=25, probe_groups=0), out=tmp_path)
    trainer.fit(progress=False, force=True)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "dev_score" in r] == [0, 3]  # step 0, then the last step (not 25)


def test_the_probe_does_not_change_the_training_trajectory(tmp_path):
    a = Trainer(config(policies=["zoo:default/quill"], probe_groups=0, steps=2), out=tmp_path / "a")
    b = Trainer(config(policies=["zoo:default/quill"], probe_groups=3, steps=2), out=tmp_path / "b")
    a.fit(progress=False, force=True)
    b.fit(progress=False, force=True)
    assert b.state.probe is not None and a.state.probe is None
    rows = [[json.loads(line) for line in (t.out / "metrics.jsonl").read_text().splitlines()
             if '"reward_mean"' in line and '"probe"' not in line] for t in (a, b)]
    assert [r["reward_mean"] for r in rows[0]] == [r["reward_mean"] for r in rows[1]]
    for k, v in a.model.state_dict().items():
        assert (v == b.model.state_dict()[k]).all()


@pytest.mark.parametrize("result, method, expected", [
    (ProbeResult(4, 4, 0.0, None, 0.01, 0.3), "crl", "cannot solve the task"),
    (ProbeResult(4, 4, 0.0, None, 0.9, 0.9), "crl", "same answer in all G=4 executions"),
    (ProbeResult(4, 4, 0.0, 0.0, 0.5, 0.8), "crl", "collaborators decide every item"),
    (ProbeResult(4, 4, 0.0, 0.3, 0.5, 0.8), "crl", "G is too small"),
    (ProbeResult(4, 4, 0.0, 0.0, 0.5, 0.5), "grpo-indiv", "G is too small"),  # solo: no collaborators to blame
])
def test_the_diagnosis_names_the_likely_cause(result, method, expected):
    setting = ProbeSetting(method, "zoo:arith", 4, "slm_mux", "sim:demo", solo=method != "crl")
    assert expected in diagnose(result, setting)


def test_cgym_train_refuses_without_signal_and_says_why(tmp_path, capsys):
    from coalition_gym.cli import main

    args = ["train", "--method", "crl", "--policy", "zoo:tiny/pico", "--task", "zoo:reverse", "--steps", "1",
            "--protocol", "majority_vote", "--collaborators", "sim:split",
            "--out", str(tmp_path), "--set", "eval_items=4", "--set", "test_items=4", "--set", "probe_groups=2",
            "--set", "task_kwargs={\"size\": 20}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "crl would train nothing" in err and "cannot solve the task" in err and "Traceback" not in err
    assert main(args + ["--force"]) == 0
    assert (tmp_path / "crl-seed0" / "report.json").is_file()
