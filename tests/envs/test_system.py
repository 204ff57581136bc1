"""The System: the one way every driver starts an episode."""

import re

import numpy as np
import pytest
from conftest import ListTask, Recorder

from coalition_gym import System, load_pool, make_protocol, make_task, run_episodes
from coalition_gym.envs.system import SystemSpec
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.learners.router_model import RouterKnowledge


def test_a_context_carries_the_coalition_styles_dev_scores_and_learned_state():
    pool = load_pool("sim:demo")
    task = make_task("rg/basic_arithmetic", size=10)
    system = System.build(SystemSpec("trained_router", task, pool, ["atlas", "delta"], split=None),
                          {"policy": "compact"}, dev_scores={"atlas": 0.5})
    item = task.items("test")[0]
    ctx = system.context(item, 7)
    assert ctx.members == ("atlas", "delta", "policy") and ctx.seed == 7 and ctx.item is item
    assert ctx.style("policy") == "compact" and ctx.dev_scores == {"atlas": 0.5}
    assert isinstance(ctx.learned, RouterKnowledge) and ctx.learned is system.learned
    assert system.context(item, 7, ["delta"]).members == ("delta",)  # a sub-coalition
    assert system.frozen == ["atlas", "delta"]  # the seat is answered from outside
    assert next(system.start(item, 7, ["delta"]))[0].member == "delta"


def test_dev_scores_are_measured_once_for_the_frozen_members_only():
    pool = load_pool("sim:demo")
    backends = {n: Recorder(g) for n, g in pool.backends().items()}
    system = System.build(SystemSpec("majority_vote", make_task("rg/basic_arithmetic", size=20), backends,
                                     ["atlas", "delta"], split=None), {"policy": "chat"})
    first = system.dev
    assert set(first.scores) == {"atlas", "delta"} and system.dev is first
    asked = sum(len(c) for r in backends.values() for c in r.calls)
    system.context(system.task.items("test")[0], 0)
    assert sum(len(c) for r in backends.values() for c in r.calls) == asked  # nothing measured again
    alone = System.build(SystemSpec("majority_vote", system.task, pool, ["atlas"], split=None))
    assert alone.dev.scores == {}  # alone: no ties


def test_draw_is_the_environments_item_and_seed_rule():
    task = make_task("rg/basic_arithmetic", size=10)
    system = System.build(SystemSpec("debate", task, "sim:demo", split="test"))
    a, b = system.draw(np.random.default_rng(3), {}), system.draw(np.random.default_rng(3), {})
    assert a == b and a[0] in system.items
    item = system.items[4]
    assert system.draw(np.random.default_rng(0), {"item_id": item.id, "episode_seed": 11}) == (item, 11)
    with pytest.raises(UnknownNameError):
        system.draw(np.random.default_rng(0), {"item_id": "nope"})


def test_replace_shares_the_learned_state_unless_told_and_keeps_dev_scores_it_can():
    pool = load_pool("sim:specialists")
    task = make_task("rg/basic_arithmetic", size=10)
    system = System.build(SystemSpec("trained_router", task, pool, split=None), dev_scores={})
    _ = system.dev
    same = system.replace(items=task.items("test"))
    assert same.learned is system.learned and same.dev is system.dev
    assert system.replace(learned=None).learned is not system.learned
    assert system.replace(members=["mathy"]).dev is not system.dev
    results = run_episodes(system, task.items("test")[:3])
    assert len(results) == 3 and system.learned.outcomes  # what the episodes measured stays with the system


def test_build_system_checks_what_the_spec_names():
    system = System.build(SystemSpec("debate", "rg/basic_arithmetic", "sim:demo", ["atlas", "delta"],
                                     task_kwargs={"size": 5}), {"policy": "compact"})
    assert isinstance(system, System)
    assert system.members == ("atlas", "delta", "policy") and system.seats == {"policy": "compact"}
    assert system.items and all(it in system.task.items("train") for it in system.items)
    with pytest.raises(ConfigError, match="clashes"):
        System.build(SystemSpec("debate", "rg/basic_arithmetic", "sim:demo", task_kwargs={"size": 5}),
                     {"atlas": "chat"})


def route_ask(system: System):
    """The router's Ask of the system's first episode (nothing is generated)."""
    (ask,) = next(system.start(system.task.items("test")[0], 0))
    return ask


def test_a_routing_system_built_from_a_spec_reads_its_pools_descriptions():
    pool = load_pool("sim:specialists")
    system = System.build(SystemSpec("prompt_routing", "rg/basic_arithmetic", pool, task_kwargs={"size": 5}),
                          dev_scores={})
    assert system.protocol.descriptions == pool.descriptions
    assert route_ask(system).info["descriptions"] == tuple(pool.descriptions[m] for m in pool.member_names)


def test_the_constructor_fills_the_pools_descriptions_too_and_keeps_a_routers_own():
    pool, task = load_pool("sim:specialists"), make_task("rg/basic_arithmetic", size=5)
    by_hand = System(make_protocol("prompt_routing"), task, pool, dev_scores={})  # what build and replace call
    assert by_hand.protocol.descriptions == pool.descriptions
    own = System(make_protocol("prompt_routing", descriptions={"mathy": "sums"}), task, pool, dev_scores={})
    assert own.protocol.descriptions == {"mathy": "sums"}
    assert by_hand.with_protocol(make_protocol("prompt_routing", fallback="first")).protocol.descriptions == \
        pool.descriptions


def test_build_takes_backends_of_your_own_and_refuses_a_split_with_nothing_to_draw():
    pool = load_pool("sim:demo")
    system = System.build(SystemSpec("debate", "rg/basic_arithmetic", {"a": pool.members["atlas"]}, split=None,
                                     task_kwargs={"size": 5}))
    assert system.members == ("a",) and system.backends["a"] is pool.members["atlas"] and system.items == []
    with pytest.raises(ConfigError, match="no items in split 'test'"):
        System.build(SystemSpec("debate", ListTask(golds=()), "sim:demo", split="test"))


@pytest.mark.parametrize("fields,says", [
    ({"n_items": -1}, "n_items=-1"), ({"n_items": 0}, "n_items=0"), ({"n_items": 2.5}, "n_items=2.5"),
    ({"split": "validation"}, "unknown split 'validation'"), ({"members": "atlas"}, "a list of member names"),
    ({"members": ["atlas", "atlas"]}, "'atlas' twice"), ({"protocol_settings": 3}, "a mapping"),
])
def test_a_spec_checks_its_fields_when_made(fields, says):
    with pytest.raises((ConfigError, UnknownNameError), match=re.escape(says)):
        SystemSpec("majority_vote", **fields)
