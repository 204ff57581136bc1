"""Our DPO loss (training.losses.dpo_loss over summed sequence log-probs) equals TRL's DPOTrainer loss
on the same batch, to 1e-5: TRL tokenises and collates a small preference dataset for the tiny zoo
policy; we read the prompt and completion tokens back from TRL's batch, compute log-probs with our own
``sequence_logprobs`` under a policy and a different reference model, and compare the losses."""

from __future__ import annotations

import copy

import pytest
import torch

from coalition_gym.agents.hf import sequence_logprobs
from coalition_gym.training.losses import dpo_loss
from coalition_gym.training.trainer import load_policy

pytestmark = pytest.mark.slow
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")


def test_dpo_loss_matches_trl_on_the_same_batch(tmp_path):
    policy, tok = load_policy("zoo:tiny/pico", device="cpu", dtype="float32")
    reference = copy.deepcopy(policy)
    with torch.no_grad():  # a policy that moved away from its reference, so the loss is not log 2
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p, generator=torch.Generator().manual_seed(7)))
    rows = [{"prompt": "Calculate 2 + 3.\nAnswer:", "chosen": " 5", "rejected": " 7"},
            {"prompt": "Calculate 12 + 30.\nAnswer:", "chosen": " 42", "rejected": " 41 or so"},
            {"prompt": "Reverse abc.\nAnswer:", "chosen": " cba", "rejected": " abc"},
            {"prompt": "Calculate 9 - 9.\nAnswer:", "chosen": " 0", "rejected": " -18"}]
    args = trl.DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=len(rows), beta=0.3, report_to=[],
                         use_cpu=True, max_length=None, precompute_ref_log_probs=False)
    trainer = trl.DPOTrainer(model=policy, ref_model=reference, args=args, processing_class=tok,
                             train_dataset=datasets.Dataset.from_list(rows))
    batch = next(iter(trainer.get_train_dataloader()))
    policy.eval()
    reference.eval()
    with torch.no_grad():
        theirs = float(trainer.compute_loss(trainer.model, batch))

    prompts, completions = [], []
    for ids, attn, comp in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"]):
        start = int(comp.nonzero()[0])
        end = int(attn.sum())
        prompts.append(ids[:start].tolist())
        completions.append(ids[start:end].tolist())
    n = len(rows)  # TRL's batch is [chosen rows, rejected rows]
    pol = torch.tensor([sum(x) for x in sequence_logprobs(policy, prompts, completions, pad_id=tok.pad_token_id)])
    ref = torch.tensor([sum(x) for x in sequence_logprobs(reference, prompts, completions, pad_id=tok.pad_token_id)])
    ours = float(dpo_loss(pol[:n], pol[n:], ref[:n], ref[n:], beta=0.3).loss)
    assert abs(ours - torch.log(torch.tensor(2.0)).item()) > 1e-3  # the check can tell a wrong loss apart
    assert ours == pytest.approx(theirs, abs=1e-5)
