"""Seated episodes of many callers answered in waves: what a server with many sessions dispatches through.

A server's open sessions are ``make_vec``'s situation spread over time: each session's episode waits for its
frozen members between two replies of its seat. A :class:`WaveBatcher` gathers the pending member Asks of every
episode handed to it (:meth:`~WaveBatcher.run` from a thread, :meth:`~WaveBatcher.run_async` from a coroutine)
and sends each backend the Asks gathered for it in one batched call (as ``make_vec`` does). A backend gets at most
``concurrent_calls`` calls at once (:attr:`~coalition_gym.agents.base.Generator.concurrent_calls`): one for a local
model, which is not re-entrant and needs no lock around whole steps; a remote backend overlaps calls (its own
``max_concurrency`` bounds what it has in flight), so sessions that arrive while a call runs do not wait for it.
Asks that find their backend busy wait in its lane and go out together in its next call. A caller gets its
episode back as soon as it waits for a seat again or has ended.

Episodes never see each other: an episode's Asks and seeds are its own, so how sessions interleave changes what
is batched together, never what an episode generates (with backends whose replies do not depend on the batch
they come in, which every backend here promises: ``Generator.generate``).

Gathering: when new work arrives the batcher waits for the other live callers (a server's open sessions, from when
they open (:meth:`~WaveBatcher.join`) and between their episodes; or, handed in without a caller, episodes not ended)
that are not in a call now to arrive too, and not at all once they all have; a caller still missing when a wait gives
up is late, and later waves do not wait for it until it is back; at most half the time its recent waves spent in
local backends (a wait buys a larger batch, and never costs more than half the wave it fills; a remote backend's
calls overlap, so a larger batch saves them nothing) and at most ``wait_s``. Members that answer in microseconds
are thus not waited for; a local model's forward pass, whose cost grows far slower than its batch, is.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Mapping

from ..agents.base import Generator, settle
from ..errors import BackendError
from ..types import Ask, Sample
from .dispatch import RunStats
from .seated import SeatedEpisode

Waiter = tuple[SeatedEpisode, Callable[[], None], Hashable]
#: the longest new work waits for the live callers by default (and never more than half a recent wave): 64 sessions
#: of the shipped zoo take about 0.15 s to come back with their next episodes (benchmarks/served_envs.py)
WAIT_S = 0.25


class _Open:
    """An episode whose wave is out: its Asks, the replies so far and how many backend calls it still waits for."""

    def __init__(self, episode: SeatedEpisode, done: Callable[[], None], caller: Hashable, asks: list[Ask]):
        self.episode, self.done, self.caller, self.asks = episode, done, caller, asks
        self.replies: list[Sample | BaseException | None] = [None] * len(asks)
        self.left = 0


class _Wakeups:
    """Futures of one event loop settled from the batcher's threads: the episodes a wave hands back wake the loop
    once, not once each (each wake-up is a write to the loop's socket and a hand-over of the interpreter lock)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._ready: list[asyncio.Future] = []
        self._lock = threading.Lock()

    def add(self, *futures: asyncio.Future) -> None:
        with self._lock:
            self._ready.extend(futures)
            if len(self._ready) > len(futures):  # a wake-up is already on its way
                return
        try:
            self.loop.call_soon_threadsafe(self._settle)
        except RuntimeError:  # the loop closed: nobody awaits these any more
            pass

    def _settle(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for future in ready:
            if not future.done():
                future.set_result(None)


class _Resume:
    """``run_async``'s ``done``: resolves ``future`` through its loop's wake-ups (the batcher hands a wave's
    resumes of one loop over in one :meth:`_Wakeups.add`)."""

    def __init__(self, wakeups: _Wakeups, future: asyncio.Future):
        self.wakeups, self.future = wakeups, future

    def __call__(self) -> None:
        self.wakeups.add(self.future)


class WaveBatcher:
    """See the module doc. ``backends``: the names the episodes' Asks go to; ``stats``: where calls are counted;
    ``wait_s``: the longest new work waits for live episodes that have not arrived yet (see the module doc)."""

    def __init__(self, backends: Mapping[str, Generator], stats: RunStats | None = None, *, wait_s: float = WAIT_S,
                 name: str = "cgym-batcher"):
        self.backends, self.stats, self.wait_s, self.name = backends, stats or RunStats(), wait_s, name
        self.waves = 0
        self.gave_up = 0  # waits that ended at their bound with live callers missing (they became late)
        self.wave_s = 0.0  # the recent waves' seconds in local calls (a moving average): a wait's bound, halved
        self._cond = threading.Condition()
        self._queue: list[Waiter] = []
        self._live: set[Hashable] = set()  # callers expected back (what new work may wait for)
        self._open: dict[Hashable, int] = {}  # caller -> its episodes with Asks in a lane or a call
        self._late: set[Hashable] = set()  # live callers a wait gave up on: not waited for until they are back
        self._lanes: dict[int, list[tuple[_Open, list[int]]]] = {}  # backend -> Asks waiting for it
        self._busy: dict[int, int] = {}  # backend -> its calls running
        self._thread: threading.Thread | None = None
        distinct = {id(b): b for b in backends.values()}
        workers = sum(max(1, int(getattr(b, "concurrent_calls", 1))) for b in distinct.values())
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(workers, 64)), thread_name_prefix=f"{name}-call")
        self._closed = False
        self._wakeups: dict[int, _Wakeups] = {}  # id(event loop) -> its wake-ups

    # -- callers ------------------------------------------------------------------------------------------
    def submit(self, episode: SeatedEpisode, done: Callable[[], None], caller: Hashable | None = None) -> None:
        """Answer ``episode``'s member Asks (in waves with the others') and call ``done`` (from a thread of the
        batcher's) once it waits for a seat or has ended; at once when it has nothing to ask. ``caller``: who
        hands the episode in (a server's session), expected back with its next episode until :meth:`leave`;
        None: the episode alone, expected back until it ends."""
        caller = id(episode) if caller is None else caller
        if episode.done or not episode.backend_asks():
            if caller == id(episode):
                self.leave(caller)
            done()
            return
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._live.add(caller)
            self._late.discard(caller)
            self._queue.append((episode, done, caller))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def run(self, episode: SeatedEpisode, caller: Hashable | None = None) -> None:
        """:meth:`submit` and wait (a thread's call)."""
        ready = threading.Event()
        self.submit(episode, ready.set, caller)
        ready.wait()

    async def run_async(self, episode: SeatedEpisode, caller: Hashable | None = None) -> None:
        """:meth:`submit` and await (no thread is held while the wave runs)."""
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        with self._cond:
            wakeups = self._wakeups.get(id(loop))
            if wakeups is None or wakeups.loop is not loop:  # a new loop (a closed one's are dropped)
                self._wakeups = {k: w for k, w in self._wakeups.items() if not w.loop.is_closed()}
                wakeups = self._wakeups[id(loop)] = _Wakeups(loop)
        self.submit(episode, _Resume(wakeups, ready), caller)
        await ready

    def forget(self, episode: SeatedEpisode) -> None:
        """The episode (handed in without a caller) will not come back: waves stop waiting for it."""
        self.leave(id(episode))

    def join(self, caller: Hashable) -> None:
        """``caller`` (a session just opened) is expected with its first episode: waves wait for it as for one
        between two episodes, so sessions opened together start in one wave."""
        with self._cond:
            if not self._closed:
                self._live.add(caller)

    def leave(self, caller: Hashable) -> None:
        """``caller`` will not come back (its session closed): waves stop waiting for it."""
        with self._cond:
            self._live.discard(caller)
            self._late.discard(caller)
            self._cond.notify()  # a wave gathering may have waited for it

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._pool.shutdown(wait=False)

    # -- the batcher's thread --------------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._runnable() and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                if self._queue:
                    self._gather()
                arrived, self._queue = self._queue, []
                for episode, done, caller in arrived:
                    self._enter(episode, done, caller)
                calls = self._launchable()
            if calls:
                self.waves += 1
            for key, items in calls:  # remote backends overlap in the pool; a local one runs here, and what
                if self._limit(key) > 1:  # arrives meanwhile waits in its lane for the next call
                    self._pool.submit(self._call, key, items)
            local = [(key, items) for key, items in calls if self._limit(key) == 1]
            start = time.perf_counter()
            for key, items in local:
                self._call(key, items)
            if local:  # a remote backend's calls overlap: a larger batch saves it nothing, so it sets no wait
                seconds = time.perf_counter() - start
                self.wave_s = seconds if self.wave_s == 0 else 0.8 * self.wave_s + 0.2 * seconds

    def _gather(self) -> None:
        """Wait (under the lock) until every live caller not in a call is queued, or the wait's bound passed; the
        callers still missing then are late: later waves do not wait for them until they are back (a session
        that sits between a trainer's steps, or has played its share, costs one bounded wait, not one a wave)."""
        deadline = time.monotonic() + min(self.wait_s, 0.5 * self.wave_s)
        while len(self._queue) < len(self._live) - len(self._late) - len(self._open) and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                queued = {caller for _, _, caller in self._queue}
                self._late |= {c for c in self._live if c not in queued and c not in self._open}
                self.gave_up += 1
                return
            self._cond.wait(left)

    def _enter(self, episode: SeatedEpisode, done: Callable[[], None], caller: Hashable) -> None:
        """Put an arrived episode's Asks in their backends' lanes (under the lock)."""
        asks = episode.backend_asks()
        entry = _Open(episode, done, caller, asks)
        by_backend: dict[int, list[int]] = {}
        for k, ask in enumerate(asks):
            backend = self.backends.get(ask.member)
            if backend is None:
                entry.replies[k] = BackendError(f"no backend is bound to {ask.member!r}; bound names: "
                                                f"{', '.join(sorted(self.backends))}")
                continue
            by_backend.setdefault(id(backend), []).append(k)
        entry.left = len(by_backend)
        self._open[caller] = self._open.get(caller, 0) + 1
        for key, slots in by_backend.items():
            self._lanes.setdefault(key, []).append((entry, slots))
        if not by_backend:
            self._pool.submit(self._finish, [entry])

    def _runnable(self) -> bool:
        return any(items and self._busy.get(key, 0) < self._limit(key) for key, items in self._lanes.items())

    def _limit(self, key: int) -> int:
        return max(1, int(getattr(self._backend(key), "concurrent_calls", 1)))

    def _backend(self, key: int) -> Generator:
        return next(b for b in self.backends.values() if id(b) == key)

    def _launchable(self) -> list[tuple[int, list[tuple[_Open, list[int]]]]]:
        """Every lane whose backend can take a call now, emptied into one call each (under the lock)."""
        calls = []
        for key, items in self._lanes.items():
            if items and self._busy.get(key, 0) < self._limit(key):
                calls.append((key, items))
                self._lanes[key] = []
                self._busy[key] = self._busy.get(key, 0) + 1
        return calls

    def _call(self, key: int, items: list[tuple[_Open, list[int]]]) -> None:
        """One batched call to backend ``key`` for the Asks of ``items`` (the batcher's thread or its pool's)."""
        backend = self._backend(key)
        asks = [entry.asks[k] for entry, slots in items for k in slots]
        start = time.perf_counter()
        try:
            results: list[Sample | BaseException] = settle(backend, asks)
        except Exception as exc:  # settle answers per Ask; anything else fails these Asks, not the server
            results = [exc] * len(asks)
        finished = []
        with self._cond:
            seconds = time.perf_counter() - start
            self.stats.record(backend, len(asks), seconds)
            self._busy[key] -= 1
            pos = 0
            for entry, slots in items:
                for k in slots:
                    entry.replies[k] = results[pos]
                    pos += 1
                entry.left -= 1
                if entry.left == 0:
                    finished.append(entry)
            self._cond.notify()
        self._finish(finished)

    def _finish(self, entries: list[_Open]) -> None:
        """Hand the complete waves back to their episodes; an episode that asks its members again is queued for
        its next wave, one that waits for a seat or ended goes back to its caller. The callers hear last, and an
        event loop's waiting coroutines all in one wake-up (one each, the loop settled the first while the next
        was being handed back: the self-pipe's write lets it run)."""
        back = []
        for entry in entries:
            entry.episode.give_backend(entry.replies)  # type: ignore[arg-type]
            with self._cond:
                if self._open[entry.caller] == 1:
                    del self._open[entry.caller]
                else:
                    self._open[entry.caller] -= 1
                again = not entry.episode.done and bool(entry.episode.backend_asks())
                if again:
                    self._queue.append((entry.episode, entry.done, entry.caller))
                    self._cond.notify()
                elif entry.episode.done and entry.caller == id(entry.episode):
                    self._live.discard(entry.caller)
            if not again:
                back.append(entry.done)
        loops: dict[int, tuple[_Wakeups, list[asyncio.Future]]] = {}
        for done in back:  # the futures of one event loop in one wake-up
            if isinstance(done, _Resume):
                loops.setdefault(id(done.wakeups), (done.wakeups, []))[1].append(done.future)
                continue
            try:
                done()
            except Exception:  # a caller that went away must not stop the batcher
                pass
        for wakeups, futures in loops.values():
            wakeups.add(*futures)


__all__ = ["WaveBatcher"]
