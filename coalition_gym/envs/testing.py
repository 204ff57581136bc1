"""Contract checks for what users add to the environments: call them in your own tests (as
``pettingzoo.test`` does). Training recipes have theirs in :mod:`coalition_gym.training.testing`.

- :func:`check_protocol`: a protocol's program yields Asks only for coalition members and its fixed
  helpers, returns an ``Outcome``, replays identically from the same context, and draws the same seed
  for a member's question whatever else is in the coalition (the project's central invariant).
- :func:`check_generator`: one Sample per Ask, in order; a sample depends on its Ask alone, not on the
  rest of the batch; an empty batch is an empty list.
- :func:`check_task`: unique item ids, disjoint splits, prompts in both styles, ``score_batch`` gives a
  ScoreResult per answer with a score in [0, 1], an unreadable answer scores 0.
- :func:`check_answer_kind`: an answer kind (parser + rubric) scores a batch as it scores each answer
  alone, gives None 0 (unparsed), keeps every score in [0, 1] and never raises on a hostile answer.

Each raises ``AssertionError`` with what broke.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..agents.base import Generator
from ..agents.pools import DEFAULT_POOL, load_pool
from ..scorers.kinds import AnswerKind, resolve_answer_kind
from ..scorers.result import ScoreResult
from ..tasks import DEFAULT_TASK, Task
from ..tasks import make as make_task
from ..tasks.base import PROMPT_STYLES, SPLITS, split_overlap
from ..types import Ask, Item, Message, Outcome, SamplingParams
from .protocols import Protocol, make_protocol
from .protocols.base import EpisodeContext
from .runner import episode_seed
from .system import System, SystemSpec


def run_one_program(protocol: Protocol, ctx: EpisodeContext, backends: dict[str, Generator]) -> tuple[list[Ask], Any]:
    """Run one program to its end; every Ask it yielded, and what it returned."""
    program = protocol.start(ctx)
    asks: list[Ask] = []
    replies = None
    try:
        while True:
            wave = program.send(replies) if replies is not None else next(program)
            asks += wave
            replies = []
            for ask in wave:
                replies += backends[ask.member].generate([ask])
    except StopIteration as stop:
        return asks, stop.value


def check_protocol(protocol: "Protocol | str", pool: Any = DEFAULT_POOL, task: "Task | str" = DEFAULT_TASK,
                   items: int = 3) -> None:
    protocol = make_protocol(protocol)
    pool = load_pool(pool)
    task = make_task(task, size=items) if isinstance(task, str) else task
    members = pool.member_names
    assert len(members) >= max(3, protocol.min_members), "check_protocol needs a pool of at least 3 members"
    backends = pool.backends()
    system = System.build(SystemSpec(protocol, task, pool, members, split=None))  # dev scores as drivers give them
    system.prepare()  # what a method learns before episodes
    allowed = set(members) | set(protocol.helper_names()) | set(pool.helpers)
    for item in task.items("test")[:items]:
        def context(coalition: Sequence[str]) -> EpisodeContext:
            return system.context(item, episode_seed(0, item), coalition)

        asks, outcome = run_one_program(protocol, context(members), backends)
        assert isinstance(outcome, Outcome), f"{protocol.name}: the program returned {type(outcome).__name__}"
        strangers = {a.member for a in asks} - allowed
        assert not strangers, f"{protocol.name}: asked {sorted(strangers)}, who are neither members nor helpers"
        for turn in outcome.transcript:
            assert turn.member in allowed, f"{protocol.name}: transcript names {turn.member!r}"
        again, outcome_again = run_one_program(protocol, context(members), backends)
        assert [(a.member, a.seed, a.messages) for a in asks] == [(a.member, a.seed, a.messages) for a in again], \
            f"{protocol.name}: the same context yielded different Asks"
        assert outcome_again.answer == outcome.answer, f"{protocol.name}: the same context answered differently"
        # the central invariant: a member's first question has the same seed in every coalition
        smaller = members[: max(protocol.min_members, len(members) - 1)]
        first = {a.member: a.seed for a in asks if a.round == 0 and a.member in smaller}
        first_small = {a.member: a.seed for a in run_one_program(protocol, context(smaller), backends)[0]
                       if a.round == 0 and a.member in smaller}
        shared = set(first) & set(first_small)
        assert all(first[m] == first_small[m] for m in shared), \
            f"{protocol.name}: a member's seed depends on who else is in the coalition"


def check_generator(generator: Generator, task: "Task | str" = "zoo:arith", n: int = 3) -> None:
    """Asks carry their item and role, as protocols' Asks do (simulated agents read them)."""
    task = make_task(task, size=n) if isinstance(task, str) else task
    params = SamplingParams(temperature=0.7, max_new_tokens=8)
    assert generator.generate([]) == [], "an empty batch must give an empty list"
    batch = [Ask(member="m", messages=tuple(task.prompt(item, "compact")), seed=k, params=params, item=item)
             for k, item in enumerate(task.items("test")[:n])]
    together = generator.generate(batch)
    assert isinstance(together, list) and len(together) == len(batch), "one Sample per Ask, as a list"
    for k, a in enumerate(batch):
        alone = generator.generate([a])
        assert alone[0].text == together[k].text, (f"{generator.identity}: Ask {k} got a different sample alone "
                                                   "than in a batch (or the order is wrong)")
    assert isinstance(generator.identity, str) and generator.identity, "a generator needs an identity"


