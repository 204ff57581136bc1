"""One protocol execution in which some members ("seats") are answered from outside.

Asks for seats are queued and handed out one at a time per seat; every other Ask of the wave goes
to the backends in one batched call per backend. When every seat Ask of the wave is answered, the
wave's samples go back to the program. Both environments drive their episodes with this.
``cost`` counts every Ask answered in the episode (seats, members and helpers) and the tokens of
the replies, as the runner does; the final info reports it as ``info["cost"]``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping, Sequence

from ..agents.base import Generator
from ..errors import EpisodeStateError
from ..result_files import redact
from ..types import HELPER_ROLES, Ask, Outcome, Sample
from .dispatch import EpisodeCost, RunStats, dispatch, with_cost
from .protocols.base import EpisodeContext, ProgramGen
from .protocols.voting import majority_of
from .runner import ProgramFailed, score_outcome


class SeatedEpisode:
    """``backends`` given: the other Asks of a wave are answered at once (one call per backend).
    ``backends=None``: they wait in :meth:`backend_asks` until :meth:`give_backend` brings replies, so a
    driver can batch the waves of many episodes together (see :func:`drive`)."""

    def __init__(self, program: ProgramGen, seats: Iterable[str], backends: Mapping[str, Generator] | None,
                 stats: RunStats | None = None):
        self.program = program
        self.seats = frozenset(seats)
        self.backends = backends
        self.stats = stats
        self.outcome: Outcome | ProgramFailed | None = None
        self._wave: list[Ask] = []
        self._answers: list[Sample | None] = []
        self._queues: dict[str, deque[int]] = {s: deque() for s in self.seats}
        self._backend_slots: list[int] = []  # wave positions waiting for backend replies
        self.seat_calls: list[tuple[Ask, Sample]] = []  # every seat Ask and the reply it got
        self.member_calls: list[tuple[Ask, Sample]] = []  # every other Ask and its reply (for replays)
        self.cost = EpisodeCost()
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def pending(self, seat: str) -> Ask | None:
        """The Ask this seat must answer now, or None if it is not asked (nor is anyone once the episode ended,
        a failed wave's unanswered seat Asks included)."""
        if self.done:
            return None
        queue = self._queues.get(seat)
        return self._wave[queue[0]] if queue else None

    def waiting_seats(self) -> list[str]:
        return [s for s in sorted(self.seats) if self._queues[s]]

    def backend_asks(self) -> list[Ask]:
        """The Asks of the current wave that backends must answer (empty in synchronous mode)."""
        return [self._wave[k] for k in self._backend_slots]

    def answer(self, seat: str, sample: Sample) -> None:
        """Give the seat's reply to its current Ask; advances the program once the wave is complete."""
        if self.done:
            raise EpisodeStateError("the episode has ended; reset before answering again")
        queue = self._queues.get(seat)
        if not queue:
            raise EpisodeStateError(f"{seat!r} is not being asked anything right now")
        k = queue.popleft()
        self._answers[k] = sample
        self.seat_calls.append((self._wave[k], sample))
        self._complete_wave_if_ready()

    def give_backend(self, replies: Sequence[Sample | BaseException]) -> None:
        """Replies for :meth:`backend_asks`, in order; an exception fails the episode (recorded)."""
        slots, self._backend_slots = self._backend_slots, []
        for k, reply in zip(slots, replies):
            if isinstance(reply, BaseException):
                self.fail(f"{type(reply).__name__}: {reply}")
                return
            self._answers[k] = reply
            self.member_calls.append((self._wave[k], reply))
        self._complete_wave_if_ready()

    def fail(self, reason: str) -> None:
        """End the episode as failed (a seat that could not answer); recorded like a failed program."""
        if not self.done:
            self.program.close()
            self.outcome = ProgramFailed(redact(reason))

    def _complete_wave_if_ready(self) -> None:
        if not self.done and not self._backend_slots and not any(self._queues.values()):
            self._advance(list(self._answers))  # type: ignore[arg-type]

    def _advance(self, samples: list[Sample] | None) -> None:
        """Send a completed wave (None to start) and set up the next one."""
        if samples is not None:
            self.cost.add(samples)
        try:
            wave = self.program.send(samples) if samples is not None else next(self.program)
        except StopIteration as stop:
            value = stop.value
            self.outcome = with_cost(value, self.cost) if isinstance(value, Outcome) else ProgramFailed(
                f"program returned {type(value).__name__}, not an Outcome")
            return
        except Exception as exc:
            self.outcome = ProgramFailed(redact(f"{type(exc).__name__}: {exc}"))
            return
        self._wave = list(wave)
        self._answers = [None] * len(self._wave)
        self._backend_slots = [k for k, a in enumerate(self._wave) if a.member not in self.seats]
        for k, ask in enumerate(self._wave):
            if ask.member in self.seats:
                self._queues[ask.member].append(k)
        if self.backends is not None and self._backend_slots:
            self.give_backend(dispatch(self.backend_asks(), self.backends, self.stats))
        else:
            self._complete_wave_if_ready()


def drive(episodes: Sequence[SeatedEpisode], backends: Mapping[str, Generator], stats: RunStats | None = None) -> None:
    """Answer the backend Asks of many deferred episodes, one batched call per backend per wave,
    until each is waiting for a seat or done."""
    while True:
        waiting = [(e, e.backend_asks()) for e in episodes if not e.done]
        waiting = [(e, asks) for e, asks in waiting if asks]
        if not waiting:
            return
        replies = dispatch([a for _, asks in waiting for a in asks], backends, stats)
        pos = 0
        for e, asks in waiting:
            e.give_backend(replies[pos:pos + len(asks)])
            pos += len(asks)


# -- reporting an episode's end -----------------------------------------------------------------

def messages_info(ask: Ask) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in ask.messages]


