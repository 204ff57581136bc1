"""The learning-signal machinery of the trainer, without a model: shared collaborator draws,
exact-zero advantages, batch-normalised losses, per-method configs, the signal diagnostics and the
refusal of settings that cannot give the policy any signal."""

import dataclasses

import numpy as np
import pytest
import torch

from coalition_gym.agents.base import Generator
from coalition_gym.agents.pools import load_pool
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.protocols.base import Protocol
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import make as make_task
from coalition_gym.training.advantages import group_advantages
from coalition_gym.training.config import make_config
from coalition_gym.training.diagnostics import pivotality, signal_metrics, summarise_signal, within_group_corr
from coalition_gym.training.losses import aggregate, batch_normalizer, clipped_policy_loss
from coalition_gym.training.rollouts import PolicyCall, RecordingPolicy, Rollout, RolloutPlan, collect, protocol_asks
from coalition_gym.types import Outcome, Sample


class FakeHF(Generator):
    """Stands in for the HF backend: answers from the Ask's seed, with token ids and log-probs."""

    identity = "fake-hf"

    def __init__(self):
        self.seeds = []

    def generate(self, asks):
        out = []
        for a in asks:
            self.seeds.append(a.seed)
            answer = str(a.seed % 7)
            out.append(Sample(text=f"Answer: {answer}", token_ids=[1, 2], logprobs=[-0.5, -0.5]))
        return out

    def encode_prompt(self, ask):
        return [0]


class SeedLog(Generator):
    """A collaborator that records the seed of every Ask it gets, per item."""

    def __init__(self, name):
        self.identity = f"log:{name}"
        self.seen = {}

    def generate(self, asks):
        for a in asks:
            self.seen.setdefault(a.item.id, []).append(a.seed)
        return [Sample(text=f"Answer: {a.seed % 3}") for a in asks]


@pytest.mark.parametrize("draws", ["shared", "fresh"])
def test_collaborator_draws_are_shared_inside_a_group_only_when_asked(draws):
    task = make_task("zoo:arith", size=10)
    items = task.items("train")[:3]
    a, b = SeedLog("a"), SeedLog("b")
    policy = RecordingPolicy(FakeHF())
    system = System.build(SystemSpec("majority_vote", task, {"a": a, "b": b}, split=None), {"policy": "chat"},
                          dev_scores={})
    rollouts = collect(system, items, policy, RolloutPlan(group_size=4, seed=5, draws=draws))
    assert len(rollouts) == 12 and {r.group for r in rollouts} == {0, 1, 2}
    for item in items:
        for collaborator in (a, b):
            seeds = collaborator.seen[item.id]
            if draws == "shared":  # one draw for the whole group, generated once (a cache serves the other G-1)
                assert len(seeds) == 1
            else:  # G draws
                assert len(seeds) == 4 and len(set(seeds)) > 1
    assert len(set(policy.backend.seeds)) == 12  # the policy always samples afresh in every execution
    assert all(r.own_answer is not None and len(r.calls) == 1 for r in rollouts)


def test_unknown_draws_are_refused():
    task = make_task("zoo:arith", size=5)
    with pytest.raises(ConfigError, match="draws"):
        collect(System.build(SystemSpec("majority_vote", task, {}, split=None), {"policy": "chat"}),
                task.items("train")[:1], RecordingPolicy(FakeHF()), RolloutPlan(2, 0, draws="sometimes"))


def test_advantages_of_all_equal_groups_are_exactly_zero_and_eps_is_trls():
    adv = group_advantages([0.3, 0.3, 0.3, 1.0, 0.0], [0, 0, 0, 1, 1])
    assert list(adv[:3]) == [0.0, 0.0, 0.0]  # not 1e-11 rounding residue
    std = np.std([1.0, 0.0], ddof=1)
    assert adv[3] == pytest.approx(0.5 / (std + 1e-4), rel=1e-12)
    assert adv[4] == pytest.approx(-0.5 / (std + 1e-4), rel=1e-12)