def check_task(task: Task, splits: Sequence[str] | None = None, per_split: int = 20) -> None:
    """A task's contract: disjoint item ids per split, test questions no more often train questions
    than the task states (``max_split_overlap``), prompts in every style, scores in [0, 1]."""
    splits = ("test",) if task.held_out else tuple(splits or SPLITS)
    seen: dict[str, str] = {}
    for split in splits:
        items = list(task.items(split))[:per_split]
        assert items, f"task {task.name!r}: split {split!r} is empty"
        for item in items:
            assert item.id not in seen or seen[item.id] == split, \
                f"task {task.name!r}: item id {item.id!r} is in splits {seen[item.id]!r} and {split!r}"
            assert seen.get(item.id) != split, f"task {task.name!r}: item id {item.id!r} repeats in {split!r}"
            seen[item.id] = split
            assert item.question, f"task {task.name!r}: item {item.id!r} has no question"
            for style in PROMPT_STYLES:
                messages = task.prompt(item, style)
                assert messages and all(isinstance(m, Message) for m in messages), \
                    f"task {task.name!r}: prompt({style!r}) is not a list of Messages"
            texts = ("Answer: 0", "I do not know.", f"Answer: {item.gold}"[:2000])
            results = task.score_batch([None] + [task.extract(text, item) for text in texts], [item] * 4)
            assert len(results) == 4 and all(isinstance(r, ScoreResult) for r in results), \
                f"task {task.name!r}: score_batch must return a ScoreResult per answer"
            assert results[0].score == 0.0, f"task {task.name!r}: an unreadable answer must score 0"
            for result in results[1:]:
                assert 0.0 <= result.score <= 1.0, f"task {task.name!r}: score {result.score} outside [0, 1]"
    if not task.held_out and "train" in splits and "test" in splits:
        overlap = split_overlap(task, "train", "test")
        assert overlap <= task.max_split_overlap, \
            (f"task {task.name!r}: {overlap:.0%} of test questions are also train questions (allowed: "
             f"{task.max_split_overlap:.0%}); draw the splits from disjoint parts of the question space, or "
             "state a larger max_split_overlap if the space is that small")


#: answers no rubric may crash on
HOSTILE_ANSWERS = ("", " ", "\x00", "NaN", "-inf", "1e309", "(" * 500, "Answer: " * 200, "\u202e\U0001F600", "9" * 5000)


def check_answer_kind(kind: "AnswerKind | str", items: Sequence[Item], answers: Sequence[str] = ()) -> None:
    """An answer kind's contract on ``items`` (of a task made of it): ``None`` scores 0 unparsed; every
    answer (``answers``, each item's gold, the items' questions, hostile strings) gets a ScoreResult in
    [0, 1] without raising, the same in a batch as alone and the same twice; ``question`` gives text and
    ``extract`` gives a string or None."""
    kind = resolve_answer_kind(kind)
    assert isinstance(kind.name, str) and kind.name, f"{kind!r}: an answer kind needs a name"
    assert items, f"{kind.name}: check_answer_kind needs items to score"
    candidates = [*answers, *(it.gold for it in items), *(it.question for it in items), *HOSTILE_ANSWERS]
    pairs = [(a, items[k % len(items)]) for k, a in enumerate(candidates)]
    for item in items:
        assert isinstance(kind.question(item), str), f"{kind.name}: question() must give text"
        for text in (None, "", f"Answer: {item.gold}", "I do not know."):
            got = kind.extract(text, item)
            assert got is None or isinstance(got, str), f"{kind.name}: extract({text!r}) gave {got!r}"
    nothing = kind.score_batch([None], [items[0]])
    assert len(nothing) == 1 and nothing[0].score == 0.0 and not nothing[0].parsed, \
        f"{kind.name}: an unreadable answer (None) must score 0, unparsed; got {nothing}"
    batch = kind.score_batch([a for a, _ in pairs], [it for _, it in pairs])
    assert len(batch) == len(pairs) and all(isinstance(r, ScoreResult) for r in batch), \
        f"{kind.name}: score_batch must give a ScoreResult per answer"
    for (answer, item), result in zip(pairs, batch):
        assert 0.0 <= result.score <= 1.0, f"{kind.name}: score {result.score} for {answer[:40]!r} outside [0, 1]"
        alone = kind.score_batch([answer], [item])[0]
        assert alone.score == result.score, (f"{kind.name}: {answer[:40]!r} scored {alone.score} alone and "
                                             f"{result.score} in a batch")
    again = kind.score_batch([a for a, _ in pairs], [it for _, it in pairs])
    assert [r.score for r in again] == [r.score for r in batch], f"{kind.name}: the same answers scored differently"


__all__ = ["check_protocol", "check_generator", "check_task", "run_one_program", "check_answer_kind", "HOSTILE_ANSWERS"]
