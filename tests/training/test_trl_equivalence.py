"""One update of our trainer equals TRL's GRPO loss and gradient on the same batch.

The batch: real policy calls from a few majority-vote rollouts of the tiny zoo policy (sampled at
temperature 0.7), advantages from :func:`group_advantages` (some groups all-equal, so some calls have
advantage exactly 0), completions of different lengths. Our side is ``PolicyUpdates.policy_gradient``
with the optimiser step replaced by a no-op and gradient clipping out of reach, so ``p.grad`` is the
gradient of one update. TRL's side is ``GRPOTrainer._compute_loss`` on a copy of the same weights, fed
the ``inputs`` dict that ``_generate_and_score_completions`` would build (left-padded prompts,
right-padded completions, our advantages, *our* old log-probs, so both sides see the same ratios),
with ``beta=0``, ``epsilon=0.2`` and TRL's temperature set to the calls' sampling temperature.

Semantics checked: ``token-mean`` == TRL ``bnpo`` (one process) == TRL ``dapo``; ``seq-mean-token-mean``
== TRL ``grpo``; each computed by TRL on the whole batch in one shot, and by us with micro-batches of
1, 3 and the whole batch. Calls with advantage 0 are never forwarded by our trainer, yet they count in
the denominator (tokens or sequences of the whole batch), as they do in TRL: normalising by the active
calls alone scales the gradient by total/active (asserted below to be far outside the tolerance).

The policy is a GPT-2 (absolute positions, ``position_ids`` not derived from the attention mask), so a
left-padded prompt would shift its positions on TRL's side; the batch therefore keeps whole groups whose
prompts have one common length (no prompt padding), which is the case in which TRL itself is right.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from coalition_gym.training.advantages import broadcast, group_advantages
from coalition_gym.training.config import make_config
from coalition_gym.training.rollouts import PolicyCall
from coalition_gym.training.trainer import Trainer, resolve_policy

pytestmark = pytest.mark.slow

POLICY = "zoo:tiny/pico"
TEMPERATURE = 0.7  # the calls' sampling temperature; TRL must score tokens at the same one
EPSILON = 0.2
RTOL, ATOL = 1e-4, 1e-6
LOSS_RTOL = 1e-5
PAIRS = [("token-mean", "bnpo"), ("token-mean", "dapo"), ("seq-mean-token-mean", "grpo")]
MICRO_BATCHES = [1, 3, "whole"]
OLD = ["sampled", "shifted"]  # old log-probs as recorded, or shifted so that clipping binds on both sides


def config(**kw):
    base = dict(policies=[POLICY], task="zoo:arith", task_kwargs={"size": 40}, collaborators="sim:demo",
                members=["atlas", "delta"], protocol="majority_vote", group_size=4, items_per_step=12,
                collaborator_draws="fresh",  # fresh collaborator draws: some groups informative, some all-equal
                rollout_temperature=TEMPERATURE, eps_low=EPSILON, eps_high=None, updates_per_batch=1,
                max_grad_norm=1e9)  # clipping never rescales: p.grad is the raw gradient
    base.update(kw)
    return make_config("crl", preset="tiny", **base)


@dataclass
class Batch:
    calls: dict[str, list[PolicyCall]]  # by OLD variant; same tokens, different recorded log-probs
    advantages: list[float]
    state: dict[str, torch.Tensor]  # the weights both sides start from
    model: Any  # a pristine copy of the policy (TRL patches the forward of the model it gets)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def discriminating(calls: list[PolicyCall], advantages: list[float]) -> str | None:
    """Why a batch could not tell the right normaliser from the wrong ones (None: it can)."""
    active = [k for k, a in enumerate(advantages) if a != 0.0]
    tokens = [len(c.completion_ids) for c in calls]
    if not 3 < len(active) <= 0.6 * len(calls):
        return "need both informative and all-equal groups"
    if sum(tokens[k] for k in active) > 0.6 * sum(tokens):
        return "zero-advantage calls must hold many tokens"
    if len({tokens[k] for k in active}) < 3:
        return "need completions of different lengths"
    if abs(sum(a * n for a, n in zip(advantages, tokens))) / sum(tokens) <= 2e-3:
        return "the on-policy token-mean loss must not vanish (it would make the loss check vacuous)"
    return None


@pytest.fixture(scope="module")
def batch(tmp_path_factory, one_thread) -> Batch:
    trainer = Trainer(config(), out=tmp_path_factory.mktemp("rollouts"), log=lambda _: None)
    why = None
    for step_seed in range(3, 23):  # the first rollout batch on which every check below can bite
        rollouts = trainer.rollouts(trainer.task.items("train")[:12], step_seed=step_seed)
        assert all(r.index == k for k, r in enumerate(rollouts))
        rewards = trainer.rewards(rollouts)
        per_rollout = group_advantages(rewards, [r.group for r in rollouts], eps=trainer.config.advantage_eps)
        # whole groups whose prompts share the most common length (see the module doc)
        lengths = [len(c.prompt_ids) for r in rollouts for c in r.calls]
        common = max(set(lengths), key=lengths.count)
        groups = {r.group for r in rollouts}
        keep = {g for g in groups
                if all(len(c.prompt_ids) == common for r in rollouts if r.group == g for c in r.calls)}
        calls = [c for r in rollouts if r.group in keep for c in r.calls]
        advantages = [float(a) for a in broadcast(per_rollout, [c.rollout for c in calls])]
        why = discriminating(calls, advantages)
        if why is None:
            break
    assert why is None, why
    assert all(c.temperature == TEMPERATURE for c in calls)
    assert all(len(c.completion_ids) > 0 for c in calls)
    assert any(a > 0 for a in advantages) and any(a < 0 for a in advantages)

    gen = torch.Generator().manual_seed(7)
    shifted = [dataclasses.replace(c, logprobs=[lp + float(d) for lp, d in zip(
        c.logprobs, torch.empty(len(c.logprobs)).uniform_(-0.5, 0.5, generator=gen))]) for c in calls]
    state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return Batch({"sampled": calls, "shifted": shifted}, advantages, state, copy.deepcopy(trainer.model))


# -- TRL's side -----------------------------------------------------------------------------------------
def zero_reward(prompts, completions, **kwargs):  # never called: no generation happens here
    return [0.0] * len(prompts)


def trl_inputs(calls: list[PolicyCall], advantages: list[float], pad_id: int) -> dict[str, Any]:
    """What ``GRPOTrainer._generate_and_score_completions`` hands to ``_compute_loss``."""
    n, width_p, width_c = len(calls), max(len(c.prompt_ids) for c in calls), max(len(c.completion_ids) for c in calls)
    prompt_ids = torch.full((n, width_p), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, width_p), dtype=torch.long)
    completion_ids = torch.full((n, width_c), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((n, width_c), dtype=torch.long)
    old = torch.zeros((n, width_c), dtype=torch.float32)
    for k, c in enumerate(calls):
        p, m = len(c.prompt_ids), len(c.completion_ids)
        prompt_ids[k, width_p - p:] = torch.tensor(c.prompt_ids)  # left padded
        prompt_mask[k, width_p - p:] = 1
        completion_ids[k, :m] = torch.tensor(c.completion_ids)  # right padded
        completion_mask[k, :m] = 1
        old[k, :m] = torch.tensor(c.logprobs, dtype=torch.float32)  # ours: the ratio is the same on both sides
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor(advantages, dtype=torch.float32),
            "old_per_token_logps": old, "num_items_in_batch": completion_mask.sum()}


def grpo_trainer(model: Any, loss_type: str, out: Any):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(resolve_policy(POLICY))
    args = GRPOConfig(output_dir=str(out), loss_type=loss_type, beta=0.0, epsilon=EPSILON, temperature=TEMPERATURE,
                      per_device_train_batch_size=4, num_generations=4, gradient_accumulation_steps=1,
                      max_completion_length=16, use_cpu=True, report_to="none", save_strategy="no", bf16=False)
    assert args.steps_per_generation == 1 and args.importance_sampling_level == "token"
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=zero_reward, args=args,
                          train_dataset=Dataset.from_list([{"prompt": "1 + 1 ="}] * 4))
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets for a one-step window
    assert trainer.beta == 0.0 and trainer.temperature == TEMPERATURE and trainer.loss_type == loss_type
    assert trainer.epsilon_low == trainer.epsilon_high == EPSILON and trainer.top_entropy_quantile == 1.0
    return trainer


@pytest.fixture(scope="module")
def trl_results(batch, tmp_path_factory):
    """(loss, {name: grad}) of TRL's ``_compute_loss`` on the whole batch at once, per (loss_type, old)."""
    cache: dict[tuple[str, str], tuple[float, dict[str, torch.Tensor]]] = {}

    def get(loss_type: str, old: str):
        if (loss_type, old) not in cache:
            model = copy.deepcopy(batch.model)
            model.load_state_dict(batch.state)
            trainer = grpo_trainer(model, loss_type, tmp_path_factory.mktemp(f"trl-{loss_type}"))
            trainer.model.train()  # "train" mode: the normalisers of a training step
            pad = int(trainer.processing_class.pad_token_id)
            inputs = trl_inputs(batch.calls[old], batch.advantages, pad)
            trainer.model.zero_grad(set_to_none=True)
            loss = trainer._compute_loss(trainer.model, inputs)
            loss.backward()
            grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
            cache[loss_type, old] = (float(loss.detach()), grads)
        return cache[loss_type, old]

    return get


