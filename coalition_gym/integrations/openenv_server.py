"""A protocol's policy seat as an OpenEnv environment server (``cgym serve ENV_ID``).

Built on OpenEnv's own server (``openenv.core.env_server``: ``Environment``, ``Action``/``Observation``/``State``,
``create_fastapi_app``): its HTTP routes (``/health``, ``/schema``, ``/metadata``, ``/reset``, ``/step``,
``/state``) and its WebSocket sessions (``/ws``: one session, one environment instance per connection), so
OpenEnv's clients (``GenericEnvClient`` included) drive it unchanged. Each session plays episodes of one
:class:`~coalition_gym.training.seat_driver.SeatDriver` that every session shares (the System built, checked and
prepared once: frozen members' dev scores, a router's learned state), so an episode over the wire is the
in-process environment's episode: ``reset(seed=s)`` draws the item and episode seed
``CollaborationEnv.reset(seed=s)`` draws (or takes ``item_id`` / ``episode_seed``; ``credit=true`` adds the
members' leave-one-out credit to the end), the observation's ``prompt`` is the policy seat's prompt,
``step({"text": ...})`` seats the reply and returns the next prompt the protocol writes for the seat or the end:
``done``, ``reward`` the system's score, and in ``details`` the episode's
:class:`~coalition_gym.training.seat_driver.SeatRecord` (the system's and the seat's answers and scores, the
seat's replies, the transcript with every member's reply and answer, cost).

Sessions are batched like ``make_vec``: the frozen members' requests of all open sessions go to each backend in
one call per wave (:class:`~coalition_gym.envs.batcher.WaveBatcher`, waiting at most ``batch_wait_ms`` for the
other sessions), and a session's step returns as soon as the protocol next asks its seat, or ends.

What a client can and cannot do:

- The action is one string field, ``text`` (at most ``max_action_chars``); a request body or WebSocket
  message over ``max_body_bytes`` is refused (HTTP 413; WebSocket: closed with 1009) before it is parsed.
- A bad request gets a 4xx with a one-line JSON body ``{"error": "..."}`` (HTTP) or OpenEnv's error frame
  (WebSocket), and the server goes on: step before reset or after the end (409), a wrong type or an unknown
  field (422), an unknown item id or reset option (400). OpenEnv's plain HTTP ``/reset`` and ``/step`` are
  stateless (a fresh environment per request): sessions live on ``/ws``.
- Sessions idle longer than ``idle_timeout_s`` are reclaimed (their next request says so); at most
  ``max_sessions`` at once (the next is refused with OpenEnv's CAPACITY_REACHED).
- Nothing of the server's machine crosses the wire: every string sent is passed through the project's
  redaction (API keys, bearer tokens, this server's token) and stripped of local paths (the members' model
  folders, the working and home directories, the interpreter's prefix); error messages lose any absolute path.
- It binds to 127.0.0.1 unless told otherwise; on any other host it requires a token (``Authorization:
  Bearer TOKEN`` on every request but ``/health``) and refuses to start without one.

The server's load (sessions open, episodes, steps, calls and Asks per backend) is ``Served.load()``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import socket
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np
from gymnasium.utils import seeding
from openenv.core.env_server import Action, Environment, Observation, State
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata
from pydantic import Field

from ..agents.base import render_plain
from ..envs.seated import messages_info
from ..envs.system import SystemSpec
from ..errors import ActionError, ConfigError, EpisodeStateError, UnknownNameError
from ..result_files import redact, register_secret, secrets
from ..training.seat_driver import SeatDriver, SeatRecord, SeatRun
from ..version import __version__
from .serve_asgi import Guard, console_log, run_app, validation_summary
from .serve_checks import listen_socket
from .serve_options import ServeError, ServeOptions
from .server_load import LoadReporter, prometheus_text

RESET_OPTIONS = ("seed", "episode_id", "item_id", "episode_seed", "credit")


# -- the wire types (what /schema publishes) ---------------------------------------------------------------

class SeatAction(Action):
    """The policy seat's reply to the prompt it was shown."""

    text: str = Field(..., description="the policy seat's reply, as text")


