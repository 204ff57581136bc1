"""Driving a ``cgym serve`` server from the other side of the wire: OpenEnv's own ``GenericEnvClient``, with the
project's errors.

:class:`ServedEnv` is a thin wrapper: ``reset(**options)`` and ``step(text)`` return OpenEnv's ``StepResult``
(``observation`` a dict: ``prompt``, ``messages``, ``role``, ``round``, ``item_id``, ``policy_asked``,
``max_new_tokens``, and ``details`` at the end; ``reward``; ``done``). A server that died, or a connection that
dropped, raises :class:`ServerGoneError` naming the URL at once (no hang: the socket's close is seen, and a
silent server is given up after ``timeout_s``); a connection the server closed on purpose raises
:class:`ServerClosedError` (one of them) with the server's reason (a missing or wrong token: pass
``ServedEnv(url, token=...)``); a request the server refused raises :class:`ServedRequestError` with the server's
one-line message.
"""

from __future__ import annotations

from typing import Any, Callable

from openenv.core.generic_client import GenericEnvClient

from ..errors import CoalitionGymError


class ServerGoneError(CoalitionGymError, ConnectionError):
    """The environment server cannot be reached any more (it died, or the connection dropped)."""


class ServedRequestError(CoalitionGymError, RuntimeError):
    """The server refused a request (its one-line message)."""


class ServerClosedError(ServerGoneError):
    """The server closed the connection on purpose and said why (a missing or wrong token: 1008; a message over
    its size limit: 1009)."""


def _bearer_client(token: str) -> type:
    """OpenEnv's generic client with ``token`` on the WebSocket handshake (openenv-core 0.3's client sends no
    headers of its own; everything else is OpenEnv's)."""
    from websockets.asyncio.client import connect as ws_connect

    class BearerClient(GenericEnvClient):
        _ws: Any

        async def connect(self) -> "BearerClient":
            if self._ws is None:
                try:
                    self._ws = await ws_connect(self._ws_url, open_timeout=self._connect_timeout,
                                                max_size=self._max_message_size,
                                                additional_headers={"Authorization": f"Bearer {token}"})
                except Exception as exc:
                    raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
            return self

    return BearerClient


class ServedEnv:
    """One session on a ``cgym serve`` server at ``url`` (``token``: its bearer token, if it requires one)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0):
        self.url = url
        client = GenericEnvClient if not token else _bearer_client(token)
        self._client = client(base_url=url, connect_timeout_s=10.0, message_timeout_s=timeout_s).sync()
        self._open = False

    def _call(self, what: str, work: Callable[[], Any]) -> Any:
        try:
            if not self._open:
                self._client.connect()
                self._open = True
            return work()
        except RuntimeError as exc:
            if str(exc).startswith("Server error:"):
                raise ServedRequestError(str(exc).removeprefix("Server error: ")) from None
            raise self._gone(what, exc) from None
        except (ConnectionError, OSError, TimeoutError) as exc:
            raise self._gone(what, exc) from None
        except Exception as exc:  # websockets' ConnectionClosed and the like: the connection is gone
            if "ConnectionClosed" in type(exc).__name__ or "closed" in str(exc).lower():
                raise self._closed(exc) or self._gone(what, exc) from None
            raise

    def _closed(self, exc: BaseException) -> ServerClosedError | None:
        """The server's reason, when it closed the connection with one (the token refused, a message too big)."""
        frame = getattr(exc, "rcvd", None)
        if frame is None or not getattr(frame, "reason", ""):
            return None
        self._open = False
        return ServerClosedError(f"the environment server at {self.url} closed the connection: {frame.reason} "
                                 f"(code {frame.code})")

    def _gone(self, what: str, exc: BaseException) -> ServerGoneError:
        self._open = False
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return ServerGoneError(f"the environment server at {self.url} did not answer {what} ({type(exc).__name__}: "
                               f"{reason[:200]}); is `cgym serve` still running there? Restart it and reset")

    def reset(self, **options: Any) -> Any:
        return self._call("reset", lambda: self._client.reset(**options))

    def step(self, text: str) -> Any:
        return self._call("step", lambda: self._client.step({"text": text}))

    def state(self) -> Any:
        return self._call("state", self._client.state)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing a connection to a dead server is best effort
            pass
        self._open = False

    def __enter__(self) -> "ServedEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
