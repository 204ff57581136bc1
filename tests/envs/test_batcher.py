"""The WaveBatcher: seated episodes of many threads answered in shared calls, each episode what it would be alone;
a local backend never called twice at once, a remote one overlapping calls up to its ``concurrent_calls``; a
backend's failure ends only the episodes that asked it."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from coalition_gym.agents.base import Generator
from coalition_gym.envs.batcher import WaveBatcher
from coalition_gym.envs.seated import SeatedEpisode, drive
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import BackendError
from coalition_gym.types import Sample


class Counting(Generator):
    """Answers from the prompt alone; records the calls' sizes and the most calls that ever overlapped."""

    def __init__(self, identity: str, concurrent_calls: int = 1, delay: float = 0.002, fail: bool = False):
        self.identity, self.concurrent_calls, self.delay, self.fail = identity, concurrent_calls, delay, fail
        self.lock = threading.Lock()
        self.running = self.most = 0
        self.sizes: list[int] = []

    def generate(self, asks):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.sizes.append(len(asks))
        try:
            time.sleep(self.delay)
            if self.fail:
                raise BackendError(f"{self.identity} is down")
            return [Sample(text=f"Answer: {(len(a.messages[-1].content) + a.seed) % 4}") for a in asks]
        finally:
            with self.lock:
                self.running -= 1


def system_of(backends: dict) -> System:
    spec = SystemSpec("debate", task="zoo:arith", collaborators=backends, task_kwargs={"size": 40},
                      protocol_settings={"rounds": 2, "tie_break": "first"})
    return System.build(spec, {"policy": "chat"})


def play(system: System, batcher: WaveBatcher | None, seed: int, pause: random.Random | None) -> tuple:
    """One debate episode with the seat answering a fixed reply; the members through ``batcher`` (None: alone)."""
    item = system.items[seed % len(system.items)]
    episode = SeatedEpisode(system.start(item, seed), ["policy"], None)
    answered = 0
    while True:
        if batcher is None:
            drive([episode], system.backends)
        else:
            batcher.run(episode)
        if episode.done:
            break
        if pause is not None:
            time.sleep(pause.uniform(0, 0.005))
        episode.answer("policy", Sample(text=f"Answer: {seed % 3 + answered}"))
        answered += 1
    outcome = episode.outcome
    return getattr(outcome, "answer", None), str(outcome) if not hasattr(outcome, "answer") else None, tuple(
        (a.member, a.round, s.text) for a, s in episode.member_calls)


def test_episodes_of_many_threads_in_a_random_order_are_each_what_they_are_alone_and_share_calls():
    local, remote = Counting("local"), Counting("remote", concurrent_calls=4, delay=0.01)
    system = system_of({"a": local, "b": local, "c": remote})
    alone = [play(system, None, seed, None) for seed in range(48)]
    batcher = WaveBatcher(system.backends, wait_s=0.002)
    local.sizes.clear()
    remote.sizes.clear()
    with ThreadPoolExecutor(max_workers=48) as pool:
        together = list(pool.map(lambda s: play(system, batcher, s, random.Random(s)), range(48)))
    batcher.close()
    assert together == alone
    assert local.most == 1  # never two calls at once on a backend that is not re-entrant
    assert 1 < remote.most <= 4  # a remote one overlaps, up to its bound
    assert max(local.sizes) > 2 and batcher.stats.batching_factor > 1.5  # calls carried several episodes


def test_a_failing_backend_ends_only_the_episodes_that_asked_it():
    good, bad = Counting("good"), Counting("bad", fail=True)
    both = system_of({"a": good, "b": bad})
    only_good = system_of({"a": good, "b": Counting("good-2")})
    batcher_both, batcher_good = WaveBatcher(both.backends), WaveBatcher(only_good.backends)
    with ThreadPoolExecutor(max_workers=8) as pool:
        failed = list(pool.map(lambda s: play(both, batcher_both, s, None), range(4)))
        fine = list(pool.map(lambda s: play(only_good, batcher_good, s, None), range(4)))
    assert all(error and "bad is down" in error for _, error, _ in failed)
    assert all(error is None for _, error, _ in fine)


