"""Seated episodes of many callers answered in waves: what a server with many sessions dispatches through.

A server's open sessions are ``make_vec``'s situation spread over time: each session's episode waits for its
frozen members between two replies of its seat. A :class:`WaveBatcher` gathers the pending member Asks of every
episode handed to it (:meth:`~WaveBatcher.run` from a thread, :meth:`~WaveBatcher.run_async` from a coroutine)
into waves and sends each backend one batched call per wave (:func:`~.dispatch.dispatch`, as ``make_vec`` does),
the backends of one wave side by side in a thread pool (remote ones overlap; their own ``max_concurrency`` bounds
what each has in flight). Only the batcher's thread calls the backends, one call per backend at a time, so a
backend that is not re-entrant (a local HF model) needs no lock around whole steps. A caller gets its episode
back as soon as it waits for a seat again or has ended.

Episodes never see each other: an episode's Asks and seeds are its own, so how sessions interleave changes what
is batched together, never what an episode generates (with backends whose replies do not depend on the batch
they come in, which every backend here promises: ``Generator.generate``).

Gathering: when work arrives the batcher waits at most ``wait_s`` for the other live episodes (handed in before
and not ended) to arrive too, and not at all once every live episode is waiting; episodes that arrive while a
wave runs join the next one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping

from ..agents.base import Generator
from .dispatch import RunStats, dispatch
from .seated import SeatedEpisode

Waiter = tuple[SeatedEpisode, Callable[[], None]]


class WaveBatcher:
    """See the module doc. ``backends``: the names the episodes' Asks go to; ``stats``: where calls are counted;
    ``wait_s``: the longest a wave waits for live episodes that have not arrived yet."""

    def __init__(self, backends: Mapping[str, Generator], stats: RunStats | None = None, *, wait_s: float = 0.002,
                 name: str = "cgym-batcher"):
        self.backends, self.stats, self.wait_s, self.name = backends, stats or RunStats(), wait_s, name
        self.waves = 0
        self._cond = threading.Condition()
        self._queue: list[Waiter] = []
        self._live: set[int] = set()  # episodes handed in and not ended (what a wave may wait for)
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(1, len({id(b) for b in backends.values()})),
                                        thread_name_prefix=f"{name}-call")
        self._closed = False

    # -- callers ------------------------------------------------------------------------------------------
    def submit(self, episode: SeatedEpisode, done: Callable[[], None]) -> None:
        """Answer ``episode``'s member Asks (in waves with the others') and call ``done`` (from the batcher's
        thread) once it waits for a seat or has ended; at once when it has nothing to ask."""
        if episode.done or not episode.backend_asks():
            self.forget(episode)
            done()
            return
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._live.add(id(episode))
            self._queue.append((episode, done))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def run(self, episode: SeatedEpisode) -> None:
        """:meth:`submit` and wait (a thread's call)."""
        ready = threading.Event()
        self.submit(episode, ready.set)
        ready.wait()

    async def run_async(self, episode: SeatedEpisode) -> None:
        """:meth:`submit` and await (no thread is held while the wave runs)."""
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(lambda: ready.done() or ready.set_result(None))

        self.submit(episode, wake)
        await ready

    def forget(self, episode: SeatedEpisode) -> None:
        """The episode will not come back (it ended, or its session closed): waves stop waiting for it."""
        with self._cond:
            self._live.discard(id(episode))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._pool.shutdown(wait=False)

    # -- the batcher's thread --------------------------------------------------------------------------------
    def _serve(self) -> None:
        active: list[Waiter] = []
        while True:
            with self._cond:
                if not active:
                    while not self._queue and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._gather()
                active += self._queue
                self._queue = []
            self._wave(active)
            active = self._release(active)

    def _gather(self) -> None:
        """Wait (under the lock) until every live episode is queued or ``wait_s`` passed."""
        deadline = time.monotonic() + self.wait_s
        while len(self._queue) < len(self._live) and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _wave(self, active: list[Waiter]) -> None:
        """One wave: every active episode's pending member Asks, one call per backend."""
        waiting = [(episode, episode.backend_asks()) for episode, _ in active]
        waiting = [(episode, asks) for episode, asks in waiting if asks]
        if not waiting:
            return
        asks = [a for _, episode_asks in waiting for a in episode_asks]
        try:
            replies = dispatch(asks, self.backends, self.stats, self._pool)
        except Exception as exc:  # dispatch answers per Ask; anything else fails this wave's episodes, not the server
            replies = [exc] * len(asks)
        self.waves += 1
        pos = 0
        for episode, episode_asks in waiting:
            episode.give_backend(replies[pos:pos + len(episode_asks)])
            pos += len(episode_asks)

    def _release(self, active: list[Waiter]) -> list[Waiter]:
        """Hand back the episodes that wait for a seat or ended; keep the rest for the next wave."""
        still = []
        for episode, done in active:
            if episode.done or not episode.backend_asks():
                if episode.done:
                    self.forget(episode)
                try:
                    done()
                except Exception:  # a caller that went away must not stop the batcher
                    pass
            else:
                still.append((episode, done))
        return still


__all__ = ["WaveBatcher"]
