"""The collaborative system as one object: what every driver (envs, runner, games, training) starts episodes from.

A :class:`System` is a protocol, a task, a pool and the coalition that plays it, with the *seats* (names
answered from outside the pool, e.g. a policy, with their prompt styles), the prompt styles of everyone,
the frozen members' dev scores (measured once, lazily) and what the protocol has learned (its learned state,
outside its settings). :meth:`System.context` / :meth:`System.start` are the one way to start an episode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..agents.base import Generator
from ..agents.cache import GenerationCache
from ..agents.pools import DEFAULT_POOL, Pool, load_pool
from ..errors import ConfigError, UnknownNameError
from ..settings_check import check_settings, setting
from ..tasks import DEFAULT_TASK, Task
from ..tasks import make as make_task
from ..types import Item
from .dev_scores import DevScores, dev_scores_for
from .protocols import EpisodeContext, ProgramGen, Protocol, make_protocol


@dataclass(eq=False)
class System:
    """protocol + task + pool + coalition (+ seats, styles, dev scores, learned state, items).

    Build one with :meth:`System.build` from a :class:`SystemSpec`: the one public way, which resolves and
    checks the names. The constructor is what ``build``, :meth:`replace` and :meth:`with_seats` call; every
    system passes its one check (:meth:`_check`) and gets the protocol settings its pool knows
    (:func:`with_pool_defaults`), however it was made.

    ``members``: the coalition in seat order (default: the pool's members); it may name ``seats``, which
    the pool does not answer (a policy, PettingZoo agents). ``seats`` maps each such name to its prompt
    style. ``items``: the split the system was built for (environments draw from it). ``dev_scores``:
    given scores to use as they are (else measured on first use, see :attr:`dev`); ``cache``: the
    generation cache that measuring shares. ``learned``: the protocol's learned state (default: a fresh
    one, :meth:`Protocol.fresh_learned`); pass one to share it between systems."""

    protocol: Protocol
    task: Task
    pool: Pool
    members: Sequence[str] = None  # type: ignore[assignment]  # None: the pool's members (a tuple once built)
    seats: Mapping[str, str] = field(default_factory=dict)
    items: Sequence[Item] = ()
    dev_scores: Mapping[str, float] | None = None
    cache: GenerationCache | None = None
    learned: Any = None

    def __post_init__(self) -> None:
        self.members = tuple(self.pool.member_names if self.members is None else self.members)
        self.seats = dict(self.seats)
        self.items = list(self.items)
        self.protocol = with_pool_defaults(self.protocol, self.pool)
        if self.learned is None:
            self.learned = self.protocol.fresh_learned()
        self._by_id = {it.id: it for it in self.items}
        self._dev: DevScores | None = None
        self._check()

    def _check(self) -> None:
        """The one check every system passes, however it was made: the protocol's fixed helpers exist (in
        the pool or answered by a seat) and are not coalition members."""
        pool, proto = self.pool, self.protocol
        missing = [h for h in proto.helper_names()
                   if h not in pool.helpers and h not in pool.members and h not in self.seats]
        if missing:
            raise ConfigError(f"protocol {proto.name!r} needs helper {missing[0]!r}, which pool {pool.name!r} "
                              f"does not provide (its helpers: {', '.join(pool.helpers) or 'none'}); "
                              "add it to the pool or set the protocol's helper setting")
        helpers_in_coalition = set(self.members) & set(proto.helper_names())
        if helpers_in_coalition:
            raise ConfigError(f"{sorted(helpers_in_coalition)} are fixed helpers of {proto.name!r} and cannot "
                              "also be coalition members")

    @classmethod
    def build(cls, spec: "SystemSpec", seats: Mapping[str, str] | None = None, *, seats_in_coalition: bool = True,
              cache: GenerationCache | None = None, dev_scores: Mapping[str, float] | None = None,
              learned: Any = None) -> "System":
        """The system ``spec`` names, checked: the one way to build a System (drivers, envs, trainers,
        reports, CLI commands, examples and benchmarks all come here). The spec's protocol, task and pool may
        be names or objects; a pool may also be a mapping of names to Generators (backends of your own).
        Unknown names, a coalition-training recipe as protocol, a held-out task outside its test split and an
        empty split are refused. ``seats`` (name -> prompt style) sit after the frozen members when
        ``seats_in_coalition``, else they answer a fixed helper's requests and the coalition is the frozen
        members alone. ``cache``, ``dev_scores`` and ``learned``: see the class."""
        seats = dict(seats or {})
        proto = make_protocol(spec.protocol, **dict(spec.protocol_settings))
        the_task = make_task(spec.task, **dict(spec.task_kwargs or {}))
        items = _split_items(the_task, spec.split, spec.n_items)
        pool = load_pool(spec.collaborators)
        chosen = pool.select(list(spec.members)) if spec.members is not None else pool.member_names
        if seats_in_coalition:
            _refuse_clashes(seats, pool)
        members = list(chosen) + (list(seats) if seats_in_coalition else [])
        return cls(proto, the_task, pool, members, seats=seats, items=items, dev_scores=dev_scores, cache=cache,
                   learned=learned)

    # -- what episodes read --------------------------------------------------------------------------
    @property
    def backends(self) -> dict[str, Generator]:
        return self.pool.backends()

    @property
    def styles(self) -> dict[str, str]:
        """Every name's prompt style: the pool's, and each seat's own."""
        return {**self.pool.styles, **self.seats}

    @property
    def frozen(self) -> list[str]:
        """The coalition's members the pool answers (everyone but the seats), in coalition order."""
        backends = self.backends
        return [m for m in self.members if m not in self.seats and m in backends]

    @property
    def dev(self) -> DevScores:
        """The frozen members' dev scores on this task: the given ones, else measured on first use when the
        protocol needs them (next to the generation cache's file when it has one), the same for every
        episode and sub-coalition. A coalition of one is ranked against nobody: it gets none."""
        if self._dev is None:
            if self.dev_scores is not None:
                self._dev = DevScores(dict(self.dev_scores), "given")
            elif len(self.members) < 2:
                self._dev = DevScores()
            else:
                self._dev = dev_scores_for(self, self.frozen, cache=self.cache)
        return self._dev

    def item(self, item_id: str) -> Item:
        if item_id not in self._by_id:
            raise UnknownNameError("item id", item_id, self._by_id)
        return self._by_id[item_id]

    def draw(self, rng: np.random.Generator, options: Mapping[str, Any]) -> tuple[Item, int]:
        """An environment's next item and episode seed: ``options["item_id"]`` / ``options["episode_seed"]``
        when given, else drawn by ``rng`` (item first, then seed)."""
        if "item_id" in options:
            item = self.item(options["item_id"])
        else:
            item = self.items[int(rng.integers(len(self.items)))]
        return item, int(options.get("episode_seed", rng.integers(2**31)))

    def context(self, item: Item, seed: int, members: Sequence[str] | None = None) -> EpisodeContext:
        """Everything one episode on ``item`` may read; ``members``: a sub-coalition (a game's coalition,
        an evaluation without the policy), default the system's coalition."""
        return EpisodeContext(item=item, task=self.task, members=tuple(self.members if members is None else members),
                              seed=seed, styles=self.styles, dev_scores=self.dev.scores, learned=self.learned)

    def start(self, item: Item, seed: int, members: Sequence[str] | None = None) -> ProgramGen:
        """The protocol program of one episode (see :meth:`context`)."""
        return self.protocol.start(self.context(item, seed, members))

    def prepare(self) -> None:
        """Let the protocol learn, before any episode, what it would otherwise learn inside one (a trained
        router's dev outcomes of the frozen members); seats in the coalition cannot be asked and are not."""
        seats = [m for m in self.members if m in self.seats]
        self.protocol.prepare(self.learned, self.task, self.backends, self.frozen, seats, self.styles)

    def replace(self, **changes: Any) -> "System":
        """A copy with ``changes`` to its fields, sharing the learned state unless ``learned`` is changed (pass
        ``learned=None`` for a fresh one). The dev scores measured so far are kept when nothing they depend on
        changed (protocol, task, pool, coalition, seats, given scores)."""
        other = dataclasses.replace(self, **changes)
        if all(changes[k] is getattr(self, k) for k in _DEV_INPUTS & changes.keys()):
            other._dev = self._dev
        return other

    def with_seats(self, seats: Mapping[str, str], *, in_coalition: bool = True) -> "System":
        """This system with ``seats`` (name -> prompt style) added: after the frozen members when
        ``in_coalition``, else answering a fixed helper's requests outside the coalition. Seats it already
        has are kept where they are."""
        new = {name: style for name, style in seats.items() if name not in self.seats or self.seats[name] != style}
        if not new:
            return self
        added = [name for name in new if name not in self.members] if in_coalition else []
        _refuse_clashes(added, self.pool)
        return self.replace(members=(*self.members, *added), seats={**self.seats, **new})

    def with_protocol(self, protocol: Protocol) -> "System":
        """The same system under another protocol (its own learned state; the dev scores measured so far kept)."""
        other = self.replace(protocol=protocol, learned=None)
        other._dev = self._dev
        return other


