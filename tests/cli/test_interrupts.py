"""Ctrl-C (SIGINT) and SIGTERM in the long subcommands: one line saying what was kept and how to resume,
exit 130 / 143, no traceback; running the same command again gives what an uninterrupted run gives.

The runs use a simulated pool slowed by a plugin backend (``--import slow.py``), so a signal lands
mid-run on any machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CGYM = Path(sys.executable).with_name("cgym")

SLOW_PLUGIN = '''
import os
import time
from dataclasses import dataclass

from coalition_gym import load_pool, register_backend, setting


class Slow:
    """A simulated member that takes its time: the same samples, later."""

    def __init__(self, inner, delay):
        self.inner, self.delay, self.identity = inner, delay, inner.identity

    def generate(self, asks):
        time.sleep(self.delay)
        return self.inner.generate(asks)

    def describe(self):
        return self.inner.describe()


def slow_member(model, delay=0.01):
    preset, _, name = model.partition("/")
    return Slow(load_pool(preset).members[name], float(os.environ.get("SLOW_DELAY", delay)))


@dataclass
class SlowOptions:
    delay: float = setting(0.01, ge=0)


register_backend("slow", slow_member, options=SlowOptions, needs_model=True)
'''

SLOW_POOL = """name: slow-demo
members:
""" + "".join(f"  - {{name: {m}, backend: slow, model: sim:demo/{m}, delay: 0.01}}\n"
              for m in ("atlas", "borealis", "cirrus", "delta"))


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    (tmp_path / "slow.yaml").write_text(SLOW_POOL)
    return tmp_path


def run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(CGYM), "--import", "slow.py", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _interruptible() -> None:
    """In the child: SIGINT back to its default, so Python turns it into KeyboardInterrupt even when this
    suite runs as a background job (whose children inherit SIGINT ignored, which Python respects)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(args: list[str], cwd: Path, started, sig: int = signal.SIGINT, timeout: float = 300,
              delay: float = 1.0):
    """Start ``cgym args`` with every backend call taking ``delay`` seconds (so the run cannot end
    before the signal lands, on any machine), send ``sig`` once ``started()`` is true, and return
    (exit code, stderr). Reruns use the pool's own short delay: the same samples, sooner."""
    err_file = cwd / f"stderr-{time.monotonic_ns()}.txt"
    with open(err_file, "w") as err:
        proc = subprocess.Popen([str(CGYM), "--import", "slow.py", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                                stderr=err, env={**os.environ, "SLOW_DELAY": str(delay)},
                                preexec_fn=_interruptible)
        deadline = time.monotonic() + timeout
        while not started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the command ended before it could be interrupted:\n" + err_file.read_text()
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
    return code, err_file.read_text()


def check_one_line(code: int, stderr: str, expected_code: int, kept: str) -> str:
    assert code == expected_code, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    ours = [line for line in stderr.splitlines() if line.startswith("cgym:")]
    assert len(ours) == 1, stderr[-3000:]
    assert ours[0].startswith(f"cgym: interrupted ({'SIGINT' if expected_code == 130 else 'SIGTERM'})")
    assert kept in ours[0] and "resume with: cgym --import slow.py " in ours[0], ours[0]
    return ours[0]


def progress_shown(stderr_glob: Path):
    return lambda: any("%|" in p.read_text() for p in stderr_glob.parent.glob(stderr_glob.name))


def without_run(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "run"}


EVAL = ["eval", "--pool", "slow.yaml", "--protocol", "debate", "--set", "rounds=2", "--items", "24",
        "--estimator", "shapley", "--bootstrap", "100"]


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_eval_interrupted_then_resumed_equals_an_uninterrupted_run(folder, sig, code):
    cmd = EVAL + ["--cache", "cache", "--out", "out"]
    got, stderr = interrupt(cmd, folder, progress_shown(folder / "stderr-*.txt"), sig)
    check_one_line(got, stderr, code, "finished generations are kept in --cache cache")
    resumed = run(cmd, folder)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    reference = run(EVAL + ["--out", "reference"], folder)
    assert reference.returncode == 0, reference.stderr[-2000:]
    assert (folder / "out" / "leaderboard.csv").read_text() == (folder / "reference" / "leaderboard.csv").read_text()
    assert json.loads((folder / "out" / "run.json").read_text())["arguments"]["items"] == 24


@pytest.mark.slow
def test_sweep_interrupted_then_resumed_equals_an_uninterrupted_run(folder):
    sweep = ["sweep", "--pools", "slow.yaml", "--protocols", "majority_vote,debate", "--tasks", "rg/basic_arithmetic",
             "--items", "30"]
    cmd = sweep + ["--cache", "cache", "--out", "out"]
    started = lambda: (folder / "out" / "slow.yaml").is_dir()  # noqa: E731 - the first setting is written
    got, stderr = interrupt(cmd, folder, started)
    check_one_line(got, stderr, 130, "finished generations are kept in --cache cache")
    assert json.loads((folder / "out" / "run.json").read_text())["status"] == "interrupted"
    resumed = run(cmd, folder)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    reference = run(sweep + ["--out", "reference"], folder)
    assert reference.returncode == 0, reference.stderr[-2000:]
    mine, theirs = (json.loads((folder / f / "sweep_summary.json").read_text()) for f in ("out", "reference"))
    assert without_run(mine) == without_run(theirs)


@pytest.mark.slow
def test_robustness_interrupted_then_resumed_equals_an_uninterrupted_run(folder):
    cmd = ["robustness", "--pool", "slow.yaml", "--adversary", "persuader", "--protocols", "majority_vote,debate",
           "--items", "30", "--bootstrap", "100"]
    resumable = cmd + ["--cache", "cache", "--out", "out"]
    got, stderr = interrupt(resumable, folder, progress_shown(folder / "stderr-*.txt"))
    check_one_line(got, stderr, 130, "finished generations are kept in --cache cache")
    for args in (resumable, cmd + ["--out", "reference"]):
        proc = run(args, folder)
        assert proc.returncode == 0, proc.stderr[-2000:]
    mine, theirs = (json.loads((folder / f / "robustness.json").read_text()) for f in ("out", "reference"))
    assert without_run(mine) == without_run(theirs)


@pytest.mark.slow
def test_train_interrupted_then_resumed_equals_an_uninterrupted_run(folder):
    (folder / "split.yaml").write_text("name: slow-split\nmembers:\n" + "".join(
        f"  - {{name: {m}, backend: slow, model: sim:split/{m}, delay: 0.01}}\n" for m in ("ana", "ben")))
    train = ["train", "--method", "crl", "--policy", "zoo:tiny/pico", "--task", "zoo:arith", "--collaborators",
             "split.yaml", "--protocol", "majority_vote", "--steps", "8", "--force", "--set", "probe_groups=0"]
    started = lambda: (folder / "out" / "crl-seed0" / "policy" / "last").is_dir()  # noqa: E731 - a step was saved
    got, stderr = interrupt(train + ["--out", "out"], folder, started, delay=0.3)
    check_one_line(got, stderr, 130, "finished steps are checkpointed in out")
    resumed = run(train + ["--out", "out"], folder)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed crl from step" in resumed.stdout + resumed.stderr
    reference = run(train + ["--out", "reference"], folder)
    assert reference.returncode == 0, reference.stderr[-2000:]
    mine, theirs = (json.loads((folder / f / "crl-seed0" / "report.json").read_text()) for f in ("out", "reference"))
    for key in ("collab", "solo", "best_step", "steps_run"):
        assert mine[key] == theirs[key], key


def test_an_interrupt_before_work_says_so(tmp_path, monkeypatch):
    from coalition_gym import cli

    def stop(args):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "import_plugins", lambda specs: stop(None))
    assert cli.main(["envs"]) == 130


def test_sigterm_handler_is_restored_after_main(tmp_path, monkeypatch):
    from coalition_gym import cli

    monkeypatch.chdir(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["envs"]) == 0
    assert signal.getsignal(signal.SIGTERM) == before


if os.name != "posix":  # pragma: no cover
    pytest.skip("signals are POSIX", allow_module_level=True)


def test_a_stopped_server_says_it_stopped_not_how_to_resume(tmp_path):
    """SIGTERM is how a server is stopped: one line, exit 0, no 'resume with' (there is no work to resume)."""
    pytest.importorskip("openenv", reason="cgym serve needs the 'serve' extra")
    proc = subprocess.Popen([str(CGYM), "serve", "coalition_gym/MajorityVote-v0", "--pool", "sim:demo", "--task",
                             "zoo:arith", "--port", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
    try:
        line = proc.stdout.readline()  # blocks until the server is up (or the command ended)
        assert line.startswith("serving "), line + proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    ours = [x for x in stderr.splitlines() if x.startswith("cgym:")]
    assert code == 0 and ours == ["cgym: stopped (SIGTERM); the server held no work to keep"], stderr[-2000:]
