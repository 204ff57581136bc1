"""The split code harness: untrusted code and the tests that judge it run in two separate sandboxed
processes, so nothing the code does to its own interpreter can reach the verdict.

* The **candidate process** loads the generated code and then only answers calls: it reads
  ``(name, args, kwargs)`` from a pipe, calls the function of that name and writes back the result as
  plain data (``_plain.py``: exact builtin types only; a subclass of int with its own ``__eq__``, a
  custom object, a generator is refused with its type as the reason).
* The **tests process** never executes the candidate's code. It runs the trusted context (the
  HumanEval prompt, whose helpers such as ``poly`` the tests call; MBPP setup code) and the tests, with
  every candidate function replaced by a proxy that sends the arguments over the pipe and decodes the
  reply into fresh builtins. The verdict is this process running to its end (the launcher's nonce,
  see ``launcher.py``); frames, gc, threads, patched builtins or modules and exit tricks in the
  candidate's process touch none of it.

One launcher runs both (``Program.companion``): one namespace setup, two fresh uids (neither can
signal, trace or read the other), two working folders, two memory cgroups; the candidate's output is
discarded and its process is killed when the tests end. The candidate never sees its tests: no
program's source is a file, the launcher forks the candidate before it reads the tests' part of the
job (so no copy lies in the candidate's memory), a private /proc hides the other processes, and the
task's data files (``hidden``) are covered (docs/SANDBOX.md). Without root (``rlimit`` mode) both run as
the host's user, so the candidate could reach the tests' process through ctypes or ptrace: that
mode's documented weakness, now shared by the split.

A failure of the channel itself (the candidate's process died, sent something that is not plain data,
lacks the function) is raised as ``CandidateFailed``, a BaseException that ``except Exception`` in
a test cannot swallow, and is re-checked after the tests ended.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .launcher import Limits, Program, RunResult, default_workers, run_program

PLAIN_SOURCE = Path(__file__).with_name("_plain.py").read_text(encoding="utf-8")

_CHANNEL = '''
import signal
signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed channel is an answer (False), not a kill
_CH_R, _CH_W = __channel__
_ch_buffer = bytearray()


def _ch_send(text):
    """Write one line; False when the other process is gone."""
    data = (text + "\\n").encode("utf-8")
    try:
        while data:
            data = data[os.write(_CH_W, data):]
    except OSError:
        return False
    return True


def _ch_receive():
    """One line, or None when the other process is gone."""
    global _ch_buffer
    while b"\\n" not in _ch_buffer:
        chunk = os.read(_CH_R, 1 << 16)
        if not chunk:
            return None
        _ch_buffer += chunk
    line, _, rest = bytes(_ch_buffer).partition(b"\\n")
    _ch_buffer = bytearray(rest)
    return line.decode("utf-8", errors="replace")
'''

_CANDIDATE = '''import os
{plain}
{channel}
_source = {source!r}
_namespace = {{"__name__": "__candidate__"}}  # as the official harness: `if __name__ == "__main__"` blocks do not run
try:
    exec(compile(_source, "candidate.py", "exec"), _namespace)
    _load_error = None
except BaseException as _exc:
    _load_error = "loading the code raised " + type(_exc).__name__


def _answer(line):
    if _load_error:
        return encode(("error", _load_error))
    try:
        _, name, args, kwargs = decode(line)
    except (NotPlain, ValueError) as exc:
        return encode(("error", "malformed call: " + str(exc)))
    function = _namespace.get(name)
    if not callable(function):
        return encode(("error", "the code defines no function " + repr(name)))
    try:
        value = function(*args, **kwargs)
    except BaseException as exc:
        try:
            message = str(exc)[:500]
        except BaseException:
            message = ""
        return encode(("raise", type(exc).__name__, message, isinstance(exc, Exception)))
    try:
        return encode(("ok", value))
    except NotPlain as exc:
        return encode(("error", name + "() returned " + str(exc)))
    except BaseException as exc:  # a hostile value's hooks; still the candidate's failure, said as such
        return encode(("error", name + "() returned a value that could not be sent: " + type(exc).__name__))


while True:
    _line = _ch_receive()
    if _line is None:
        break
    if not _ch_send(_answer(_line)):
        break
'''

_TESTS_HEAD = '''import builtins as _builtins
import os
{plain}
{channel}


class CandidateFailed(BaseException):
    """The candidate's process could not answer a call with plain data: the program fails."""


_failures = []


def _fail(reason):
    _failures.append(reason)
    raise CandidateFailed(reason)