class SeatObservation(Observation):
    """The prompt the protocol writes for the policy seat (empty at the end); ``details`` at the end (also the
    observation's ``metadata``, which OpenEnv's serializer keeps on the server): the system's and the seat's
    answers and scores, the transcript (each member's replies and answers), cost."""

    prompt: str = Field(default="", description="the policy seat's prompt as plain text ('' when not asked)")
    messages: list[dict[str, str]] = Field(default_factory=list, description="the prompt as chat messages")
    role: Optional[str] = Field(default=None, description="what the seat is asked to do (answer, revise ...)")
    round: Optional[int] = Field(default=None, description="the protocol's round of this request")
    item_id: str = Field(default="", description="the task item of this episode")
    policy_asked: bool = Field(default=False, description="whether the seat is asked (False: the protocol "
                                                          "ended without asking it; step with any text)")
    details: dict[str, Any] = Field(default_factory=dict, description="at the end: the system's and the seat's "
                                    "answers and scores, each member's replies and answers, the cost")
    max_new_tokens: Optional[int] = Field(default=None, description="the reply length the protocol asks for")


class SeatState(State):
    """A session's episode: its item, episode seed, whether it ended."""

    env_id: str = ""
    item_id: Optional[str] = None
    episode_seed: Optional[int] = None
    done: bool = False


# -- what may cross the wire ----------------------------------------------------------------------------------

_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])(?:/[\w.@+-]+){2,}/?")  # not a URL's path: "https://host/x" stays


