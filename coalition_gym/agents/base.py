"""The one interface every text-writing backend implements."""

from __future__ import annotations

import dataclasses
import hashlib
from abc import ABC, abstractmethod
from typing import Any, Sequence

from ..errors import BackendError, PartialBatchError
from ..types import Ask, Message, Sample


class Generator(ABC):
    """Turns a batch of Asks into one Sample per Ask, in order.

    A backend should make one batched call for the whole list; results for an Ask must depend only
    on that Ask (its messages, params and seed), never on what else is in the batch.
    """

    #: Stable identity of the model behind the backend (used as part of generation-cache keys).
    identity: str = "generator"
    #: How many ``generate`` calls may run at once: 1 for a backend that is not re-entrant (a local model's forward
    #: pass); a remote backend allows more (its requests share its own bound on what is in flight).
    concurrent_calls: int = 1

    @abstractmethod
    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        """Return one Sample per Ask, in the same order."""

    def describe(self) -> dict[str, Any]:
        """What a run record says about this backend: its kind and identity (backends add more)."""
        return {"kind": type(self).__name__, "identity": self.identity}


def _checked(backend: Generator, asks: Sequence[Ask], samples: object) -> list[Sample]:
    if not isinstance(samples, list) or len(samples) != len(asks):
        got = len(samples) if isinstance(samples, list) else type(samples).__name__
        raise BackendError(f"backend {backend.identity!r} (for {asks[0].member!r}) returned {got} samples "
                           f"for {len(asks)} asks")
    return samples


def settle(backend: Generator, asks: Sequence[Ask]) -> list[Sample | BaseException]:
    """Answer ``asks`` in one call; per Ask its Sample or the exception that ended it.

    A backend that reports per-Ask failures (:class:`PartialBatchError`) is taken at its word: what
    succeeded is used and never sent again. A batch that fails as a whole (an out-of-memory batch, a
    malformed reply) is retried one Ask at a time, so only the Asks that fail on their own are lost.
    """
    asks = list(asks)
    try:
        return list(_checked(backend, asks, backend.generate(asks)))
    except PartialBatchError as exc:
        if isinstance(exc.results, list) and len(exc.results) == len(asks):
            return list(exc.results)
        batch_error: Exception = exc
    except Exception as exc:
        batch_error = exc
    if len(asks) == 1:
        return [batch_error]
    results: list[Sample | BaseException] = []
    for ask in asks:
        try:
            results.append(_checked(backend, [ask], backend.generate([ask]))[0])
        except Exception as exc:
            results.append(exc)
    return results


def stable_hash(*parts: object) -> int:
    """A 63-bit integer hash of ``parts`` that is the same in every process and Python version."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def derive_seed(episode_seed: int, item_id: str, member: str, round_: int, index: int = 0,
                role: str = "") -> int:
    """The seed of one Ask. It depends on who is asked and when, never on the rest of the coalition,
    so the same member asked the same prompt in two coalitions draws the same sample."""
    return stable_hash("ask", episode_seed, item_id, member, round_, index, role)


def with_system_prompt(ask: Ask, system_prompt: str) -> Ask:
    """The Ask with a model's own system prompt (a trained policy's) replacing the protocol's, or added:
    merged into the first user turn for compact prompts that have no system turn."""
    if not system_prompt:
        return ask
    messages = list(ask.messages)
    if messages and messages[0].role == "system":
        messages[0] = Message("system", system_prompt)
    elif messages and messages[0].role == "user" and len(messages) == 1:
        messages[0] = Message("user", f"{system_prompt}\n{messages[0].content}")
    else:
        messages.insert(0, Message("system", system_prompt))
    return dataclasses.replace(ask, messages=tuple(messages))


def settled(results: list, what: str) -> list[Sample]:
    """``results`` (per Ask a Sample or the exception that ended it) as a backend returns them: the list
    when every Ask was answered, else a :class:`PartialBatchError` carrying it, so the runner keeps the
    answers and fails only the others (``what`` says why they failed)."""
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        raise PartialBatchError(f"{len(failed)} of {len(results)} {what}; first: {failed[0]}", results)
    return results


def fit_new_tokens(prompt_tokens: int, wanted: int, context: int) -> int:
    """New tokens that fit after a prompt of ``prompt_tokens`` in a ``context``-token window: ``wanted``,
    capped at what is left; 0 when the prompt alone fills the context. A prompt is never cut to make
    room: generation budgets give way, and a prompt that cannot fit is the caller's error to report."""
    return max(0, min(int(wanted), int(context) - int(prompt_tokens)))


def render_plain(messages: Sequence[Message]) -> str:
    """A chat as one plain string: the bare content for a single user message, else role headers."""
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].content
    return "\n\n".join(f"<|{m.role}|>\n{m.content}" for m in messages)