def __proxy__(name):
    def call(*args, **kwargs):
        try:
            request = encode(("call", name, args, kwargs))
        except NotPlain as exc:
            _fail("an argument of " + name + "() cannot be sent to the candidate: " + str(exc))
        line = _ch_receive() if _ch_send(request) else None
        if line is None:
            _fail("the candidate's process ended while " + name + "() was called")
        try:
            reply = decode(line)
        except NotPlain as exc:
            _fail("the candidate's process sent something that is not plain data: " + str(exc))
        if type(reply) is not tuple or not reply or reply[0] not in ("ok", "raise", "error"):
            _fail("the candidate's process sent a malformed reply")
        if reply[0] == "ok" and len(reply) == 2:
            return reply[1]
        if reply[0] == "raise" and len(reply) == 4 and reply[3] is True:
            kind = getattr(_builtins, str(reply[1]), None)
            if isinstance(kind, type) and issubclass(kind, Exception):
                raise kind(reply[2])
            raise RuntimeError(str(reply[1]) + ": " + str(reply[2]))
        if reply[0] == "raise":
            _fail(name + "() raised " + str(reply[1]) + " (not an Exception)")
        _fail(str(reply[1]) if len(reply) > 1 else "malformed reply")

    call.__name__ = name
    return call


def __verdict__():
    if _failures:
        raise CandidateFailed(_failures[0])

'''


@dataclass(frozen=True)
class SplitProgram:
    """The two halves: ``tests`` (trusted; calls the candidate through proxies) and ``candidate``
    (the untrusted code, served function by function)."""

    tests: str
    candidate: str


def candidate_program(code: str) -> str:
    return _CANDIDATE.format(plain=PLAIN_SOURCE, channel=_CHANNEL, source=code)


def tests_program(context: str, test_body: str, candidates: Sequence[str]) -> str:
    """The harness (codec, pipe, proxies) lives in a namespace of its own, so that names of the
    context or the tests (``encode``, ``decode`` are HumanEval entry points) cannot shadow it."""
    harness = _TESTS_HEAD.format(plain=PLAIN_SOURCE, channel=_CHANNEL)
    proxies = "".join(f"{name} = __proxy__({name!r})\n" for name in candidates)
    return ("__harness__ = {'__channel__': __channel__}\n"
            f"exec(compile({harness!r}, 'harness.py', 'exec'), __harness__)\n"
            "__proxy__, __verdict__ = __harness__['__proxy__'], __harness__['__verdict__']\n"
            "del __harness__\n"
            "# --- trusted context ---\n" + context
            + "\n# --- candidate functions, served by the other process ---\n" + proxies
            + "# --- tests ---\n" + test_body + "\n__verdict__()\n")


def humaneval_split(prompt: str, completion: str, test: str, entry_point: str) -> SplitProgram:
    """HumanEval: the candidate serves prompt + completion; the tests run prompt (its helpers, trusted),
    the test code and ``check(<proxy of entry_point>)``."""
    return SplitProgram(tests=tests_program(prompt, f"{test}\ncheck({entry_point})\n", [entry_point]),
                        candidate=candidate_program(prompt + completion))


def assert_split(code: str, tests: Sequence[str], setup: str = "") -> SplitProgram:
    """MBPP: every name the asserts call that neither the setup, the tests nor Python defines is
    served by the candidate."""
    body = "\n".join(tests) + "\n"
    return SplitProgram(tests=tests_program(setup, body, called_names(body, setup)),
                        candidate=candidate_program(code if not setup else f"{setup}\n{code}"))


def called_names(test_code: str, context: str = "") -> list[str]:
    """Names the tests load but neither they, the context nor builtins bind (sorted)."""
    bound: set[str] = set(dir(builtins))
    loaded: set[str] = set()
    for source in (context, test_code):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
    return sorted(loaded - bound)


def run_split(program: SplitProgram, limits: Limits | None = None, mode: str = "auto",
              hidden: Sequence[str] = ()) -> RunResult:
    """Run both halves under one launcher (one namespace setup, two fresh uids, joined by two pipes);
    the tests' run is the verdict, and the candidate's process ends with it. ``hidden``: host paths
    neither half may see (the task's data files; ``Program.hidden``)."""
    return run_program(Program(program.tests, companion=Program(program.candidate), hidden=tuple(hidden)),
                       limits, mode)


def run_splits(programs: Sequence[SplitProgram], limits: Limits | None = None, mode: str = "auto",
               workers: int | None = None, hidden: Sequence[str] = ()) -> list[RunResult]:
    """Many split programs on ``workers`` cores (default: the usable cores). The two processes of a
    pair mostly take turns (call, answer), so two pairs run per core to keep it busy."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = 2 * (workers or default_workers())
    if len(programs) <= 1:
        return [run_split(p, limits, mode, hidden) for p in programs]
    with ThreadPoolExecutor(max_workers=min(pairs, len(programs))) as pool:
        return list(pool.map(lambda p: run_split(p, limits, mode, hidden), programs))


__all__ = ["SplitProgram", "humaneval_split", "assert_split", "called_names", "run_split", "run_splits",
           "candidate_program", "tests_program"]
