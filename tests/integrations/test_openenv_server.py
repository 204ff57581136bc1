"""`cgym serve`: a protocol's policy seat as an OpenEnv server that OpenEnv's own clients drive, equal to the
in-process environment, and a server that holds (concurrency, bad requests, idle sessions, dead servers, secrets,
tokens). Servers start on 127.0.0.1 on free ports and stop at the end."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("openenv.core.env_server")

import requests  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from coalition_gym.agents.base import Generator  # noqa: E402
from coalition_gym.agents.pools import load_pool  # noqa: E402
from coalition_gym.envs.gym_env import CollaborationEnv  # noqa: E402
from coalition_gym.envs.system import SystemSpec  # noqa: E402
from coalition_gym.errors import BackendError, ConfigError  # noqa: E402
from coalition_gym.integrations.openenv_client import ServedEnv, ServedRequestError, ServerGoneError  # noqa: E402
from coalition_gym.integrations.openenv_files import write_openenv_files  # noqa: E402
from coalition_gym.integrations.processes import ServerProcess, ThreadServer, free_port  # noqa: E402
from coalition_gym.integrations.serve_options import ServeOptions  # noqa: E402
from coalition_gym.types import Sample  # noqa: E402

SPEC = SystemSpec("debate", task="zoo:arith", collaborators="sim:demo", members=["atlas", "delta"],
                  task_kwargs={"size": 40}, protocol_settings={"rounds": 2})


def reply_for(session: int, call: int) -> str:
    return f"I think it is {session % 7 + call}.\nAnswer: {session % 7 + call}"


@pytest.fixture(scope="module")
def server():
    with ThreadServer(SPEC, ServeOptions(port=free_port(), max_sessions=80)) as running:
        yield running


def play_in_process(seed: int, session: int) -> dict:
    """The in-process environment's episode with seed ``seed`` and ``reply_for(session, k)`` as the k-th reply."""
    env = CollaborationEnv(SPEC)
    prompt, info = env.reset(seed=seed)
    prompts, call = [prompt], 0
    while True:
        prompt, reward, done, _, info = env.step(reply_for(session, call))
        call += 1
        if done:
            return {"prompts": prompts, "reward": reward, "transcript": info["transcript"],
                    "item_id": info["item_id"], "system_answer": info["system_answer"]}
        prompts.append(prompt)


def play_served(env, seed: int, session: int) -> dict:
    result = env.reset(seed=seed)
    prompts, call = [result.observation["prompt"]], 0
    while True:
        result = env.step(reply_for(session, call)) if isinstance(env, ServedEnv) else env.step(
            {"text": reply_for(session, call)})
        call += 1
        if result.done:
            meta = result.observation["details"]
            return {"prompts": prompts, "reward": result.reward, "transcript": meta["transcript"],
                    "item_id": meta["item_id"], "system_answer": meta["system_answer"]}
        prompts.append(result.observation["prompt"])


def test_openenv_generic_client_plays_an_episode_equal_to_the_in_process_one(server):
    health = requests.get(f"{server.url}/health").json()
    assert health["status"] == "healthy"
    schema = requests.get(f"{server.url}/schema").json()
    strings = [k for k, v in schema["action"]["properties"].items() if v.get("type") == "string"]
    assert strings == ["text"] and schema["action"]["required"] == ["text"]
    with GenericEnvClient(base_url=server.url).sync() as env:
        for seed in (0, 5):
            served = play_served(env, seed, session=seed)
            assert served == play_in_process(seed, session=seed)
            assert len(served["prompts"]) == 2  # debate of 2 rounds asks the seat twice
    with GenericEnvClient(base_url=server.url).sync() as env:  # the final metadata: scores, members, cost
        env.reset(seed=1)
        env.step({"text": "Answer: 3"})
        final = env.step({"text": "Answer: 3"})
        assert final.done and final.reward == final.observation["details"]["system_score"]
        assert set(final.observation["details"]["members"]) == {"atlas", "delta", "policy"}
        assert final.observation["details"]["policy_answer"] == "3" and final.observation["details"]["cost"]["calls"] == 6


def test_reset_takes_an_item_and_an_episode_seed(server):
    item_id = "zoo:arith/train/3"
    with ServedEnv(server.url) as env:
        first = env.reset(item_id=item_id, episode_seed=11)
        assert first.observation["item_id"] == item_id and first.observation["policy_asked"]
        assert env.state()["item_id"] == item_id and env.state()["episode_seed"] == 11
    local = CollaborationEnv(SPEC)
    prompt, _ = local.reset(options={"item_id": item_id, "episode_seed": 11})
    assert first.observation["prompt"] == prompt


