"""Run untrusted Python programs (generated code, candidate kernels) in a sandbox.

Every execution-based scorer goes through :func:`run_program` or :func:`run_programs`. Each program:

* runs in its own process group and session, started by a small trusted launcher
  (``_child.py``) that forks the program's process and kills everything the program left
  behind when it ends;
* gets CPU-time, address-space, file-size, open-file and process-count limits (``Limits``) and a
  wall-clock limit that kills every process it started;
* starts in a fresh working directory that holds only ``Program.files`` (its own source is compiled
  from memory, never written to disk) with a scrubbed environment (no API keys: only ``PATH``,
  ``HOME``, ``LANG``, ``TMPDIR`` and thread-count variables, plus what the caller passes);
* has no network: a private network namespace with no interface up when the machine allows it
  (root), otherwise an audit hook that refuses socket use (a documented weaker fallback);
* writes at most ``Limits.output_bytes`` of stdout+stderr before it is stopped.

Isolation modes and their guarantees are described in ``_child.py``; ``RunResult.isolation``
says which one a run got. Running as root on Linux with namespaces (as here) gives the strongest,
``namespace``: the program runs as a fresh random uid (so RLIMIT_NPROC is enforced even though the
host is root), sees fresh tmpfs over every shared writable folder and empty folders over homes, the
workplace and this checkout, cannot reach any network, and shares one memory cap with its children.
Without a writable cgroup hierarchy the memory bound is per process: at most ``processes`` x
``memory_bytes`` in all.

What each mode leaves visible of the host (the checkout, data files, other processes) is in
``VISIBLE``; ``RunResult.visible`` carries it (and anything the launcher could not hide) per run.
The threat model, row by row with the tests that show it: docs/SANDBOX.md.

A program passes only when it runs to its last statement: the launcher then writes a per-run
secret to a private pipe. Exit codes and printed text are never trusted.
"""

from __future__ import annotations

import atexit
import functools
import json
import marshal
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ConfigError

LAUNCHER = Path(__file__).with_name("_child.py")
MODES = ("auto", "namespace", "uid", "rlimit")
_UID_RANGE = (1_000_000_000, 2_000_000_000)  # fresh per run; far from any real account
_GRACE_SECONDS = 5.0  # launcher's own setup/cleanup time before the host kills it
_SAFE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
             "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
             "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
#: What of the host a program can still read in each isolation mode (besides the read-only system and
#: library folders every mode shows); ``RunResult.visible`` adds what the launcher failed to hide.
VISIBLE: dict[str, tuple[str, ...]] = {
    "namespace": (),
    "uid": ("world-readable files of the host (the project checkout, library folders, the task's data files "
            "where they are world-readable)",
            "the shared /tmp, /var/tmp and /dev/shm (other users' world-readable files)",
            "every process's command line (/proc/*/cmdline); cwd, fd and environ of other uids are refused"),
    "rlimit": ("every file the host's user can read (the project checkout, the task's data files)",
               "the host user's other processes (/proc/<pid>/cwd, fd, environ, cmdline, memory); the launcher "
               "and the tests' process are non-dumpable",
               "the shared /tmp, /var/tmp and /dev/shm",
               "every process's command line (/proc/*/cmdline)"),
}