def own_answer_of(task: Any, item: Any, replies: Iterable[tuple[str, int, str]]) -> str | None:
    """What a seat itself answered, from its ``(role, round, text)`` replies: the majority of its
    extracted answers in the last round it answered the item, helper roles (rankings, routes, reviews,
    dev items) left out. The one definition the envs, the C-RL trainer and the TRL adapter share."""
    own = [(round_, text) for role, round_, text in replies if role not in HELPER_ROLES]
    if not own:
        return None
    last = max(round_ for round_, _ in own)
    return majority_of([task.extract(text, item) for round_, text in own if round_ == last])[0]


def final_info(system: Any, ctx: EpisodeContext, episode: SeatedEpisode) -> dict[str, Any]:
    """A finished episode's info: the system's answer and score, transcript, error and cost."""
    return final_infos(system, [(ctx, episode)])[0]


def final_infos(system: Any, finished: Sequence[tuple[EpisodeContext, SeatedEpisode]],
                seats: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Each finished episode's info (see :func:`final_info`), with ``info["own"][seat]`` = (answer, score) for
    every seat in ``seats``: the system's answers and the seats' own answers of all the episodes are scored in
    one ``task.score_batch`` call (execution-based tasks run them together)."""
    task = system.task
    owns = [{seat: own_answer_of(task, ctx.item, [(a.role, a.round, s.text) for a, s in episode.seat_calls
                                                  if a.member == seat]) for seat in seats}
            for ctx, episode in finished]
    answers: list[Any] = []
    items: list[Any] = []
    for (ctx, episode), own in zip(finished, owns):
        if not isinstance(episode.outcome, ProgramFailed):  # a failed program scores 0 unscored
            answers.append(episode.outcome.answer)  # type: ignore[union-attr]
            items.append(ctx.item)
        for answer in own.values():
            if answer is not None:
                answers.append(answer)
                items.append(ctx.item)
    scores = iter([r.score for r in task.score_batch(answers, items)] if answers else [])
    infos = []
    for (ctx, episode), own in zip(finished, owns):
        outcome = episode.outcome
        failed = isinstance(outcome, ProgramFailed)
        result = score_outcome(task, ctx.item, ctx.members, ctx.seed, outcome,  # type: ignore[arg-type]
                               None if failed else next(scores))
        info: dict[str, Any] = {"item_id": ctx.item.id, "system_answer": result.answer,
                                "system_score": result.score, "parsed": result.parsed,
                                "transcript": [], "error": result.error, "cost": episode.cost.as_dict()}
        if not failed:
            info["transcript"] = [t.to_dict() for t in outcome.transcript]  # type: ignore[union-attr]
            info["details"] = dict(outcome.details)  # type: ignore[union-attr]
        if seats:
            info["own"] = {seat: (answer, next(scores) if answer is not None else 0.0)
                           for seat, answer in own.items()}
        infos.append(info)
    return infos
