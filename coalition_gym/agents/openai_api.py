"""OpenAI-compatible chat-completions backend (``vllm serve``, SGLang, ``transformers serve``, hosted APIs).

Plain stdlib HTTP (``http.client``) from a bounded thread pool: one request per Ask, at most
``max_concurrency`` in flight. Retried with exponential backoff and full jitter: 429 (its
``Retry-After`` is honoured, capped by ``backoff_max``), 5xx, timeouts, dropped or refused
connections, and unreadable bodies. Other 4xx errors are not retried. When the retries are spent,
:class:`BackendError` names the server and the model and quotes the server's error message.

The API key is read from the environment variable ``api_key_env`` (default ``OPENAI_API_KEY``) at
request time; it is sent only as the ``Authorization`` header and never appears in errors, logs,
``repr``, output files or the backend's identity: every error text passes through
:func:`coalition_gym.result_files.redact`, which removes it even when the server echoes it back.
Each request of a batch is retried on its own; when some fail for good, :class:`PartialBatchError`
carries the replies of the others, which are used and never sent again. ``seed`` is sent (reduced to
31 bits) unless ``send_seed=False``;
whether the server honours it is up to the server. With ``logprobs=True`` the request asks for
per-token log-probs and ``Sample.logprobs`` holds them when the server returns them.
``Sample.n_tokens`` is the reply's generated-token count: the server's ``usage.completion_tokens`` when it
sends it, else its log-prob entries, else the count of the ``tokenizer`` given (see
:meth:`OpenAIGenerator.count_tokens`).

For several GPUs, run ``vllm serve MODEL --tensor-parallel-size N`` (or one server per GPU) and point
this backend at it: ``OpenAIGenerator("http://127.0.0.1:8000/v1", "MODEL")``.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from ..errors import BackendError, ConfigError, PartialBatchError
from ..result_files import redact, register_key_variable, register_secret
from ..types import Ask, Sample
from .base import Generator
from .options import OpenAIOptions

RETRY_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))
SEED_MODULUS = 2**31 - 1


class _Retryable(Exception):
    """One failed attempt that may succeed if tried again (``wait`` = server-requested delay)."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int
    path: str  # base path, e.g. "/v1"


def _endpoint(base_url: str) -> _Endpoint:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base_url={base_url!r} must be an http(s) URL such as http://127.0.0.1:8000/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return _Endpoint(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date (seconds from now); None if absent/unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(body: bytes) -> str:
    """The server's own error text from an error body (OpenAI ``{"error": {"message"}}``, FastAPI
    ``{"detail"}``, or raw text), shortened."""
    text = redact(body.decode("utf-8", "replace").strip())  # a server may echo the key back
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err)[:300]
        if err is not None:
            return str(err)[:300]
    return text[:300]