@dataclass(frozen=True)
class Limits:
    """Per-program limits. ``memory_bytes=None`` lifts the address-space limit (needed for CUDA)."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int | None = 1 << 30
    file_bytes: int = 16 << 20
    disk_bytes: int = 64 << 20  # size of each private tmpfs (namespace mode)
    processes: int = 16  # tasks of the sandbox user, threads included
    open_files: int = 256
    output_bytes: int = 1 << 20  # stdout + stderr kept; more stops the program

    def __post_init__(self) -> None:
        for name in ("wall_seconds", "cpu_seconds", "file_bytes", "disk_bytes", "processes", "open_files",
                     "output_bytes"):
            if not getattr(self, name) or getattr(self, name) <= 0:
                raise ConfigError(f"sandbox limit {name}={getattr(self, name)!r} must be > 0")
        if self.memory_bytes is not None and self.memory_bytes < (64 << 20):
            raise ConfigError(f"sandbox limit memory_bytes={self.memory_bytes} must be >= 64 MiB "
                              "(the interpreter alone needs that much address space) or None")


@dataclass(frozen=True)
class Program:
    """A Python program: its main source (compiled from memory, never a file) and any extra files
    for its working directory."""

    source: str
    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    #: A second program run beside this one by the same launcher (same namespaces, its own fresh uid,
    #: working folder and memory cgroup, output discarded); the two are joined by two pipes, which each
    #: sees as ``__channel__ = (read fd, write fd)``. The run's verdict is this program's alone.
    companion: "Program | None" = None
    #: Host paths (files or folders) the programs must not see, such as the task's data files: namespace
    #: mode covers them (and the package's own folder) wherever they appear, library folders included.
    hidden: Sequence[str] = ()


@dataclass(frozen=True)
class RunResult:
    """How a program ended. ``passed`` only when it ran to its last statement."""

    passed: bool
    status: str  # passed | error | exit | timeout | cpu | memory | output | signal | sandbox
    reason: str
    stdout: str = ""
    stderr: str = ""
    report: Any = None  # the last object the program gave to ``__report__``, if it passed
    exit_code: int | None = None
    signal: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    isolation: str = ""
    truncated: bool = False
    uid: int | None = None  # the fresh uid the program ran as (namespace and uid modes), to check on it
    companion_uid: int | None = None  # the companion program's uid, likewise
    memory_cap: str = ""  # "cgroup v1|v2" (program and children together) or "per process (why)"
    visible: tuple[str, ...] = ()  # what of the host the program could still read (VISIBLE, plus failures)

    def exposure(self) -> dict[str, Any]:
        """The isolation the run got and what of the host stayed visible: for a score's details."""
        return {"isolation": self.isolation, "visible": list(self.visible)}


def run_program(program: Program | str, limits: Limits | None = None, mode: str = "auto") -> RunResult:
    """Run one program in the sandbox and say how it ended. Never raises for what the program does."""
    if isinstance(program, str):
        program = Program(program)
    if mode not in MODES:
        raise ConfigError(f"unknown sandbox mode {mode!r}; use one of {', '.join(MODES)}")
    limits = limits or Limits()
    return _Run(program, limits, mode).execute()


