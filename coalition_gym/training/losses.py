"""Losses as small functions over padded token tensors (batch x time), with a mask of the policy's
own sampled tokens: prompt and collaborator tokens carry mask 0 and never reach the loss."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError
from .config import AGGREGATIONS


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


@dataclass
class PreferenceLossOutput:
    loss: torch.Tensor
    chosen_rewards: torch.Tensor  # beta * (policy - reference) log-ratio of each chosen response, detached
    rejected_rewards: torch.Tensor
    accuracy: float  # share of pairs whose chosen reward exceeds the rejected one


def dpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, ref_chosen_logps: torch.Tensor,
             ref_rejected_logps: torch.Tensor, beta: float = 0.1) -> PreferenceLossOutput:
    """DPO with the sigmoid loss (Rafailov et al. 2023), mean over pairs:
    ``-log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))``, where each argument is the summed
    log-probability of a whole response (one value per pair). The reference log-probs carry no gradient."""
    if beta <= 0:
        raise ConfigError(f"DPO beta={beta} must be > 0")
    shapes = {tuple(t.shape) for t in (chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps)}
    if len(shapes) != 1 or chosen_logps.dim() != 1:
        raise ConfigError(f"DPO needs four 1-D tensors of one length (a value per pair), got shapes {sorted(shapes)}")
    chosen_ratio = chosen_logps - ref_chosen_logps.detach()
    rejected_ratio = rejected_logps - ref_rejected_logps.detach()
    loss = -torch.nn.functional.logsigmoid(beta * (chosen_ratio - rejected_ratio)).mean()
    chosen_rewards, rejected_rewards = beta * chosen_ratio.detach(), beta * rejected_ratio.detach()
    accuracy = float((chosen_rewards > rejected_rewards).float().mean()) if len(chosen_logps) else 0.0
    return PreferenceLossOutput(loss, chosen_rewards, rejected_rewards, accuracy)