# -- our side -------------------------------------------------------------------------------------------
def our_update(batch: Batch, old: str, aggregation: str, micro_batch: int, out: Any, monkeypatch):
    calls = batch.calls[old]
    trainer = Trainer(config(aggregation=aggregation, micro_batch=micro_batch), out=out, log=lambda _: None)
    trainer.model.load_state_dict(batch.state)
    monkeypatch.setattr(trainer.optimizer, "step", lambda *a, **k: None)  # read the gradient of one update
    cfg = trainer.config
    metrics = trainer.updates["policy"].policy_gradient(calls, batch.advantages, eps_low=cfg.eps_low,
                                                        eps_high=cfg.eps_high, aggregation=cfg.aggregation,
                                                        passes=cfg.updates_per_batch)
    for name, p in trainer.model.state_dict().items():
        assert torch.equal(p, batch.state[name])  # no optimiser step was taken
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return metrics, grads


# -- tests ----------------------------------------------------------------------------------------------
def test_trl_scores_the_tokens_as_we_do(batch, tmp_path):
    """Sanity for everything below: at the shared weights TRL's per-token log-probs (temperature 0.7)
    equal the ones recorded at sampling time, so the ratios start at 1 on both sides."""
    model = copy.deepcopy(batch.model)
    model.load_state_dict(batch.state)
    trainer = grpo_trainer(model, "grpo", tmp_path)
    calls = batch.calls["sampled"]
    inputs = trl_inputs(calls, batch.advantages, int(trainer.processing_class.pad_token_id))
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1),
            torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1), inputs["completion_ids"].shape[1])
    mask = inputs["completion_mask"].bool()
    torch.testing.assert_close(logps[mask], inputs["old_per_token_logps"][mask], rtol=0, atol=1e-4)