@pytest.mark.parametrize("how", ["token-mean", "seq-mean-token-mean"])
def test_micro_batches_normalised_by_the_whole_batch_sum_to_the_one_shot_loss(how):
    gen = torch.Generator().manual_seed(0)
    lengths = [3, 7, 1, 5, 4, 2]
    width = max(lengths)
    mask = torch.zeros(len(lengths), width)
    for k, n in enumerate(lengths):
        mask[k, :n] = 1
    new = torch.randn(len(lengths), width, generator=gen, requires_grad=True)
    old = new.detach() + 0.1 * torch.randn(len(lengths), width, generator=gen)
    adv = torch.tensor([0.0, 1.3, 0.0, -0.7, 0.4, 0.0])  # three calls carry no signal
    whole = clipped_policy_loss(new, old, adv, mask, aggregation=how).loss
    (g_whole,) = torch.autograd.grad(whole, new)
    norm = batch_normalizer(lengths, how)
    active = [k for k in range(len(lengths)) if adv[k] != 0]
    for size in (1, 2, 3):
        total = 0.0
        for start in range(0, len(active), size):
            idx = active[start:start + size]
            total = total + clipped_policy_loss(new[idx], old[idx], adv[idx], mask[idx], aggregation=how,
                                                normalizer=norm).loss
        (g_parts,) = torch.autograd.grad(total, new)
        assert float(total.detach()) == pytest.approx(float(whole.detach()), abs=1e-7)
        assert torch.allclose(g_parts, g_whole, atol=1e-7)
    # dividing by the active part only (the old behaviour) would not agree
    only_active = clipped_policy_loss(new[active], old[active], adv[active], mask[active], aggregation=how).loss
    assert abs(float(only_active.detach()) - float(whole.detach())) > 1e-3


def test_aggregate_rejects_unknown_modes():
    with pytest.raises(ConfigError, match="aggregation"):
        aggregate(torch.zeros(1, 1), torch.ones(1, 1), "sum")
    with pytest.raises(ConfigError, match="aggregation"):
        batch_normalizer([1], "sum")


def test_each_method_has_only_its_own_settings():
    assert make_config("dapo-indiv", max_new_tokens=128).overlong_limit == 128  # the penalty follows the cap
    assert make_config("dapo-indiv", max_new_tokens=128, overlong_max=64).overlong_limit == 64
    with pytest.raises(ConfigError, match="belongs to raft"):
        make_config("crl", raft_threshold=0.5)
    with pytest.raises(ConfigError, match="belongs to"):
        make_config("raft", dynamic_sampling=True)
    assert not hasattr(make_config("crl", raft_threshold=0.5, strict=False), "raft_threshold")
    with pytest.raises(ConfigError, match="no training method has a setting 'nope'"):
        make_config("crl", strict=False, nope=1)
    with pytest.raises(ConfigError, match="G >= 2"):
        make_config("crl", group_size=1)
    with pytest.raises(ConfigError, match="collaborator_draws"):
        make_config("crl", collaborator_draws="sometimes")
    with pytest.raises(ConfigError, match="eval_decoding"):
        make_config("base", eval_decoding="beam")
    with pytest.raises(ConfigError, match="integer"):
        make_config("crl", steps="abc")
    assert make_config("crl", dynamic_sampling=True).dynamic_sampling  # C-RL may use DAPO's dynamic sampling
    assert make_config("grpo-indiv").aggregation == "seq-mean-token-mean"
    assert make_config("crl", preset="tiny").eval_items == 200


def _rollout(k, group, reward, solo, answer, tokens=2):
    call = PolicyCall(k, [0], [1] * tokens, [-0.1] * tokens, 0.7, 0, f"Answer: {answer}", seat="policy")
    return Rollout(k, None, group, reward, [call], own_scores={"policy": solo}, answers={"policy": answer})


def test_signal_diagnostics_on_a_known_batch():
    rollouts = [_rollout(0, 0, 1.0, 1.0, "4"), _rollout(1, 0, 0.0, 0.0, "5"),  # answer changes the outcome
                _rollout(2, 1, 1.0, 0.0, "7"), _rollout(3, 1, 1.0, 1.0, "8"),  # it does not
                _rollout(4, 2, 0.0, 0.0, "9"), _rollout(5, 2, 0.0, 0.0, "9")]  # same answer: not counted
    rewards = [r.reward for r in rollouts]
    assert pivotality(rollouts, rewards) == pytest.approx(0.5)
    adv = group_advantages(rewards, [r.group for r in rollouts])
    m = signal_metrics(rollouts, rewards, list(adv))
    assert m["informative_groups"] == pytest.approx(1 / 3)
    assert m["grad_tokens"] == 4 and m["grad_token_share"] == pytest.approx(4 / 12)
    assert m["adv_abs_mean"] == pytest.approx(float(np.abs(adv).mean()))
    assert within_group_corr([1, 0, 1, 1], [1, 0, 0, 1], [0, 0, 1, 1]) == pytest.approx(1 / np.sqrt(2))
    assert within_group_corr([1, 1], [0, 1], [0, 0]) is None  # no reward variance: undefined, not 0
    summary = summarise_signal([{"step": s, "reward_mean": s / 10, "pivotality": None} for s in range(10)])
    assert summary["first"]["reward_mean"] == pytest.approx(0.05) and summary["last"]["pivotality"] is None