def _split_items(task: Task, split: str | None, n_items: int | None) -> list[Item]:
    """The first ``n_items`` of ``task``'s ``split`` (None: no items of the system's own). A held-out task
    has a test split only, and a split with no items is no split to draw from."""
    if split is None:
        return []
    if task.held_out and split != "test":
        raise ConfigError(f"task {task.name!r} is held out (evaluation only: a test split and nothing to train "
                          f"on), and it was asked for split={split!r}; pass split='test' to evaluate on it")
    items = list(task.items(split))[:n_items]
    if not items:
        raise ConfigError(f"task {task.name!r} has no items in split {split!r}")
    return items


def _refuse_clashes(seats: Iterable[str], pool: Pool) -> None:
    """A seat added to a coalition is answered from outside: it may not take a name the pool answers (the
    PettingZoo view turns pool members into seats on purpose, through ``replace``)."""
    for name in seats:
        if name in pool.members or name in pool.helpers:
            raise ConfigError(f"seat name {name!r} clashes with a name in pool {pool.name!r}; choose another")


#: the fields a System's dev scores depend on
_DEV_INPUTS = frozenset({"protocol", "task", "pool", "members", "seats", "dev_scores"})


def with_pool_defaults(protocol: Protocol, pool: Pool) -> Protocol:
    """Fill protocol settings the pool knows about and the user left unset (member descriptions
    for routers)."""
    if getattr(protocol, "descriptions", "unset") is None and pool.descriptions:
        return make_protocol(protocol, descriptions=dict(pool.descriptions))
    return protocol


