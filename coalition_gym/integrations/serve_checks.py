"""What ``cgym serve`` refuses before it imports the server or builds the System (one line each, exit 2): a
name that is not known (env id, protocol setting, pool, task, member: with the close names, as ``cgym eval``
says them) and an address it cannot listen on (a host that does not resolve or is not this machine's, a busy
port). No OpenEnv import here: these checks take about a second where building takes many.

:func:`listen_socket` binds the server's socket itself; the server is handed that socket, so the port checked
is the port served (no window for another program to take it in between)."""

from __future__ import annotations

import errno
import socket
from typing import Any, Mapping, Sequence

from ..errors import ConfigError


def check_served_names(env_id: str, pool: str, task: str, task_kwargs: Mapping[str, Any],
                       members: Sequence[str] | None, settings: Mapping[str, Any]) -> str:
    """The protocol ``env_id`` names, once every name was found; else the first unknown one's error (a
    :class:`~coalition_gym.errors.UnknownNameError` with its close names, or a ConfigError)."""
    from ..agents.pools import check_pool_name, load_pool
    from ..envs.protocols import make_protocol
    from ..envs.registration import protocol_of
    from ..tasks import make as make_task
    from ..training.recipes import refuse_not_episodic

    refuse_not_episodic(env_id)  # a coalition-training recipe: say what it is
    protocol = protocol_of(env_id)
    make_protocol(protocol, **dict(settings))
    check_pool_name(pool)
    make_task(task, **dict(task_kwargs))
    if members:  # the pool's member names: a simulated pool is built at once, a model pool imports its library
        load_pool(pool).select(list(members))
    return protocol


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``(host, port)`` (``port`` 0: any free one), ready for the server to listen on; a
    host that does not resolve, is not this machine's or a busy or forbidden port is a one-line ConfigError."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host}: the name does not resolve ({_reason(exc)}); give an address of this "
                          "machine, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart reuses the port
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(_bind_refusal(host, port, exc)) from None
    return sock


def _bind_refusal(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"--port {port}: already in use on {host} (another server listens there); pass --port 0 for any "
                "free port, or stop what listens there")
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host}: not an address of this machine ({_reason(exc)}); give one of its addresses, "
                "e.g. 127.0.0.1 or 0.0.0.0")
    if exc.errno == errno.EACCES:
        return f"--port {port}: not allowed to listen there ({_reason(exc)}); use a port above 1023, or --port 0"
    return f"cannot listen on {host}:{port} ({_reason(exc)}); pass another --host or --port (--port 0: any free one)"


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc) or type(exc).__name__
