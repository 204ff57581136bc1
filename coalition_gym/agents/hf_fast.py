"""The HF backend's decode steppers: how one batch's forward passes are run, never what is sampled.

:class:`~coalition_gym.agents.hf.HFGenerator` owns the sampling (per-Ask seeded uniforms, inverse CDF,
nucleus, log-probs); a *stepper* only turns "the prompt" and then "the token each row just chose" into
next-token logits. Two of them:

- :class:`EagerStepper`: transformers' dynamic KV cache, the attention mask grown by one column a step
  (the backend's original path).
- :class:`StaticStepper` (``fast_decode``): a preallocated :class:`transformers.StaticCache`, a full-width
  attention mask written in place, and the single-token decode step compiled with
  ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) on CUDA. Shapes are bucketed so that a
  few graphs serve every wave: the batch is padded with dummy rows to a power of two and the cache
  length rounded up to a multiple of :data:`CACHE_BUCKET`; the prompt itself is run once, eagerly.

Numerics: both steppers compute the same function. The static cache attends over its whole length with
the unwritten (and left-padding) slots masked, so the softmax adds exact zeros for them; only the
order of floating-point reductions differs (SDPA over a longer key axis). On CPU in float32 logits
agree to ~1e-7 and the tests require equal tokens; on GPU in bf16 a near-tie between two tokens can
break differently, as between any two kernel choices.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: the static cache's length is rounded up to a multiple of this (fewer distinct graphs)
CACHE_BUCKET = 64
#: static caches (and their graphs' shapes) kept alive for reuse, most recently used first
MAX_CACHES = 4
FAST_DECODE = ("auto", "on", "off")


def wants_fast(setting: str, device: str) -> bool:
    """``auto``: on for CUDA, off elsewhere; ``on`` / ``off`` force it (``on`` works on CPU, uncompiled)."""
    if setting not in FAST_DECODE:
        from ..errors import ConfigError

        raise ConfigError(f"fast_decode={setting!r}; use one of {', '.join(FAST_DECODE)}")
    return setting == "on" or (setting == "auto" and str(device).startswith("cuda"))


def _bucket_rows(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class EagerStepper:
    """Dynamic cache, mask grown a column per step."""

    def __init__(self, forward: Any):
        self._forward = forward  # (ids, mask, positions, cache) -> (last logits float32, cache)
        self._cache: Any = None

    def prefill(self, ids: Any, mask: Any, positions: Any) -> Any:
        import torch

        self._mask, self._last = mask, positions[:, -1:]
        logits, self._cache = self._forward(ids, mask, positions, None)
        self._ones = torch.ones((ids.shape[0], 1), dtype=mask.dtype, device=mask.device)
        return logits

    def decode(self, tokens: Any, step: int) -> Any:
        import torch

        self._mask = torch.cat([self._mask, self._ones], dim=1)
        logits, self._cache = self._forward(tokens.unsqueeze(1), self._mask, self._last + step + 1, self._cache)
        return logits


class StaticDecoder:
    """Per-model state of the fast path: the compiled step and the static caches, kept across calls."""

    def __init__(self, model: Any, cache_kw: str, pad_id: int, compile_step: bool, keep_kw: str | None = None,
                 compile_options: dict[str, Any] | None = None):
        self.model, self.cache_kw, self.pad_id, self.keep_kw = model, cache_kw, int(pad_id), keep_kw
        self.compile_step = bool(compile_step)
        # torch.compile options of the decode step; tests trace it on CPU with {"backend": "eager"}
        self.compile_options = compile_options or {"mode": "reduce-overhead"}
        self._caches: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._step_fn: Any = None

    def clear(self) -> None:
        """Drop the static caches (after a CUDA out-of-memory error, or to free memory)."""
        self._caches.clear()

    def _cache(self, rows: int, length: int) -> Any:
        from transformers import StaticCache

        key = (rows, length)
        cache = self._caches.pop(key, None)
        if cache is None:
            while len(self._caches) >= MAX_CACHES:
                self._caches.popitem(last=False)
            cache = StaticCache(config=self.model.config, max_cache_len=length)
        else:
            cache.reset()
        self._caches[key] = cache
        return cache

    def step_fn(self) -> Any:
        if self._step_fn is None:
            if self.compile_step:
                import torch

                self._step_fn = torch.compile(self.model.forward, fullgraph=True, dynamic=False,
                                              **self.compile_options)
            else:
                self._step_fn = self.model.forward
        return self._step_fn

    def stepper(self, rows: int, width: int, steps: int) -> "StaticStepper":
        padded = _bucket_rows(rows)
        length = -(-(width + steps) // CACHE_BUCKET) * CACHE_BUCKET
        return StaticStepper(self, rows, padded, width, length, self._cache(padded, length))


class StaticStepper:
    """One batch on a static cache (see the module doc); dummy rows pad the batch to its bucket."""

    def __init__(self, owner: StaticDecoder, rows: int, padded: int, width: int, length: int, cache: Any):
        self.owner, self.rows, self.padded, self.width, self.length = owner, rows, padded, width, length
        self.cache = cache

    def _call(self, fn: Any, ids: Any, positions: Any, cache_position: Any) -> Any:
        kwargs = {self.owner.cache_kw: self.cache}
        if self.owner.keep_kw:
            kwargs[self.owner.keep_kw] = 1
        out = fn(input_ids=ids, attention_mask=self.mask, position_ids=positions, use_cache=True,
                 cache_position=cache_position, **kwargs)
        return out.logits[:self.rows, -1, :].float().clone()  # graphs reuse their output buffers

    def prefill(self, ids: Any, mask: Any, positions: Any) -> Any:
        import torch

        dev, extra = ids.device, self.padded - self.rows
        if extra:  # a dummy row reads one pad token (never an all-masked row: no NaN softmax)
            pad_ids = torch.full((extra, self.width), self.owner.pad_id, dtype=ids.dtype, device=dev)
            pad_mask = torch.zeros((extra, self.width), dtype=mask.dtype, device=dev)
            pad_mask[:, -1] = 1
            ids, mask = torch.cat([ids, pad_ids]), torch.cat([mask, pad_mask])
            positions = torch.cat([positions, torch.zeros((extra, self.width), dtype=positions.dtype, device=dev)])
        self.mask = torch.zeros((self.padded, self.length), dtype=mask.dtype, device=dev)
        self.mask[:, :self.width] = mask
        self._last = positions[:, -1:].clone()
        self._tokens = torch.full((self.padded, 1), self.owner.pad_id, dtype=ids.dtype, device=dev)
        self._where = torch.zeros(1, dtype=torch.long, device=dev)
        return self._call(self.owner.model.forward, ids, positions,
                          torch.arange(self.width, device=dev))

    def decode(self, tokens: Any, step: int) -> Any:
        import torch

        column = self.width + step
        self.mask[:, column] = 1
        self._tokens[:self.rows, 0] = tokens
        self._where.fill_(column)
        if self.owner.compile_step and self.owner.compile_options.get("mode") == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs were cloned
        return self._call(self.owner.step_fn(), self._tokens, self._last + step + 1, self._where)


__all__ = ["EagerStepper", "StaticDecoder", "StaticStepper", "wants_fast", "CACHE_BUCKET", "FAST_DECODE"]
