"""OpenAI-compatible backend: against a small in-test server that injects every failure, and against a
real `transformers serve` process running a tiny zoo model."""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from servers import transformers_serve

from coalition_gym.agents.openai_api import OpenAIGenerator, retry_after_seconds
from coalition_gym.agents.options import HFOptions, OpenAIOptions
from coalition_gym.errors import BackendError, ConfigError
from coalition_gym.types import Ask, Message, SamplingParams

KEY_ENV = "CGYM_TEST_OPENAI_KEY"
SECRET = "sk-test-secret-123"


def ask(text: str = "Calculate 2 + 3.\nAnswer:", seed: int = 7, **params) -> Ask:
    return Ask(member="remote", messages=(Message("user", text),), seed=seed, params=SamplingParams(**params))


def completion(text: str, logprobs: list[float] | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": lp} for lp in logprobs]}
    return {"id": "c1", "object": "chat.completion", "choices": [choice]}


class QuietServer(http.server.ThreadingHTTPServer):
    """Clients that time out on purpose leave broken pipes behind; they are expected, not news."""

    def handle_error(self, request, client_address):
        pass


class FakeServer:
    """Answers /v1/chat/completions; each request takes the next scripted behaviour (then "ok")."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0
        self.default = "ok"  # the behaviour once the script is spent
        self.fail_marker: str | None = None  # a request whose prompt holds it always gets HTTP 500
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append(dict(self.headers))
                    action = fake.script.pop(0) if fake.script else fake.default
                    if fake.fail_marker and fake.fail_marker in body["messages"][-1]["content"]:
                        action = "500"
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    fake.act(self, action, body, self.headers.get("Authorization", ""))
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def act(self, h: http.server.BaseHTTPRequestHandler, action: str, body: dict, auth: str) -> None:
        def send(status: int, payload: bytes, headers: dict | None = None) -> None:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)

        if action == "ok":
            time.sleep(self.delay)
            text = " " + body["messages"][-1]["content"][-12:]
            lps = [-0.5, -0.25] if body.get("logprobs") else None
            send(200, json.dumps(completion(text, lps)).encode())
        elif action == "ok_then_close":  # answer, then drop the keep-alive connection without saying so
            send(200, json.dumps(completion("bye")).encode())
            h.close_connection = True
        elif action == "500":
            send(500, b'{"error": {"message": "internal error"}}')
        elif action == "429":
            send(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0.25"})
        elif action == "timeout":
            time.sleep(1.5)  # longer than the client's timeout
            send(200, json.dumps(completion("late")).encode())
        elif action == "reset":  # drop the connection abruptly (RST)
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            h.close_connection = True
        elif action == "malformed":
            send(200, b'{"choices": [ {"message": ')
        elif action == "not_found":
            send(404, b'{"error": {"message": "The model `nope` does not exist.", "type": "invalid_request_error"}}')
        elif action == "echo_key_401":  # as some hosted APIs do: the rejected key quoted back
            send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth[7:]} ({auth})"}}).encode())
        elif action == "echo_key_500":
            send(500, f"upstream failed for request with header Authorization: {auth}".encode())
        elif action == "echo_key_ok":  # a reply that happens to contain the key
            send(200, json.dumps(completion(f"The answer is 5. (key {auth[7:]})")).encode())
        elif action == "error_body":
            send(200, b'{"error": {"message": "context length exceeded"}}')

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def client(server: FakeServer, **kw) -> tuple[OpenAIGenerator, list[float]]:
    sleeps: list[float] = []
    opts = dict(api_key_env=KEY_ENV, timeout=0.5, max_retries=3, backoff_base=0.01)
    opts.update(kw)
    return OpenAIGenerator("zoo-model", OpenAIOptions(base_url=server.url, **opts), sleep=sleeps.append), sleeps


def test_request_carries_messages_sampling_seed_and_key(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    gen, _ = client(server)
    a = ask(seed=2**40 + 5, temperature=0.3, top_p=0.9, max_new_tokens=11)
    (sample,) = gen.generate([a])
    assert sample.text == " " + a.messages[0].content[-12:] and sample.finish_reason == "stop" and sample.logprobs is None
    body = server.requests[0]
    assert body["model"] == "zoo-model" and body["messages"] == [{"role": "user", "content": a.messages[0].content}]
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9 and body["max_tokens"] == 11
    assert body["seed"] == a.seed % (2**31 - 1) and "logprobs" not in body
    assert server.headers[0]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(gen) and SECRET not in gen.identity


def test_no_key_means_no_authorization_header(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    gen, _ = client(server)
    gen.generate([ask()])
    assert "Authorization" not in server.headers[0]


def test_seed_is_omitted_when_disabled_and_cap_applies(server):
    gen, _ = client(server, send_seed=False, max_new_tokens=4)
    gen.generate([ask(max_new_tokens=50)])
    assert "seed" not in server.requests[0] and server.requests[0]["max_tokens"] == 4


def test_logprobs_are_requested_and_returned(server):
    gen, _ = client(server, logprobs=True)
    (sample,) = gen.generate([ask()])
    assert server.requests[0]["logprobs"] is True and sample.logprobs == (-0.5, -0.25)


@pytest.mark.parametrize("failure", ["500", "reset", "malformed", "timeout"])
def test_transient_failures_are_retried_with_backoff(server, failure):
    server.script = [failure, failure]
    gen, sleeps = client(server)
    (sample,) = gen.generate([ask()])
    assert sample.text.endswith("Answer:")
    assert gen.attempts == 3 and len(sleeps) == 2
    assert all(0.0 <= s <= gen.backoff_base * 2 ** k for k, s in enumerate(sleeps))  # jittered exponential


def test_a_keep_alive_connection_the_server_dropped_is_reopened_without_backoff(server):
    server.script = ["ok_then_close"]
    gen, sleeps = client(server)
    assert gen.generate([ask()])[0].text == "bye"
    time.sleep(0.1)  # let the server close its end
    assert gen.generate([ask()])[0].text.endswith("Answer:")
    assert sleeps == [] and gen.attempts == 3  # the failed send on the stale connection, then a fresh one


def test_429_honours_retry_after(server):
    server.script = ["429"]
    gen, sleeps = client(server)
    gen.generate([ask()])
    assert sleeps == [0.25] and gen.attempts == 2


def test_retry_after_parsing():
    assert retry_after_seconds("3") == 3.0 and retry_after_seconds(None) is None
    assert retry_after_seconds("garbage") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


def test_persistent_failure_names_server_and_model_never_the_key(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    server.script = ["500"] * 10
    gen, sleeps = client(server, max_retries=2)
    with pytest.raises(BackendError) as err:
        gen.generate([ask()])
    message = str(err.value)
    assert server.url in message and "zoo-model" in message and "3 attempts" in message
    assert "internal error" in message and SECRET not in message
    assert len(sleeps) == 2


def test_client_errors_are_not_retried_and_quote_the_server(server):
    server.script = ["not_found"]
    gen, sleeps = client(server)
    with pytest.raises(BackendError, match="HTTP 404.*does not exist"):
        gen.generate([ask()])
    assert gen.attempts == 1 and sleeps == []


def test_an_api_error_body_is_a_clear_error(server):
    server.script = ["error_body"]
    gen, _ = client(server)
    with pytest.raises(BackendError, match="context length exceeded"):
        gen.generate([ask()])


def test_server_that_is_down_gives_a_clear_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = OpenAIGenerator("m", OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_base=0.0),
                          sleep=lambda s: None)
    with pytest.raises(BackendError, match=rf"127\.0\.0\.1:{port}.*'m'.*connection failed"):
        gen.generate([ask()])


def test_batches_are_concurrent_but_bounded_and_ordered(server):
    server.delay = 0.05
    gen, _ = client(server, max_concurrency=3)
    asks = [ask(f"question {k}?", seed=k) for k in range(10)]
    samples = gen.generate(asks)
    assert [s.text for s in samples] == [" " + f"question {k}?"[-12:] for k in range(10)]
    assert server.max_in_flight <= 3
    gen.close()


def test_one_failed_ask_fails_the_batch_with_a_count(server):
    server.script = ["not_found"]
    gen, _ = client(server, max_concurrency=1)
    with pytest.raises(BackendError, match="1 of 3 requests failed"):
        gen.generate([ask(seed=k) for k in range(3)])


def test_bad_configuration_is_refused():
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIGenerator("m", OpenAIOptions(base_url="localhost:8000"))
    with pytest.raises(ConfigError, match="max_concurrency"):
        OpenAIGenerator("m", OpenAIOptions(base_url="http://127.0.0.1:1/v1", max_concurrency=0))
    with pytest.raises(ConfigError, match="model name"):
        OpenAIGenerator("", OpenAIOptions(base_url="http://127.0.0.1:1/v1"))


# -- a real `transformers serve` ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from coalition_gym.agents.zoo import build_zoo

    build = build_zoo("tiny", tmp_path_factory.getbasetemp() / "cgym-home" / "zoo", progress=False)
    return build.model_path(next(iter(build.models)))


@pytest.fixture(scope="module")
def served(tiny_model):
    """`transformers serve` on 127.0.0.1 with a zoo model folder, started and stopped here."""
    with transformers_serve(tiny_model, tiny_model.parent / "serve.log", timeout=120) as url:
        yield url, str(tiny_model)


@pytest.mark.slow
def test_real_transformers_serve_matches_the_hf_backend_when_greedy(served):
    from coalition_gym.agents.hf import HFGenerator

    url, model = served
    remote = OpenAIGenerator(model, OpenAIOptions(base_url=url, max_concurrency=4, timeout=60, max_retries=2))
    local = HFGenerator(model, options=HFOptions(device="cpu", max_new_tokens=8))
    asks = [ask(f"Calculate {a} + {b}.\nAnswer:", seed=a, temperature=0.0, max_new_tokens=8)
            for a, b in [(1, 2), (3, 4), (5, 6), (7, 1), (2, 2)]]
    got = remote.generate(asks)
    assert [s.text for s in got] == [s.text for s in local.generate(asks)]
    assert all(s.finish_reason in ("stop", "length") for s in got)
    # Sampling goes through too, and the seed is passed on (the server seeds its global generator).
    hot = [ask("Calculate 4 * 4.\nAnswer:", seed=3, temperature=1.0, max_new_tokens=8)]
    assert all(isinstance(s.text, str) for s in remote.generate(hot))


@pytest.mark.slow
def test_real_server_errors_are_clear(served):
    url, _ = served
    wrong = OpenAIGenerator("not-the-served-model", OpenAIOptions(base_url=url, max_retries=0))
    with pytest.raises(BackendError, match="HTTP 400.*pinned"):
        wrong.generate([ask()])


# -- failures stay per request; the key never leaves ---------------------------------------------------------------


def test_a_request_that_fails_for_good_never_makes_the_others_go_again(server):
    """32 asks, one of which the server always refuses: the 31 that succeeded are sent once each."""
    from coalition_gym.envs.runner import dispatch

    server.fail_marker = "poison"
    gen, _ = client(server, max_concurrency=4, max_retries=2, timeout=10.0)
    asks = [ask(f"question {k}?" if k != 13 else "poison", seed=k) for k in range(32)]
    results = dispatch(asks, {"remote": gen})
    assert isinstance(results[13], BackendError) and "3 attempts" in str(results[13])
    assert [r.text for k, r in enumerate(results) if k != 13] == [" " + f"question {k}?"[-12:]
                                                                   for k in range(32) if k != 13]
    assert len(server.requests) == 31 + 3  # the poisoned one tried 3 times, nothing re-sent
    gen.close()


def test_replicas_and_the_cache_keep_what_succeeded(server, tmp_path):
    from coalition_gym.agents.cache import CachedGenerator, GenerationCache
    from coalition_gym.agents.replicas import ReplicaGenerator
    from coalition_gym.envs.runner import dispatch

    server.fail_marker = "poison"
    # a generous timeout: under load a slow answer must not pass for the one failure under test
    replicas = ReplicaGenerator([client(server, max_retries=0, timeout=10.0)[0],
                                 client(server, max_retries=0, timeout=10.0)[0]])
    cached = CachedGenerator(replicas, GenerationCache(tmp_path / "cache.sqlite"))
    asks = [ask(f"q{k}" if k != 2 else "poison", seed=k) for k in range(8)]
    first = dispatch(asks, {"remote": cached})
    assert isinstance(first[2], BackendError) and sum(isinstance(r, BackendError) for r in first) == 1
    assert len(server.requests) == 8
    server.fail_marker = None
    second = dispatch(asks, {"remote": cached})  # only the failed one is asked again
    assert len(server.requests) == 9 and [s.text for s in second] == [" " + f"q{k}" if k != 2 else " poison"
                                                                      for k in range(8)]


@pytest.mark.parametrize("action", ["echo_key_401", "echo_key_500"])
def test_an_echoed_key_is_redacted_from_the_error(server, monkeypatch, action):
    monkeypatch.setenv(KEY_ENV, SECRET)
    server.default = action
    gen, _ = client(server, max_retries=1)
    with pytest.raises(BackendError) as err:
        gen.generate([ask()])
    assert SECRET not in str(err.value) and "[REDACTED]" in str(err.value)


def _served_pool(tmp_path: Path, server: FakeServer, with_sim: bool = False) -> str:
    members = [{"name": "remote", "backend": "openai", "model": "zoo-model", "base_url": server.url,
                "api_key_env": KEY_ENV, "max_retries": 0, "timeout": 2.0}]
    if with_sim:
        members.append({"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"})
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"name": "served", "members": members}))
    return str(path)


def _files_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and p.suffix != ".png")


def test_a_server_that_echoes_the_key_leaves_it_in_no_output(server, monkeypatch, tmp_path, capsys):
    """Every request echoes the key, in error bodies and in replies: not one copy reaches a file or the terminal."""
    from coalition_gym.cli import main

    monkeypatch.setenv(KEY_ENV, SECRET)
    server.script = ["echo_key_401", "echo_key_500"] * 3
    server.default = "echo_key_ok"
    pool = _served_pool(tmp_path, server)
    # tie_break=first: no dev-score measurement, so the scripted errors reach the episodes
    code = main(["run", "coalition_gym/MajorityVote-v0", "--pool", pool, "--episodes", "10", "--set", "tie_break=first",
                 "--out", str(tmp_path / "run"), "--max-failures", "100%"])
    assert code == 0
    code = main(["eval", "--pool", pool, "--protocol", "majority_vote", "--items", "6", "--bootstrap", "50",
                 "--set", "tie_break=first", "--out", str(tmp_path / "eval"), "--max-failures", "100%"])
    assert code == 0
    captured = capsys.readouterr()
    written = _files_text(tmp_path / "run") + _files_text(tmp_path / "eval")
    assert SECRET not in written + captured.out + captured.err
    assert "[REDACTED]" in written and "[REDACTED]" in captured.err  # the echoes were there, and were removed
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["failures"]["failed"] == 6  # the 6 scripted errors; max_retries=0


def test_failed_episodes_are_shown_and_past_the_limit_the_exit_is_3(server, tmp_path, capsys):
    from coalition_gym.cli import main

    server.default = "500"
    pool = _served_pool(tmp_path, server, with_sim=True)
    code = main(["eval", "--pool", pool, "--protocol", "majority_vote", "--items", "5", "--bootstrap", "50",
                 "--out", str(tmp_path / "eval")])
    err = capsys.readouterr().err
    assert code == 3
    assert ("every episode failed in 2 coalitions: {atlas,remote}, {remote}" in err
            or "every episode failed in 2 coalitions: {remote}, {atlas,remote}" in err)
    assert "HTTP 500: internal error" in err and "exit status 3" in err
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["failures"]["failed"] == 10 and summary["failures"]["episodes"] == 15
    assert sorted(map(tuple, summary["failures"]["whole_coalitions"])) == [("atlas", "remote"), ("remote",)]
    assert "Failed episodes: 10 of 15" in (tmp_path / "eval" / "leaderboard.md").read_text()
    assert main(["eval", "--pool", pool, "--protocol", "majority_vote", "--items", "5", "--bootstrap", "50",
                 "--out", str(tmp_path / "eval"), "--max-failures", "10", "--overwrite"]) == 0
    server.default = "ok"
    assert main(["run", "coalition_gym/MajorityVote-v0", "--pool", pool, "--members", "remote",
                 "--episodes", "4"]) == 0
