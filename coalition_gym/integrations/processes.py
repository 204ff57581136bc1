"""``cgym serve`` as a child process: start it on a free local port, wait until ``/health`` answers, stop it.

What the example, the tests and the benchmark use to put servers beside a trainer on one machine::

    with ServerProcess("coalition_gym/Debate-v0", ["--pool", "zoo:default", "--task", "zoo:arith"]) as server:
        env = ServedEnv(server.url)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Sequence

from ..errors import ConfigError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``cgym serve ENV_ID ARGS --port PORT`` in a child process on 127.0.0.1 (``port``: a free one by default);
    :attr:`url` once :meth:`start` returned. ``env``: extra environment variables of the child."""

    def __init__(self, env_id: str, args: Sequence[str] = (), port: int | None = None,
                 env: dict[str, str] | None = None, startup_s: float = 300.0):
        self.env_id, self.args, self.port = env_id, list(args), port or free_port()
        self.env, self.startup_s = env, startup_s
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> "ServerProcess":
        return self.launch().wait_ready()

    def launch(self) -> "ServerProcess":
        """Start the child without waiting (start several, then :meth:`wait_ready` on each)."""
        command = [sys.executable, "-m", "coalition_gym.cli", "serve", self.env_id, *self.args,
                   "--port", str(self.port)]
        self._log = tempfile.TemporaryFile(mode="w+")  # never a pipe: a chatty server would block on a full one
        self.process = subprocess.Popen(command, env={**os.environ, **(self.env or {})},
                                        stdout=self._log, stderr=subprocess.STDOUT, text=True)
        return self

    def wait_ready(self) -> "ServerProcess":
        """Wait until ``/health`` answers (the child exiting first, or the startup time passing, raises)."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigError(f"`cgym serve {self.env_id}` exited with {self.process.returncode} before it "
                                  f"served: {self.output().strip().splitlines()[-1:] or ''}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise ConfigError(f"`cgym serve {self.env_id}` did not answer /health within {self.startup_s:.0f} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def output(self) -> str:
        """What the server printed so far."""
        self._log.seek(0)
        return self._log.read()

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ThreadServer:
    """The same server in a thread of this process (tests, benchmarks): :attr:`url` once started; :attr:`app` is
    the ASGI app (its ``.app.state.served`` the shared System)."""

    def __init__(self, spec: Any, options: Any):
        import uvicorn

        from .openenv_server import build_app

        self.options = options
        self.app = build_app(spec, options)
        port = options.port or free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host=options.host, port=port, log_level="error",
                                                    ws_max_size=options.max_body_bytes))
        self.thread: Any = None

    def start(self) -> "ThreadServer":
        import threading

        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise ConfigError(f"the server at {self.url} did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)

    def __enter__(self) -> "ThreadServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
