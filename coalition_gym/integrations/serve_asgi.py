"""What stands between uvicorn and OpenEnv's app in ``cgym serve``: the :class:`Guard` (bearer token, body limit,
WebSocket error frames that name the bad field, a quiet console) and :func:`run_app` (uvicorn on a socket bound
before anything was built).

The console says one line per event: a client that leaves, however it leaves, says nothing (OpenEnv's ``/ws``
handler closes a socket the client already closed, which starlette raises and uvicorn would print as a 60-line
"Exception in ASGI application"); a real failure (an exception out of a route, a session's internal error) is
one ``ERROR`` line, scrubbed of registered secrets. :data:`log` (``coalition_gym.serve``) carries them and the
load lines (:mod:`.server_load`).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import sys
from typing import Any, Callable

from starlette.websockets import WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected

from ..result_files import redact

log = logging.getLogger("coalition_gym.serve")

#: the close reason a WebSocket without the right token gets (at most 123 bytes: a close frame's limit)
TOKEN_REFUSAL = "missing or wrong bearer token: send 'Authorization: Bearer TOKEN' (ServedEnv(url, token=TOKEN))"
#: the error codes of OpenEnv's WebSocket frames that are the server's failure, not the client's
SERVER_FAILURES = ("SESSION_ERROR", "FACTORY_ERROR")


def console_log() -> logging.Logger:
    """:data:`log`, writing ``INFO`` and above to stderr once (uvicorn's own loggers stay as configured)."""
    if not any(getattr(h, "_cgym_console", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("cgym serve %(levelname)s: %(message)s"))
        handler._cgym_console = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    return log


def _one_line(text: str, limit: int = 500) -> str:
    return " ".join(redact(text).split())[:limit]


def _error_body(message: str) -> bytes:
    return (json.dumps({"error": " ".join(message.split())[:500]}) + "\n").encode()


async def _respond(send: Callable, status: int, message: str) -> None:
    body = _error_body(message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def validation_summary(errors: Any) -> str:
    """Pydantic's errors as one line, without the input they echo (a client's 10 MB body stays with it)."""
    if not isinstance(errors, (list, tuple)):
        return str(errors)[:200]
    parts = []
    for error in list(errors)[:3]:
        if isinstance(error, dict):
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def error_frame(text: str, where: str) -> str:
    """An outgoing WebSocket frame, made to say what went wrong: OpenEnv's ``VALIDATION_ERROR`` ("Invalid
    message") gets the fields and what is wrong with each (the input they echo dropped); a server-side failure
    is logged as one line. Any other frame is returned unchanged."""
    try:
        frame = json.loads(text)
        data = frame["data"]
        code, message = data.get("code"), str(data.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        return text
    if code == "VALIDATION_ERROR" and isinstance(data.get("errors"), list):
        data["message"] = "invalid message: " + validation_summary(data["errors"])
        data["errors"] = [{k: e.get(k) for k in ("loc", "msg", "type")} for e in data["errors"] if isinstance(e, dict)]
        return json.dumps(frame)
    if code in SERVER_FAILURES or message.startswith("internal error"):
        log.error("%s: %s (%s)", where, _one_line(message), code)
    return text


class Guard:
    """ASGI middleware in front of OpenEnv's app: the bearer token (every route but ``/health``; a WebSocket
    without it is accepted and closed at once with 1008 and :data:`TOKEN_REFUSAL`, which a client shows, where a
    refused handshake would only say "HTTP 403"), the body limit (HTTP: 413 before the route parses anything;
    WebSocket messages are limited by the server itself), WebSocket error frames (:func:`error_frame`), and one
    console line per failure instead of a traceback (a client that left: none)."""

    def __init__(self, app: Any, token: str | None, max_body_bytes: int):
        self.app, self.token, self.max_body = app, token, max_body_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if self.token and scope.get("path") != "/health" and not self._authorised(scope):
            if scope["type"] == "websocket":
                return await _close_socket(receive, send, 1008, TOKEN_REFUSAL)
            return await _respond(send, 401, "missing or wrong bearer token (send 'Authorization: Bearer TOKEN')")
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                return await _respond(send, 413, f"request body over {self.max_body} bytes")
            receive = self._limited(receive)
        return await self._quietly(scope, receive, send)

    async def _quietly(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Run the app; what escapes it is one console line (nothing when a WebSocket's client left)."""
        where = f"{scope.get('path', '')}"
        started = False

        async def sending(message: dict) -> None:
            nonlocal started
            if message["type"] == "websocket.send" and message.get("text", "").startswith('{"type":"error"'):
                message = {**message, "text": error_frame(message["text"], where)}
            started = started or message["type"] in ("http.response.start", "websocket.accept")
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except (WebSocketDisconnect, ClientDisconnected):
            if scope["type"] != "websocket":
                log.warning("%s: the client left before the response was sent", where)
        except Exception as exc:  # a failure of the server's: one line here, a 500 there if nothing was sent
            log.error("%s %s: %s: %s", scope.get("method", "WS"), where, type(exc).__name__, _one_line(str(exc)))
            if scope["type"] == "http" and not started:
                await _respond(send, 500, f"internal error ({type(exc).__name__})")

    def _authorised(self, scope: dict) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), str(self.token).encode())

    def _limited(self, receive: Callable) -> Callable:
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:  # a body sent without its length (chunked): refused once it is too long
                from starlette.exceptions import HTTPException

                raise HTTPException(413, f"request body over {self.max_body} bytes")
            return message
        return limited


async def _close_socket(receive: Callable, send: Callable, code: int, reason: str) -> None:
    """Accept the WebSocket and close it with ``code`` and ``reason`` (the client's error shows the reason)."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code, "reason": reason})


def run_app(app: Any, options: Any, ready: Callable[[str], None] | None = None,
            sock: socket.socket | None = None) -> None:
    """Serve ``app`` with uvicorn on ``sock`` (default: bound now to ``options.host``/``options.port``, a
    problem refused in one line) until interrupted. ``ready(url)`` is called once it listens."""
    import uvicorn

    from .serve_checks import listen_socket

    sock = sock or listen_socket(options.host, options.port)
    console_log()
    # no per-message deflate: observations are small, and compressing each one cost the event loop about a tenth
    # of its time per episode (benchmarks/served_envs.py, profiled)
    config = uvicorn.Config(app, log_level="warning", ws_max_size=options.max_body_bytes, timeout_graceful_shutdown=2,
                            ws_per_message_deflate=False)
    server = uvicorn.Server(config)
    if ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            host = f"[{options.host}]" if ":" in options.host else options.host  # an IPv6 address in a URL
            ready(f"http://{host}:{sock.getsockname()[1]}")
        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])