class OpenAIGenerator(Generator):
    """A Generator over an OpenAI-compatible ``/chat/completions`` endpoint: ``model`` is the server's
    model id, ``options`` the backend's settings (:class:`~coalition_gym.agents.options.OpenAIOptions`,
    ``base_url`` one URL). ``sleep`` waits between retries (tests pass a recorder); ``tokenizer`` (a
    name, folder or object) counts reply tokens when the server does not."""

    def __init__(self, model: str, options: OpenAIOptions, *, sleep: Callable[[float], None] = time.sleep,
                 tokenizer: Any = None):
        if not model:
            raise ConfigError("the OpenAI backend needs a model name (the server's model id)")
        if not isinstance(options.base_url, str):
            raise ConfigError(f"base_url={options.base_url!r}: one generator talks to one URL (a pool file's list "
                              "of replicas becomes one generator per URL)")
        self.options = options
        self.base_url = options.base_url.rstrip("/")
        self._endpoint = _endpoint(self.base_url)
        self.model = model
        self.api_key_env = options.api_key_env
        register_key_variable(self.api_key_env)  # its value is redacted from every error, log and output file
        self.max_concurrency, self.timeout = int(options.max_concurrency), float(options.timeout)
        self.concurrent_calls = self.max_concurrency  # calls share one pool of max_concurrency requests
        self.max_retries = int(options.max_retries)
        self.backoff_base, self.backoff_max = float(options.backoff_base), float(options.backoff_max)
        self.logprobs, self.send_seed = bool(options.logprobs), bool(options.send_seed)
        self.max_new_tokens = options.max_new_tokens
        self.extra_body = dict(options.extra_body)
        self._sleep = sleep
        self.tokenizer: Any = tokenizer  # counts reply tokens when the server does not (a name, folder or object)
        self._loaded_tokenizer: Any = None
        self._rng = random.Random()  # jitter only; never affects samples
        self._local = threading.local()
        self.identity = f"openai:{model}@{self.base_url}"
        self.attempts = 0  # requests sent, retries included (for tests and benchmarks)
        self._count = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "identity": self.identity, "base_url": self.base_url, "model": self.model}

    def __repr__(self) -> str:
        return f"OpenAIGenerator(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    # -- one request ---------------------------------------------------------------------------
    def payload(self, ask: Ask) -> dict[str, Any]:
        max_tokens = int(ask.params.max_new_tokens)
        if self.max_new_tokens is not None:
            max_tokens = min(max_tokens, self.max_new_tokens)
        body: dict[str, Any] = {"model": self.model,
                                "messages": [{"role": m.role, "content": m.content} for m in ask.messages],
                                "temperature": float(ask.params.temperature), "max_tokens": max_tokens}
        if ask.params.top_p < 1.0:
            body["top_p"] = float(ask.params.top_p)
        if self.send_seed:
            body["seed"] = int(ask.seed) % SEED_MODULUS
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            register_secret(key)
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._endpoint.scheme == "https" else http.client.HTTPConnection
            conn = cls(self._endpoint.host, self._endpoint.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _attempt(self, body: bytes) -> dict[str, Any]:
        with self._count:
            self.attempts += 1
        conn = self._connection()
        reused = conn.sock is not None
        try:
            conn.request("POST", f"{self._endpoint.path}/chat/completions", body=body, headers=self._headers())
            resp = conn.getresponse()
            raw = resp.read()
        except (socket.timeout, TimeoutError) as exc:
            self._drop_connection()
            raise _Retryable(f"timed out after {self.timeout:g}s") from exc
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            self._drop_connection()
            if reused:  # the server closed an idle keep-alive connection: reconnect at once, no backoff
                return self._attempt(body)
            raise _Retryable(f"connection failed ({type(exc).__name__}: {exc})") from exc
        if resp.getheader("Connection", "").lower() == "close":
            self._drop_connection()
        if resp.status in RETRY_STATUS:
            wait = retry_after_seconds(resp.getheader("Retry-After")) if resp.status in (429, 503) else None
            raise _Retryable(f"HTTP {resp.status}: {_error_message(raw)}", wait)
        if resp.status >= 400:
            raise BackendError(f"{self._where()}: HTTP {resp.status}: {_error_message(raw)}")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise _Retryable(redact(f"unreadable JSON body ({raw[:80]!r})")) from exc
        if isinstance(data, dict) and "error" in data and "choices" not in data:
            raise BackendError(f"{self._where()}: server error: {_error_message(raw)}")
        return data

    def _where(self) -> str:
        return f"server {self.base_url} (model {self.model!r})"

    def probe(self, timeout: float = 3.0) -> str | None:
        """Why the server cannot be reached (one TCP connection, at most ``timeout`` seconds), or None when it
        accepts connections. Says nothing of the model: a request does."""
        try:
            socket.create_connection((self._endpoint.host, self._endpoint.port), timeout=timeout).close()
            return None
        except (socket.timeout, TimeoutError):
            return f"no answer within {timeout:g}s"
        except OSError as exc:
            return exc.strerror or type(exc).__name__

    def _backoff(self, attempt: int, wait: float | None) -> float:
        if wait is not None:
            return min(wait, self.backoff_max)
        return self._rng.uniform(0.0, min(self.backoff_max, self.backoff_base * 2**attempt))

    def complete(self, ask: Ask) -> Sample:
        """One Ask, with retries; raises BackendError when they are spent or the reply is unusable."""
        body = json.dumps(self.payload(ask)).encode()
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._sample(self._attempt(body))
            except _Retryable as exc:
                last = str(exc)
                if attempt < self.max_retries:
                    self._sleep(self._backoff(attempt, exc.wait))
        raise BackendError(f"{self._where()} failed after {self.max_retries + 1} attempts; last error: {last}")

    def _sample(self, data: Any) -> Sample:
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BackendError(redact(f"{self._where()}: reply is not a chat completion ({exc}): "
                                      f"{str(data)[:200]}")) from exc
        finish = choice.get("finish_reason") or "stop"
        logprobs = None
        content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
        if content:
            logprobs = tuple(float(t["logprob"]) for t in content if isinstance(t, dict) and "logprob" in t)
        return Sample(text=text, token_ids=None, logprobs=logprobs, finish_reason=str(finish),
                      n_tokens=self.count_tokens(data, text, content))

    def count_tokens(self, data: Any, text: str, content: Any = None) -> int | None:
        """Generated tokens of one reply, as honestly as the server allows: its ``usage.completion_tokens``
        (one choice per request, so the request's count is the reply's), else the number of per-token
        log-prob entries it returned, else the ``tokenizer`` given to the backend (a Hugging Face tokenizer
        name or folder); None when none of these exist (the runner then counts whitespace words)."""
        usage = data.get("usage") if isinstance(data, dict) else None
        used = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if isinstance(used, int) and not isinstance(used, bool) and used >= 0:
            return used
        if content:
            return len(content)
        if self.tokenizer is not None:
            return len(self._tokenizer()(text, add_special_tokens=False)["input_ids"])
        return None

    def _tokenizer(self) -> Any:
        if self._loaded_tokenizer is None:
            if not isinstance(self.tokenizer, str):
                self._loaded_tokenizer = self.tokenizer  # a tokenizer object given directly
            else:
                from transformers import AutoTokenizer

                self._loaded_tokenizer = AutoTokenizer.from_pretrained(self.tokenizer)
        return self._loaded_tokenizer

    # -- batches --------------------------------------------------------------------------------
    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        asks = list(asks)
        if len(asks) <= 1:
            return [self.complete(a) for a in asks]
        with self._count:
            if self._pool is None:  # kept across calls, so each worker keeps its connection alive
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="cgym-openai")
        futures = [self._pool.submit(self.complete, a) for a in asks]
        results: list[Sample | BaseException] = []
        for fut in futures:
            try:
                results.append(fut.result())
            except BackendError as exc:
                results.append(exc)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:  # each request was retried on its own; the ones that succeeded are returned, not re-sent
            raise PartialBatchError(f"{len(failed)} of {len(asks)} requests failed; first: {failed[0]}", results)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the worker threads (their connections close with them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._drop_connection()

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