class Scrubber:
    """Removes from outgoing text what belongs to the server's machine: secrets (the project's redaction,
    this server's token) and local paths (``paths``: the members' model folders and the like)."""

    def __init__(self, paths: list[str], token: str | None):
        register_secret(token)
        self.paths = sorted({p.rstrip("/") for p in paths if p and p.count("/") >= 2}, key=len, reverse=True)
        # one scan per string (longest path first), not one replace per path: every string of every response
        forms = sorted({form for p in self.paths for form in (p, json.dumps(p, ensure_ascii=False)[1:-1])},
                       key=len, reverse=True)  # a path as JSON text holds it too (a quote or backslash escaped)
        self._paths = re.compile("|".join(map(re.escape, forms))) if forms else None

    def text(self, text: str, *, error: bool = False, values: list[str] | None = None) -> str:
        """``values``: the secrets to remove (default: the project's, read now)."""
        text = redact(text, values)
        if self._paths is not None:
            text = self._paths.sub("<local>", text)
        return _ABSOLUTE_PATH.sub("<path>", text) if error else text

    def data(self, data: Any, values: list[str] | None = None) -> Any:
        """Every string of a JSON-like structure scrubbed (the secrets read once for the whole of it): scrubbed as
        its JSON text in one pass where that text reads back (an episode's record is a few hundred strings), else
        string by string."""
        values = secrets() if values is None else values
        if isinstance(data, str):
            return self.text(data, values=values)
        try:
            return json.loads(self.text(json.dumps(data, ensure_ascii=False, default=str), values=values))
        except (TypeError, ValueError):  # a key JSON cannot hold, or a replacement inside a number
            return self._walk(data, values)

    def _walk(self, data: Any, values: list[str]) -> Any:
        if isinstance(data, str):
            return self.text(data, values=values)
        if isinstance(data, dict):
            return {self.text(str(k), values=values): self._walk(v, values) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [self._walk(v, values) for v in data]
        return data if data is None or isinstance(data, (bool, int, float)) else self.text(str(data), values=values)

    def error(self, exc: BaseException) -> str:
        """One line: the exception's message, scrubbed (paths included), at most 500 characters."""
        line = " ".join(str(exc).split()) or type(exc).__name__
        return self.text(line, error=True)[:500]


def local_paths(system: Any) -> list[str]:
    """The paths of this machine a response could leak: each backend's identity and description (a model
    folder, a cache file), the working, home and temporary directories, the interpreter's and the package's."""
    found = [os.getcwd(), str(Path.home()), tempfile.gettempdir(), sys.prefix, sys.exec_prefix,
             str(Path(__file__).resolve().parents[2])]
    for backend in system.backends.values():
        texts = [str(getattr(backend, "identity", ""))]
        try:
            texts += [str(v) for v in backend.describe().values()]
        except Exception:  # a backend's description is best effort here
            pass
        for text in texts:
            found += [m.group(0) for m in _ABSOLUTE_PATH.finditer(text)]
    real = [str(Path(p).resolve()) for p in found if p.startswith("/")]
    return found + real


# -- the environment ------------------------------------------------------------------------------------------

class Served:
    """What every session shares: the seat driver over the prepared System (its members' Asks batched across
    sessions), the options, the scrubber and the load counters."""

    def __init__(self, spec: SystemSpec, options: ServeOptions):
        self.options = options
        self.driver = SeatDriver(spec, policy_name=options.policy_name, policy_style=options.policy_style,
                                 batched=True, wait_s=options.batch_wait_ms / 1000.0,
                                 model_process=options.model_process == "auto")
        self.system = self.driver.system
        self.env_id = options.env_id or f"coalition_gym/{self.system.protocol.name}"
        self.scrub = Scrubber(local_paths(self.system), options.token)
        self.records = Recorder(self.driver)
        self._counts = {"sessions_open": 0, "sessions": 0, "episodes": 0, "steps": 0, "failed": 0}
        self._count_lock = threading.Lock()

    def count(self, **changes: int) -> None:
        with self._count_lock:
            for key, change in changes.items():
                self._counts[key] += change

    def load(self) -> dict[str, Any]:
        """Sessions open, totals (sessions, episodes, steps, failed episodes, waves, waits given up) and per backend
        its calls, the Asks they carried and their seconds (mean batch size = asks / calls)."""
        with self._count_lock:
            out: dict[str, Any] = dict(self._counts)
        batcher = self.driver.batcher
        out["waves"] = batcher.waves if batcher is not None else 0
        out["waits_given_up"] = batcher.gave_up if batcher is not None else 0
        out["backends"] = {name: dict(row) for name, row in self.driver.stats.per_backend.items()}
        return out


class Recorder:
    """The records of the episodes that end together (a wave's), scored in one call off the event loop: one hop to a
    thread per wave, not per session, and an execution-based task runs their programs together."""

    def __init__(self, driver: SeatDriver):
        self.driver = driver
        self._pending: list[tuple[SeatRun, bool, asyncio.Future]] = []
        self._scoring: set[asyncio.Task] = set()  # held: the loop keeps only weak references to tasks

    async def record(self, run: SeatRun, credit: bool) -> SeatRecord:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        if not self._pending:  # after the callbacks already due: the wave's other sessions join this batch
            loop.call_soon(self._flush)
        self._pending.append((run, credit, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        for credit in (False, True):
            part = [(run, future) for run, wanted, future in batch if wanted is credit]
            if part:
                task = asyncio.ensure_future(self._score(part, credit))
                self._scoring.add(task)
                task.add_done_callback(self._scoring.discard)

    async def _score(self, part: list[tuple[SeatRun, asyncio.Future]], credit: bool) -> None:
        runs = [run for run, _ in part]
        try:
            results: list[Any] = await asyncio.to_thread(self.driver.records, runs, credit)
        except Exception:  # one episode's failure is its own: the others are scored one by one
            results = await asyncio.to_thread(self._one_by_one, runs, credit)
        for (_, future), result in zip(part, results):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    def _one_by_one(self, runs: list[SeatRun], credit: bool) -> list[SeatRecord | BaseException]:
        out: list[SeatRecord | BaseException] = []
        for run in runs:
            try:
                out.append(self.driver.record(run, credit))
            except Exception as exc:
                out.append(exc)
        return out


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, ServeError):
        return exc.status
    if isinstance(exc, EpisodeStateError):
        return 409
    if isinstance(exc, ActionError):
        return 422
    if isinstance(exc, (UnknownNameError, ConfigError)):
        return 400
    return 500


class SeatEnvironment(Environment[SeatAction, SeatObservation, SeatState]):
    """One OpenEnv session: episodes of the shared :class:`SeatDriver`, one at a time (see the module doc).
    OpenEnv awaits :meth:`reset_async` / :meth:`step_async` on its event loop: a session waiting for its
    members' wave holds no thread."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: Served):
        super().__init__()
        self._served = served
        self._state = SeatState(env_id=served.env_id)
        self._run: SeatRun | None = None
        self._rng: np.random.Generator | None = None
        self._credit = False
        self._closed = False
        self._wave: asyncio.Future | None = None  # the members' wave out while the client answers (see below)
        served.driver.join(id(self))  # expected from now: sessions opened together start in one wave
        served.count(sessions_open=1, sessions=1)

    # -- OpenEnv's calls ---------------------------------------------------------------------------------------
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> SeatObservation:
        with self._errors():
            run = self._begin(seed, episode_id, kwargs)
            self._served.driver.advance([run])
            return self._observation(run)

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          **kwargs: Any) -> SeatObservation:
        with self._errors():
            await self._wave_landed()
            run = self._begin(seed, episode_id, kwargs)
            if self._asked_beside_members(run):
                return self._with_wave_out(run, self._observation(run))
            await self._served.driver.advance_async(run, id(self))
            return self._observation(run)

    def step(self, action: SeatAction, timeout_s: Optional[float] = None, **kwargs: Any) -> SeatObservation:
        with self._errors():
            run = self._give(action)
            self._served.driver.advance([run])
            return self._after_step(run, self._served.driver.record(run, self._credit) if run.done else None)

    async def step_async(self, action: SeatAction, timeout_s: Optional[float] = None,
                         **kwargs: Any) -> SeatObservation:
        with self._errors():
            await self._wave_landed()
            run = self._give(action)
            if self._asked_beside_members(run):
                return self._with_wave_out(run, self._after_step(run, None))
            await self._served.driver.advance_async(run, id(self))
            record = await self._served.records.record(run, self._credit) if run.done else None
            return self._after_step(run, record)

    # The seat's next prompt is written before its wave goes out, so it never waits for the members' replies in
    # that wave (it cannot see them): the observation goes back at once, the members' wave runs meanwhile and the
    # next step awaits it before the reply is seated. The episode is the same; the client's round trip and the
    # server's work for it overlap the members' forward passes instead of following them.
    def _asked_beside_members(self, run: SeatRun) -> bool:
        return (not run.done and self._served.driver.pending(run) is not None
                and bool(run.episode.backend_asks()))

    def _with_wave_out(self, run: SeatRun, observation: SeatObservation) -> SeatObservation:
        """Send ``run``'s members' wave out (the batcher's thread owns the episode until it lands) and return
        ``observation``, made before."""
        self._wave = asyncio.ensure_future(self._served.driver.advance_async(run, id(self)))
        return observation

    async def _wave_landed(self) -> None:
        wave, self._wave = self._wave, None
        if wave is not None:
            await wave

    @property
    def state(self) -> SeatState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        system = self._served.system
        return EnvironmentMetadata(
            name=self._served.env_id, version=__version__,
            description=self._served.scrub.text(
                f"coalition-gym {system.protocol.name}: the policy seat {self._served.driver.policy_name!r} "
                f"plays with frozen members {list(system.frozen)} on task {system.task.name!r} "
                f"({len(system.items)} items); reward: the system's score"))

    def close(self) -> None:
        if not self._closed:  # the episode's state goes with it; a later request says the session is closed
            self._closed = True
            if self._wave is not None:  # it lands by itself; a failure of it has nobody left to tell
                self._wave.add_done_callback(lambda wave: wave.cancelled() or wave.exception())
            if self._run is not None:
                self._served.driver.close(self._run)
            self._served.driver.leave(id(self))
            self._served.count(sessions_open=-1)

    # -- the episode -------------------------------------------------------------------------------------------
    def _begin(self, seed: Any, episode_id: Any, kwargs: dict[str, Any]) -> SeatRun:
        """Check the reset's options, draw the item and episode seed as ``CollaborationEnv.reset`` does (the
        session's generator, reseeded by ``seed``) and begin the episode."""
        self._check_open()
        options = reset_options(seed, episode_id, kwargs)
        if seed is not None or self._rng is None:
            self._rng, _ = seeding.np_random(seed)
        item, episode_seed = self._served.system.draw(self._rng, options)
        if self._run is not None and not self._run.done:
            self._served.driver.close(self._run)  # the unfinished episode is abandoned
        self._run = self._served.driver.begin(item, episode_seed)
        self._credit = bool(kwargs.get("credit", False))
        self._state = SeatState(env_id=self._served.env_id, episode_id=episode_id, step_count=0, item_id=item.id,
                                episode_seed=episode_seed)
        return self._run

    def _give(self, action: Any) -> SeatRun:
        self._check_open()
        if not isinstance(action, SeatAction):
            raise ServeError(422, f"an action is {{'text': str}}, not {type(action).__name__}")
        if self._run is None:
            raise EpisodeStateError("step() before reset(): call reset() to start an episode")
        if self._run.done:
            if self._state.done:
                raise EpisodeStateError("step() after the episode ended: call reset() to start a new one")
            return self._run  # the protocol ended without asking the seat: this step reads the end
        limit = self._served.options.max_action_chars
        if len(action.text) > limit:
            raise ActionError(f"action of {len(action.text)} characters exceeds max_action_chars={limit}")
        self._served.driver.give(self._run, action.text)
        return self._run

    def _after_step(self, run: SeatRun, record: SeatRecord | None) -> SeatObservation:
        self._state.step_count += 1
        self._served.count(steps=1)
        if record is None:
            return self._observation(run)
        self._state.done = True
        self._served.count(episodes=1, failed=int(record.error is not None))
        return self._final(record)

    def _check_open(self) -> None:
        if self._closed:
            raise ServeError(410, "this session was closed (idle longer than the server's idle timeout); "
                                  "reconnect and reset")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Any failure becomes a one-line, scrubbed :class:`ServeError` with its HTTP status."""
        try:
            yield
        except ServeError as exc:
            raise ServeError(exc.status, self._served.scrub.error(exc)) from None
        except Exception as exc:
            status = _status_of(exc)
            prefix = "" if status < 500 else f"internal error ({type(exc).__name__}): "
            raise ServeError(status, prefix + self._served.scrub.error(exc)) from None

    # -- observations -------------------------------------------------------------------------------------
    def _observation(self, run: SeatRun) -> SeatObservation:
        ask = self._served.driver.pending(run)
        scrub = self._served.scrub
        common = {"item_id": run.item.id, "done": False, "reward": None if self._state.step_count == 0 else 0.0}
        if ask is None:  # the protocol ended without asking the seat
            return SeatObservation(policy_asked=False, **common)
        values = secrets()  # read once for the prompt and its messages
        return SeatObservation(prompt=scrub.text(render_plain(ask.messages), values=values),
                               messages=scrub.data(messages_info(ask), values), role=ask.role, round=ask.round,
                               policy_asked=True, max_new_tokens=int(ask.params.max_new_tokens), **common)

    def _final(self, record: SeatRecord) -> SeatObservation:
        scrub = self._served.scrub
        metadata = scrub.data(record.as_dict())
        if metadata.get("error"):
            metadata["error"] = scrub.text(str(metadata["error"]), error=True)
        metadata["members"] = members_summary(metadata.get("transcript") or [])
        return SeatObservation(item_id=record.item_id, done=True, reward=record.system_score, details=metadata,
                               metadata=metadata)


def reset_options(seed: Any, episode_id: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A reset's checked options (``item_id``, ``episode_seed``); a bad one is a :class:`ServeError`."""
    unknown = sorted(set(kwargs) - set(RESET_OPTIONS))
    if unknown:
        raise ServeError(400, f"unknown reset option {unknown[0]!r}; use {', '.join(RESET_OPTIONS)}")
    options = {k: kwargs[k] for k in ("item_id", "episode_seed") if kwargs.get(k) is not None}
    if "item_id" in options and not isinstance(options["item_id"], str):
        raise ServeError(422, f"item_id must be a string, not {type(options['item_id']).__name__}")
    if "episode_seed" in options and (not isinstance(options["episode_seed"], int)
                                      or isinstance(options["episode_seed"], bool)):
        raise ServeError(422, f"episode_seed must be an integer, not {type(options['episode_seed']).__name__}")
    if not isinstance(kwargs.get("credit", False), bool):
        raise ServeError(422, f"credit must be true or false, not {kwargs['credit']!r}"[:200])
    if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
        raise ServeError(422, "episode_id must be a string of at most 255 characters")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ServeError(422, f"seed must be an integer >= 0, not {seed!r}"[:200])
    return options


def members_summary(transcript: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per member: its replies in the episode and its last extracted answer."""
    out: dict[str, dict[str, Any]] = {}
    for turn in transcript:
        entry = out.setdefault(str(turn.get("member")), {"replies": 0, "last_answer": None})
        entry["replies"] += 1
        entry["last_answer"] = turn.get("answer")
    return out


# -- the app ----------------------------------------------------------------------------------------------------

def build_app(spec: SystemSpec, options: ServeOptions) -> Any:
    """The ASGI app ``cgym serve`` runs: OpenEnv's FastAPI app over :class:`SeatEnvironment` sessions, with
    one-line JSON errors, the load (``/metrics`` and the console's line: :func:`add_load_reports`) and the
    :class:`~coalition_gym.integrations.serve_asgi.Guard` in front."""
    from fastapi import Request
    from fastapi.exceptions import HTTPException, RequestValidationError
    from fastapi.responses import JSONResponse
    from openenv.core.env_server import create_fastapi_app

    served = Served(spec, options)
    app = create_fastapi_app(functools.partial(SeatEnvironment, served), SeatAction, SeatObservation,
                             concurrency_config=ConcurrencyConfig(max_concurrent_envs=options.max_sessions,
                                                                  session_timeout=options.idle_timeout_s))
    scrub = served.scrub

    def failure(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": " ".join(message.split())[:500]}, status_code=status)

    @app.exception_handler(ServeError)
    async def refused(request: Request, exc: ServeError) -> JSONResponse:
        return failure(exc.status, str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return failure(422, "invalid request: " + validation_summary(exc.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else validation_summary(exc.detail)
        return failure(exc.status_code, scrub.text(detail, error=True))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        return failure(500, f"internal error ({type(exc).__name__}): {scrub.error(exc)}")

    add_load_reports(app, served, options.report_every_s)
    app.router.on_shutdown.append(served.driver.close)  # the batcher and the model process, if any
    app.state.served = served
    return Guard(app, options.token, options.max_body_bytes)


def add_load_reports(app: Any, served: Served, every_s: float) -> None:
    """``GET /metrics``: ``served.load()`` in Prometheus' text format (the token required, as on every route
    but ``/health``; backends named by their scrubbed identity); and, every ``every_s`` seconds (0: never),
    the console's load line (:class:`~coalition_gym.integrations.server_load.LoadReporter`)."""
    from fastapi.responses import PlainTextResponse

    def label(identity: str) -> str:
        return served.scrub.text(identity, error=True)

    @app.get("/metrics", response_class=PlainTextResponse, include_in_schema=False)
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(prometheus_text(served.load(), label), media_type="text/plain; version=0.0.4")

    if every_s <= 0:
        return
    reporter, running = LoadReporter(served.load, label), []

    async def start() -> None:
        running.append(asyncio.get_running_loop().create_task(reporter.run(every_s, console_log().info)))

    async def stop() -> None:
        for task in running:
            task.cancel()

    app.router.on_startup.append(start)
    app.router.on_shutdown.append(stop)


def serve(spec: SystemSpec, options: ServeOptions, ready: Callable[[str], None] | None = None,
          sock: socket.socket | None = None) -> None:
    """Serve ``spec``'s policy seat until interrupted (blocking), on ``sock`` (default: bound to the options'
    host and port before the System is built, so a busy port or a bad host is refused at once, in one line).
    ``ready(url)`` is called once it listens."""
    sock = sock or listen_socket(options.host, options.port)
    try:
        app = build_app(spec, options)
    except BaseException:
        sock.close()
        raise
    run_app(app, options, ready, sock)
