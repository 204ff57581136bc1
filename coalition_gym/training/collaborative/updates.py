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
from ..update_loop import UpdateLoop
from .members import Member


@dataclass(frozen=True)
class Preference:
    item: Item  # the question both responses answered (its prompt is rendered in each member's style)
    chosen: str
    rejected: str
    margin: float  # the judges' reputation-weighted score difference


@dataclass(frozen=True)
class Optimisation:
    """How one member's weights are updated: AdamW at ``lr``, ``epochs`` passes in batches of ``batch_size``
    shuffled by ``seed``, gradients clipped to ``max_grad_norm``."""

    lr: float
    epochs: int
    batch_size: int
    seed: int
    max_grad_norm: float = 1.0


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


def _loop(member: Member, lr: float, max_grad_norm: float) -> UpdateLoop:
    import torch

    optimizer = torch.optim.AdamW(member.model.parameters(), lr=lr, weight_decay=0.0)
    return UpdateLoop(member.model, optimizer, max_grad_norm)


def _summed(logps: Sequence[Any]) -> Any:
    import torch

    return torch.stack([lp.sum() for lp in logps])


def dpo_train(member: Member, task: Task, prefs: Sequence[Preference], beta: float, opt: Optimisation
              ) -> dict[str, float]:
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
    torch.manual_seed(opt.seed)
    loop = _loop(member, opt.lr, opt.max_grad_norm)
    model.train()
    accs = []

    def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
        p = [prompts[i] for i in idx]
        pol_c = _summed(sequence_logprobs(model, p, [chosen[i] for i in idx], pad_id=pad, grad=True))
        pol_r = _summed(sequence_logprobs(model, p, [rejected[i] for i in idx], pad_id=pad, grad=True))
        out = dpo_loss(pol_c, pol_r, ref_c[idx].to(pol_c.device), ref_r[idx].to(pol_c.device), beta=beta)
        accs.append(out.accuracy)
        return out.loss, {}

    losses = [step.loss for step in loop.steps(_batches(len(prefs), opt.batch_size, opt.epochs, opt.seed), loss_fn)]
    model.eval()
    return {"pairs": len(prefs), "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
            "last_accuracy": accs[-1]}


def sft_train(member: Member, examples: Sequence[Example], opt: Optimisation) -> dict[str, float]:
    """Weighted negative log-likelihood of each example's text (token mean per example, then the
    weighted mean over the batch)."""
    import torch

    prompts = [_prompt(member, e.ask) for e in examples]
    targets = [encode_completion(member, e.text) for e in examples]
    weights = torch.tensor([e.weight for e in examples], dtype=torch.float32)
    pad = member.generator.pad_id  # type: ignore[attr-defined]
    model = member.model
    torch.manual_seed(opt.seed)
    loop = _loop(member, opt.lr, opt.max_grad_norm)
    model.train()

    def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]] | None:
        logps: list[Any] = sequence_logprobs(model, [prompts[i] for i in idx], [targets[i] for i in idx], pad_id=pad,
                                             grad=True)
        nll = torch.stack([-lp.mean() for lp in logps])
        w = weights[idx].to(nll.device)
        if float(w.sum()) == 0.0:
            return None  # every example of the batch weighs 0: no step
        return (w * nll).sum() / w.sum(), {}

    losses = [step.loss for step in loop.steps(_batches(len(examples), opt.batch_size, opt.epochs, opt.seed),
                                               loss_fn)]
    model.eval()
    return {"examples": len(examples), "steps": len(losses), "first_loss": losses[0] if losses else 0.0,
            "last_loss": losses[-1] if losses else 0.0}
