"""The trainer on a tiny zoo policy: log-prob consistency, uniform credit, dynamic sampling, resume, CLI."""

import json

import pytest
import torch

from coalition_gym.errors import ConfigError
from coalition_gym.training.advantages import group_advantages, informative_groups
from coalition_gym.training.config import make_config
from coalition_gym.training.trainer import RunOptions, Trainer, run_methods

pytestmark = pytest.mark.slow


def config(method="crl", **kw):
    base = dict(policies=["zoo:tiny/pico"], task="zoo:arith", task_kwargs={"size": 40}, steps=2, eval_every=2,
                eval_items=4, test_items=8, items_per_step=2, group_size=4, collaborators="sim:demo",
                members=["atlas", "delta"], protocol="slm_mux")
    if method in ("crl", "grpo-indiv", "dapo-indiv"):
        base["probe_groups"] = 0  # pico cannot solve zoo:arith; the probe has its own tests (test_probe.py)
    base.update(kw)
    return make_config(method, preset="tiny", **base)


def test_recomputed_logprobs_match_the_sampled_ones_at_step_zero(tmp_path):
    trainer = Trainer(config(), out=tmp_path)
    rollouts = trainer.rollouts(trainer.task.items("train")[:2], step_seed=1)
    calls = [c for r in rollouts for c in r.calls if c.completion_ids]
    assert calls and all(len(c.logprobs) == len(c.completion_ids) for c in calls)
    new, old, mask = trainer.updates["policy"].token_batch(calls)
    assert torch.allclose(new[mask.bool()], old[mask.bool()], atol=1e-4)
    assert new.requires_grad


def test_every_policy_call_of_a_rollout_gets_its_advantage(tmp_path):
    trainer = Trainer(config(protocol="debate", protocol_settings={"rounds": 2}), out=tmp_path)
    rollouts = trainer.rollouts(trainer.task.items("train")[:2], step_seed=2)
    assert all(len(r.calls) == 2 for r in rollouts)  # two debate rounds: two policy calls per rollout
    rewards = trainer.rewards(rollouts)
    adv = group_advantages(rewards, [r.group for r in rollouts])
    seen = {}
    captured = {}
    original = trainer.updates["policy"].policy_gradient  # what the strategy calls (it never sees the trainer)

    def spy(calls, advantages, **settings):
        captured["pairs"] = list(zip([c.rollout for c in calls], advantages or []))
        return original(calls, advantages, **settings)

    trainer.updates["policy"].policy_gradient = spy
    trainer.gather_batch = lambda step: (rollouts, rewards, {})
    trainer.train_step(0)
    assert captured["pairs"]
    for rollout, a in captured["pairs"]:
        seen.setdefault(rollout, set()).add(round(a, 9))
        assert a == pytest.approx(adv[rollout])
    assert all(len(values) == 1 for values in seen.values())


def test_dynamic_sampling_never_keeps_an_all_equal_group(tmp_path):
    trainer = Trainer(config("dapo-indiv", items_per_step=3, group_size=3), out=tmp_path)
    rollouts, rewards, extra = trainer.gather_batch(0)
    groups = [r.group for r in rollouts]
    assert informative_groups(rewards, groups) == set(groups)
    assert 0.0 <= extra["first_informative_groups"] <= 1.0
    assert len(set(groups)) <= 3  # refills never overshoot items_per_step


class Killed(Exception):
    pass


def test_a_killed_run_resumes_where_it_stopped(tmp_path):
    straight = Trainer(config(steps=3, eval_every=10), out=tmp_path / "straight")
    straight.fit(progress=False)

    victim = Trainer(config(steps=3, eval_every=10), out=tmp_path / "victim")
    save = victim.save_state

    def save_then_die():
        save()
        if victim.state.step == 2:
            raise Killed  # the process dies right after its second step's state hit the disk

    victim.save_state = save_then_die
    with pytest.raises(Killed):
        victim.fit(progress=False)

    resumed = Trainer(config(steps=3, eval_every=10), out=tmp_path / "victim")
    resumed.fit(progress=False)
    assert resumed.state.step == 3
    for p, q in zip(straight.model.parameters(), resumed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6)  # same weights as a run that was never interrupted
    with pytest.raises(ConfigError, match="different configuration"):
        Trainer(config(steps=5, eval_every=10), out=tmp_path / "victim").fit(progress=False)


def test_methods_report_against_base(tmp_path):
    reports = run_methods(["crl", "raft", "nudge"], tmp_path, "tiny", RunOptions(progress=False),
                          **{k: v for k, v in config().to_dict().items()
                             if k in ("policies", "task", "task_kwargs", "steps", "eval_every", "eval_items",
                                      "test_items", "items_per_step", "group_size", "collaborators", "members",
                                      "protocol", "probe_groups")})
    assert [r["method"] for r in reports] == ["base", "crl", "raft", "nudge"]
    for r in reports[1:]:
        assert set(r["vs_base_collab"]) == {"rescue", "drag"} and 0 <= r["collab"]["mean"] <= 1
        lo, hi = r["collab"]["ci"]
        assert lo <= r["collab"]["mean"] <= hi
    metrics = [json.loads(x) for x in (tmp_path / "crl-seed0" / "metrics.jsonl").read_text().splitlines()]
    step_rows = [m for m in metrics if "reward_mean" in m]
    assert step_rows and {"reward_std", "informative_groups", "pivotality", "reward_policy_score_corr", "adv_abs_mean",
                          "grad_token_share", "clip_low", "clip_high", "loss", "tokens", "grad_norm",
                          "rollout_seconds", "update_seconds"} <= set(step_rows[0])
    crl = reports[1]
    assert set(crl["last"]) == {"collab", "solo"} and crl["dev_at_best"]["n"] == 4
    assert crl["signal"]["steps"] == 2 and "pivotality" in crl["signal"]["last"]
    table = (tmp_path / "summary.md").read_text()
    assert all(m in table for m in ("base", "crl", "raft", "nudge"))


def test_bad_training_configs():
    with pytest.raises(ConfigError, match="unknown method"):
        make_config("ppo")
    with pytest.raises(ConfigError, match="G >= 2"):
        make_config("crl", group_size=1)
    with pytest.raises(ConfigError, match="has a setting"):
        make_config("crl", learning_rate=1.0)
    with pytest.raises(ConfigError, match="neither a zoo model"):
        Trainer(make_config("crl", policies=["/does/not/exist"], task="zoo:arith", task_kwargs={"size": 5}))
