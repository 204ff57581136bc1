"""The one update loop: an optimiser step over micro-batches (gradient accumulation), clipping and the
step, given a loss function. C-RL and the policy-gradient baselines, RAFT's SFT (via
:mod:`.policy_updates`) and the collaborative DPO/SFT updates (:mod:`.collaborative.updates`) all step
through it, so zero_grad / clip / step is written once.

A loss function takes one micro-batch and returns ``(loss, stats)``: the micro-batch's *share* of the
step's loss (callers normalise by the whole batch, so the accumulated gradient is the one-shot
gradient whatever the micro-batch size) and numbers to add up over the step; ``None`` skips the
micro-batch (nothing in it carries a loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
LossFn = Callable[[T], "tuple[Any, dict[str, float]] | None"]


def chunks(seq: Sequence[T], size: int) -> list[Sequence[T]]:
    return [seq[i:i + size] for i in range(0, len(seq), size)]


@dataclass
class StepResult:
    loss: float = 0.0  # the sum of the micro-batches' losses: the step's loss
    stats: dict[str, float] = field(default_factory=dict)  # each stat summed over the micro-batches
    grad_norm: float = 0.0  # before clipping
    stepped: bool = False  # False: every micro-batch was skipped, the weights did not move


class UpdateLoop:
    """Optimiser steps on ``model``'s parameters; ``after_step`` runs after each (e.g. pushing the new
    weights into a rollout engine)."""

    def __init__(self, model: Any, optimizer: Any, max_grad_norm: float,
                 after_step: Callable[[], None] | None = None):
        self.model, self.optimizer, self.max_grad_norm = model, optimizer, max_grad_norm
        self.after_step = after_step

    def step(self, micro_batches: Sequence[T], loss_fn: LossFn) -> StepResult:
        """One optimiser step with the gradients of every micro-batch accumulated."""
        import torch

        result = StepResult()
        self.optimizer.zero_grad(set_to_none=True)
        for batch in micro_batches:
            out = loss_fn(batch)
            if out is None:
                continue
            loss, stats = out
            loss.backward()
            result.loss += float(loss.detach())
            for key, value in stats.items():
                result.stats[key] = result.stats.get(key, 0.0) + value
            result.stepped = True
        if not result.stepped:
            return result
        result.grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm))
        self.optimizer.step()
        if self.after_step is not None:
            self.after_step()
        return result

    def steps(self, batches: Sequence[T], loss_fn: LossFn) -> list[StepResult]:
        """One optimiser step per batch (no accumulation across them); skipped batches are left out."""
        return [r for r in (self.step([b], loss_fn) for b in batches) if r.stepped]


__all__ = ["UpdateLoop", "StepResult", "LossFn", "chunks"]