def test_an_abandoned_episode_does_not_hold_the_others_back():
    """A wave waits for live episodes that have not come back; a forgotten one is not waited for (with no
    bound on the wait, forgetting is what lets the next episode finish at all)."""
    backend = Counting("m")
    system = system_of({"a": backend, "b": backend})
    batcher = WaveBatcher(system.backends, wait_s=3600.0)
    left = SeatedEpisode(system.start(system.items[0], 1), ["policy"], None)
    batcher.run(left)  # it now waits for its seat, which never answers
    batcher.forget(left)  # its session closed
    worker = threading.Thread(target=play, args=(system, batcher, 2, None), daemon=True)
    worker.start()
    worker.join(timeout=120)  # a liveness bound, not a speed one: the episode takes milliseconds
    assert not worker.is_alive()


def test_a_session_that_comes_back_with_its_next_episode_is_waited_for():
    """Sessions (callers) play episodes one after another: a wave waits for the open sessions between two
    episodes, not only for the episodes in play, so every wave after the first carries every session."""
    local = Counting("local", delay=0.1)
    system = system_of({"a": local, "b": local, "c": local})
    batcher = WaveBatcher(system.backends, wait_s=1.0)
    sessions, episodes = 8, 3

    def session(k: int) -> None:
        pause = random.Random(k)
        for e in range(episodes):
            item = system.items[(k * episodes + e) % len(system.items)]
            episode = SeatedEpisode(system.start(item, k * 100 + e), ["policy"], None)
            while True:
                batcher.run(episode, caller=("session", k))
                if episode.done:
                    break
                time.sleep(pause.uniform(0, 0.01))
                episode.answer("policy", Sample(text="Answer: 1"))
            time.sleep(pause.uniform(0, 0.02))  # the client between two episodes: its session stays open
        batcher.leave(("session", k))

    threads = [threading.Thread(target=session, args=(k,)) for k in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    full = 3 * sessions  # the three members share the backend
    # the first wave goes before the others arrive (no wave timed yet), the last ones as sessions finish
    assert local.sizes.count(full) >= len(local.sizes) - 3, local.sizes


def test_sessions_that_joined_before_their_first_episode_start_in_one_wave():
    """A session counts as expected from when it opens (``join``), not from its first episode: sessions opened
    together share their first wave instead of the first to arrive going alone and the rest a wave behind."""
    local = Counting("local")
    system = system_of({"a": local, "b": local, "c": local})
    batcher = WaveBatcher(system.backends, wait_s=3600.0)
    batcher.wave_s = 3600.0  # as after slow waves: the wait's bound never ends it here, the arrivals do
    sessions = 6
    for k in range(sessions):
        batcher.join(("session", k))

    def first_wave(k: int) -> None:
        time.sleep(0.01 * k)  # they arrive one by one
        episode = SeatedEpisode(system.start(system.items[k], k), ["policy"], None)
        batcher.run(episode, caller=("session", k))

    threads = [threading.Thread(target=first_wave, args=(k,), daemon=True) for k in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)  # a liveness bound, not a speed one
    batcher.close()
    assert not any(t.is_alive() for t in threads)
    assert local.sizes[0] == 3 * sessions, local.sizes


def test_a_session_that_does_not_come_back_is_waited_for_once_not_every_wave():
    """An open session that plays no episode (between a trainer's steps, or done with its share) costs one wait
    that gives up; later waves go without it until it is back, and then it is waited for again."""
    local = Counting("local")
    system = system_of({"a": local, "b": local, "c": local})
    batcher = WaveBatcher(system.backends, wait_s=0.05)
    batcher.wave_s = 1.0  # the bound is wait_s
    batcher.join("idle")
    for seed in range(4):  # a debate episode: two waves, and the seat answers between them
        episode = SeatedEpisode(system.start(system.items[seed], seed), ["policy"], None)
        while True:
            batcher.run(episode, caller="busy")
            if episode.done:
                break
            episode.answer("policy", Sample(text="Answer: 1"))
    assert batcher.gave_up == 1  # the first wave's wait; not one per wave
    assert local.sizes and all(size == 3 for size in local.sizes)
    back = SeatedEpisode(system.start(system.items[5], 5), ["policy"], None)
    batcher.run(back, caller="idle")  # it is back: no longer late
    assert "idle" not in batcher._late
    batcher.close()
