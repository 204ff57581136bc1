"""Team rollouts: every seat samples in every execution, collaborators' draws are shared inside a group as
single-seat collect shares them, counterfactuals of one-shot protocols are replayed for free while a debate's
cost generations that are counted, and two zoo seats' calls are recorded per seat and per execution."""

from __future__ import annotations

import pytest

from coalition_gym.agents.base import Generator
from coalition_gym.agents.pools import load_pool
from coalition_gym.envs.protocols import make_protocol
from coalition_gym.envs.runner import run_programs, score_outcomes
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.tasks import make as make_task
from coalition_gym.training.credit import needed_coalitions
from coalition_gym.training.rollouts import CounterfactualCost, RecordingPolicy, RolloutPlan, collect, plan_contexts
from coalition_gym.types import Sample


def collect_with_cost(system, items, policies, plan, credit):
    """The rollouts of :func:`collect` with what their counterfactuals cost."""
    cost = CounterfactualCost()
    return collect(system, items, policies, plan, credit, cost=cost), cost


class FakeHF(Generator):
    """A policy backend answering from the Ask's seed, with token ids and log-probs; logs every Ask."""

    def __init__(self, name: str):
        self.identity, self.asks = f"fake:{name}", []

    def generate(self, asks):
        self.asks += asks
        return [Sample(text=f"Answer: {a.seed % 3}", token_ids=[1, 2], logprobs=[-0.5, -0.5]) for a in asks]

    def encode_prompt(self, ask):
        return [0]


class Frozen(Generator):
    """A frozen collaborator answering from the Ask's seed; logs every Ask it generates for."""

    def __init__(self, name: str):
        self.identity, self.asks = f"frozen:{name}", []

    def generate(self, asks):
        self.asks += asks
        return [Sample(text=f"Answer: {a.seed % 2}") for a in asks]


def setup(protocol, seats=("A", "B"), frozen=("f",)):
    task = make_task("zoo:arith", size=10)
    backends = {n: Frozen(n) for n in frozen}
    system = System.build(SystemSpec(protocol, task, backends, list(frozen), split=None), {s: "chat" for s in seats},
                          dev_scores={})
    policies = {s: RecordingPolicy(FakeHF(s)) for s in seats}
    return system, task.items("train")[:2], policies, backends


def generated(policies, backends) -> int:
    return sum(len(p.backend.asks) for p in policies.values()) + sum(len(b.asks) for b in backends.values())


@pytest.mark.parametrize("protocol", ["majority_vote", "slm_mux"])
@pytest.mark.parametrize("credit", ["loo", "shapley"])
def test_one_shot_counterfactuals_are_replayed_for_free(protocol, credit):
    system, items, policies, backends = setup(protocol)
    base, _ = collect_with_cost(system, items, policies, RolloutPlan(3, seed=4), "system")
    real = generated(policies, backends)
    system, items, policies, backends = setup(protocol)
    rollouts, cost = collect_with_cost(system, items, policies, RolloutPlan(3, seed=4), credit)
    assert cost.generations == 0 and cost.replayed > 0 and cost.counterfactuals > 0
    assert generated(policies, backends) == real  # no backend generated anything beyond the real executions
    assert [r.reward for r in rollouts] == [r.reward for r in base]
    assert cost.executions == 6
    # the sub-team without any seat is the same program in all G executions of a group: run once per item
    per_execution = len(needed_coalitions(["A", "B"], credit)) - 1 - (credit == "shapley")
    assert cost.counterfactuals == 6 * per_execution + 2 * (credit == "shapley")


@pytest.mark.parametrize("credit", ["loo", "shapley"])
def test_a_debates_counterfactuals_cost_generations_and_they_are_counted(credit):
    system, items, policies, backends = setup("debate")
    base, _ = collect_with_cost(system, items, policies, RolloutPlan(2, seed=4), "system")
    real = generated(policies, backends)
    recorded = [len(r.calls) for r in base]
    system, items, policies, backends = setup("debate")
    rollouts, cost = collect_with_cost(system, items, policies, RolloutPlan(2, seed=4), credit)
    assert cost.generations > 0 and cost.replayed > 0
    assert generated(policies, backends) - real == cost.generations  # every extra generation is counted
    # the seats' counterfactual generations are not recorded: each seat trains on its real calls alone
    assert [len(r.calls) for r in rollouts] == recorded == [6] * 4
    assert all(not p.calls for p in policies.values())
    assert all(c.rollout == r.index for r in rollouts for c in r.calls)


