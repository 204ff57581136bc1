"""Losses as small functions over padded token tensors (batch x time), with a mask of the policy's
own sampled tokens: prompt and collaborator tokens carry mask 0 and never reach the loss."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError

AGGREGATIONS = ("token-mean", "seq-mean-token-mean")


@dataclass
class PolicyLossOutput:
    loss: torch.Tensor
    clip_fraction_low: float  # share of masked tokens where the lower clip bound is the active branch
    clip_fraction_high: float  # share where the upper bound is active
    mean_ratio: float


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str = "token-mean",
              normalizer: float | None = None) -> torch.Tensor:
    """``token-mean``: sum over every policy token / number of policy tokens (DAPO, C-RL).
    ``seq-mean-token-mean``: mean per sequence first, then over sequences (the original GRPO).

    ``normalizer`` replaces the denominator (tokens for token-mean, sequences for seq-mean) with the
    count of the *whole* batch, so that a micro-batch (or the part of a batch that carries a non-zero
    advantage) contributes exactly its share of the full-batch loss: summing the parts gives the
    one-shot value whatever the micro-batch size (TRL normalises by the whole batch too)."""
    mask = mask.to(per_token.dtype)
    if how == "token-mean":
        total = (per_token * mask).sum()
        return total / (normalizer if normalizer is not None else mask.sum().clamp(min=1.0))
    if how == "seq-mean-token-mean":
        per_seq = (per_token * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)
        has_tokens = (mask.sum(dim=-1) > 0).to(per_token.dtype)
        total = (per_seq * has_tokens).sum()
        return total / (normalizer if normalizer is not None else has_tokens.sum().clamp(min=1.0))
    raise ConfigError(f"unknown loss aggregation {how!r}; use one of {', '.join(AGGREGATIONS)}")


def batch_normalizer(lengths: list[int], how: str) -> float:
    """The full batch's denominator for :func:`aggregate`: its token count (token-mean) or its number
    of non-empty sequences (seq-mean-token-mean)."""
    if how == "token-mean":
        return float(max(sum(lengths), 1))
    if how == "seq-mean-token-mean":
        return float(max(sum(1 for n in lengths if n > 0), 1))
    raise ConfigError(f"unknown loss aggregation {how!r}; use one of {', '.join(AGGREGATIONS)}")


def clipped_policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                        mask: torch.Tensor, eps_low: float = 0.2, eps_high: float | None = None,
                        aggregation: str = "token-mean", normalizer: float | None = None) -> PolicyLossOutput:
    """PPO-style clipped surrogate without a KL term: per token
    ``max(-A * r, -A * clip(r, 1 - eps_low, 1 + eps_high))`` with ``r = exp(logprobs - old_logprobs)``.
    ``advantages`` has one value per sequence (broadcast over its tokens) or one per token."""
    eps_high = eps_low if eps_high is None else eps_high
    if eps_low < 0 or eps_high < 0:
        raise ConfigError(f"clip epsilons must be >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    per_token = torch.maximum(unclipped, clipped)
    m = mask.bool()
    active = (clipped > unclipped) & m
    n = max(int(m.sum()), 1)
    low = int((active & (ratio < 1.0 - eps_low)).sum()) / n
    high = int((active & (ratio > 1.0 + eps_high)).sum()) / n
    mean_ratio = float(ratio.detach()[m].mean()) if m.any() else 1.0
    return PolicyLossOutput(aggregate(per_token, mask, aggregation, normalizer), low, high, mean_ratio)


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor, aggregation: str = "token-mean",
             normalizer: float | None = None) -> torch.Tensor:
    """Negative log-likelihood of the policy's own tokens (Collaborative RAFT)."""
    return aggregate(-logprobs, mask, aggregation, normalizer)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each target token under ``logits`` (already aligned: logits[:, t] predicts
    targets[:, t]), at the sampling temperature."""
    scaled = logits.float() / max(temperature, 1e-6)
    return torch.log_softmax(scaled, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
