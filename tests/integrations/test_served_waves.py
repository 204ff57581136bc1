"""A served wave's work on the server's event loop, done once per wave rather than once per session: the batcher
wakes the loop once for the episodes a wave hands back, the sessions that end together are scored in one call,
and a response is scrubbed in one pass over its JSON text (what string-by-string scrubbing removes, and no less)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

pytest.importorskip("openenv")

from coalition_gym.agents.base import Generator  # noqa: E402
from coalition_gym.envs.batcher import WaveBatcher  # noqa: E402
from coalition_gym.envs.seated import SeatedEpisode  # noqa: E402
from coalition_gym.envs.system import System, SystemSpec  # noqa: E402
from coalition_gym.integrations.openenv_server import Scrubber, SeatAction, SeatEnvironment, Served  # noqa: E402
from coalition_gym.integrations.serve_options import ServeOptions  # noqa: E402
from coalition_gym.result_files import redact, secrets  # noqa: E402
from coalition_gym.types import Sample  # noqa: E402

SPEC = SystemSpec("majority_vote", task="zoo:arith", collaborators="sim:demo", task_kwargs={"size": 40})


def play_sessions(served: Served, sessions: int, seeds: int) -> list[dict]:
    """``sessions`` in-process sessions playing ``seeds`` episodes each, all at once on one loop; each episode's
    reward and record."""
    envs = [SeatEnvironment(served) for _ in range(sessions)]

    async def episode(env: SeatEnvironment, seed: int) -> dict:
        await env.reset_async(seed=seed)
        observation = await env.step_async(SeatAction(text="Answer: 4"))
        while not observation.done:
            observation = await env.step_async(SeatAction(text="Answer: 4"))
        return {"seed": seed, "reward": observation.reward, "details": observation.details}

    async def rounds() -> list[dict]:
        out = []
        for r in range(seeds):
            out += await asyncio.gather(*(episode(env, r * sessions + k) for k, env in enumerate(envs)))
        return out

    results = asyncio.run(rounds())
    for env in envs:
        env.close()
    return results


def test_sessions_that_end_together_are_scored_in_one_call_and_each_gets_its_own_record():
    served = Served(SPEC, ServeOptions(model_process="off"))
    calls: list[int] = []
    records = served.driver.records

    def counted(runs, credit=False):
        calls.append(len(runs))
        return records(runs, credit)

    served.driver.records = counted  # type: ignore[method-assign]
    batched = play_sessions(served, sessions=8, seeds=3)
    assert sum(calls) == 24 and len(calls) < 24 and max(calls) > 1, calls
    for result in batched:  # each record is its own episode's, as the session alone would get it
        alone = _one(Served(SPEC, ServeOptions(model_process="off")), result["seed"])
        assert (alone["reward"], alone["details"]["system_answer"]) == (result["reward"],
                                                                         result["details"]["system_answer"])


def _one(served: Served, seed: int) -> dict:
    env = SeatEnvironment(served)

    async def episode() -> dict:
        await env.reset_async(seed=seed)
        observation = await env.step_async(SeatAction(text="Answer: 4"))
        return {"reward": observation.reward, "details": observation.details}

    return asyncio.run(episode())


def test_one_episode_whose_scoring_fails_fails_only_its_own_session():
    served = Served(SPEC, ServeOptions(model_process="off"))
    records = served.driver.records
    doomed: set[int] = set()

    def failing(runs, credit=False):
        if any(id(run) in doomed for run in runs):
            raise RuntimeError("the scorer broke on one episode")
        return records(runs, credit)

    served.driver.records = failing  # type: ignore[method-assign]
    served.driver.record = lambda run, credit=False: failing([run], credit)[0]  # type: ignore[method-assign]
    envs = [SeatEnvironment(served) for _ in range(4)]

    async def episode(k: int, env: SeatEnvironment):
        await env.reset_async(seed=k)
        if k == 2:
            doomed.add(id(env._run))
        try:
            return (await env.step_async(SeatAction(text="Answer: 4"))).reward
        except Exception as exc:
            return exc

    async def together():
        return await asyncio.gather(*(episode(k, env) for k, env in enumerate(envs)))

    outcomes = asyncio.run(together())
    assert "the scorer broke" in str(outcomes[2])
    assert all(isinstance(o, float) for k, o in enumerate(outcomes) if k != 2), outcomes


def test_a_wave_wakes_the_event_loop_once_for_all_the_episodes_it_hands_back():
    system = System.build(SPEC, {"policy": "chat"})
    batcher = WaveBatcher(system.backends, wait_s=1.0)
    episodes = [SeatedEpisode(system.start(system.items[k], k), ["policy"], None) for k in range(16)]
    wakes = []

    async def all_of_them():
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe

        def counted(callback, *args, **kwargs):
            wakes.append(callback)
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        # every episode is handed in before the batcher's thread looks (on a loaded machine it could otherwise
        # gather the first ones alone, a wave each): the condition is re-entrant, so the submits go through
        with batcher._cond:
            tasks = [asyncio.ensure_future(batcher.run_async(e, caller=k)) for k, e in enumerate(episodes)]
            await asyncio.sleep(0)  # each task runs to its own await: submitted
        await asyncio.gather(*tasks)

    asyncio.run(all_of_them())
    batcher.close()
    assert all(not e.done for e in episodes)  # each waits for its seat now: every wave answered
    assert 1 <= len(wakes) < len(episodes), len(wakes)


def test_a_response_scrubbed_as_json_text_loses_what_string_by_string_scrubbing_loses(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-0123456789")
    scrub = Scrubber(['/srv/models/a "quoted" folder', "/srv/models/plain"], token=None)
    data = {"transcript": [{"text": 'loaded /srv/models/a "quoted" folder/x and sk-secret-0123456789',
                            "member": "/srv/models/plain/m", "n": 3, "ok": True, "none": None, "x": 0.5}],
            "/srv/models/plain": ("a tuple", 1), "note": "Authorization: Bearer abcdef123456"}
    scrubbed = scrub.data(data)
    assert scrubbed == scrub._walk(data, secrets())
    text = json.dumps(scrubbed)
    assert "sk-secret" not in text and "/srv/models" not in text and "abcdef123456" not in text
    assert scrubbed["transcript"][0]["n"] == 3 and scrubbed["transcript"][0]["ok"] is True


def test_a_secret_that_is_all_digits_cannot_break_a_number_it_is_found_in():
    secret = ["12345678901"]  # passed, not registered: nothing outside this test sees it
    data = {"count": 123456789012, "text": "id 12345678901"}
    scrubbed = Scrubber([], token=None).data(data, secret)
    assert scrubbed["count"] == 123456789012 and scrubbed["text"] == "id [REDACTED]"
    assert redact("a 12345678901 b", secret) == "a [REDACTED] b"


class Gated(Generator):
    """Answers only once ``gate`` is set: a member still computing."""

    identity = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    def generate(self, asks):
        self.calls += 1
        if not self.gate.wait(60):  # a guard against a hang, not a timing
            raise RuntimeError("the gate was never opened")
        return [Sample(text="Answer: 4") for _ in asks]


def test_the_seats_prompt_goes_back_while_its_members_wave_is_still_out_and_the_step_waits_for_it():
    gated = Gated()
    spec = SystemSpec("majority_vote", task="zoo:arith", collaborators={"a": gated, "b": gated},
                      task_kwargs={"size": 40})
    served = Served(spec, ServeOptions(model_process="off", batch_wait_ms=0))
    env = SeatEnvironment(served)

    async def episode():
        gated.gate.set()  # a first episode with the gate open (the members' dev scores are measured on it)
        await env.reset_async(seed=2)
        await env.step_async(SeatAction(text="Answer: 4"))
        gated.gate.clear()
        first = await asyncio.wait_for(env.reset_async(seed=3), 60)  # returns with the members' call blocked
        asked_while_out = first.policy_asked and not gated.gate.is_set()
        step = asyncio.ensure_future(env.step_async(SeatAction(text="Answer: 4")))
        await asyncio.sleep(0.05)
        waited = not step.done()  # the reply is not seated before the members answered
        gated.gate.set()
        return asked_while_out, waited, await asyncio.wait_for(step, 60)

    asked_while_out, waited, final = asyncio.run(episode())
    env.close()
    assert asked_while_out and waited and final.done
    assert final.details["system_answer"] == "4" and set(final.details["members"]) == {"a", "b", "policy"}