@pytest.mark.parametrize("draws", ["shared", "fresh"])
def test_collaborators_draw_alike_inside_a_group_while_every_seat_samples_anew(draws):
    system, items, policies, backends = setup("majority_vote", frozen=("f", "g"))
    plan = RolloutPlan(group_size=4, seed=5, draws=draws)
    rollouts, _ = collect_with_cost(system, items, policies, plan, "system")
    assert len(rollouts) == 8 and [r.group for r in rollouts] == [0] * 4 + [1] * 4
    for item in items:
        for name in ("f", "g"):
            # the frozen members' Asks of the 4 executions: one Ask (one draw) under shared draws, 4 under fresh
            seeds = [a.seed for a in backends[name].asks if a.item.id == item.id]
            assert len(seeds) == (1 if draws == "shared" else 4) and len(set(seeds)) == len(seeds)
        for seat in ("A", "B"):
            seeds = [a.seed for a in policies[seat].backend.asks if a.item.id == item.id]
            assert len(set(seeds)) == 4  # every seat samples in every execution, each time anew
    a_seeds = {a.seed for a in policies["A"].backend.asks}
    assert not a_seeds & {a.seed for a in policies["B"].backend.asks}  # and the seats differ from each other
    assert all(len(r.calls_of("A")) == len(r.calls_of("B")) == 1 for r in rollouts)
    # exactly the draws single-seat collect gives its collaborators with the same plan
    one = System.build(SystemSpec("majority_vote", system.task, {"f": Frozen("f"), "g": Frozen("g")}, split=None),
                       {"A": "chat"}, dev_scores={})
    collect(one, items, RecordingPolicy(FakeHF("A")), plan)
    assert {a.seed for a in one.backends["f"].asks} == {a.seed for a in backends["f"].asks}


def test_episode_draws_use_the_runners_episode_seed():
    from coalition_gym.envs.runner import episode_seed

    system, items, policies, backends = setup("majority_vote")
    rollouts, cost = collect_with_cost(system, items, policies, RolloutPlan(1, seed=9, draws="episode"), "loo")
    assert len(rollouts) == 2 and cost.generations == 0
    expected = {system.context(it, episode_seed(9, it)).seed_for("f", 0) for it in items}
    assert {a.seed for a in backends["f"].asks} == expected


def test_bad_input_is_refused_before_any_rollout():
    system, items, policies, backends = setup("majority_vote")
    with pytest.raises(ConfigError, match="missing \\['B'\\]"):
        collect_with_cost(system, items, {"A": policies["A"]}, RolloutPlan(2, 0), "loo")
    with pytest.raises(ConfigError, match="share one RecordingPolicy"):
        collect_with_cost(system, items, {"A": policies["A"], "B": policies["A"]}, RolloutPlan(2, 0), "loo")
    with pytest.raises(ConfigError, match="credit"):
        collect_with_cost(system, items, policies, RolloutPlan(2, 0), "leave-one-out")
    outside = system.replace(members=("f", "A"))  # seat B takes no part in the coalition
    with pytest.raises(ConfigError, match="not coalition members"):
        collect_with_cost(outside, items, policies, RolloutPlan(2, 0), "loo")
    with pytest.raises(ConfigError, match="no trainable seats"):
        collect_with_cost(system.replace(seats={}), items, {}, RolloutPlan(2, 0), "system")
    assert generated(policies, backends) == 0


