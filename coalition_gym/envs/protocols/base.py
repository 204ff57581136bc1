"""What every protocol program shares: the episode context and the Protocol base class.

A protocol program is a generator: it yields ``list[Ask]``, receives ``list[Sample]`` (same order)
and finally returns an :class:`Outcome`. It never calls a model itself.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence
from typing import Generator as PyGenerator

from ...agents.base import derive_seed
from ...errors import ConfigError, EmptyCoalitionError
from ...settings_check import check_settings, setting
from ...tasks.base import Task
from ...types import Ask, Item, Message, Outcome, Sample, SamplingParams, Turn

ProgramGen = PyGenerator[list[Ask], list[Sample], Outcome]


@dataclass(frozen=True)
class EpisodeContext:
    """Everything a protocol program may read about one execution."""

    item: Item
    task: Task
    members: tuple[str, ...]
    seed: int
    styles: Mapping[str, str] = field(default_factory=dict)
    dev_scores: Mapping[str, float] = field(default_factory=dict)
    #: what the protocol has learned so far (``Protocol.fresh_learned``), held by the System that started the
    #: episode and shared by all its episodes; None for a protocol that learns nothing
    learned: Any = field(default=None, compare=False, repr=False)

    def style(self, member: str) -> str:
        return self.styles.get(member, "chat")

    def question(self, member: str) -> list[Message]:
        return self.task.prompt(self.item, self.style(member))

    def seed_for(self, member: str, round_: int, index: int = 0, role: str = "") -> int:
        return derive_seed(self.seed, self.item.id, member, round_, index, role)

    def ask(self, member: str, messages: list[Message], params: SamplingParams, *, round_: int,
            role: str = "answer", index: int = 0, seed_role: str = "", **info: Any) -> Ask:
        return Ask(member=member, messages=tuple(messages), params=params,
                   seed=self.seed_for(member, round_, index, seed_role), role=role, round=round_,
                   item=self.item, info=info)


@dataclass
class Protocol(ABC):
    """A collaboration method. Subclasses are dataclasses whose fields are the method's settings, declared
    with :func:`~coalition_gym.settings_check.setting` where they have bounds or choices."""

    name: ClassVar[str] = "protocol"
    description: ClassVar[str] = ""
    #: The fields naming fixed helper backends (never coalition members).
    helper_fields: ClassVar[tuple[str, ...]] = ()
    #: Smallest coalition the method is defined for.
    min_members: ClassVar[int] = 1

    temperature: float = setting(0.7, ge=0, doc="sampling temperature of the members' answers")
    max_new_tokens: int = setting(512, ge=1, doc="new-token cap of every request")

    def __post_init__(self) -> None:
        # every setting's type, bounds and choices (declared with `setting(...)`), checked in one place;
        # a subclass adds only the rules between fields that a declaration cannot say
        check_settings(self)

    @property
    def params(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, max_new_tokens=self.max_new_tokens)

    def needs_dev_scores(self) -> bool:
        """Whether the method reads ``ctx.dev_scores`` (then drivers measure them on the task's dev split,
        see ``envs.dev_scores``). Default: when it breaks ties by them (``tie_break="dev"``); a method that
        picks a member by dev score says so by overriding this."""
        return getattr(self, "tie_break", None) == "dev"

    def helper_names(self) -> list[str]:
        return [v for v in (getattr(self, f) for f in self.helper_fields) if v]

    def start(self, ctx: EpisodeContext) -> ProgramGen:
        """The program for one execution; refuses an empty coalition up front."""
        if not ctx.members:
            raise EmptyCoalitionError(f"{self.name}: the coalition is empty; give at least one member")
        if len(ctx.members) < self.min_members:
            raise ConfigError(f"{self.name}: needs at least {self.min_members} members, got {list(ctx.members)}")
        if len(set(ctx.members)) != len(ctx.members):
            raise ConfigError(f"{self.name}: coalition {list(ctx.members)} names a member twice")
        clash = set(ctx.members) & set(self.helper_names())
        if clash:
            raise ConfigError(f"{self.name}: {sorted(clash)} cannot be both a member and a fixed helper")
        return self.program(ctx)

    @abstractmethod
    def program(self, ctx: EpisodeContext) -> ProgramGen:
        """The protocol program (a generator function)."""

    def settings(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fresh_learned(self) -> Any:
        """A new, empty learned state for this method (what it learns from episodes or ``prepare``, e.g. a
        trained router's dev outcomes). It lives outside the settings: the System keeps one and every
        episode's ``ctx.learned`` is that object. Default: None (the method learns nothing)."""
        return None

    def prepare(self, learned: Any, task: Any, backends: Mapping[str, Any], frozen: Sequence[str],
                seats: Sequence[str], styles: Mapping[str, str] | None = None) -> None:
        """Learn into ``learned`` (from :meth:`fresh_learned`), before any episode, what the method would
        otherwise learn inside one (called by the environments when they are built). ``frozen`` members are
        answered by ``backends``; ``seats`` are answered from outside (a policy) and cannot be asked outside
        an episode. Default: nothing."""


def answer_turns(ctx: EpisodeContext, asks: list[Ask], samples: list[Sample]) -> list[Turn]:
    """Transcript lines for a wave, each with the task's extraction of the reply."""
    return [Turn(a.member, a.role, a.round, s.text, ctx.task.extract(s.text, ctx.item))
            for a, s in zip(asks, samples)]


def answer_independently(ctx: EpisodeContext, params: SamplingParams
                         ) -> PyGenerator[list[Ask], list[Sample], tuple[list[Sample], list[Turn]]]:
    """The usual first wave (``yield from`` it): every member answers the question alone, round 0."""
    asks = [ctx.ask(m, ctx.question(m), params, round_=0) for m in ctx.members]
    samples = yield asks
    return samples, answer_turns(ctx, asks, samples)
