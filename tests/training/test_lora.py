"""LoRA for the trained policy (``lora_r`` > 0): one update equals peft's own model under the same loss and batch;
only the adapter trains (the base stays bitwise, the optimiser holds adapter state only); checkpoints are adapter
folders and a killed run resumes bitwise; ``--export`` writes merged weights that a pool file loads as a member."""

from __future__ import annotations

import random

import pytest
import torch
import yaml

from coalition_gym.agents.hf import HFGenerator
from coalition_gym.agents.lora import LoraSpec, is_adapter_folder, load_merged
from coalition_gym.agents.options import HFOptions
from coalition_gym.agents.pools import load_pool
from coalition_gym.errors import ConfigError
from coalition_gym.training.config import make_config
from coalition_gym.training.export import export_run
from coalition_gym.training.policy_model import load_policy
from coalition_gym.training.policy_updates import PolicyUpdates
from coalition_gym.training.rollouts import PolicyCall
from coalition_gym.training.trainer import RunOptions, Trainer, run_methods
from coalition_gym.training.update_loop import UpdateLoop

POLICY = "zoo:tiny/pico"
SPEC = LoraSpec(r=4, alpha=8, dropout=0.0, target="all-linear")


def config(method="crl", **kw):
    # fresh collaborator draws: pico rarely answers zoo:arith, but its partners' varying draws give every group
    # a reward spread, so C-RL gets signal (and the adapter moves) in a few steps
    base = dict(policies=[POLICY], task="zoo:arith", task_kwargs={"size": 40}, steps=3, eval_every=10, eval_items=4,
                test_items=6, items_per_step=2, group_size=4, collaborators="sim:demo", members=["atlas", "delta"],
                protocol="slm_mux", collaborator_draws="fresh", lora_r=4, lora_alpha=8)
    if method in ("crl", "grpo-indiv", "dapo-indiv"):
        base["probe_groups"] = 0
    base.update(kw)
    return make_config(method, preset="tiny", **base)


def _calls(model, n=6, seed=0):
    """Policy calls of different lengths, their old log-probs the model's own (ratios 1 at the first pass)."""
    from coalition_gym.agents.hf import sequence_logprobs

    rng = random.Random(seed)
    vocab = model.config.vocab_size
    prompts = [[rng.randrange(vocab) for _ in range(5)] for _ in range(n)]
    completions = [[rng.randrange(vocab) for _ in range(rng.randint(2, 6))] for _ in range(n)]
    old = sequence_logprobs(model, prompts, completions, 1.0)
    return [PolicyCall(k, p, c, lp, 1.0, 0, "") for k, (p, c, lp) in enumerate(zip(prompts, completions, old))]


def _peft_reference(seed):
    """peft's own model: the same base wrapped by ``get_peft_model`` with the same LoraConfig and seed."""
    import peft

    base, _ = load_policy(POLICY, "cpu", "float32")
    torch.manual_seed(seed)
    return peft.get_peft_model(base, SPEC.peft_config(), adapter_name="default")