def test_64_concurrent_sessions_in_a_random_order_each_equal_their_own_in_process_replay(server):
    """64 clients at once, each its own seed and replies, stepping in a random order (random pauses): no session
    sees another's episode, and the members' requests of different sessions went out in shared waves."""
    sessions = 64
    before = server.app.app.state.served.load()

    def one(k: int) -> dict:
        pauses = random.Random(k)
        with ServedEnv(server.url) as env:
            result = env.reset(seed=1000 + k)
            prompts, call = [result.observation["prompt"]], 0
            while not result.done:
                time.sleep(pauses.uniform(0, 0.02))
                result = env.step(reply_for(k, call))
                call += 1
                if not result.done:
                    prompts.append(result.observation["prompt"])
            meta = result.observation["details"]
            return {"prompts": prompts, "reward": result.reward, "transcript": meta["transcript"],
                    "item_id": meta["item_id"], "system_answer": meta["system_answer"]}

    with ThreadPoolExecutor(max_workers=sessions) as pool:
        served = list(pool.map(one, range(sessions)))
    expected = [play_in_process(1000 + k, session=k) for k in range(sessions)]
    mismatched = [k for k in range(sessions) if served[k] != expected[k]]
    assert mismatched == []
    assert len({s["item_id"] for s in served}) > 10  # the sessions really played different episodes
    after = server.app.app.state.served.load()
    assert after["episodes"] - before["episodes"] == sessions
    calls = sum(row["calls"] for row in after["backends"].values()) - sum(
        row["calls"] for row in before["backends"].values())
    asks = sum(row["asks"] for row in after["backends"].values()) - sum(
        row["asks"] for row in before["backends"].values())
    assert asks > calls  # batched: some call carried more than one session's request


def test_bad_requests_get_a_4xx_with_one_line_of_json_and_the_server_goes_on(server):
    url = server.url
    bad_http = [
        (requests.post(f"{url}/step", json={"action": {"text": "4"}}), 409, "before reset"),
        (requests.post(f"{url}/step", json={"action": {"text": 4}}), 422, "valid string"),
        (requests.post(f"{url}/step", json={"action": {"txt": "4"}}), 422, "text"),
        (requests.post(f"{url}/step", json=["not", "an", "object"]), 422, "invalid request"),
        (requests.post(f"{url}/step", data=b"{not json", headers={"content-type": "application/json"}), 422, ""),
        (requests.post(f"{url}/step", data=b"x" * (10 << 20), headers={"content-type": "application/json"}), 413,
         "over"),
        (requests.post(f"{url}/reset", json={"item_id": "zoo:arith/train/999"}), 400, "item id"),
        (requests.post(f"{url}/reset", json={"itemid": "x"}), 400, "unknown reset option"),
        (requests.post(f"{url}/reset", json={"episode_seed": "x"}), 422, "episode_seed"),
    ]
    for response, status, words in bad_http:
        assert response.status_code == status, response.text
        assert response.text.strip().count("\n") == 0 and set(response.json()) == {"error"}
        assert words in response.json()["error"]
    ws_errors = []
    with GenericEnvClient(base_url=url).sync() as env:
        for action in ({"text": "x"}, {"text": 4}, {"words": "x"}):  # before reset, a wrong type, a wrong field
            with pytest.raises(RuntimeError, match="Server error") as caught:
                env.step(action)
            ws_errors.append(str(caught.value))
        for options in ({"seed": 1.5}, {"episode_id": 12345}, {"item_id": "zoo:arith/train/999"}, {"itemid": 3}):
            with pytest.raises(RuntimeError, match="Server error") as caught:  # bad reset options
                env.reset(**options)
            ws_errors.append(str(caught.value))
        env.reset(seed=2)
        env.step({"text": "Answer: 1"})
        assert env.step({"text": "Answer: 1"}).done
        with pytest.raises(RuntimeError, match="after the episode ended"):  # step after the end
            env.step({"text": "x"})
        assert env.reset(seed=3).observation["policy_asked"]  # the same session goes on
    assert "before reset" in ws_errors[0] and all("\n" not in e and "internal error" not in e for e in ws_errors)
    with ServedEnv(url) as env:  # a 10 MB WebSocket message: the connection is closed, nothing else
        env.reset(seed=1)
        with pytest.raises(ServerGoneError):
            env.step("x" * (10 << 20))
    assert requests.get(f"{url}/health").status_code == 200
    with ServedEnv(url) as env:
        assert play_served(env, 7, 7) == play_in_process(7, 7)
    print(f"{len(bad_http)} bad HTTP requests, {len(ws_errors) + 2} bad WebSocket requests refused")


