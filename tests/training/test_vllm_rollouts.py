"""Rollouts on a vLLM engine that follows the trainer's weights, on CPU with a fake engine (vLLM is not
installable on the machines this project is tested on; the real-engine test below skips there)."""

from __future__ import annotations

import pytest
import torch

from coalition_gym.agents import vllm_engine
from coalition_gym.agents.hf import sequence_logprobs
from coalition_gym.training.config import make_config
from coalition_gym.training.trainer import RolloutFallbackWarning, Trainer, resolve_policy
from coalition_gym.types import Sample


def pg_update(trainer, calls, advantages):
    """The trainer's clipped policy gradient on ``calls`` with the run's settings (what C-RL's strategy calls)."""
    cfg = trainer.config
    return trainer.updates["policy"].policy_gradient(calls, advantages, eps_low=cfg.eps_low, eps_high=cfg.eps_high,
                                                     aggregation=cfg.aggregation, passes=cfg.updates_per_batch)


def config(**kw):
    base = dict(policies=["zoo:tiny/pico"], task="zoo:arith", task_kwargs={"size": 40}, steps=1, eval_every=1,
                eval_items=2, test_items=2, items_per_step=2, group_size=3, collaborators="sim:demo",
                members=["atlas", "delta"], protocol="majority_vote", rollout_backend="vllm", updates_per_batch=2)
    base.update(kw)
    return make_config("crl", preset="tiny", **base)


class FakeEngine:
    """Stands in for ``VLLMEngine``: its own copy of the policy (loaded from the folder, as vLLM would),
    updated only through ``load_weights``; samples seeded random tokens and reports log-probs of 0 (wrong
    on purpose: the trainer must recompute them)."""

    instances: list["FakeEngine"] = []

    def __init__(self, model: str, **kwargs):
        from transformers import AutoModelForCausalLM

        self.path, self.kwargs = model, kwargs
        self.model = AutoModelForCausalLM.from_pretrained(model)
        self.updates: list[dict[str, torch.Tensor]] = []
        self.prompts: list[list[int]] = []
        FakeEngine.instances.append(self)

    def generate_ids(self, prompts, params):
        out = []
        vocab = self.model.config.vocab_size
        for prompt, kw in zip(prompts, params):
            self.prompts.append(list(prompt))
            g = torch.Generator().manual_seed(kw["seed"])
            ids = torch.randint(3, vocab, (kw["max_tokens"],), generator=g).tolist()
            out.append(Sample(text="", token_ids=tuple(ids), logprobs=tuple(0.0 for _ in ids), finish_reason="length"))
        return out

    def load_weights(self, named_tensors):
        named = {n: t.detach().clone() for n, t in named_tensors}
        self.updates.append(named)
        self.model.load_state_dict(named, strict=False)


class BrokenEngine:
    def __init__(self, model: str, **kwargs):
        raise vllm_engine.BackendError(f"vllm could not start model {model!r}: unsupported architecture")


@pytest.fixture
def fake(monkeypatch):
    FakeEngine.instances.clear()
    monkeypatch.setattr(vllm_engine, "VLLMEngine", FakeEngine)
    return FakeEngine.instances


