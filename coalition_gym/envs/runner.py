"""Drives many protocol programs at once, one batched ``generate`` call per backend per wave.

A *wave* collects the pending Asks of every live program, groups them by backend (the Generator
object a name is bound to, so two names on one backend share a call) and sends each group in one
call. Only the programs whose own Ask fails are lost (see :func:`~coalition_gym.agents.base.settle`);
a failed program is recorded (its error text redacted), never raised, and the others go on.

Every finished program's Outcome gets ``details["cost"] = {"calls": ..., "tokens": ...}``: the
Asks the episode had answered (members and fixed helpers alike, whether or not a generation cache
served them) and the tokens of those replies (see :func:`.dispatch.sample_tokens`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from ..agents.base import Generator, stable_hash
from ..errors import CoalitionGymError
from ..result_files import redact
from ..tasks.base import Task
from ..types import Ask, EpisodeResult, Item, Outcome, Sample
from .dispatch import EpisodeCost, RunStats, dispatch, sample_tokens, with_cost
from .protocols.base import EpisodeContext, ProgramGen

if TYPE_CHECKING:  # the System starts the episodes; it imports this module's neighbours, not this module
    from .system import System


class ProgramFailed(CoalitionGymError):
    """Why one program could not finish (kept in results, never raised by the runner)."""


def run_programs(programs: Sequence[ProgramGen], backends: Mapping[str, Generator],
                 stats: RunStats | None = None,
                 on_done: Callable[[int, "Outcome | ProgramFailed"], None] | None = None,
                 on_call: Callable[[], None] | None = None) -> list["Outcome | ProgramFailed"]:
    """Run every program to completion, batching their Asks wave by wave (``on_call``: after each backend
    call of a wave, see :func:`.dispatch.dispatch`)."""
    stats = stats if stats is not None else RunStats()
    start = time.perf_counter()
    results: list[Outcome | ProgramFailed | None] = [None] * len(programs)
    pending: dict[int, list[Ask]] = {}
    costs = [EpisodeCost() for _ in programs]

    def finish(i: int, value: "Outcome | ProgramFailed") -> None:
        if isinstance(value, Outcome):
            value = with_cost(value, costs[i])
        results[i] = value
        pending.pop(i, None)
        if on_done is not None:
            on_done(i, value)

    def advance(i: int, sent: list[Sample] | None) -> None:
        try:
            asks = programs[i].send(sent) if sent is not None else next(programs[i])
            while not asks:  # a program may yield an empty wave
                asks = programs[i].send([])
            pending[i] = list(asks)
        except StopIteration as stop:
            value = stop.value
            if isinstance(value, Outcome):
                finish(i, value)
            else:
                finish(i, ProgramFailed(f"program returned {type(value).__name__}, not an Outcome"))
        except Exception as exc:  # a bug or bad reply inside one program must not stop the others
            finish(i, ProgramFailed(redact(f"{type(exc).__name__}: {exc}")))

    for i in range(len(programs)):
        advance(i, None)
    while pending:
        stats.waves += 1
        order = list(pending)
        flat = [ask for i in order for ask in pending[i]]
        answers = dispatch(flat, backends, stats, on_call)
        pos = 0
        for i in order:
            n = len(pending[i])
            mine = answers[pos:pos + n]
            pos += n
            error = next((a for a in mine if isinstance(a, BaseException)), None)
            if error is not None:
                programs[i].close()
                finish(i, ProgramFailed(redact(f"{type(error).__name__}: {error}")))
            else:
                costs[i].add(mine)  # type: ignore[arg-type]
                advance(i, mine)  # type: ignore[arg-type]
    stats.wall_seconds += time.perf_counter() - start
    return results  # type: ignore[return-value]


def episode_seed(seed: int, item: Item) -> int:
    """The per-item episode seed: the same for every coalition, so coalitions share samples."""
    return stable_hash("episode", seed, item.id) % 2**31


def score_outcome(task: Task, item: Item, coalition: Sequence[str], seed: int,
                  outcome: "Outcome | ProgramFailed", score: float | None = None) -> EpisodeResult:
    """The scored episode (``score`` when already computed); a failure scores 0 with its error."""
    if isinstance(outcome, ProgramFailed):
        return EpisodeResult(item.id, tuple(coalition), seed, 0.0, None, False, None, str(outcome))
    if score is None:
        score = task.score_batch([outcome.answer], [item])[0].score
    return EpisodeResult(item.id, tuple(coalition), seed, score, outcome.answer,
                         outcome.answer is not None, outcome)


def episode_record(result: EpisodeResult, item: Item, with_text: bool = True) -> dict[str, Any]:
    """One line of a results file: the item (question, gold), the coalition, every turn's extracted
    answer (and reply text unless ``with_text`` is False), the system answer and score, the error
    and the episode's cost."""
    outcome = result.outcome
    turns = [{k: v for k, v in t.to_dict().items() if with_text or k != "text"}
             for t in (outcome.transcript if outcome is not None else ())]
    return {"item_id": result.item_id, "question": item.question, "gold": item.gold,
            "coalition": list(result.coalition), "seed": result.seed, "turns": turns,
            "answer": result.answer, "score": result.score, "parsed": result.parsed, "error": result.error,
            "cost": outcome.details.get("cost") if outcome is not None else None}


def score_outcomes(task: Task, contexts: Sequence[EpisodeContext],
                   outcomes: Sequence["Outcome | ProgramFailed"]) -> list[EpisodeResult]:
    """Score many episodes with one ``task.score_batch`` call (execution-based tasks run in parallel)."""
    done = [k for k, o in enumerate(outcomes) if not isinstance(o, ProgramFailed)]
    answers = [outcomes[k].answer for k in done]  # type: ignore[union-attr]
    scores = dict(zip(done, (r.score for r in task.score_batch(answers, [contexts[k].item for k in done]))))
    return [score_outcome(task, ctx.item, ctx.members, ctx.seed, o, scores.get(k))
            for k, (ctx, o) in enumerate(zip(contexts, outcomes))]


def run_episodes(system: "System", items: Iterable[Item], seed: int = 0, *, stats: RunStats | None = None,
                 progress: bool = False, description: str = "episodes") -> list[EpisodeResult]:
    """One execution of ``system`` per item (its coalition, the runner's per-item episode seed), scored by
    the task. The dev scores are the system's (:attr:`~coalition_gym.envs.system.System.dev`: given ones, or measured
    on the task's
    dev split when the protocol needs them, cached)."""
    contexts = [system.context(it, episode_seed(seed, it)) for it in items]
    protocol, task, backends = system.protocol, system.task, system.backends
    programs = [protocol.start(ctx) for ctx in contexts]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(programs), desc=description, unit="ep", leave=False)
    outcomes = run_programs(programs, backends, stats, on_done=(lambda i, o: bar.update(1)) if bar else None)
    if bar is not None:
        bar.close()
    return score_outcomes(task, contexts, outcomes)


# RunStats, EpisodeCost, dispatch, sample_tokens and with_cost live in .dispatch; re-exported for old imports
__all__ = ["EpisodeCost", "ProgramFailed", "RunStats", "dispatch", "episode_record", "episode_seed", "run_episodes",
           "run_programs", "sample_tokens", "score_outcome", "score_outcomes", "with_cost"]