@dataclass(frozen=True)
class SystemSpec:
    """What names a system: protocol and task (names or objects), the pool (a name, a file, a Pool or a mapping of
    names to Generators: backends of your own), the frozen ``members`` (default: all the pool's), the ``split``
    its items come from (None: no items of its own, the driver gives each episode's item), the first
    ``n_items`` of it (None: all), the task's keyword arguments and the protocol's settings."""

    protocol: "str | Protocol" = "debate"
    task: Any = DEFAULT_TASK
    collaborators: Any = DEFAULT_POOL
    members: Sequence[str] | None = None
    split: str | None = "train"
    task_kwargs: Mapping[str, Any] | None = None
    protocol_settings: Mapping[str, Any] = field(default_factory=dict)
    n_items: int | None = setting(None, ge=1, doc="the first n items of the split (None: all)")

    def __post_init__(self) -> None:
        """The fields' shapes, checked when the spec is made (names are checked when the System is built)."""
        from ..tasks.base import SPLITS

        check_settings(self, "system spec")
        if self.split is not None and self.split not in SPLITS:
            raise UnknownNameError("split", str(self.split), SPLITS)
        if self.members is not None:
            if isinstance(self.members, str) or not all(isinstance(m, str) for m in self.members):
                raise ConfigError(f"members={self.members!r}: give a list of member names, e.g. ['atlas', 'delta']")
            repeated = sorted({m for m in self.members if list(self.members).count(m) > 1})
            if repeated:
                raise ConfigError(f"members names {repeated[0]!r} twice")
        for name in ("task_kwargs", "protocol_settings"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"{name}={value!r}: give a mapping of names to values")

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "SystemSpec":
        """The spec ``gym.make(env_id, **kwargs)`` names: the spec's own fields by name, every other keyword
        a protocol setting (``rounds=2``)."""
        own = {f.name for f in dataclasses.fields(cls)}
        settings = {**dict(kwargs.pop("protocol_settings", None) or {}),
                    **{k: kwargs.pop(k) for k in list(kwargs) if k not in own}}
        return cls(**kwargs, protocol_settings=settings)


def system_source(system: "System | SystemSpec | str | None", spec: dict[str, Any],
                  defaults: Mapping[str, Any] | None = None) -> "System | SystemSpec":
    """What an environment or adapter is made from: the System or spec given, else the spec that ``spec``'s
    keywords name (``system`` may be a protocol name; ``defaults`` fill the spec's fields not given). The
    protocol name an env id passes beside a given System must be the one that System plays."""
    if isinstance(system, str):
        system, spec = None, {**spec, "protocol": system}
    if system is None:
        return SystemSpec.from_kwargs(**{**dict(defaults or {}), **spec})
    registered = spec.pop("protocol", None)  # gym.make(env_id, system=...) passes the id's protocol name too
    playing = system.protocol if isinstance(system, SystemSpec) else system.protocol.name
    playing = getattr(playing, "name", playing)
    if registered is not None and registered != playing:
        raise ConfigError(f"this environment id is protocol {registered!r}, but the given system plays {playing!r}")
    if spec:
        raise ConfigError(f"got a {type(system).__name__} and spec keywords {sorted(spec)}: pass one or the other")
    return system


def seated_system(source: "System | SystemSpec", seats: Mapping[str, str], *, in_coalition: bool = True) -> System:
    """A system with ``seats``, from a spec (built and checked) or from a System (the seats added)."""
    if isinstance(source, SystemSpec):
        return System.build(source, seats, seats_in_coalition=in_coalition)
    if isinstance(source, System):
        return source.with_seats(seats, in_coalition=in_coalition)
    raise ConfigError(f"expected a System or a SystemSpec, not {type(source).__name__}")