def test_vllm_rollouts_follow_the_trainers_weights(tmp_path, fake):
    trainer = Trainer(config(vllm_settings={"gpu_memory_utilization": 0.2}), out=tmp_path)
    engine = fake[0]
    assert trainer.engine is engine and engine.path == resolve_policy("zoo:tiny/pico")
    assert engine.kwargs["gpu_memory_utilization"] == 0.2
    assert trainer.weight_syncs == 1 and len(engine.updates) == 1  # synced at start (resume/best may differ)

    rollouts, rewards, _ = trainer.gather_batch(0)
    calls = [c for r in rollouts for c in r.calls]
    assert calls and len(engine.prompts) == len(calls)
    assert [c.prompt_ids for c in calls] == engine.prompts[-len(calls):]  # the ids vLLM read are those recorded
    # the engine's log-probs (zeros) are kept aside; the loss's old log-probs are the trainer's own
    assert all(c.sampler_logprobs == [0.0] * len(c.completion_ids) for c in calls)
    expected = sequence_logprobs(trainer.model, [c.prompt_ids for c in calls], [c.completion_ids for c in calls],
                                 calls[0].temperature, trainer.updates["policy"].pad_id)
    for c, lp in zip(calls, expected):
        assert c.logprobs == pytest.approx(lp, abs=1e-5) and min(lp) < -0.01
    assert trainer.last_logprob_gap > 0
    new, old, mask = trainer.updates["policy"].token_batch(calls)
    assert torch.allclose(new[mask.bool()], old[mask.bool()], atol=1e-4)  # ratio 1 before the first step

    after_each: list[dict[str, torch.Tensor]] = []
    step = trainer.optimizer.step

    def spy(*a, **k):  # what the trainer's parameters are right after each optimiser step
        result = step(*a, **k)
        after_each.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})
        return result

    trainer.optimizer.step = spy
    advantages = [1.0 if k % 2 else -1.0 for k in range(len(calls))]
    pg_update(trainer, calls, advantages)
    assert len(after_each) == 2 and trainer.weight_syncs == 3 and len(engine.updates) == 3  # updates_per_batch=2
    for pushed, params in zip(engine.updates[1:], after_each):
        assert pushed.keys() == params.keys()
        assert all(torch.equal(pushed[n], params[n]) for n in params)
    assert not all(torch.equal(engine.updates[0][n], engine.updates[1][n]) for n in params)  # weights moved
    for n, p in trainer.model.named_parameters():  # the engine's own model now is the trainer's
        held = engine.model.state_dict()[n]
        assert torch.equal(held, p.detach().to(held.device, held.dtype))  # the fake engine is on CPU


def test_a_train_step_on_vllm_reports_the_logprob_gap(tmp_path, fake):
    trainer = Trainer(config(updates_per_batch=1), out=tmp_path)
    row = trainer.train_step(0)
    assert row["sampler_logprob_gap"] > 0 and row["rollout_seconds"] > 0
    assert trainer.weight_syncs == 1 + (1 if row.get("grad_norm", 0) else 0)


def test_a_policy_vllm_cannot_load_falls_back_to_hf(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_engine, "VLLMEngine", BrokenEngine)
    with pytest.warns(RolloutFallbackWarning, match="unsupported architecture.*HF backend"):
        trainer = Trainer(config(), out=tmp_path)
    assert trainer.engine is None
    policy = trainer.recording("policy")
    assert type(policy.backend).__name__ == "HFGenerator"
    rollouts = trainer.rollouts(trainer.task.items("train")[:1], step_seed=1)
    assert all(c.sampler_logprobs is None for r in rollouts for c in r.calls)


def test_missing_vllm_falls_back_too(tmp_path):
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.warns(RolloutFallbackWarning, match="vllm package"):
            assert Trainer(config(), out=tmp_path).engine is None
    else:  # pragma: no cover - machines with vllm
        pytest.skip("vllm is installed here")


@pytest.mark.gpu
def test_real_vllm_engine_receives_weights(tmp_path):  # pragma: no cover - needs vllm and a CUDA GPU
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    trainer = Trainer(config(vllm_settings={"gpu_memory_utilization": 0.2, "enforce_eager": True}), out=tmp_path)
    assert trainer.engine is not None
    rollouts, _, _ = trainer.gather_batch(0)
    calls = [c for r in rollouts for c in r.calls if c.completion_ids]
    pg_update(trainer, calls, [1.0 if k % 2 else -1.0 for k in range(len(calls))])
    assert trainer.weight_syncs == 3
    trainer.gather_batch(1)
    assert trainer.last_logprob_gap < 0.05  # vLLM now samples from the updated weights
