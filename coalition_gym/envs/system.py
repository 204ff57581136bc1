"""Assembles what an environment needs: protocol, task, items, pool and the coalition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..agents.base import Generator
from ..agents.pools import Pool, load_pool
from ..errors import ConfigError, UnknownNameError
from ..tasks import Task
from ..tasks import make as make_task
from ..types import Item
from .dev_scores import DevScores, dev_scores_for
from .protocols import Protocol, make_protocol
from .protocols.collaborative import check_episodic


@dataclass
class CollaborativeSystem:
    protocol: Protocol
    task: Task
    items: list[Item]
    pool: Pool
    members: list[str]  # frozen collaborators drawn from the pool, in pool order unless given

    @property
    def backends(self) -> dict[str, Generator]:
        return self.pool.backends()

    def __post_init__(self) -> None:
        self._by_id = {it.id: it for it in self.items}

    def dev_scores(self, frozen: Sequence[str]) -> DevScores:
        """The dev scores the protocol reads, for the ``frozen`` members (those the pool answers; a seat
        answered from outside cannot be asked dev items and gets none). See ``envs.dev_scores``."""
        return dev_scores_for(self.protocol, self.task, self.pool, list(frozen))

    def item(self, item_id: str) -> Item:
        if item_id not in self._by_id:
            raise UnknownNameError("item id", item_id, self._by_id)
        return self._by_id[item_id]


def with_pool_defaults(protocol: Protocol, pool: Pool) -> Protocol:
    """Fill protocol settings the pool knows about and the user left unset (member descriptions
    for routers)."""
    if getattr(protocol, "descriptions", "unset") is None and pool.descriptions:
        return make_protocol(protocol, descriptions=dict(pool.descriptions))
    return protocol


def build_system(protocol: "str | Protocol", task: "str | Task", collaborators: Any,
                 members: Sequence[str] | None, split: str, task_kwargs: Mapping[str, Any] | None,
                 protocol_settings: Mapping[str, Any], reserved_names: Sequence[str] = ()) -> CollaborativeSystem:
    proto = make_protocol(protocol, **dict(protocol_settings))
    check_episodic(proto)
    the_task = make_task(task, **dict(task_kwargs or {}))
    if the_task.held_out and split != "test":
        raise ConfigError(f"task {the_task.name!r} is held out (evaluation only: a test split and nothing to "
                          f"train on), and environments default to split='train'; pass split='test' to "
                          "evaluate on it")
    items = list(the_task.items(split))
    if not items:
        raise ConfigError(f"task {the_task.name!r} has no items in split {split!r}")
    pool = load_pool(collaborators)
    proto = with_pool_defaults(proto, pool)
    chosen = pool.select(list(members)) if members is not None else pool.member_names
    missing = [h for h in proto.helper_names() if h not in pool.helpers and h not in pool.members]
    if missing:
        raise ConfigError(f"protocol {proto.name!r} needs helper {missing[0]!r}, which pool {pool.name!r} "
                          f"does not provide (its helpers: {', '.join(pool.helpers) or 'none'}); "
                          "add it to the pool or set the protocol's helper setting")
    helpers_in_coalition = set(chosen) & set(proto.helper_names())
    if helpers_in_coalition:
        raise ConfigError(f"{sorted(helpers_in_coalition)} are fixed helpers of {proto.name!r} and cannot "
                          "also be coalition members")
    for name in reserved_names:
        if name in pool.members or name in pool.helpers:
            raise ConfigError(f"seat name {name!r} clashes with a name in pool {pool.name!r}; choose another")
    return CollaborativeSystem(proto, the_task, items, pool, chosen)