def _reference_step(model, calls, advantages, lr, eps=0.2):
    """One AdamW step on peft's model: the clipped token-mean policy loss written out by hand."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    total = sum(len(c.completion_ids) for c in calls)
    loss = 0.0
    for call, adv in zip(calls, advantages):
        ids = torch.tensor([call.prompt_ids + call.completion_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        start = len(call.prompt_ids) - 1
        new = logp[start:start + len(call.completion_ids)].gather(1, torch.tensor(call.completion_ids)[:, None])[:, 0]
        ratio = torch.exp(new - torch.tensor(call.logprobs))
        loss = loss - torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).sum() / total
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()


def test_a_lora_step_equals_peft_own_model_under_the_same_loss_and_batch():
    model, tokenizer = load_policy(POLICY, "cpu", "float32", lora=SPEC, seed=7)
    reference = _peft_reference(seed=7)
    ours = dict(model.named_parameters())
    theirs = {n: p for n, p in reference.named_parameters() if p.requires_grad}
    assert set(ours) == set(theirs) and all(torch.equal(ours[n], theirs[n]) for n in ours)  # same start
    base_before = {n: p.detach().clone() for n, p in model.inner.named_parameters() if "lora_" not in n}
    calls = _calls(model)
    advantages = [1.0, -0.5, 0.0, 2.0, -1.0, 0.25]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    updates = PolicyUpdates(model, tokenizer, UpdateLoop(model, optimizer, 1.0), micro_batch=4)
    updates.policy_gradient(calls, advantages, eps_low=0.2, eps_high=None, aggregation="token-mean")
    _reference_step(reference, calls, advantages, lr=1e-2)
    for name in ours:
        assert torch.allclose(ours[name], theirs[name], atol=1e-6, rtol=1e-5), name
    assert any(not torch.equal(p, torch.zeros_like(p)) for n, p in ours.items() if "lora_B" in n)  # it moved
    assert all(torch.equal(p, base_before[n]) for n, p in model.inner.named_parameters() if "lora_" not in n)
    assert {id(p) for group in optimizer.param_groups for p in group["params"]} == {id(p) for p in ours.values()}
    assert len(optimizer.state) == len(ours)  # Adam state for the adapter only


def test_lora_crl_trains_only_the_adapter_and_a_killed_run_resumes_bitwise(tmp_path):
    straight = Trainer(config(), out=tmp_path / "straight")
    start = {n: p.detach().clone() for n, p in straight.model.named_parameters()}
    base = {n: p.detach().clone() for n, p in straight.model.inner.named_parameters() if "lora_" not in n}
    straight.fit(progress=False)
    after = dict(straight.model.named_parameters())
    assert any(not torch.equal(start[n], after[n]) for n in start)  # the adapter trained
    assert all(torch.equal(p, base[n]) for n, p in straight.model.inner.named_parameters() if "lora_" not in n)
    last = tmp_path / "straight" / "policy" / "last"
    assert is_adapter_folder(last) and not (last / "model.safetensors").exists()  # checkpoints hold the adapter
    assert len(straight.optimizer.state) == len(start)

    class Killed(Exception):
        pass

    victim = Trainer(config(), out=tmp_path / "victim")
    save = victim.save_state

    def save_then_die():
        save()
        if victim.state.step == 2:
            raise Killed

    victim.save_state = save_then_die
    with pytest.raises(Killed):
        victim.fit(progress=False)
    resumed = Trainer(config(), out=tmp_path / "victim")
    resumed.fit(progress=False)
    assert resumed.state.step == 3
    ours = dict(resumed.model.named_parameters())
    assert all(torch.equal(ours[n], after[n]) for n in after)  # bitwise the uninterrupted run's adapter


def test_lora_grpo_indiv_runs_and_exports_merged_weights_a_pool_loads(tmp_path):
    settings = {k: v for k, v in config().to_dict().items()
                if k in ("policies", "task", "task_kwargs", "steps", "eval_every", "eval_items", "test_items",
                         "items_per_step", "group_size", "collaborators", "members", "protocol", "probe_groups",
                         "lora_r", "lora_alpha")}
    settings["steps"] = 2
    reports = run_methods(["grpo-indiv"], tmp_path / "runs", "tiny", RunOptions(progress=False), **settings)
    assert [r["method"] for r in reports] == ["base", "grpo-indiv"]
    run = tmp_path / "runs" / "grpo-indiv-seed0"
    best = run / "policy" / "best"
    assert is_adapter_folder(best)
    done = export_run(run, tmp_path / "export")
    merged_folder = tmp_path / "export" / "policy"
    assert [m["model"] for m in done["members"]] == [str(merged_folder.resolve())]
    assert (merged_folder / "config.json").is_file() and not is_adapter_folder(merged_folder)  # plain HF weights
    assert (merged_folder / "coalition_gym.json").is_file()
    entry = yaml.safe_load((tmp_path / "export" / "pool.yaml").read_text())["members"][-1]
    assert entry["model"] == str(merged_folder.resolve())

    # the merged member computes what base + adapter computes
    adapter, _ = load_policy(POLICY, "cpu", "float32", lora=SPEC)
    from coalition_gym.agents.lora import load_adapter_weights

    load_adapter_weights(adapter, best)
    # on the device the reference runs on (a GPU machine would load the member in bf16 on cuda by default)
    exported = yaml.safe_load((tmp_path / "export" / "pool.yaml").read_text())
    exported["members"][-1].update(device="cpu", dtype="float32")
    member = load_pool(exported).backends()["policy"]
    net = getattr(member, "model", None) or member.generator.model
    ids = torch.tensor([[3, 5, 7, 11, 13]])
    with torch.no_grad():
        assert torch.allclose(net(input_ids=ids).logits, adapter(input_ids=ids).logits, atol=1e-5)
        # the adapter folder itself also loads as a member (merged on load, where its base exists), named by its run
        direct = HFGenerator(str(run), options=HFOptions(device="cpu", dtype="float32"))
        assert torch.allclose(direct.model(input_ids=ids).logits, adapter(input_ids=ids).logits, atol=1e-5)
        assert torch.allclose(load_merged(best)(input_ids=ids).logits, adapter(input_ids=ids).logits,
                              atol=1e-5)


def test_lora_settings_are_checked_before_any_rollout(tmp_path):
    with pytest.raises(ConfigError, match="lora_r"):
        config(lora_r=-1)
    with pytest.raises(ConfigError, match="vllm.*lora_r|lora_r.*vllm"):
        config(rollout_backend="vllm")
    with pytest.raises(ConfigError, match="lora_target='nope' does not fit"):
        Trainer(config(lora_target="nope"), out=tmp_path / "bad")
    assert config(lora_r=0).lora is None and config().lora == LoraSpec(4, 8, 0.0, "all-linear")


def test_a_lora_policy_ships_merged_weights_to_a_worker():
    """A Ray worker rebuilds the policy from its config and a state dict: base + adapter merged, computed without
    touching the trained model, equal to peft's own merge."""
    import copy

    from coalition_gym.training.rollouts import PolicyWeights, RecordingPolicy

    model, tokenizer = load_policy(POLICY, "cpu", "float32", lora=SPEC, seed=3)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a trained adapter: B no longer zero
            p.add_(0.05 * torch.randn_like(p))
    before = {n: p.detach().clone() for n, p in model.inner.named_parameters()}
    policy = RecordingPolicy(HFGenerator(model, tokenizer, options=HFOptions(max_new_tokens=4), identity="lora-test"))
    rebuilt = PolicyWeights.of(policy).rebuild().backend.model
    ids = torch.tensor([[3, 5, 7, 11, 13]])
    with torch.no_grad():
        assert torch.allclose(rebuilt(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5)
        merged = copy.deepcopy(model.peft_model).merge_and_unload()
        assert torch.allclose(rebuilt(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-5)
    assert all(torch.equal(p, before[n]) for n, p in model.inner.named_parameters())  # untouched