def test_idle_sessions_are_reclaimed_and_say_so():
    with ThreadServer(SPEC, ServeOptions(port=free_port(), max_sessions=1, idle_timeout_s=0.5)) as srv:
        idle = ServedEnv(srv.url)
        idle.reset(seed=1)
        with ServedEnv(srv.url) as second, pytest.raises((ServedRequestError, ServerGoneError)):
            second.reset(seed=1)  # one session at most: the idle one holds it (OpenEnv refuses, then closes)
        time.sleep(6.5)  # OpenEnv's reaper looks every max(timeout / 4, 5) s
        with ServedEnv(srv.url) as third:  # the idle session was reclaimed: its slot is free again
            assert third.reset(seed=2).observation["policy_asked"]
        with pytest.raises((ServedRequestError, ServerGoneError)):
            idle.step("Answer: 1")  # its session is gone
        idle.close()


def test_a_client_whose_server_died_gets_a_clear_error_not_a_hang():
    with ServerProcess("coalition_gym/MajorityVote-v0", ["--pool", "sim:demo", "--task", "zoo:arith"]) as proc:
        env = ServedEnv(proc.url, timeout_s=30)
        env.reset(seed=0)
        proc.kill()
        started = time.monotonic()
        with pytest.raises(ServerGoneError, match="did not answer step"):
            env.step("Answer: 1")
        assert time.monotonic() - started < 10
    with pytest.raises(ServerGoneError, match=f"127.0.0.1:{proc.port}"):
        ServedEnv(proc.url).reset(seed=0)  # nothing listens there any more


SECRET_KEY = "sk-test-0123456789abcdefghij"
SECRET_DIR = "/srv/private/models/checkpoint-7"


class Leaky(Generator):
    """A member whose identity is a local model folder and whose failures name it and an API key."""

    identity = f"hf:{SECRET_DIR}:float32:abc"

    def __init__(self, fail_on: str):
        self.fail_on = fail_on

    def describe(self):
        return {"kind": "hf", "identity": self.identity, "model": SECRET_DIR}

    def generate(self, asks):
        if any(self.fail_on in m.content for a in asks for m in a.messages):
            raise BackendError(f"model {SECRET_DIR}/weights.bin failed (api key {SECRET_KEY}) in /home/me/x.py")
        return [Sample(text=f"{SECRET_DIR} says Answer: 4") for _ in asks]