@dataclasses.dataclass
class FirstMemberOnly(Protocol):
    """A protocol that only ever asks the first member: a seat further down never gets a call."""

    name = "first_member_only"

    def program(self, ctx):
        replies = yield [ctx.ask(ctx.members[0], ctx.question(ctx.members[0]), self.params, round_=0)]
        return Outcome(answer=ctx.task.extract(replies[0].text), text=replies[0].text, transcript=())


def test_the_probe_tells_which_seats_a_protocol_can_ask():
    task = make_task("zoo:arith", size=10)
    pool = load_pool("sim:specialists")
    items = task.items("train")[:3]
    last = System.build(SystemSpec(FirstMemberOnly(), task, pool, split=None), {"policy": "chat"})
    assert protocol_asks(last, items, "policy") is False
    assert protocol_asks(last.replace(members=("policy", *pool.member_names)), items, "policy") is True  # seated first
    for name in ("majority_vote", "debate", "prompt_routing", "cascade", "llm_blender"):
        system = System.build(SystemSpec(name, task, pool, split=None), {"policy": "chat"})
        assert protocol_asks(system, items, "policy") is True


def test_the_trainer_refuses_a_protocol_that_never_asks_the_policy(monkeypatch, tmp_path):
    from coalition_gym.envs import protocols
    from coalition_gym.training.trainer import Trainer

    monkeypatch.setitem(protocols.PROTOCOLS, "first_member_only", FirstMemberOnly)
    cfg = make_config("crl", preset="tiny", protocol="first_member_only", task="zoo:arith",
                      task_kwargs={"size": 10}, collaborators="sim:demo", members=["atlas"],
                      policies=["/no/model/needed/before/the/refusal"])
    with pytest.raises(ConfigError, match="never asks the policy"):
        Trainer(cfg, out=tmp_path)


def test_rollout_temperature_and_greedy_evaluation_reach_the_policy_only():
    backend = FakeHF()
    seen = []
    original = backend.generate

    def spy(asks):
        seen.extend(a.params.temperature for a in asks)
        return original(asks)

    backend.generate = spy
    task = make_task("zoo:arith", size=5)
    policy = RecordingPolicy(backend, temperature=0.3)
    system = System.build(SystemSpec(make_protocol("majority_vote", temperature=0.9), task, {}, split=None),
                          {"policy": "chat"}, dev_scores={})
    rollouts = collect(system, task.items("train")[:2], policy, RolloutPlan(2, 0))
    assert seen == [0.3] * 4 and all(c.temperature == 0.3 for r in rollouts for c in r.calls)
    assert RecordingPolicy(FakeHF(), temperature=0.0).identity != RecordingPolicy(FakeHF()).identity


def test_run_methods_checks_every_method_and_setting_before_running_any(tmp_path):
    from coalition_gym.training.trainer import run_methods

    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        run_methods(["base", "nope"], tmp_path / "a", preset="tiny")
    with pytest.raises(ConfigError, match="has a setting 'group_sise'"):
        run_methods(["base", "crl"], tmp_path / "b", preset="tiny", group_sise=4)
    with pytest.raises(ConfigError, match="G >= 2"):
        run_methods(["base", "crl"], tmp_path / "c", preset="tiny", group_size=1)
    assert not any(tmp_path.iterdir())  # nothing ran, nothing was written


def test_the_policy_answer_is_defined_once_and_helper_roles_never_count():
    from coalition_gym.envs.seated import own_answer_of
    from coalition_gym.training.rollouts import policy_answer

    task = make_task("zoo:arith", size=5)
    item = task.items("test")[0]
    replies = [("answer", 0, "Answer: 3"), ("answer", 1, "Answer: 5"), ("answer", 1, "Answer: 5"),
               ("route", 1, "Answer: 9"), ("feedback", 2, "Answer: 9")]
    assert own_answer_of(task, item, replies) == "5"  # last round of own answers, routing/reviews left out
    calls = [PolicyCall(0, [0], [1], [-0.1], 0.7, r, text, role) for role, r, text in replies]
    assert policy_answer(task, calls, item) == "5"  # the trainer uses the same definition
    assert own_answer_of(task, item, [("route", 0, "Answer: 9")]) is None