@pytest.mark.parametrize("old", OLD)
@pytest.mark.parametrize("micro_batch", MICRO_BATCHES)
@pytest.mark.parametrize("aggregation,loss_type", PAIRS)
def test_one_update_equals_trl(batch, trl_results, aggregation, loss_type, micro_batch, old, tmp_path, monkeypatch):
    size = len(batch.calls[old]) if micro_batch == "whole" else micro_batch
    metrics, ours = our_update(batch, old, aggregation, size, tmp_path, monkeypatch)
    trl_loss, theirs = trl_results(loss_type, old)

    assert metrics["loss"] == pytest.approx(trl_loss, rel=LOSS_RTOL, abs=1e-7)
    if old == "shifted" or aggregation == "token-mean":  # on-policy seq-mean: the advantages sum to ~0
        assert abs(trl_loss) > 1e-3  # not a vacuous zero
    assert set(ours) == set(theirs)
    for name in theirs:
        torch.testing.assert_close(ours[name], theirs[name], rtol=RTOL, atol=ATOL, msg=lambda m: f"{name}: {m}")
    norm = torch.sqrt(sum((g ** 2).sum() for g in theirs.values()))
    assert norm > 1e-3
    assert metrics["tokens"] == sum(len(c.completion_ids) for c in batch.calls[old])


def test_wrong_normalisers_would_be_caught(batch):
    """The tolerance above is far tighter than what dividing by the active calls would change: the
    gradient would grow by total/active, for tokens and for sequences."""
    calls, adv = batch.calls["sampled"], batch.advantages
    active = [k for k, a in enumerate(adv) if a != 0.0]
    tokens = np.array([len(c.completion_ids) for c in calls])
    assert tokens.sum() / tokens[active].sum() > 1 + 100 * RTOL
    assert len(calls) / len(active) > 1 + 100 * RTOL