@pytest.mark.parametrize("protocol", ["majority_vote", "debate"])
def test_two_zoo_seats_are_recorded_per_seat_and_per_execution(protocol):
    zoo = load_pool("zoo:tiny")
    task = make_task("zoo:arith", size=20)
    proto = make_protocol(protocol, max_new_tokens=6, **({"rounds": 2} if protocol == "debate" else {}))
    system = System.build(SystemSpec(proto, task, "sim:split", ["ana"], split=None),
                          {"pico": "compact", "nano": "compact"}, dev_scores={})
    policies = {s: RecordingPolicy(zoo.members[s]) for s in ("pico", "nano")}
    items = task.items("train")[:2]
    rollouts, cost = collect_with_cost(system, items, policies, RolloutPlan(group_size=2, seed=3), "loo")
    rounds = 2 if protocol == "debate" else 1
    assert len(rollouts) == 4 and cost.executions == 4
    for r in rollouts:
        assert r.error is None and {c.seat for c in r.calls} == {"pico", "nano"}
        for seat, calls in ((s, r.calls_of(s)) for s in ("pico", "nano")):
            assert len(calls) == rounds and [c.round for c in calls] == list(range(rounds))
            assert all(c.rollout == r.index and c.completion_ids and len(c.logprobs) == len(c.completion_ids)
                       for c in calls)
        assert set(r.own_scores) == {"pico", "nano"} and set(r.values) == set(needed_coalitions(["pico", "nano"],
                                                                                                "loo"))
    assert all(not p.calls for p in policies.values())  # the rollouts own the calls
    # the two seats' prompts are the same question, their samples their own: pico's calls are pico's tokens
    assert rollouts[0].calls_of("pico")[0].prompt_ids == rollouts[1].calls_of("pico")[0].prompt_ids
    if protocol == "majority_vote":
        # each execution's two sub-teams {ana, seat}: 2 Asks each, all replayed
        assert cost.generations == 0 and cost.counterfactuals == 8 and cost.replayed == 8 * 2
        # and the replayed value of {ana, pico} is what that sub-team scores when it plays with the same draws
        alone = System.build(SystemSpec(proto, task, "sim:split", ["ana"], split=None), {"pico": "compact"},
                             dev_scores={})
        single = collect(alone, items, RecordingPolicy(zoo.members["pico"]), RolloutPlan(group_size=2, seed=3))
        assert [r.values[frozenset({"pico"})] for r in rollouts] == [r.reward for r in single]
        assert [r.calls_of("pico")[0].completion_ids for r in rollouts] == [r.calls[0].completion_ids for r in single]
    else:
        assert cost.generations > 0


@pytest.mark.parametrize("protocol", ["majority_vote", "debate"])
def test_a_sub_teams_value_is_what_that_sub_team_scores_when_it_plays(protocol):
    """v({A}) (replayed, or regenerated under debate) equals the reward single-seat collect measures on the system
    of the frozen member and A alone with the same plan; v({}) the frozen member's own execution: each
    counterfactual is that sub-team's real execution with the same draws."""
    system, items, policies, backends = setup(protocol)
    plan = RolloutPlan(3, seed=2)
    rollouts, _ = collect_with_cost(system, items, policies, plan, "shapley")
    for seat in ("A", "B"):
        alone = System.build(SystemSpec(system.protocol, system.task, {"f": Frozen("f")}, split=None),
                             {seat: "chat"}, dev_scores={})
        single = collect(alone, items, RecordingPolicy(FakeHF(seat)), plan)
        assert [r.values[frozenset({seat})] for r in rollouts] == [r.reward for r in single]
    frozen = System.build(SystemSpec(system.protocol, system.task, {"f": Frozen("f")}, split=None), dev_scores={})
    contexts = [frozen.context(c.item, c.seed) for c in plan_contexts(system, items, plan)[0]]
    outcomes = run_programs([frozen.protocol.start(c) for c in contexts], frozen.backends)
    assert [r.values[frozenset()] for r in rollouts] == [x.score for x in score_outcomes(system.task, contexts,
                                                                                          outcomes)]


@pytest.mark.parametrize("seats", [("A",), ("A", "B")])
def test_own_answers_are_scored_in_one_batch_for_one_seat_or_several(seats, monkeypatch):
    """A single policy is a team of one: its own answers go to the task in one scoring call (a sandboxed task
    runs them in parallel), as a team's do, and score as one at a time would."""
    system, items, policies, _ = setup("majority_vote", seats=seats)
    calls = []
    score_batch = system.task.score_batch

    def counted(answers, batch_items):
        calls.append(len(answers))
        return score_batch(answers, batch_items)

    monkeypatch.setattr(system.task, "score_batch", counted)
    one = policies["A"] if len(seats) == 1 else policies  # a bare policy answers a system of one seat
    rollouts = collect(system, items, one, RolloutPlan(3, seed=1))
    assert calls[-1] == len(rollouts) * len(seats)  # the outcomes' scoring call, then the own answers' one
    assert len(calls) == 2
    for r in rollouts:
        for seat in seats:
            expected = score_batch([r.answers[seat]], [r.item])[0].score
            assert r.own_scores[seat] == expected and r.credit[seat] == r.reward