def run_programs(programs: Sequence[Program | str], limits: Limits | None = None, mode: str = "auto",
                 workers: int | None = None) -> list[RunResult]:
    """Run many programs, at most ``workers`` at once (default: the number of usable cores)."""
    workers = workers or default_workers()
    if workers < 1:
        raise ConfigError(f"workers={workers} must be >= 1")
    if len(programs) <= 1 or workers == 1:
        return [run_program(p, limits, mode) for p in programs]
    with ThreadPoolExecutor(max_workers=min(workers, len(programs))) as pool:
        return list(pool.map(lambda p: run_program(p, limits, mode), programs))


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def library_paths() -> tuple[str, ...]:
    """The host interpreter's import folders: the ``sys.path`` entries inside its installation
    (``interpreter_paths``: stdlib, site-packages) or a site-packages folder. Never the current folder,
    a script's folder, ``PYTHONPATH`` or what a test runner put first (the project's tests and their
    fixtures would be bind-mounted into the sandbox), and never the project's checkout."""
    import site

    roots = [*interpreter_paths(), *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        roots.append(site.getusersitepackages())
    cwd = os.getcwd()
    return tuple(p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)
                 and any(_inside(os.path.realpath(p), os.path.realpath(r)) for r in roots)
                 and not os.path.samefile(p, cwd) and not (PROJECT_ROOT and os.path.samefile(p, PROJECT_ROOT)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


#: Folders a sandboxed program must not see (namespace mode covers them with an empty tmpfs): homes,
#: the workplace, data and add-on folders, and the project checkout (``hidden_paths``). The
#: interpreter's own installation (``interpreter_paths``) is put back read-only where it lay inside one.
HIDDEN_FOLDERS = ("/root", "/home", "/work", "/srv", "/mnt", "/media", "/opt", "/var/lib", "/var/log")
_ROOT = Path(__file__).resolve().parents[2]
#: This checkout, when the package runs from one (an installed wheel lies in site-packages: None).
PROJECT_ROOT = str(_ROOT) if (_ROOT / "pyproject.toml").is_file() else None
#: The package's own folder (the harness's sources), covered in namespace mode even where it lies in
#: site-packages.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])


@functools.lru_cache(maxsize=1)  # fixed for the process; asked per program launch
def hidden_paths() -> tuple[str, ...]:
    """HIDDEN_FOLDERS and this checkout. The host's working folder is hidden when it lies in one of
    them; elsewhere (say /usr/local/src/...) it stays visible, because system folders cannot be."""
    return tuple(dict.fromkeys(p for p in (*HIDDEN_FOLDERS, PROJECT_ROOT) if p and os.path.isdir(p)))


@functools.lru_cache(maxsize=1)  # fixed for the process; asked per program launch
def interpreter_paths() -> tuple[str, ...]:
    """The installation the launcher runs from (venv and base prefix): shared libraries and
    extension modules find each other by path inside it."""
    return tuple(dict.fromkeys(p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if os.path.isdir(p)))


class _Run:
    def __init__(self, program: Program, limits: Limits, mode: str):
        self.program, self.limits, self.mode = program, limits, mode
        self.uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
        self.companion_uid = self.uid + 1 if self.uid + 1 < _UID_RANGE[1] else self.uid - 1
        self.nonce = secrets.token_hex(16)

    @staticmethod
    def _files_and_env(program: Program, work: str) -> tuple[dict[str, str], dict[str, str]]:
        files = dict(program.files)
        for name in files:
            if os.path.isabs(name) or ".." in Path(name).parts or name == "main.py":
                raise ConfigError(f"sandbox file name {name!r} must be a relative path inside the working "
                                  "directory, without '..', and not main.py")
        env = {**_SAFE_ENV, "HOME": work, "TMPDIR": work, **program.env}
        return files, env

    def _job(self, workdir: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The launcher's job in two parts: what it needs to set up and start the companion, and the
        main program's own source, files and nonce, which it reads only after the companion (the
        split harness's candidate) was forked, so that they never lie in the candidate's memory."""
        files, env = self._files_and_env(self.program, f"{workdir}/work")
        companion = None
        hidden = [*self.program.hidden]
        if self.program.companion is not None:
            if self.program.companion.companion is not None:
                raise ConfigError("a companion program cannot have a companion of its own")
            c_files, c_env = self._files_and_env(self.program.companion, f"{workdir}/work-companion")
            companion = {"source": self.program.companion.source, "files": c_files, "env": c_env,
                         "uid": self.companion_uid}
            hidden += self.program.companion.hidden
        for path in hidden:
            if not isinstance(path, str) or not os.path.isabs(path) or os.path.realpath(path) == "/":
                raise ConfigError(f"sandbox hidden path {path!r} must be an absolute path other than /")
        setup = {"workdir": workdir, "main": "main.py", "mode": self.mode, "uid": self.uid,
                 "companion": companion, "env": env, "sys_path": list(library_paths()),
                 "hidden": list(hidden_paths()), "keep": list(interpreter_paths()),
                 "secret": list(dict.fromkeys((PACKAGE_ROOT, *hidden))),
                 "disk_bytes": self.limits.disk_bytes,
                 "limits": {"wall_seconds": self.limits.wall_seconds, "cpu_seconds": int(self.limits.cpu_seconds),
                            "memory_bytes": self.limits.memory_bytes, "file_bytes": self.limits.file_bytes,
                            "processes": self.limits.processes, "open_files": self.limits.open_files}}
        return setup, {"source": self.program.source, "files": files, "nonce": self.nonce}

    def execute(self) -> RunResult:
        workdir = tempfile.mkdtemp(prefix="cgym-sandbox-")
        pipes = {name: os.pipe() for name in ("job", "out", "err", "status", "result")}
        started = time.monotonic()
        open_fds = {fd for pair in pipes.values() for fd in pair}
        child_fds = [pipes["job"][0], pipes["out"][1], pipes["err"][1], pipes["status"][1], pipes["result"][1]]
        try:
            setup, own = self._job(workdir)
            try:
                launcher = _start_launcher(setup, child_fds, workdir)
            except OSError as exc:
                return RunResult(False, "sandbox", f"could not start the sandbox launcher: {exc}")
            finally:  # the launcher holds its own copies now; ours would hide its end of file
                for fd in child_fds:
                    os.close(fd)
                    open_fds.discard(fd)
            frames = b"".join(len(data).to_bytes(8, "little") + data for data in map(marshal.dumps, (setup, own)))
            streams = self._communicate(launcher, frames, pipes, started)
        finally:
            for fd in open_fds:  # each closed exactly once: another thread may reuse the number
                os.close(fd)
            shutil.rmtree(workdir, ignore_errors=True)
        return self._verdict(*streams, wall=time.monotonic() - started)

    def _communicate(self, launcher: "_Launcher", job: bytes, pipes: dict[str, tuple[int, int]],
                     started: float) -> tuple[bytes, bytes, bytes, bytes, bool, bool]:
        """Feed the job, collect output within the limits; returns stdout, stderr, result, status,
        whether output was cut, and whether the host had to kill the launcher."""
        job_w = pipes["job"][1]
        os.set_blocking(job_w, False)
        pending = memoryview(job)
        out_fd, err_fd, status_r, result_r = (pipes["out"][0], pipes["err"][0], pipes["status"][0],
                                              pipes["result"][0])
        buffers = {out_fd: bytearray(), err_fd: bytearray(), result_r: bytearray(), status_r: bytearray()}
        sel = selectors.DefaultSelector()
        for fd in buffers:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(job_w, selectors.EVENT_WRITE)
        deadline = started + self.limits.wall_seconds + _GRACE_SECONDS
        truncated = killed = stop_sent = False
        try:
            while len(sel.get_map()) > (1 if job_w in sel.get_map() else 0) or pending:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    self._kill_launcher(launcher.pid)
                    killed = True
                    break
                for key, _ in sel.select(timeout):
                    if key.fd == job_w:
                        try:
                            pending = pending[os.write(job_w, pending):]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(job_w)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                        if key.fd == status_r and pending:  # launcher gone before reading its job
                            pending = pending[:0]
                            sel.unregister(job_w)
                        continue
                    buf = buffers[key.fd]
                    if key.fd in (out_fd, err_fd):
                        room = self.limits.output_bytes - len(buffers[out_fd]) - len(buffers[err_fd])
                        if len(chunk) > room:
                            truncated = True
                            chunk = chunk[:max(room, 0)]
                            if not stop_sent and status_r in sel.get_map():
                                _signal(launcher.pid, signal.SIGTERM)
                                stop_sent = True
                    elif len(buf) > 1 << 20:  # result/status records are small; ignore floods
                        continue
                    buf.extend(chunk)
        finally:
            sel.close()
            if not launcher.wait(_GRACE_SECONDS):
                self._kill_launcher(launcher.pid)
                killed = True
                launcher.wait(None)
        return (bytes(buffers[out_fd]), bytes(buffers[err_fd]), bytes(buffers[result_r]),
                bytes(buffers[status_r]), truncated, killed)

    def _kill_launcher(self, pid: int) -> None:
        """Backstop when the launcher itself did not finish: kill its group and the sandbox uid."""
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if os.geteuid() == 0:
            uids = (self.uid, self.companion_uid) if self.program.companion is not None else (self.uid,)
            for _ in range(3):
                for uid in uids:
                    subprocess.run(["kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    def _verdict(self, stdout: bytes, stderr: bytes, result: bytes, status_raw: bytes, truncated: bool,
                 killed: bool, wall: float) -> RunResult:
        out, err = _text(stdout), _text(stderr)
        try:  # written by the trusted launcher only (the program's process never holds this pipe)
            status = marshal.loads(status_raw) if status_raw else {}
        except (EOFError, ValueError, TypeError):
            status = {}
        isolated = status.get("mode") in ("namespace", "uid")
        base = RunResult(False, "", "", stdout=out, stderr=err, wall_seconds=wall, truncated=truncated,
                         exit_code=status.get("exit_code"), signal=status.get("signal"),
                         cpu_seconds=float(status.get("cpu_seconds") or 0.0), isolation=status.get("mode") or "",
                         uid=self.uid if isolated else None,
                         companion_uid=self.companion_uid if isolated and self.program.companion is not None else None,
                         memory_cap=status.get("memory_cap") or "",
                         visible=(*VISIBLE.get(status.get("mode") or "", ()), *(status.get("exposed") or ())))

        def ended(passed: bool, why: str, reason: str) -> RunResult:
            return replace(base, passed=passed, status=why, reason=reason)

        report, proved = self._proof(result)
        if killed or not status:
            return ended(False, "timeout", f"the sandbox launcher had to be killed after {wall:.1f}s")
        if status.get("error"):
            return ended(False, "sandbox", f"sandbox setup failed: {status['error']}")
        if truncated or status.get("stopped"):
            return ended(False, "output", f"output exceeded {self.limits.output_bytes} bytes")
        if status.get("timed_out"):
            return ended(False, "timeout", f"wall-clock limit of {self.limits.wall_seconds}s reached")
        sig = status.get("signal")
        if sig == signal.SIGKILL and status.get("oom_kills"):
            return ended(False, "memory", f"memory limit of {self.limits.memory_bytes} bytes for the program "
                                              "and its children together reached")
        if sig is not None:
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and base.cpu_seconds >= 0.9 * self.limits.cpu_seconds):
                return ended(False, "cpu", f"CPU-time limit of {self.limits.cpu_seconds}s reached")
            if sig == signal.SIGXFSZ:
                return ended(False, "error", f"file-size limit of {self.limits.file_bytes} bytes reached")
            return ended(False, "signal", f"killed by signal {signal.Signals(sig).name}")
        code = status.get("exit_code")
        if code == 0 and proved:
            return replace(ended(True, "passed", "ran to the end"), report=report)
        last = _last_line(err)
        if "MemoryError" in last:
            return ended(False, "memory", f"memory limit reached: {last}")
        if code == 4:
            return ended(False, "sandbox", last or "the sandbox could not start the program")
        if code == 3:
            return ended(False, "exit", last or "the program exited before its end")
        if code == 1:
            return ended(False, "error", last or "the program raised an exception")
        return ended(False, "exit", f"the program ended (exit code {code}) without finishing its last "
                                        "statement")

    def _proof(self, result: bytes) -> tuple[Any, bool]:
        """The launcher's end-of-program record: ``<nonce> <json report>``; anything else is ignored."""
        marker = self.nonce.encode() + b" "
        for line in reversed(result.splitlines()):
            if line.startswith(marker):
                try:
                    return json.loads(line[len(marker):].decode("utf-8")), True
                except (UnicodeDecodeError, ValueError):
                    return None, True
        return None, False


class _Launcher:
    """A started launcher: its pid, and how to wait for it (a fork-server child is reaped by the
    server; a one-shot launcher by us)."""

    def __init__(self, pid: int, proc: subprocess.Popen | None = None):
        self.pid, self.proc = pid, proc

    def wait(self, timeout: float | None) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False


class _ForkServer:
    """A warm launcher process that forks one launcher per program (saves the interpreter start).
    It holds no secrets (scrubbed environment) and exits when our end of its socket closes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.owner = -1

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(LAUNCHER), "--serve"], stdin=theirs.fileno(),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(_SAFE_ENV),
                                         cwd="/", start_new_session=True, close_fds=True)
        finally:
            theirs.close()
        self.sock, self.owner = ours, os.getpid()

    def spawn(self, fds: Sequence[int]) -> int:
        with self.lock:
            for attempt in range(2):
                if self.sock is None or self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
                    self._start()
                assert self.sock is not None
                try:
                    socket.send_fds(self.sock, [b"j"], list(fds))
                    return int(self.sock.recv(32))
                except (OSError, ValueError):
                    self.close()
                    if attempt:
                        raise
        raise OSError("the sandbox fork server did not answer")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.owner == os.getpid():
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


_SERVER = _ForkServer()
atexit.register(_SERVER.close)
USE_FORK_SERVER = True  # False: start a fresh interpreter per program (slower, same isolation)


def _start_launcher(job: dict[str, Any], fds: Sequence[int], workdir: str) -> _Launcher:
    if USE_FORK_SERVER:
        return _Launcher(_SERVER.spawn(fds))
    job_r, out_w, err_w, status_w, result_w = fds
    job["status_fd"], job["result_fd"] = status_w, result_w
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(LAUNCHER)], stdin=job_r, stdout=out_w, stderr=err_w,
                            env=dict(_SAFE_ENV), cwd=workdir, start_new_session=True,
                            pass_fds=(status_w, result_w), close_fds=True)
    return _Launcher(proc.pid, proc)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


__all__ = ["Limits", "Program", "RunResult", "run_program", "run_programs", "default_workers", "MODES",
           "VISIBLE", "library_paths"]
