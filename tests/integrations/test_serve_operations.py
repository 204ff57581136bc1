"""`cgym serve` as an operator runs it: a quiet console (a client leaving says nothing, a failure one line), the
token named to a client without it (and the docs' client sending it), OpenEnv's files that `openenv validate`
passes and that never replace a file they did not write, bad ports, hosts and names refused in one line before the
System is built, WebSocket validation errors that name the field, and the load (`/metrics`, the console's line).
Servers start on 127.0.0.1 on free ports and stop at the end."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv.core.env_server")

import requests  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from websockets.sync.client import connect as ws_connect  # noqa: E402

from coalition_gym.cli import main  # noqa: E402
from coalition_gym.envs.system import System, SystemSpec  # noqa: E402
from coalition_gym.integrations.openenv_client import ServedEnv, ServerClosedError, ServerGoneError  # noqa: E402
from coalition_gym.integrations.openenv_files import MARKER, SOURCE_PARTS, TORCH_CPU  # noqa: E402
from coalition_gym.integrations.processes import ServerProcess, ThreadServer, free_port  # noqa: E402
from coalition_gym.integrations.serve_asgi import Guard, error_frame  # noqa: E402
from coalition_gym.integrations.serve_options import ServeOptions  # noqa: E402
from coalition_gym.integrations.server_load import LoadReporter, prometheus_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPEC = SystemSpec("majority_vote", task="zoo:arith", collaborators="sim:demo", task_kwargs={"size": 40})
SERVE = ["coalition_gym/MajorityVote-v0", "--pool", "sim:demo", "--task", "zoo:arith"]
TOKEN = "tok-" + "5" * 24


@pytest.fixture(scope="module")
def server():
    with ThreadServer(SPEC, ServeOptions(port=free_port(), token=TOKEN, report_every_s=0.3)) as running:
        yield running


@pytest.fixture
def no_build(monkeypatch):
    """Fail the test if a System is built or the server (OpenEnv, its seconds of imports) is imported: what the
    refusals must come before."""
    def refuse(*args, **kwargs):
        raise AssertionError("System.build was reached")

    monkeypatch.setattr(System, "build", classmethod(refuse))
    for heavy in ("coalition_gym.integrations.openenv_server", "openenv"):
        monkeypatch.setitem(sys.modules, heavy, None)  # importing it now raises ImportError


def refusal(capsys, argv: list[str]) -> str:
    """``cgym ARGV``'s one-line error, having checked it exited 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("cgym: error: "), err
    return err


# -- 1. a quiet console ---------------------------------------------------------------------------------------

def test_100_sessions_that_connect_and_leave_leave_no_traceback_in_the_servers_log():
    """Clients that close politely, that drop the socket after a reset, and that drop it at once."""
    with ServerProcess(SERVE[0], SERVE[1:] + ["--report-every", "0"]) as proc:
        ws_url = proc.url.replace("http://", "ws://") + "/ws"
        for k in range(100):
            if k % 3 == 0:
                with ServedEnv(proc.url) as env:
                    env.reset(seed=k)
            else:
                with ws_connect(ws_url) as raw:  # closes the socket without OpenEnv's "close" message
                    if k % 3 == 1:
                        raw.send(json.dumps({"type": "reset", "data": {"seed": k}}))
                        assert json.loads(raw.recv())["type"] == "observation"
        with ServedEnv(proc.url) as env:  # the server went on
            assert env.reset(seed=1).observation["policy_asked"]
        time.sleep(0.5)  # the last sessions' cleanup is logged, if anything is
        log = proc.output()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]
    assert log.strip().splitlines() == [log.strip().splitlines()[0]]  # the "serving ..." line, nothing else


async def _drive(app, scope: dict) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def test_a_real_failure_is_one_log_line_and_a_500(caplog):
    async def broken(scope, receive, send):
        raise RuntimeError("the disk\nis full")

    caplog.set_level(logging.INFO, logger="coalition_gym.serve")
    sent = asyncio.run(_drive(Guard(broken, None, 1024), {"type": "http", "path": "/step", "method": "POST",
                                                          "headers": []}))
    assert sent[0]["status"] == 500 and json.loads(sent[1]["body"]) == {"error": "internal error (RuntimeError)"}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["POST /step: RuntimeError: the disk is full"]
    assert not any(r.exc_info for r in caplog.records)  # no traceback
    frame = json.dumps({"type": "error", "data": {"message": "boom\nat startup", "code": "SESSION_ERROR"}})
    assert error_frame(frame, "/ws") == frame  # the client's frame as OpenEnv wrote it; the console's line:
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR][-1] == \
        "/ws: boom at startup (SESSION_ERROR)"


# -- 2. the token ------------------------------------------------------------------------------------------------

def test_a_websocket_client_without_the_token_is_told_about_the_token(server):
    with pytest.raises(ServerClosedError, match="missing or wrong bearer token") as caught:
        ServedEnv(server.url).reset(seed=0)
    assert isinstance(caught.value, ServerGoneError) and "token=" in str(caught.value)
    with pytest.raises(Exception, match="bearer token"):  # OpenEnv's own client shows the server's reason too
        with GenericEnvClient(base_url=server.url).sync() as env:
            env.reset(seed=0)
    with pytest.raises(ServerClosedError, match="token"):
        ServedEnv(server.url, token="wrong-" + TOKEN).reset(seed=0)


