"""Every trainer runs the pre-training probe and refuses to train nothing (issue 41, item 4): the one Trainer
for K >= 2 seats (each seat's informative groups, pivotality and own score) and the TRL adapters (a probe() with
force=, and a warning when the rewards had zero spread for K consecutive steps)."""

import json
import warnings

import pytest

from coalition_gym.agents.zoo import zoo_task
from coalition_gym.training.config import make_config
from coalition_gym.training.probe import NoSignalError
from coalition_gym.training.trl_adapter import NoSignalWarning, SystemOutcomeReward, ZeroSignalWatch

CANNOT = dict(task="zoo:reverse", task_kwargs={"size": 30}, protocol="majority_vote", collaborators="sim:split")


def test_the_zero_spread_watch_warns_once_after_k_silent_steps():
    seen = []
    watch = ZeroSignalWatch(3, seen.append)
    for _ in range(2):
        watch.observe(["a", "a", "b", "b"], [1.0, 1.0, 0.0, 0.0])
    watch.observe(["a", "a"], [1.0, 0.0])  # one informative group: the count starts over
    for _ in range(3):
        watch.observe(["a", "a", "b", "b"], [0.0, 0.0, None, None])
    assert len(seen) == 1 and "3 consecutive steps" in seen[0]
    watch.observe(["a", "a"], [0.0, 0.0])
    assert len(seen) == 1  # once
    with pytest.warns(NoSignalWarning, match="zero spread"):
        default = ZeroSignalWatch(1)
        default.observe(["a", "a"], [1.0, 1.0])


def test_the_trl_reward_warns_when_every_group_scores_alike():
    seen = []
    reward = SystemOutcomeReward("majority_vote", task=zoo_task("arith", size=30), collaborators="sim:demo",
                                 members=["atlas", "delta"], policy_style="compact", watch_steps=2,
                                 on_no_signal=seen.append)
    rows = reward.dataset("train", limit=2)
    for _ in range(2):
        reward([rows[0]["prompt"]] * 2 + [rows[1]["prompt"]] * 2, [" 12345"] * 4, [rows[0]["item_id"]] * 2 +
               [rows[1]["item_id"]] * 2)
    assert len(seen) == 1 and "probe(model, tokenizer)" in seen[0]
    assert SystemOutcomeReward("majority_vote", task=zoo_task("arith", size=30)).watch.steps == 5  # the default


@pytest.mark.slow
def test_the_trl_probe_refuses_a_policy_that_cannot_learn_unless_forced():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coalition_gym.training.policy_model import resolve_policy

    path = resolve_policy("zoo:tiny/pico")
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    reward = SystemOutcomeReward("majority_vote", task=zoo_task("reverse", size=30), collaborators="sim:split",
                                 policy_style="compact")
    with pytest.raises(NoSignalError, match=r"no informative group.*cannot solve the task.*force=True"):
        reward.probe(model, tokenizer, groups=3, group_size=3, max_new_tokens=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = reward.probe(model, tokenizer, groups=3, group_size=3, max_new_tokens=8, force=True)
    assert result.groups == 3 and result.informative_groups == 0.0 and model.training is False
    from coalition_gym.training.trl_rollouts import ProtocolRollout

    rollout = ProtocolRollout("debate", task=zoo_task("reverse", size=30), collaborators="sim:split",
                              policy_style="compact", rounds=2)  # multi-round: the same probe
    with pytest.raises(NoSignalError, match="cannot solve the task"):
        rollout.probe(model, tokenizer, groups=2, group_size=2, max_new_tokens=6)


@pytest.mark.slow
def test_a_team_that_cannot_learn_is_refused_before_any_update_with_each_seats_cause(tmp_path, capsys):
    from coalition_gym.training.trainer import Trainer

    config = make_config("team-crl", "tiny", policies=["zoo:tiny/pico", "zoo:tiny/nano"], steps=1, eval_items=2,
                         test_items=2, items_per_step=2, group_size=2, probe_groups=3, **CANNOT)
    lines = []
    trainer = Trainer(config, out=tmp_path, log=lines.append)
    with pytest.raises(NoSignalError, match=r"team-crl would train nothing.*for any seat.*seat 'seat0'.*--force"):
        trainer.fit(progress=False)
    assert trainer.state.step == 0 and set(trainer.state.probe) == {"seat0", "seat1"}
    assert [line.split(":")[0] for line in lines] == ["seat0", "seat1"]  # one probe line per seat
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert row["probe"]["seat1"]["group_size"] == 2 and "pivotality" in row["probe"]["seat0"]

    from coalition_gym.cli import main

    argv = ["train", "--policy", "zoo:tiny/pico", "--policy", "zoo:tiny/nano", "--task", "zoo:reverse",
            "--protocol", "majority_vote", "--collaborators", "sim:split", "--steps", "1", "--out",
            str(tmp_path / "cli"), "--set", "probe_groups=2", "--set", "eval_items=2", "--set", "test_items=2",
            "--set", "items_per_step=2", "--set", "group_size=2", "--set", "task_kwargs={size: 30}"]
    assert main(argv) == 2
    assert "team-crl would train nothing" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0  # --force reaches a team too
    assert "Training anyway (force)" in capsys.readouterr().out


@pytest.mark.slow
def test_the_trl_example_probes_first_and_stops_with_the_cause(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "trl" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with pytest.raises(SystemExit, match=r"(?s)would train nothing.*cannot solve the task.*--force trains anyway"):
        example.main(["--probe-groups", "2", "--out", str(tmp_path)])  # its defaults: tiny/0 cannot do arith


def test_a_team_seat_that_cannot_learn_is_warned_about_and_the_team_goes_on():
    from coalition_gym.training.probe import ProbeResult, ProbeSetting, refuse_without_signal

    setting = ProbeSetting("team-crl", "zoo:arith", 4, "majority_vote", "sim:demo")
    learns, noise = ProbeResult(4, 4, 0.5, 0.4, 0.3, 0.2), ProbeResult(4, 4, 0.5, 0.0, 0.3, 0.2)
    lines = []
    refuse_without_signal({"a": learns, "b": noise}, setting, False, lines.append, "")
    assert lines[:2] == [f"a: {learns.line()}", f"b: {noise.line()}"]
    # b's credit moved only with a's samples (pivotality 0): it will not learn, and the run is told so
    assert lines[2].startswith("warning: 'b' got no learning signal in the probe") and "seat 'b'" in lines[2]
    with pytest.raises(NoSignalError, match="for any seat"):
        refuse_without_signal({"a": noise, "b": noise}, setting, False, lines.append, "")
