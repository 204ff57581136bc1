"""Plain data passed between protocols, drivers and backends. No logic lives here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping, TypedDict

from .errors import ConfigError


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 512


@dataclass(frozen=True)
class Item:
    """One task instance. ``gold`` is the reference answer in the task's canonical form."""

    id: str
    question: str
    gold: str
    category: str = "general"
    difficulty: float | None = None  # in [0, 1] when the task knows it
    choices: tuple[str, ...] | None = None  # multiple-choice options, if any
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def for_policy(self) -> "Item":
        """What a policy may see: no gold answer, no scorer data (tests, references, relevance)."""
        return replace(self, gold="", meta={})


class Role(str, Enum):
    """What an Ask asks for: the vocabulary shared by protocols, simulated agents and drivers. A Role is
    a str, so ``ask.role == "route"`` keeps working; a protocol may use a role of its own (it then counts
    as the member's own answer). ``info`` keys each role carries:

    - ``answer``: the question alone (none).
    - ``debate``: a revision after reading peers: ``peer_answers`` (their extracted answers),
      ``own_previous`` (this member's last answer).
    - ``rank_pair`` / ``rank_list``: a fixed ranker judges candidates: ``answers`` (theirs, in order).
    - ``fuse``: a fuser or aggregator writes the final answer from references: ``answers``.
    - ``route``: a router names who answers: ``candidates``.
    - ``feedback``: a peer reviews one answer: ``reviewed`` (whose), ``answers``.
    - ``dev``: a trained router measures a member on a dev item (not the episode's question).
    - ``judge``: a member scores one response to the question on a 1-10 scale (collaborative training's
      judges): ``answers`` (the judged response's extracted answer, alone).
    """

    ANSWER = "answer"
    DEBATE = "debate"
    RANK_PAIR = "rank_pair"
    RANK_LIST = "rank_list"
    FUSE = "fuse"
    ROUTE = "route"
    FEEDBACK = "feedback"
    DEV = "dev"
    JUDGE = "judge"

    @property
    def is_helper(self) -> bool:
        """Helper work (rankings, fusions, routing, reviews, dev items) is never a seat's own answer."""
        return self in HELPER_ROLES

    def __str__(self) -> str:
        return self.value


HELPER_ROLES = frozenset({Role.RANK_PAIR, Role.RANK_LIST, Role.FUSE, Role.ROUTE, Role.FEEDBACK, Role.DEV,
                          Role.JUDGE})


class DebateInfo(TypedDict, total=False):
    """answer and debate: what the member is shown besides the question (empty for a first answer)."""

    peer_answers: tuple  # the peers' extracted answers shown in the prompt
    own_previous: "str | None"  # this member's previous answer


class AnswersInfo(TypedDict, total=False):
    answers: tuple  # the candidates' extracted answers, in the order shown (rank_pair, rank_list, fuse)


class FeedbackInfo(TypedDict, total=False):
    reviewed: str  # whose answer is reviewed
    answers: tuple


class RouteInfo(TypedDict, total=False):
    candidates: tuple  # the members the router may name
    descriptions: Mapping[str, str]


class DevInfo(TypedDict, total=False):
    dev: bool


#: the typed payload of each role's ``Ask.info`` (drivers may add ``rollout``, the training tag)
ROLE_INFO: dict[str, type] = {Role.ANSWER: DebateInfo, Role.DEBATE: DebateInfo, Role.RANK_PAIR: AnswersInfo,
                              Role.RANK_LIST: AnswersInfo, Role.FUSE: AnswersInfo, Role.FEEDBACK: FeedbackInfo,
                              Role.ROUTE: RouteInfo, Role.DEV: DevInfo, Role.JUDGE: AnswersInfo}
DRIVER_INFO_KEYS = frozenset({"rollout"})


def check_info(role: str, info: Mapping[str, Any]) -> None:
    """Refuse an ``info`` key the role's payload does not define (a typo a simulated agent would
    silently ignore); a role of a protocol's own is not checked."""
    payload = ROLE_INFO.get(role)
    if payload is None:
        return
    unknown = set(info) - set(payload.__annotations__) - DRIVER_INFO_KEYS
    if unknown:
        raise ConfigError(f"Ask role {role!r} has no info key {sorted(unknown)[0]!r}; its payload "
                         f"{payload.__name__} has {', '.join(payload.__annotations__) or 'none'}")


@dataclass(frozen=True)
class Ask:
    """A request for one generation, yielded by a protocol program.

    ``member`` names who must answer: a coalition member or a fixed helper (ranker, fuser).
    ``role`` and ``info`` describe the request to drivers and to simulated agents (which use them
    instead of reading the prompt); real backends only look at ``messages``, ``params`` and ``seed``.
    """

    member: str
    messages: tuple[Message, ...]
    seed: int
    params: SamplingParams = SamplingParams()
    role: str = "answer"  # a Role (see Role for the vocabulary and each role's info keys)
    round: int = 0
    item: Item | None = field(default=None, compare=False, hash=False)
    info: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        check_info(self.role, self.info)


@dataclass(frozen=True)
class Sample:
    """One generation. Token ids and log-probs are present when the backend can give them."""

    text: str
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    finish_reason: str = "stop"
    n_tokens: int | None = None  # generated tokens the backend counted without giving ids (an API's ``usage``)


@dataclass(frozen=True)
class Turn:
    """One line of a transcript: who said what, in which role and round."""

    member: str
    role: str
    round: int
    text: str
    answer: str | None = None  # the task's extraction of ``text`` where the protocol needed it

    def to_dict(self) -> dict[str, Any]:
        return {"member": self.member, "role": self.role, "round": self.round, "text": self.text,
                "answer": self.answer}


@dataclass(frozen=True)
class Outcome:
    """What a protocol program returns: the system's final answer and how it got there."""

    answer: str | None
    text: str
    transcript: tuple[Turn, ...]
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeResult:
    """A scored protocol execution, or a recorded failure (``error`` set, score 0)."""

    item_id: str
    coalition: tuple[str, ...]
    seed: int
    score: float
    answer: str | None
    parsed: bool
    outcome: Outcome | None = None
    error: str | None = None

    def to_dict(self, with_transcript: bool = True) -> dict[str, Any]:
        record: dict[str, Any] = {
            "item_id": self.item_id, "coalition": list(self.coalition), "seed": self.seed,
            "score": self.score, "answer": self.answer, "parsed": self.parsed, "error": self.error,
        }
        if with_transcript and self.outcome is not None:
            record["transcript"] = [t.to_dict() for t in self.outcome.transcript]
            record["details"] = dict(self.outcome.details)
        return record
