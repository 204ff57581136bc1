"""Local models answered from a process of their own, so a server's event loop and its models do not share one
interpreter lock.

A server that runs local models (``hf`` backends on the CPU) in its own process pays twice for the lock: the
model's Python-side decoding holds it between torch calls, so the event loop that talks to the clients stalls
while a batch runs, and the batch stalls while the loop parses messages. :class:`ModelProcess` moves the models
into one child process (started with ``spawn``: safe beside the server's threads) that answers one batched call at
a time, as the batcher already calls a local backend; :func:`in_model_process` swaps the backends it can move for
:class:`ProcessGenerator` proxies. A reply depends only on its Ask and seed (``Generator.generate``), so which
process ran a model changes no result.

What moves: a backend whose model can be rebuilt from what it names (an ``hf`` backend loaded from a folder, on
the CPU; its wrappers travel with it), see :func:`movable`. The child loads its own copy of the weights from
the folder, so the parent's copy stays for work outside the batcher (leave-one-out replays). A GPU model is never
moved (a second copy on the device; use ``vllm``, which runs its own engine process). If the child dies, every
call fails with a :class:`~coalition_gym.errors.BackendError` that says so and gives its exit code.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import pickle
import threading
from typing import Any, Mapping, Sequence

from ..errors import BackendError
from ..types import Ask, Sample
from .base import Generator, settle


def _unwrapped(backend: Generator) -> Generator:
    while hasattr(backend, "inner"):
        backend = backend.inner  # type: ignore[attr-defined]
    return backend


def movable(backend: Generator) -> bool:
    """Whether ``backend`` runs a model a child process can rebuild on its own: an ``hf`` backend loaded from a
    folder on the CPU (through any wrappers: sampling settings, a cache)."""
    from .hf import HFGenerator

    inner = _unwrapped(backend)
    return (isinstance(inner, HFGenerator) and inner.folder is not None and str(inner.device) == "cpu"
            and not hasattr(backend, "cache"))  # a cache's SQLite connection stays with the process that opened it


def _portable(result: Sample | BaseException) -> Sample | BaseException:
    """A result the pipe can carry: an exception that does not pickle becomes a BackendError with its text."""
    if not isinstance(result, BaseException):
        return result
    try:
        pickle.dumps(result)
        return result
    except Exception:
        return BackendError(f"{type(result).__name__}: {result}")


def _reload_hf(folder: str, options: Any, identity: str) -> Generator:
    from .hf import HFGenerator

    return HFGenerator(folder, options=options, identity=identity)


class _ByFolder(pickle.Pickler):
    """Pickles an ``hf`` backend loaded from a folder as that folder and its options (the child loads it), and
    everything else as usual (its wrappers)."""

    def reducer_override(self, obj: Any) -> Any:
        from .hf import HFGenerator

        if isinstance(obj, HFGenerator) and obj.folder is not None:
            return _reload_hf, (str(obj.folder), obj.options, obj.identity)
        return NotImplemented


def _packed(backends: list[Generator]) -> bytes:
    buffer = io.BytesIO()
    _ByFolder(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(backends)
    return buffer.getvalue()


def _child(conn: Any, packed: bytes, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    try:
        backends: list[Generator] = pickle.loads(packed)
    except Exception as exc:  # a folder that does not load: said once, before any call
        conn.send(f"{type(exc).__name__}: {exc}")
        return
    conn.send("ready")
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the parent is gone
            return
        if message is None:
            return
        key, asks = message
        try:
            results = settle(backends[key], asks)
        except Exception as exc:
            results = [exc] * len(asks)
        conn.send([_portable(r) for r in results])


class ModelProcess:
    """One child process holding ``backends`` (an ``hf`` backend reloads its folder there, its wrappers are copied) and
    answering one call at a time. ``threads``: the child's torch threads (the parent's count by default)."""

    def __init__(self, backends: Sequence[Generator], threads: int | None = None):
        import torch

        self.backends = list(backends)
        context = mp.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._lock = threading.Lock()
        self.process = context.Process(target=_child, name="cgym-models", daemon=True,
                                       args=(child_conn, _packed(self.backends), threads or torch.get_num_threads()))
        self.process.start()
        child_conn.close()
        self._ready = False

    def wait_ready(self) -> None:
        """Block until the child has loaded its models; a BackendError naming why when it could not."""
        with self._lock:
            self._wait_ready()

    def _wait_ready(self) -> None:
        if self._ready:
            return
        try:
            said = self._conn.recv()
        except (EOFError, OSError):
            said = None
        if said != "ready":
            self.process.join(timeout=1)
            raise BackendError(f"the model process could not load its models ({said or 'it exited, code '}"
                               f"{'' if said else self.process.exitcode})")
        self._ready = True

    def call(self, key: int, asks: list[Ask]) -> list[Sample | BaseException]:
        with self._lock:
            self._wait_ready()
            try:
                self._conn.send((key, asks))
                return self._conn.recv()
            except (EOFError, OSError):
                self.process.join(timeout=1)
                raise BackendError(f"the model process exited (exit code {self.process.exitcode}); its models "
                                   "answer nothing more: restart the server") from None

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._conn.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()


class ProcessGenerator(Generator):
    """A backend answered by a :class:`ModelProcess` (same identity and description as the one it replaces)."""

    concurrent_calls = 1

    def __init__(self, process: ModelProcess, key: int):
        self.process, self.key = process, key
        original = process.backends[key]
        self.identity = original.identity
        self._described = original.describe()

    def describe(self) -> dict[str, Any]:
        return {**self._described, "process": "model process"}

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        results = self.process.call(self.key, list(asks))
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            from ..errors import PartialBatchError

            raise PartialBatchError(f"{len(failed)} of {len(asks)} requests failed; first: {failed[0]}", results)
        return results  # type: ignore[return-value]


def in_model_process(backends: Mapping[str, Generator]) -> tuple[dict[str, Generator], ModelProcess | None]:
    """``backends`` with every :func:`movable` one answered by one :class:`ModelProcess` (names sharing a backend
    share its proxy), and that process; the mapping unchanged and None when nothing moves."""
    moving: dict[int, Generator] = {id(b): b for b in backends.values() if movable(b)}
    if not moving:
        return dict(backends), None
    order = list(moving)
    process = ModelProcess([moving[k] for k in order])
    proxies = {k: ProcessGenerator(process, i) for i, k in enumerate(order)}
    return {name: proxies.get(id(b), b) for name, b in backends.items()}, process


__all__ = ["ModelProcess", "ProcessGenerator", "in_model_process", "movable"]
