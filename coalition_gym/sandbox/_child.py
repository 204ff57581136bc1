"""Sandbox launcher: runs one untrusted Python program and reports how it ended.

Started by ``launcher.py`` as ``python -I -S _child.py`` with the job (``marshal``) on stdin.
It uses the standard library only (and imports little: start-up time is per program) and never
imports coalition_gym, so nothing of the host leaks in.

The launcher itself is trusted; it sets up the isolation, forks the program's process, enforces
the wall-clock limit, kills every process the program left behind and writes a status record to
the host. Isolation modes (best first, "auto" takes the best that works):

* ``namespace`` (root with CAP_SYS_ADMIN): private network namespace with no interface up (no
  network, not even loopback), private mount namespace with fresh size-limited tmpfs over /tmp,
  /var/tmp, /dev/shm, /run/lock and the working directory, an empty folder over homes, the
  workplace and the project checkout (``sandbox.hidden_paths``; the interpreter's installation is
  put back read-only), the job's secret paths (the package's own folder, the task's data files)
  covered wherever they appear, library folders included, a fresh /proc with ``hidepid=2`` (a
  program sees only its own uid's processes: not the other program's, the launcher's or the
  host's), private IPC namespace, the interpreter's library folders bind-mounted read-only, the
  program runs as a fresh random uid/gid, and one memory cgroup caps the program and all its
  children together (when the hierarchy is writable; ``RunResult.memory_cap`` says).
* ``uid`` (root without namespaces): fresh random uid/gid (so RLIMIT_NPROC is enforced, files of
  other users are protected and other users' processes cannot be signalled), and an audit hook
  that refuses socket use. World-writable folders (/tmp ...) stay writable, and the program can
  import only what the sandbox uid may read (an interpreter installed under /root is not), and
  world-readable files of the host stay readable: weaker. The memory cgroup applies here too.
* ``rlimit`` (not root): same user as the host, resource limits, and an audit hook that refuses
  sockets, signals to other processes and spawning programs. Weakest: a program that uses ctypes
  can get around the hook.

A program's own source is compiled from memory (it is never a file), and the launcher reads the
job in two parts: the split harness's candidate (the companion) is forked before the part that
holds the tests' source and the nonce is read, so neither lies anywhere in the candidate's memory.
The launcher and the programs are non-dumpable: a process of the same uid cannot open their
/proc/<pid>/fd, cwd, environ or mem (rlimit mode).

The program proves that it ran to the end only by the launcher writing a per-run secret (the
nonce) after its last statement; exit codes, printed text, ``SystemExit`` and ``os._exit`` prove
nothing. The nonce lives in the program's own process, so a program that deliberately digs it out
of the interpreter's memory could still forge a pass; no other route can.
"""

import ctypes
import importlib
import linecache
import marshal
import os
import resource
import select
import signal
import sys
import time
import types
from os import _exit as _hard_exit  # the program cannot rebind these
from os import write as _write

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (1, 2, 4, 8, 32, 4096,
                                                                                16384, 1 << 18)
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
NETWORK_EVENTS = ("socket.", "urllib.Request", "http.client.")
SPAWN_EVENTS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen", "pty.spawn",
                "os.fork", "os.forkpty", "ctypes.dlopen")


class Stop(Exception):
    """The host asked the launcher to stop (SIGTERM): output limit reached, or shutting down."""


