"""`transformers serve` for tests: a real OpenAI-compatible server on 127.0.0.1, started and stopped here."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def transformers_serve(folder: str | Path, log: Path, timeout: float = 180) -> Iterator[str]:
    """Serve the model ``folder`` until the block ends; yields the ``.../v1`` base URL (the server's output goes
    to ``log``; a server that does not answer /health within ``timeout`` seconds fails the test with it)."""
    exe = Path(sys.executable).with_name("transformers")
    cli = [str(exe)] if exe.exists() else [shutil.which("transformers") or "transformers"]
    port = free_port()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cli + ["serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                                       "--device", "cpu"], stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
