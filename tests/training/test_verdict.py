"""A training run ends with a verdict (issue 41, item 5): the paired system difference to Base with its 95% CI
and better / worse / no difference, read in the direction the method optimises; the direction of "best" said
where it is not "higher"; the probe's hint never repeats the setting it was given; the docs' --export
example has a learning signal."""

import json
import re
from pathlib import Path

import pytest

from coalition_gym.training.probe import ProbeResult, ProbeSetting, diagnose
from coalition_gym.training.reporting import summary_table
from coalition_gym.training.verdict import paired_verdict, verdict_line, verdict_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_verdict_is_the_paired_difference_with_its_ci():
    base = [1.0] * 30 + [0.0] * 10
    worse = [1.0] * 20 + [0.0] * 20  # 10 items dragged, none rescued
    v = paired_verdict(base, worse)
    assert v["difference"] == pytest.approx(-0.25) and v["ci"][1] < 0 and v["verdict"] == "worse"
    assert v["score"] == pytest.approx(0.5) and v["base"] == pytest.approx(0.75) and v["n"] == 40
    assert paired_verdict(base, base)["verdict"] == "no difference"
    assert paired_verdict(worse, base)["verdict"] == "better"
    assert paired_verdict(base, worse[:-1]) is None  # not paired: no verdict
    # an adversary (reward negate) wants lower system scores: the same drop is what it aims at
    assert paired_verdict(base, worse, "lower")["verdict"] == "better"
    assert verdict_of([-0.1, 0.2]) == "no difference"
    line = verdict_line("crl", paired_verdict(base, worse, "lower"))
    assert "worse" not in line and "better than Base" in line and "best = lower system score" in line


def _report(folder: Path, method: str, verdict=None, direction="higher", reward="system"):
    cell = {"mean": 0.9, "ci": [0.8, 1.0]}
    report = {"method": method, "seed": 0, "best_step": 3, "dev_at_best": cell, "collab": cell, "solo": cell,
              "last": {"collab": cell}, "best_direction": direction, "config": {"reward": reward}}
    if verdict:
        report["verdict"] = verdict
    (folder / f"{method}-seed0").mkdir(parents=True)
    (folder / f"{method}-seed0" / "report.json").write_text(json.dumps(report))


def test_the_summary_ends_with_each_methods_verdict_and_the_direction_of_best(tmp_path):
    base = [1.0] * 30 + [0.0] * 10
    _report(tmp_path, "base")
    _report(tmp_path, "crl", paired_verdict(base, [1.0] * 20 + [0.0] * 20))
    text = summary_table(tmp_path)
    assert re.search(r"verdict crl: system score on test 0\.500 vs Base 0\.750, paired difference -0\.250 "
                     r"\[95% CI -\d\.\d+, -\d\.\d+\] over 40 items: worse than Base", text), text
    assert "verdict base" not in text and "lower" not in text
    adversary = tmp_path / "adv"
    _report(adversary, "crl", paired_verdict(base, base, "lower"), direction="lower", reward="negate")
    assert "best step of crl: its lower dev score (reward negate: an adversary)" in summary_table(adversary)


@pytest.mark.parametrize("settings, repeated", [({"tie_break": "first"}, False), ({"tie_break": "random"}, True)])
def test_the_probe_hint_never_repeats_the_setting_it_was_given(settings, repeated):
    result = ProbeResult(4, 4, 0.0, 0.0, 0.5, 0.8)  # the collaborators decide every item
    text = diagnose(result, ProbeSetting("crl", "zoo:reverse", 4, "majority_vote", "sim:split", settings))
    assert "collaborators decide every item" in text
    assert ("majority_vote with protocol.tie_break=first" in text) is repeated


@pytest.mark.slow
def test_the_docs_export_example_has_a_learning_signal(tmp_path):
    """The docs' `cgym train ... --export` command (docs/train/crl.md, and the README's train example), probed as
    it is written: some group is informative."""
    from coalition_gym.cli.commands import _given_settings
    from coalition_gym.cli.parser import build_parser
    from coalition_gym.training.config import default_run, make_config, preset_for
    from coalition_gym.training.trainer import Trainer

    text = (ROOT / "docs" / "train" / "crl.md").read_text()
    command = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "--export runs/trained" in b)
    argv = command.split("\n#")[0].replace("\\\n", " ").split()[1:]
    assert " ".join(argv) in " ".join((ROOT / "README.md").read_text().replace("\\\n", " ").split())
    assert "--force" not in argv  # a run with signal needs no force
    args = build_parser().parse_args(argv)
    [policy] = args.policy  # one --policy: a single seat
    settings = default_run({**_given_settings(args), "policies": [policy]})  # as training.runs.train_runs lays them
    config = make_config(args.method, preset=preset_for(args.preset, [policy]), **settings)
    trainer = Trainer(config, out=tmp_path, log=lambda line: None)
    results = trainer.probe()
    assert results is not None and next(iter(results.values())).informative_groups > 0