def _on_term(signum, frame):
    raise Stop()


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _mount(libc, source, target, fstype, flags, data):
    def enc(s):
        return None if s is None else s.encode()

    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _enter_namespaces(job, libc, exposed):
    """Private net, mount and IPC namespaces; fresh tmpfs everywhere the program may write; a /proc
    that shows each uid only its own processes; the job's secret paths covered. What could not be
    hidden is appended to ``exposed``."""
    if libc.unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE, None)
    _private_proc(libc, exposed)
    # Hold every library folder open *before* covering /tmp and friends: the interpreter or the
    # project may live under one of them (a checkout or venv in /tmp), and a covered path is gone.
    held = [(index, path, os.open(path, os.O_PATH), os.path.isdir(path))
            for index, path in enumerate(job["sys_path"]) if os.path.exists(path)]
    kept = [(path, os.open(path, os.O_PATH)) for path in job.get("keep", ()) if os.path.isdir(path)]
    for path in job.get("hidden", ()):  # homes, the workplace, the checkout: an empty folder instead
        if os.path.isdir(path) and not os.path.islink(path) and os.path.realpath(path) != "/":
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    tmp_size = job["disk_bytes"]
    for path in SHARED_WRITABLE:
        if os.path.isdir(path) and not os.path.islink(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    for path, fd in kept:  # the interpreter's installation, back where it was, read-only
        if not os.path.isdir(path) or not os.listdir(path):
            os.makedirs(path, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            _mount(libc, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, None)
        os.close(fd)
    root = job["workdir"]
    os.makedirs(root, exist_ok=True)  # it vanished if it lay under a folder just covered
    _mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=0755")
    # The interpreter may live where the sandbox user cannot read (e.g. under /root): bind every
    # library folder read-only into the sandbox's own tmpfs and import from there.
    mapped = []
    os.mkdir(os.path.join(root, "lib"), 0o755)
    for index, path, fd, is_dir in held:
        target = os.path.join(root, "lib", str(index))
        if is_dir:
            os.mkdir(target, 0o755)
        else:
            open(target, "w").close()
        _mount(libc, f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
        _mount(libc, None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, None)
        os.close(fd)
        mapped.append((path, target))
    _cover_secrets(libc, job.get("secret", ()), mapped, exposed)
    return os.path.join(root, "work"), mapped


def _private_proc(libc, exposed):
    """A fresh /proc that shows each uid only its own processes (``hidepid=2``; root, the launcher,
    still sees all), with what was mounted inside the old one put back on top: a container's masks
    (/proc/kcore, a read-only /proc/sys) and a GPU runtime's /proc/driver/nvidia stay as they were."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            point = line.split()[4].encode("utf-8", "surrogateescape").decode("unicode_escape")
            point = point.encode("latin-1").decode("utf-8", "surrogateescape")  # mountinfo's \040 escapes
            if point.startswith("/proc/"):
                points.append(point)
    points = [p for p in sorted(set(points), key=len) if not any(p.startswith(q + "/") for q in points if q != p)]
    held = []
    for point in points:
        try:
            held.append((point, os.open(point, os.O_PATH)))
        except OSError as exc:
            exposed.append(f"{point} (a mount inside /proc that could not be kept: {exc})")
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    except OSError as exc:
        exposed.append(f"every process's /proc/<pid> entry (a private /proc could not be mounted: {exc})")
    for point, fd in held:
        try:
            _mount(libc, f"/proc/self/fd/{fd}", point, None, MS_BIND | MS_REC, None)
        except OSError as exc:
            exposed.append(f"{point} (a mount inside /proc that could not be kept: {exc})")
        os.close(fd)


def _cover_secrets(libc, secrets, mapped, exposed):
    """Cover every secret path (a file: /dev/null bound over it; a folder: an empty read-only tmpfs)
    where it lies and where a library folder bound into the sandbox shows it."""
    for secret in secrets:
        places = [secret]
        for original, target in mapped:
            for path in {original, os.path.realpath(original)}:
                for name in {secret, os.path.realpath(secret)}:
                    if name == path or name.startswith(path.rstrip(os.sep) + os.sep):
                        places.append(target + name[len(path):])
        for place in dict.fromkeys(places):
            if os.path.islink(place) or not os.path.exists(place):
                continue
            try:
                if os.path.isdir(place):
                    _mount(libc, "tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=0755")
                else:
                    _mount(libc, "/dev/null", place, None, MS_BIND, None)
            except OSError as exc:
                exposed.append(f"{place} (could not be covered: {exc})")


CGROUP_V2, CGROUP_V1 = "/sys/fs/cgroup", "/sys/fs/cgroup/memory"


def _memory_cgroup(name, limit):
    """A memory cgroup capping the program *and all its children* together at ``limit`` bytes
    (the address-space rlimit is per process, so N processes could otherwise hold N times it).
    Returns (folder, kind) or (None, why not); needs root and a writable cgroup hierarchy."""
    if not limit:
        return None, "no memory limit asked"
    why = "no memory cgroup hierarchy"
    for kind, root, limit_file, extra in (
            ("cgroup v2", CGROUP_V2, "memory.max", ("memory.swap.max", "0")),
            ("cgroup v1", CGROUP_V1, "memory.limit_in_bytes", ("memory.memsw.limit_in_bytes", None))):
        if kind == "cgroup v2" and not os.path.exists(os.path.join(root, "cgroup.controllers")):
            continue
        if kind == "cgroup v1" and not os.path.exists(os.path.join(root, "memory.limit_in_bytes")):
            continue
        folder = os.path.join(root, "coalition_gym", name)
        try:
            os.makedirs(folder)
            if kind == "cgroup v2":  # the controller must be handed down to our group's children
                for parent in (root, os.path.dirname(folder)):
                    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
                        fh.write("+memory")
            with open(os.path.join(folder, limit_file), "w") as fh:
                fh.write(str(limit))
            swap_file, swap_value = extra
            if os.path.exists(os.path.join(folder, swap_file)):  # no escape into swap
                try:
                    with open(os.path.join(folder, swap_file), "w") as fh:
                        fh.write(swap_value or str(limit))
                except OSError:
                    pass
            return folder, kind
        except OSError as exc:
            _remove_cgroup(folder)
            why = f"{kind}: {exc}"
    return None, why


def _cgroup_oom_kills(folder):
    """How many processes of the group the kernel killed for memory (v2 memory.events, v1 oom_control
    or, on older kernels, any allocation failure)."""
    for name, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
        try:
            with open(os.path.join(folder, name)) as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            pass
    try:
        with open(os.path.join(folder, "memory.failcnt")) as fh:
            return int(fh.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _remove_cgroup(folder):
    for _ in range(50):  # the killed processes leave the group a moment after they are reaped
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def _count_user_processes(uid):
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _prepare_work(work, files, uid):
    """The program's private working folder (owned by its uid) with its files in it."""
    os.makedirs(work, mode=0o700, exist_ok=True)
    if uid is not None:
        os.chown(work, uid, uid)
    for name, text in files.items():
        path = os.path.join(work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        if uid is not None:
            os.chown(path, uid, uid)


def _audit_hook(mode, own_pid_getter):
    blocked_prefixes = NETWORK_EVENTS + (SPAWN_EVENTS if mode == "rlimit" else ())

    def hook(event, args):
        if event.startswith(blocked_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if mode == "rlimit" and event in ("os.kill", "os.killpg"):
            if event == "os.killpg" or args[0] != own_pid_getter():
                raise PermissionError(f"sandbox: {event}{tuple(args)} is not allowed")

    return hook


def _remap_packages(pairs):
    """Packages imported before the switch keep search paths under the old folders; point them
    at the mapped folders so that their submodules still import."""
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if not isinstance(search, list):
            continue
        fixed = []
        for entry in search:
            for old, new in pairs:
                if entry == old or entry.startswith(old + os.sep):
                    entry = new + entry[len(old):]
                    break
            fixed.append(entry)
        search[:] = fixed


def _run_program(job, mode, work, sys_path, uid, result_fd, cgroup):
    """In the forked child: drop privileges, apply limits, run the program (``job["source"]``, compiled
    from memory), report the nonce."""
    limits = job["limits"]
    os.setpgid(0, 0)
    if cgroup:  # joined while still root; every process the program starts inherits the group
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    nproc = limits["processes"]
    if mode == "rlimit":  # the limit counts every process of the user, not only ours
        nproc += _count_user_processes(os.getuid())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if limits["memory_bytes"]:
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    os.chdir(work)
    os.umask(0o077)
    os.environ.clear()
    os.environ.update(job["env"])
    if mode == "uid":
        import traceback  # noqa: F401  (the library folders may be unreadable to the sandbox uid)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.path[:] = [new for _, new in sys_path]
    _remap_packages(sys_path)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    if mode != "namespace":
        sys.addaudithook(_audit_hook(mode, os.getpid))
    main_path = os.path.join(work, job["main"])  # a name for tracebacks: no such file exists
    source = job.pop("source")
    linecache.cache[main_path] = (len(source), None, source.splitlines(True), main_path)
    module = types.ModuleType("__main__")
    module.__file__ = main_path
    payload = []
    module.__dict__["__report__"] = lambda obj: payload.append(obj)
    module.__dict__["__channel__"] = job.get("channel")  # pipes to the companion program, or None
    sys.modules["__main__"] = module
    sys.argv = [main_path]
    nonce = job.pop("nonce")
    try:
        code = compile(source, main_path, "exec")
        del source
        exec(code, module.__dict__)
    except SystemExit as exc:
        sys.stderr.write(f"sandbox: the program exited with SystemExit({exc.code!r}) before its end\n")
        _flush()
        _hard_exit(3)
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
        except BaseException:
            pass
        _flush()
        _hard_exit(1)
    _flush()
    body = "null"
    if payload:
        try:
            import json

            body = json.dumps(payload[-1])
        except BaseException:
            pass
    _write(result_fd, f"{nonce} {body}\n".encode())
    _hard_exit(0)


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def _kill_everything(mode, uid, child_pid):
    """Kill the program and every process it started, then reap them (we are their subreaper)."""
    deadline = time.monotonic() + 2.0
    while True:
        if uid is not None:
            helper = os.fork()
            if helper == 0:  # as the sandbox uid, kill(-1) reaches exactly that uid's processes
                try:
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(helper, 0)
        else:
            for pid in _children_of(os.getpid()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.killpg(child_pid, signal.SIGKILL)
            except OSError:
                pass
        alive = _reap()
        if not alive or time.monotonic() > deadline:
            return
        time.sleep(0.002)


def _children_of(parent):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    stat = fh.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _reap():
    """Reap finished children; True while some are still alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _choose_mode(job, libc, exposed):
    wanted = job["mode"]
    root = os.geteuid() == 0
    if wanted in ("auto", "namespace") and root:
        try:
            work, mapped = _enter_namespaces(job, libc, exposed)
            return "namespace", work, mapped, None
        except OSError as exc:
            if wanted == "namespace":
                raise
            reason = str(exc)
            exposed.clear()  # the fallback's VISIBLE says what it leaves
    else:
        reason = "not root" if not root else f"{wanted} requested"
    if wanted in ("auto", "uid") and root:
        return "uid", os.path.join(job["workdir"], "work"), [(p, p) for p in job["sys_path"]], reason
    if wanted == "uid":
        raise OSError("uid isolation needs root")
    return "rlimit", os.path.join(job["workdir"], "work"), [(p, p) for p in job["sys_path"]], reason


def _pipe_above_stdio():
    """A pipe whose ends are not 0-2 (the program's stdin is replaced with /dev/null, and a fork
    server's launcher has fd 0 free, so a plain pipe could land there)."""
    import fcntl

    ends = []
    for fd in os.pipe():
        if fd <= 2:
            high = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
            os.close(fd)
            fd = high
        ends.append(fd)
    return tuple(ends)


def _start_companion(job, mode, work, sys_path, uid, private_fds):
    """Fork the companion program (the split harness's candidate) under its own uid, working folder
    and memory cgroup, with its output discarded, and join it to the main program by two pipes:
    ``job["channel"]`` gets the main program's ends. Returns (pid, cgroup folder or None)."""
    spec = job["companion"]
    _prepare_work(work, spec["files"], uid)
    cgroup = _memory_cgroup(f"run-{uid}-{os.getpid()}", job["limits"]["memory_bytes"])[0] if uid is not None else None
    to_companion_r, to_companion_w = _pipe_above_stdio()
    to_main_r, to_main_w = _pipe_above_stdio()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (*private_fds, to_main_r, to_companion_w):
                os.close(fd)
            sink = os.open(os.devnull, os.O_WRONLY)
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            own = {**job, "source": spec["source"], "files": spec["files"], "env": spec["env"],
                   "channel": (to_companion_r, to_main_w), "nonce": "companion"}  # its nonce proves nothing
            _run_program(own, mode, work, sys_path, uid, sink, cgroup)
        except BaseException as exc:
            _write(2, f"sandbox: companion setup failed: {type(exc).__name__}: {exc}\n".encode())
        finally:
            _hard_exit(4)
    os.close(to_companion_r)
    os.close(to_main_w)
    job["channel"] = (to_main_r, to_companion_w)
    return pid, cgroup


def launch(job, job_fd, status_fd, result_fd):
    """Set up, run and clean up one program; write the status record; never returns. ``job`` is the
    job's first part; the second (the main program's source, files and nonce) is read from ``job_fd``
    only after the companion was forked."""
    status = {"mode": None, "exit_code": None, "signal": None, "timed_out": False, "stopped": False,
              "cpu_seconds": 0.0, "error": None, "fallback_reason": None, "memory_cap": "per process",
              "oom_kills": 0, "exposed": []}
    signal.signal(signal.SIGTERM, _on_term)
    child = companion = None
    mode, uid, cgroup, c_uid, c_cgroup = "rlimit", None, None, None, None
    try:
        libc = _libc()
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # our fds and memory: not for a program of the same uid
        mode, work, sys_path, status["fallback_reason"] = _choose_mode(job, libc, status["exposed"])
        status["mode"] = mode
        uid = job["uid"] if mode in ("namespace", "uid") else None
        if mode == "uid":
            os.chmod(job["workdir"], 0o711)  # the sandbox uid must pass through the host's folder
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if uid is not None:  # root: one memory cap for the program and its children together
            cgroup, cap = _memory_cgroup(f"run-{uid}-{os.getpid()}", job["limits"]["memory_bytes"])
            status["memory_cap"] = cap if cgroup else f"per process ({cap})"
        if job.get("companion"):
            c_uid = job["companion"]["uid"] if uid is not None else None
            companion, c_cgroup = _start_companion(job, mode, work + "-companion", sys_path, c_uid,
                                                   (job_fd, status_fd, result_fd))
        job.update(_read_job(job_fd))  # the main program's own part, now that no companion can hold it
        os.close(job_fd)
        _prepare_work(work, job.pop("files"), uid)
        start = time.monotonic()
        child = os.fork()
        if child == 0:
            try:
                os.close(status_fd)
                _run_program(job, mode, work, sys_path, uid, result_fd, cgroup)
            except BaseException as exc:  # setup failed before the program started
                _write(2, f"sandbox: setup failed: {type(exc).__name__}: {exc}\n".encode())
            finally:
                _hard_exit(4)
        os.close(result_fd)
        for fd in job.get("channel") or ():  # only the programs hold the channel: one's end is the other's EOF
            os.close(fd)
        job.pop("nonce", None)
        job.pop("source", None)
        pidfd = os.pidfd_open(child)
        remaining = job["limits"]["wall_seconds"]
        while remaining > 0:
            ready, _, _ = select.select([pidfd], [], [], remaining)
            if ready:
                break
            remaining = job["limits"]["wall_seconds"] - (time.monotonic() - start)
        done, wait_status, usage = os.wait4(child, os.WNOHANG)
        if done == 0:
            status["timed_out"] = True
        else:
            status["cpu_seconds"] = usage.ru_utime + usage.ru_stime
            if os.WIFSIGNALED(wait_status):
                status["signal"] = os.WTERMSIG(wait_status)
            else:
                status["exit_code"] = os.WEXITSTATUS(wait_status)
    except Stop:
        status["stopped"] = True
    except BaseException as exc:  # the launcher must always report
        status["error"] = f"{type(exc).__name__}: {exc}"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if child and (status["timed_out"] or status["stopped"] or _reap()):
        _kill_everything(mode, uid, child)
    if companion:  # its verdict counts for nothing; it ends with the program it served
        _kill_everything(mode, c_uid, companion)
    if cgroup:
        status["oom_kills"] = _cgroup_oom_kills(cgroup)
        _remove_cgroup(cgroup)
    if c_cgroup:
        _remove_cgroup(c_cgroup)
    os.write(status_fd, marshal.dumps(status))
    _hard_exit(0)


def _read_job(fd):
    """One part of the job: an 8-byte length, then that many bytes of marshal data."""
    data = bytearray()
    need = 8
    while len(data) < need:
        chunk = os.read(fd, min(1 << 20, need - len(data)))
        if not chunk:
            raise EOFError("the job ended early")
        data += chunk
        if need == 8 and len(data) == 8:
            need = 8 + int.from_bytes(data[:8], "little")
    return marshal.loads(bytes(data[8:]))


def serve(sock_fd):
    """Fork server: one message per program, carrying five file descriptors (job, stdout, stderr,
    status, result). Forking this warm process saves the interpreter start per program. The server
    runs until its socket closes (the host exited)."""
    import json  # noqa: F401  (warm for every program: the split harness's codec needs it on both sides)
    import socket
    import traceback  # noqa: F401  (warm: every failing program prints one)

    sock = socket.socket(fileno=sock_fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # launchers are reaped by the kernel
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 16, 8)
        except OSError:
            return
        if len(fds) != 5:
            if not fds and not message:
                return  # the host closed the socket
            for fd in fds:
                os.close(fd)
            continue
        job_fd, out_fd, err_fd, status_fd, result_fd = fds
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the launcher waits for its program
                sock.close()
                os.setsid()
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                os.close(out_fd)
                os.close(err_fd)
                job = _read_job(job_fd)
                launch(job, job_fd, status_fd, result_fd)
            finally:
                _hard_exit(5)
        for fd in fds:
            os.close(fd)
        sock.send(str(pid).encode())


def main():
    if sys.argv[1:] == ["--serve"]:
        serve(0)
        return
    job = _read_job(0)
    launch(job, 0, job["status_fd"], job["result_fd"])


if __name__ == "__main__":
    main()