def test_no_key_or_local_path_crosses_the_wire(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    pool = load_pool({"leaky": Leaky(fail_on=" + "), "atlas": load_pool("sim:demo").members["atlas"]})
    spec = SystemSpec("majority_vote", task="zoo:arith", collaborators=pool, task_kwargs={"size": 40})
    seen = []
    with ThreadServer(spec, ServeOptions(port=free_port())) as srv:
        seen.append(requests.get(f"{srv.url}/metadata").text)
        seen.append(requests.post(f"{srv.url}/reset", json={"seed": 1}).text)
        with ServedEnv(srv.url) as env:
            for seed in range(30):
                env.reset(seed=seed)
                result = env.step("Answer: 4")
                seen.append(json.dumps(result.observation["details"]))
        assert any("failed" in (json.loads(s).get("error") or "") for s in seen[2:])  # the failing items were hit
    wire = "\n".join(seen)
    assert SECRET_KEY not in wire and SECRET_DIR not in wire and "/home/me" not in wire
    assert "<local>" in wire  # the member's text named its folder: scrubbed, the rest kept


def test_a_non_local_host_needs_a_token_and_every_request_but_health_must_carry_it(monkeypatch):
    monkeypatch.delenv("CGYM_SERVE_TOKEN", raising=False)
    assert ServeOptions().host == "127.0.0.1"  # local unless told otherwise
    with pytest.raises(ConfigError, match="not local"):
        ServeOptions(host="0.0.0.0")
    token = "tok-" + "7" * 24
    assert ServeOptions(host="0.0.0.0", token=token).token == token
    with ThreadServer(SPEC, ServeOptions(port=free_port(), token=token)) as srv:
        assert requests.get(f"{srv.url}/health").status_code == 200
        for wrong in ({}, {"Authorization": "Bearer nope"}, {"Authorization": token}):
            response = requests.post(f"{srv.url}/reset", json={}, headers=wrong)
            assert response.status_code == 401 and set(response.json()) == {"error"}
        with pytest.raises(ServerGoneError):
            ServedEnv(srv.url).reset(seed=0)  # the WebSocket is refused without it
        with ServedEnv(srv.url, token=token) as env:
            final = env.reset(seed=0)
            while not final.done:
                final = env.step(f"Answer: 4 ({token})")
        assert token not in json.dumps(final.observation["details"])


def test_openenv_files_are_written_and_the_app_module_builds(tmp_path):
    paths = write_openenv_files(tmp_path, SPEC, ServeOptions(env_id="coalition_gym/Debate-v0", token="t" * 20))
    assert sorted(p.relative_to(tmp_path).as_posix() for p in paths) == [
        "openenv.yaml", "pyproject.toml", "server/Dockerfile", "server/__init__.py", "server/app.py", "uv.lock"]
    manifest = (tmp_path / "openenv.yaml").read_text()
    assert "app: server.app:app" in manifest and "t" * 20 not in (tmp_path / "server" / "app.py").read_text()
    assert "NOT BUILT" in (tmp_path / "server" / "Dockerfile").read_text()
    namespace: dict = {}
    exec(compile((tmp_path / "server" / "app.py").read_text(), "app.py", "exec"), namespace)
    assert type(namespace["app"]).__name__ == "Guard"


def test_cgym_serve_debate_with_the_shipped_zoo_answers_openenv_client():
    """The command of the issue: `cgym serve coalition_gym/Debate-v0 --pool zoo:default` answers OpenEnv's client."""
    with ServerProcess("coalition_gym/Debate-v0", ["--pool", "zoo:default", "--task", "zoo:arith",
                                                   "--set", "rounds=2"]) as proc:
        with GenericEnvClient(base_url=proc.url).sync() as env:
            result = env.reset(seed=0)
            assert result.observation["policy_asked"] and "<|user|>" in result.observation["prompt"]
            steps = 0
            while not result.done:
                result = env.step({"text": "Answer: 4"})
                steps += 1
            assert steps == 2 and result.reward in (0.0, 1.0)
            assert len(result.observation["details"]["members"]) >= 3


class NotReentrant(Generator):
    """A backend that fails if two calls overlap (as a local model's forward pass must not), and notes the
    threads it is called from."""

    identity = "not-reentrant"

    def __init__(self):
        self.busy = threading.Lock()
        self.threads: set[str] = set()
        self.sizes: list[int] = []

    def generate(self, asks):
        if not self.busy.acquire(blocking=False):
            raise BackendError("two calls overlapped")
        try:
            self.threads.add(threading.current_thread().name)
            self.sizes.append(len(asks))
            time.sleep(0.002)
            return [Sample(text=f"Answer: {len(a.messages[-1].content) % 5}") for a in asks]
        finally:
            self.busy.release()


def test_a_backend_that_is_not_reentrant_is_called_one_wave_at_a_time_by_the_batcher():
    backend = NotReentrant()
    spec = SystemSpec("majority_vote", task="zoo:arith", collaborators={"a": backend, "b": backend},
                      task_kwargs={"size": 40})
    with ThreadServer(spec, ServeOptions(port=free_port(), max_sessions=40)) as running:
        def one(k: int) -> float:
            with ServedEnv(running.url) as env:
                env.reset(seed=k)
                return env.step("Answer: 1").reward

        with ThreadPoolExecutor(max_workers=32) as pool:
            rewards = list(pool.map(one, range(32)))
    assert all(r in (0.0, 1.0) for r in rewards)  # no episode failed on an overlapping call
    dev_threads = {t for t in backend.threads if not t.startswith("cgym-batcher")}
    assert len(dev_threads) <= 1  # the dev-score measurement at build time; every episode's call: the batcher's
    assert max(backend.sizes) > 2  # and a wave carried several sessions' requests


def test_local_models_answer_from_the_model_process_and_every_episode_equals_its_replay():
    """`cgym serve --model-process auto` runs CPU zoo models in a process of their own: the server has that child,
    and 8 concurrent sessions each get their in-process episode, as with --model-process off (the default)."""
    import psutil

    spec = SystemSpec("debate", task="zoo:arith", collaborators="zoo:tiny", task_kwargs={"size": 40},
                      protocol_settings={"rounds": 2})

    def replay(seed: int) -> dict:
        env = CollaborationEnv(spec)
        env.reset(seed=seed)
        call = 0
        while True:
            _, reward, done, _, info = env.step(reply_for(seed, call))
            call += 1
            if done:
                return {"reward": reward, "transcript": info["transcript"]}

    def served(url: str, seed: int) -> dict:
        with ServedEnv(url) as env:
            env.reset(seed=seed)
            call = 0
            while True:
                result = env.step(reply_for(seed, call))
                call += 1
                if result.done:
                    return {"reward": result.reward, "transcript": result.observation["details"]["transcript"]}

    args = ["--pool", "zoo:tiny", "--task", "zoo:arith", "--size", "40", "--set", "rounds=2"]
    want = [replay(seed) for seed in range(8)]
    for mode in ("auto", "off"):
        with ServerProcess("coalition_gym/Debate-v0", args + ["--model-process", mode]) as proc:
            children = [c for c in psutil.Process(proc.process.pid).children()  # type: ignore[union-attr]
                        if "spawn_main" in " ".join(c.cmdline())]  # (not multiprocessing's resource tracker)
            assert len(children) == (1 if mode == "auto" else 0), mode
            with ThreadPoolExecutor(max_workers=8) as pool:
                got = list(pool.map(lambda seed: served(proc.url, seed), range(8)))
        assert got == want, mode