def readme_client_code() -> str:
    """The served-client code of docs/serve/openenv.md: its Python block's import of ``ServedEnv`` and its ``with ServedEnv(url,
    token=token)`` statement."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "serve" / "openenv.md").read_text(), re.S)
    lines = next(b for b in blocks if "ServedEnv(url, token=token)" in b).splitlines()
    start = next(k for k, line in enumerate(lines) if "with ServedEnv(url, token=token)" in line)
    imports = [line for line in lines if line.startswith("from ") and "import ServedEnv" in line]
    assert len(imports) == 1
    return imports[0] + "\n" + textwrap.dedent("\n".join(lines[start:]))


def test_the_docs_client_drives_a_server_started_with_token(capsys):
    code = readme_client_code()
    assert "GenericEnvClient" not in code
    with ServerProcess("coalition_gym/Debate-v0", ["--pool", "sim:demo", "--task", "zoo:arith", "--set", "rounds=2",
                                                   "--token", TOKEN, "--report-every", "0"]) as proc:
        namespace = {"url": proc.url, "token": TOKEN}
        exec(compile(code, "docs/serve/openenv.md (served client)", "exec"), namespace)
    assert namespace["result"].done and set(namespace["details"]["members"]) == {"atlas", "borealis", "cirrus",
                                                                                  "delta", "policy"}
    assert capsys.readouterr().out.strip().startswith(str(namespace["result"].reward))


# -- 3, 4. OpenEnv's files ---------------------------------------------------------------------------------------

def openenv_files(folder: Path, *extra: str) -> int:
    return main(["serve", *SERVE, "--openenv-files", str(folder), *extra])


def test_openenv_files_pass_openenv_validate_and_the_dockerfile_builds_from_source(tmp_path, capsys):
    validate = shutil.which("openenv", path=str(Path(sys.executable).parent)) or shutil.which("openenv")
    if validate is None:
        pytest.skip("the openenv command (openenv-core) is not installed")
    assert openenv_files(tmp_path) == 0
    checked = subprocess.run([validate, "validate", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "[OK]" in checked.stdout, checked.stdout + checked.stderr
    docker = (tmp_path / "server" / "Dockerfile").read_text()
    assert "NOT BUILT OR TESTED" in docker and "Docker cannot run" in docker
    assert "coalition-gym[serve]==" not in docker and 'pip install --no-cache-dir ".[serve]"' in docker
    for part in SOURCE_PARTS:  # the project's source, copied from the named build context
        assert f"COPY --from=coalition-gym {part} ./{part}" in docker and (ROOT / part).exists()
    assert f"--build-context coalition-gym={ROOT}" in docker
    makefile_torch = re.search(r"^TORCH\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert TORCH_CPU == makefile_torch and f'"{TORCH_CPU}" --index-url https://download.pytorch.org/whl/cpu' in docker
    assert docker.index(TORCH_CPU) < docker.index('".[serve]"')  # the CPU wheel first: pip never pulls CUDA


def test_the_written_app_serves_with_its_main(tmp_path):
    assert openenv_files(tmp_path) == 0
    port = free_port()
    env = {**os.environ, "PORT": str(port), "PYTHONPATH": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-m", "server.app"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert f"127.0.0.1:{port}" in child.stdout.readline()  # "serving ... at URL": it listens
        assert requests.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "healthy"
    finally:
        child.terminate()
        child.wait(timeout=30)


def test_openenv_files_never_replace_a_file_they_did_not_write(tmp_path, capsys, no_build):
    mine = tmp_path / "server" / "app.py"
    mine.parent.mkdir()
    mine.write_text("# my own app\n")
    err = refusal(capsys, ["serve", *SERVE, "--openenv-files", str(tmp_path)])
    assert str(mine) in err and "--overwrite" in err
    assert mine.read_text() == "# my own app\n" and not (tmp_path / "openenv.yaml").exists()  # nothing written
    assert openenv_files(tmp_path, "--overwrite") == 0 and MARKER in mine.read_text().splitlines()[0]
    assert openenv_files(tmp_path) == 0  # its own files: replaced without being told
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert all(MARKER in p.read_text().splitlines()[0] for p in written) and len(written) == 6


# -- 5, 6. refused before the System is built --------------------------------------------------------------------

def test_a_busy_port_is_refused_in_one_line_before_the_system_is_built(capsys, no_build):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = refusal(capsys, ["serve", *SERVE, "--port", str(port)])
    assert f"--port {port}" in err and "already in use" in err and "--port 0" in err


@pytest.mark.parametrize("host, words", [("not-a-host.invalid", "does not resolve"),
                                         ("192.0.2.1", "not an address of this machine")])
def test_a_host_that_cannot_be_bound_is_refused_in_one_line_before_the_system_is_built(host, words, capsys,
                                                                                       no_build):
    err = refusal(capsys, ["serve", *SERVE, "--host", host, "--token", TOKEN])
    assert f"--host {host}" in err and words in err


@pytest.mark.parametrize("change, words", [
    (("coalition_gym/MajorityVot-v0",), "Did you mean 'coalition_gym/MajorityVote-v0'"),
    (("--pool", "sim:dem"), "Did you mean 'sim:demo'"),
    (("--task", "zoo:arit"), "Did you mean 'arith'"),
    (("--members", "atlas,delt"), "'delt'"),
    (("--set", "rouns=2"), "has no setting 'rouns'"),
])
def test_a_typo_in_a_name_is_refused_before_the_system_is_built(change, words, capsys, no_build):
    argv = ["serve", *SERVE, "--port", "0"]
    if len(change) == 1:
        argv[1] = change[0]
    else:
        argv += list(change)
    assert words in refusal(capsys, argv)


# -- 7. WebSocket validation errors ------------------------------------------------------------------------------

def test_a_websocket_validation_error_names_the_field(server):
    with ServedEnv(server.url, token=TOKEN) as env:
        env.reset(seed=0)
        for action, words in (({"txt": "x"}, "text: Field required"), ({"text": 4}, "text: Input should be a "
                                                                                    "valid string")):
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR") as caught:
                env._client.step(action)  # OpenEnv's client underneath: the server's frame as it arrives
            assert words in str(caught.value) and "\n" not in str(caught.value)
        assert env.step("Answer: 1").done  # the session goes on


# -- 8. the load -------------------------------------------------------------------------------------------------

def metric(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def test_metrics_report_the_load_and_need_the_token(server, caplog):
    caplog.set_level(logging.INFO, logger="coalition_gym.serve")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.get(f"{server.url}/metrics").status_code == 401
    before = requests.get(f"{server.url}/metrics", headers=auth).text
    with ServedEnv(server.url, token=TOKEN) as env:
        for seed in range(3):
            env.reset(seed=seed)
            assert env.step("Answer: 2").done
        during = requests.get(f"{server.url}/metrics", headers=auth)
    assert during.status_code == 200 and during.headers["content-type"].startswith("text/plain")
    text = during.text
    assert "# TYPE cgym_episodes_total counter" in text and "# TYPE cgym_sessions_open gauge" in text
    assert "# TYPE cgym_waits_given_up_total counter" in text  # open sessions that did not come back in time
    assert metric(text, "cgym_episodes_total") - metric(before, "cgym_episodes_total") == 3
    assert metric(text, "cgym_steps_total") - metric(before, "cgym_steps_total") == 3
    assert metric(text, "cgym_sessions_open") >= 1
    calls = metric(text, "cgym_backend_calls_total") - metric(before, "cgym_backend_calls_total")
    asks = metric(text, "cgym_backend_asks_total") - metric(before, "cgym_backend_asks_total")
    assert calls >= 3 * 4 and asks >= calls  # 4 members asked per episode
    assert len(re.findall(r'^cgym_backend_calls_total\{backend="sim:', text, re.M)) == 4
    deadline = time.monotonic() + 30  # the console's line comes every 0.3 s
    while not any("episodes/s" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
        time.sleep(0.1)
    line = next(r.getMessage() for r in caplog.records if "episodes/s" in r.getMessage())
    assert "sessions open" in line and "steps/s" in line and "mean batch" in line


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_load_line_gives_rates_since_the_last_line_and_the_mean_batch_size():
    load = {"sessions_open": 2, "episodes": 10, "steps": 30,
            "backends": {"hf:/srv/m1": {"calls": 5, "asks": 5, "seconds": 1.0}, "sim:b": {"calls": 1, "asks": 1}}}
    clock = Clock()
    reporter = LoadReporter(lambda: load, label=lambda s: s.replace("/srv/", "<local>/"), clock=clock)
    clock.now += 4
    load = {**load, "sessions_open": 3, "episodes": 12, "steps": 40,
            "backends": {"hf:/srv/m1": {"calls": 9, "asks": 17, "seconds": 2.0}, "sim:b": {"calls": 1, "asks": 1}}}
    assert reporter.line() == ("load over 4.0 s: 3 sessions open, 0.50 episodes/s, 2.50 steps/s; mean batch: "
                               "hf:<local>/m1 3.0 (4 calls), sim:b idle")
    text = prometheus_text({"sessions_open": 1, "episodes": 2,
                            "backends": {'a"1': {"calls": 2, "asks": 6, "seconds": 0.5},
                                         "/x/y/one": {"calls": 1, "asks": 1}, "/x/y/two": {"calls": 1, "asks": 2}}},
                           label=lambda s: "<local>" if s.startswith("/") else s)
    assert 'cgym_backend_asks_total{backend="a\\"1"} 6' in text  # a label's quote escaped
    assert 'cgym_backend_asks_total{backend="<local>"} 3' in text  # two backends one label: summed, not repeated
    assert "cgym_episodes_total 2" in text and "cgym_steps_total" not in text and text.endswith("\n")
