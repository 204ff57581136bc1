"""Weight updates of one member: DPO on preference pairs (Sparta) and weighted SFT on its own turns
(multi-agent finetuning). Texts are re-tokenised with the trained member's own tokenizer, so a pair may
hold another member's response (Sparta trains everyone on every judged duel)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from ...agents.hf import sequence_logprobs
from ...tasks.base import Task
from ...types import Ask, Item
from ..losses import dpo_loss
from .members import Member


@dataclass(frozen=True)
class Preference:
    item: Item  # the question both responses answered (its prompt is rendered in each member's style)
    chosen: str
    rejected: str
    margin: float  # the judges' reputation-weighted score difference


@dataclass(frozen=True)
class Example:
    ask: Ask
    text: str
    weight: float = 1.0


def encode_completion(member: Member, text: str) -> list[int]:
    """The response's tokens as the member would have written them, ending with EOS."""
    ids = list(member.tokenizer(text, add_special_tokens=False)["input_ids"])
    eos = member.tokenizer.eos_token_id
    return ids + ([int(eos)] if eos is not None else [])


def _prompt(member: Member, ask: Ask) -> list[int]:
    return member.generator.encode_prompt(ask)  # type: ignore[attr-defined]


def _batches(n: int, size: int, epochs: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        order = list(range(n))
        rng.shuffle(order)
        out += [order[i:i + size] for i in range(0, n, size)]
    return out


def _optimizer(member: Member, lr: float) -> Any:
    import torch

    return torch.optim.AdamW(member.model.parameters(), lr=lr, weight_decay=0.0)


def _summed(logps: Sequence[Any]) -> Any:
    import torch

    return torch.stack([lp.sum() for lp in logps])


def dpo_train(member: Member, task: Task, prefs: Sequence[Preference], *, beta: float, lr: float, epochs: int,
              batch_size: int, seed: int, max_grad_norm: float = 1.0) -> dict[str, float]:
    """DPO with the member as it is now as the reference (its log-probs are computed once, first)."""
    import torch

    prompts = [_prompt(member, Ask(member.name, tuple(task.prompt(p.item, member.style)), seed=0, item=p.item))
               for p in prefs]
    chosen = [encode_completion(member, p.chosen) for p in prefs]
    rejected = [encode_completion(member, p.rejected) for p in prefs]
    pad = member.generator.pad_id  # type: ignore[attr-defined]
    model = member.model
    model.eval()
    ref_c = torch.tensor([sum(x) for x in sequence_logprobs(model, prompts, chosen, pad_id=pad)])
    ref_r = torch.tensor([sum(x) for x in sequence_logprobs(model, prompts, rejected, pad_id=pad)])
    torch.manual_seed(seed)
    opt = _optimizer(member, lr)
    model.train()
    losses, accs = [], []
    for idx in _batches(len(prefs), batch_size, epochs, seed):
        p = [prompts[i] for i in idx]
        pol_c = _summed(sequence_logprobs(model, p, [chosen[i] for i in idx], pad_id=pad, grad=True))
        pol_r = _summed(sequence_logprobs(model, p, [rejected[i] for i in idx], pad_id=pad, grad=True))
        out = dpo_loss(pol_c, pol_r, ref_c[idx].to(pol_c.device), ref_r[idx].to(pol_c.device), beta=beta)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        losses.append(float(out.loss.detach()))
        accs.append(out.accuracy)
    model.eval()
    return {"pairs": len(prefs), "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
            "last_accuracy": accs[-1]}


def sft_train(member: Member, examples: Sequence[Example], *, lr: float, epochs: int, batch_size: int, seed: int,
              max_grad_norm: float = 1.0) -> dict[str, float]:
    """Weighted negative log-likelihood of each example's text (token mean per example, then the
    weighted mean over the batch)."""
    import torch

    prompts = [_prompt(member, e.ask) for e in examples]
    targets = [encode_completion(member, e.text) for e in examples]
    weights = torch.tensor([e.weight for e in examples], dtype=torch.float32)
    pad = member.generator.pad_id  # type: ignore[attr-defined]
    model = member.model
    torch.manual_seed(seed)
    opt = _optimizer(member, lr)
    model.train()
    losses = []
    for idx in _batches(len(examples), batch_size, epochs, seed):
        logps: list[Any] = sequence_logprobs(model, [prompts[i] for i in idx], [targets[i] for i in idx], pad_id=pad,
                                             grad=True)
        nll = torch.stack([-lp.mean() for lp in logps])
        w = weights[idx].to(nll.device)
        if float(w.sum()) == 0.0:
            continue
        loss = (w * nll).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return {"examples": len(examples), "steps": len(losses), "first_loss": losses[0] if losses else 0.0,
            "last_loss": losses[-1] if losses else 0.0}
