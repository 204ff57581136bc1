"""The policy's updates from recorded calls: the clipped policy gradient (C-RL and the RL baselines)
and token-mean SFT (Collaborative RAFT), both through the one :class:`~.update_loop.UpdateLoop`; and
the trainer's own log-probs of calls another engine (vLLM) sampled.

A policy recipe's strategy (:mod:`.strategies`) gets a :class:`PolicyUpdates` and calls it; it never sees the
trainer."""

from __future__ import annotations

from typing import Any, Sequence

from .losses import batch_normalizer, clipped_policy_loss, sft_loss
from .rollouts import PolicyCall, Rollout
from .update_loop import UpdateLoop, chunks


def pad_id(tokenizer: Any) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0))


class PolicyUpdates:
    """Updates of ``model`` from policy calls, ``micro_batch`` calls per forward pass."""

    def __init__(self, model: Any, tokenizer: Any, loop: UpdateLoop, micro_batch: int):
        self.model, self.tokenizer, self.loop, self.micro_batch = model, tokenizer, loop, micro_batch
        self.pad_id = pad_id(tokenizer)

    def token_batch(self, calls: Sequence[PolicyCall]) -> tuple[Any, Any, Any]:
        """New log-probs (with grad), old log-probs and the mask, padded to (calls x tokens)."""
        import torch

        from ..agents.hf import sequence_logprobs

        width = max(len(c.completion_ids) for c in calls)
        old = torch.zeros(len(calls), width)
        mask = torch.zeros(len(calls), width)
        by_temp: dict[float, list[int]] = {}
        for k, c in enumerate(calls):
            by_temp.setdefault(c.temperature if c.temperature > 0 else 1.0, []).append(k)
        rows: list[Any] = [None] * len(calls)
        for temp, idx in by_temp.items():
            lps = sequence_logprobs(self.model, [calls[k].prompt_ids for k in idx],
                                    [calls[k].completion_ids for k in idx], temp, self.pad_id, grad=True)
            for k, lp in zip(idx, lps):
                rows[k] = lp
        new = torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[0])) for r in rows])
        for k, c in enumerate(calls):
            n = len(c.completion_ids)
            old[k, :n] = torch.tensor(c.logprobs)
            mask[k, :n] = 1.0
        return new.cpu(), old, mask

    def _optimise(self, calls: Sequence[PolicyCall], active: Sequence[int], passes: int,
                  micro_loss: Any) -> dict[str, float]:
        """``passes`` optimiser steps, each over ``active`` calls in micro-batches. ``micro_loss(new, old,
        mask, idx)`` returns the micro-batch's share of the full-batch loss and its clip fractions."""
        metrics = {"loss": 0.0, "clip_low": 0.0, "clip_high": 0.0, "grad_norm": 0.0}
        if not active:
            return metrics  # nothing carries signal: the weights (and Adam's moments) stay as they are
        all_tokens = sum(len(c.completion_ids) for c in calls)  # clip shares of the whole batch, as TRL logs them

        def loss_fn(idx: Sequence[int]) -> tuple[Any, dict[str, float]]:
            new, old, mask = self.token_batch([calls[k] for k in idx])
            loss, lo, hi = micro_loss(new, old, mask, idx)
            share = float(mask.sum()) / all_tokens
            return loss, {"clip_low": lo * share, "clip_high": hi * share}

        for _ in range(passes):
            step = self.loop.step(chunks(list(active), self.micro_batch), loss_fn)
            metrics.update(loss=step.loss, clip_low=step.stats["clip_low"], clip_high=step.stats["clip_high"],
                           grad_norm=step.grad_norm)
        return metrics

    def policy_gradient(self, calls: Sequence[PolicyCall], advantages: Sequence[float], *, eps_low: float,
                        eps_high: float | None, aggregation: str, passes: int = 1) -> dict[str, float]:
        """The clipped policy gradient on ``calls``, normalised over *all* of them (TRL's semantics):
        calls with advantage 0 add nothing to the loss but count in its denominator, so the step size does
        not swell when many groups carry no signal. Only the non-zero ones are forwarded."""
        import torch

        normalizer = batch_normalizer([len(c.completion_ids) for c in calls], aggregation)
        active = [k for k, a in enumerate(advantages) if a != 0.0]

        def micro_loss(new: Any, old: Any, mask: Any, idx: Sequence[int]) -> tuple[Any, float, float]:
            adv = torch.tensor([advantages[k] for k in idx], dtype=torch.float32)
            out = clipped_policy_loss(new, old, adv, mask, eps_low, eps_high, aggregation, normalizer)
            return out.loss, out.clip_fraction_low, out.clip_fraction_high

        metrics = self._optimise(calls, active, passes, micro_loss)
        metrics["tokens"] = sum(len(c.completion_ids) for c in calls)
        return metrics

    def sft(self, calls: Sequence[PolicyCall]) -> dict[str, float]:
        """One SFT step (token-mean negative log-likelihood) on ``calls`` (Collaborative RAFT)."""
        normalizer = batch_normalizer([len(c.completion_ids) for c in calls], "token-mean")
        metrics = self._optimise(calls, list(range(len(calls))), 1,
                                 lambda new, old, mask, idx: (sft_loss(new, mask, normalizer=normalizer), 0.0, 0.0))
        metrics["tokens"] = sum(len(c.completion_ids) for c in calls)
        return metrics

    def recompute_logprobs(self, rollouts: Sequence[Rollout]) -> float:
        """Replace every call's sampler log-probs by the trainer's own (no grad), keeping the sampler's in
        ``sampler_logprobs``; returns the mean absolute gap per token. Used when another engine (vLLM)
        sampled: the loss's old log-probs must come from the model being trained."""
        from ..agents.hf import sequence_logprobs

        calls = [c for r in rollouts for c in r.calls if c.completion_ids]
        gap, tokens = 0.0, 0
        by_temp: dict[float, list[PolicyCall]] = {}
        for c in calls:
            by_temp.setdefault(c.temperature if c.temperature > 0 else 1.0, []).append(c)
        for temp, group in by_temp.items():
            for chunk in chunks(group, self.micro_batch):
                lps = sequence_logprobs(self.model, [c.prompt_ids for c in chunk], [c.completion_ids for c in chunk],
                                        temp, self.pad_id)
                for c, lp in zip(chunk, lps):
                    c.sampler_logprobs, c.logprobs = list(c.logprobs), lp
                    gap += sum(abs(a - b) for a, b in zip(c.sampler_logprobs, lp))
                    tokens += len(lp)
        return gap / tokens if tokens else 0.0


__all__ = ["PolicyUpdates", "pad_id"]
