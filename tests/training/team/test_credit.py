"""Team credit on a scripted protocol with scripted members (no models): the sub-team values and each seat's
system, leave-one-out and Shapley credit equal hand-computed ones; Shapley is efficient; refusals."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import pytest
from conftest import ListTask, Scripted, answer_text

from coalition_gym.agents.base import Generator
from coalition_gym.envs.protocols.base import EpisodeContext, ProgramGen, Protocol, answer_independently
from coalition_gym.envs.system import System, SystemSpec
from coalition_gym.errors import ConfigError
from coalition_gym.training.credit import CREDIT_MODES, SHAPLEY_SEAT_LIMIT, needed_coalitions, seat_credit
from coalition_gym.training.rollouts import CounterfactualCost, RecordingPolicy, RolloutPlan, collect
from coalition_gym.types import Outcome, Sample

S = frozenset


def collect_with_cost(system, items, policies, plan, credit):
    """The rollouts of :func:`collect` with what their counterfactuals cost."""
    cost = CounterfactualCost()
    return collect(system, items, policies, plan, credit, cost=cost), cost


@dataclass
class Highest(Protocol):
    """One shot: every member answers once; the system answer is the largest number anyone gave."""

    name: ClassVar[str] = "highest"

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        _, turns = yield from answer_independently(ctx, self.params)
        numbers = [int(t.answer) for t in turns if t.answer is not None and t.answer.isdigit()]
        return Outcome(answer=str(max(numbers)) if numbers else None, text="", transcript=tuple(turns))


@dataclass
class Quorum(Protocol):
    """One shot: the answer at least two members agree on, and strictly more than any other; else none."""

    name: ClassVar[str] = "quorum"
    min_members: ClassVar[int] = 1

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        _, turns = yield from answer_independently(ctx, self.params)
        top = Counter(t.answer for t in turns if t.answer is not None).most_common()
        clear = top and top[0][1] >= 2 and (len(top) == 1 or top[1][1] < top[0][1])
        return Outcome(answer=top[0][0] if clear else None, text="", transcript=tuple(turns))


@dataclass
class PairQuorum(Quorum):
    """The quorum, defined for two members or more only."""

    name: ClassVar[str] = "pair_quorum"
    min_members: ClassVar[int] = 2


class Seat(Generator):
    """A seat's scripted backend: ``answers[k]`` in execution k of a group of ``group`` (read from the rollout
    tag), with token ids and log-probs as a policy backend gives them."""

    def __init__(self, name: str, answers: list[str], group: int):
        self.identity, self.answers, self.group, self.asked = f"seat:{name}", answers, group, 0

    def generate(self, asks):
        self.asked += len(asks)
        return [Sample(text=answer_text(self.answers[a.info["rollout"] % self.group]), token_ids=[1, 2],
                       logprobs=[-0.1, -0.2]) for a in asks]

    def encode_prompt(self, ask):
        return [0]


def team(protocol: Protocol, seat_answers: dict[str, list[str]], frozen: str = "3", group: int = 1):
    """The system (frozen member F answering ``frozen``, then the seats) and each seat's RecordingPolicy."""
    task = ListTask(golds=("7",))
    backends = {"F": Scripted(lambda ask: answer_text(frozen), identity="F")}
    system = System.build(SystemSpec(protocol, task, backends, ["F"], split=None),
                          {s: "chat" for s in seat_answers}, dev_scores={})
    policies = {s: RecordingPolicy(Seat(s, a, group)) for s, a in seat_answers.items()}
    return system, task.items("test"), policies


def run(protocol, seat_answers, credit, frozen="3", group=1):
    system, items, policies = team(protocol, seat_answers, frozen, group)
    return collect_with_cost(system, items, policies, RolloutPlan(group, seed=0), credit)


# -- the sub-teams each mode needs ------------------------------------------------------------------------

def test_needed_coalitions_per_mode():
    assert needed_coalitions(["a", "b", "c"], "system") == [S("abc")]
    assert needed_coalitions(["a", "b", "c"], "loo") == [S("abc"), S("bc"), S("ac"), S("ab")]
    shapley = needed_coalitions(["a", "b", "c"], "shapley")
    assert shapley[0] == S("abc") and len(shapley) == 8 and set(shapley) == {S(c) for k in range(4)
                                                                              for c in itertools.combinations("abc", k)}
    assert needed_coalitions(["a"], "loo") == [S("a"), S()]


def test_refusals_name_the_limit_and_the_alternative():
    seven = [f"s{k}" for k in range(SHAPLEY_SEAT_LIMIT + 1)]
    with pytest.raises(ConfigError, match=rf"above the limit of {SHAPLEY_SEAT_LIMIT}.*credit='loo'"):
        needed_coalitions(seven, "shapley")
    with pytest.raises(ConfigError, match="above the limit"):
        seat_credit({}, seven, "shapley")
    assert len(needed_coalitions(seven, "loo")) == 8  # loo has no such limit
    assert len(needed_coalitions(seven[:SHAPLEY_SEAT_LIMIT], "shapley")) == 2 ** SHAPLEY_SEAT_LIMIT
    with pytest.raises(ConfigError, match="Did you mean 'loo'"):
        needed_coalitions(["a"], "lo")
    with pytest.raises(ConfigError, match="twice"):
        needed_coalitions(["a", "a"], "loo")
    with pytest.raises(ConfigError, match="needs the value of sub-teams"):
        seat_credit({S("ab"): 1.0}, ["a", "b"], "loo")
    assert CREDIT_MODES == ("system", "loo", "shapley")


def test_shapley_with_seven_seats_is_refused_before_any_rollout():
    seats = {f"s{k}": ["7"] for k in range(SHAPLEY_SEAT_LIMIT + 1)}
    system, items, policies = team(Highest(), seats)
    with pytest.raises(ConfigError, match=f"limit of {SHAPLEY_SEAT_LIMIT}"):
        collect_with_cost(system, items, policies, RolloutPlan(1, 0), "shapley")
    assert all(p.backend.asked == 0 for p in policies.values())


# -- hand-computed credit from a values table ---------------------------------------------------------------

def test_shapley_of_a_three_seat_table_by_hand():
    # v: a alone wins; b and c win only together; everything with a wins; v(abc) = 1
    v = {S(): 0.0, S("a"): 1.0, S("b"): 0.0, S("c"): 0.0, S("ab"): 1.0, S("ac"): 1.0, S("bc"): 1.0, S("abc"): 1.0}
    # a: marginals 1 ({}, w 1/3), 1 ({b}, 1/6), 1 ({c}, 1/6), 0 ({b,c}, 1/3) -> 2/3; b = c = 1/6 each
    credit = seat_credit(v, "abc", "shapley")
    assert credit == pytest.approx({"a": 2 / 3, "b": 1 / 6, "c": 1 / 6})
    assert seat_credit(v, "abc", "loo") == {"a": 0.0, "b": 0.0, "c": 0.0}  # nobody pivotal in the full team
    assert seat_credit(v, "abc", "system") == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_shapley_is_efficient_and_matches_the_valuation_engine():
    from coalition_gym.valuation.exact import exact_shapley
    from coalition_gym.valuation.game import FunctionGame

    rng = random.Random(3)
    seats = ["a", "b", "c", "d"]
    for _ in range(5):
        v = {c: rng.random() for c in needed_coalitions(seats, "shapley")}
        credit = seat_credit(v, seats, "shapley")
        assert sum(credit.values()) == pytest.approx(v[S(seats)] - v[S()])
        # the engine's game has v(empty) = 0: shift by v({}) (Shapley values ignore a constant)
        engine = exact_shapley(FunctionGame(seats, lambda c: v[c] - v[S()]), n_boot=10)
        assert [credit[s] for s in seats] == pytest.approx(list(engine.values))


# -- values and credit measured on a scripted protocol -----------------------------------------------------------

def test_a_never_pivotal_seat_gets_no_loo_credit_and_an_always_pivotal_one_gets_it_all():
    # Highest, gold 7: A always says 7, B always 1, F says 3. The team is right iff A plays.
    for mode, expected in [("system", {"A": 1.0, "B": 1.0}), ("loo", {"A": 1.0, "B": 0.0}),
                           ("shapley", {"A": 1.0, "B": 0.0})]:
        rollouts, _ = run(Highest(), {"A": ["7"] * 3, "B": ["1"] * 3}, mode, group=3)
        assert len(rollouts) == 3
        for r in rollouts:
            assert r.reward == 1.0 and r.credit == expected
            assert set(r.values) == set(needed_coalitions(["A", "B"], mode))
    rollouts, _ = run(Highest(), {"A": ["7"], "B": ["1"]}, "shapley")
    assert rollouts[0].values == {S("AB"): 1.0, S("A"): 1.0, S("B"): 0.0, S(): 0.0}
    assert rollouts[0].own_scores == {"A": 1.0, "B": 0.0} and rollouts[0].answers == {"A": "7", "B": "1"}


def test_quorum_values_and_credits_by_hand():
    # Quorum, gold 7, F says 7: A says 7, B and C say 5.
    # v({}) = 0 (F alone: no quorum); v(A) = v(AB) = v(AC) = 1; v(B) = v(C) = 0; v(BC) = 0 (5 wins);
    # v(ABC) = 0 (7,7 against 5,5: a tie, no answer)
    rollouts, cost = run(Quorum(), {"A": ["7"], "B": ["5"], "C": ["5"]}, "shapley", frozen="7")
    (r,) = rollouts
    assert r.values == {S(): 0.0, S("A"): 1.0, S("B"): 0.0, S("C"): 0.0, S("AB"): 1.0, S("AC"): 1.0,
                        S("BC"): 0.0, S("ABC"): 0.0}
    # A: 1 (w 1/3) + 1 (1/6) + 1 (1/6) + 0 (1/3) = 2/3; B: 0 + 0 + 0 + (0 - 1) * 1/3 = -1/3; C alike
    assert r.credit == pytest.approx({"A": 2 / 3, "B": -1 / 3, "C": -1 / 3})
    assert sum(r.credit.values()) == pytest.approx(r.values[S("ABC")] - r.values[S()])  # efficiency
    assert cost.counterfactuals == 7 and cost.generations == 0
    (loo,), _ = run(Quorum(), {"A": ["7"], "B": ["5"], "C": ["5"]}, "loo", frozen="7")
    assert loo.credit == {"A": 0.0 - 0.0, "B": 0.0 - 1.0, "C": 0.0 - 1.0}  # v(ABC) - v(BC), - v(AC), - v(AB)
    (system,), _ = run(Quorum(), {"A": ["7"], "B": ["5"], "C": ["5"]}, "system", frozen="7")
    assert system.credit == {"A": 0.0, "B": 0.0, "C": 0.0} and system.values == {S("ABC"): 0.0}


def test_credit_follows_each_execution_of_a_group():
    # A is right in executions 0 and 1 only, B in 1 and 2 only; Highest with F saying 3, gold 7
    rollouts, _ = run(Highest(), {"A": ["7", "7", "1", "1"], "B": ["1", "7", "7", "1"]}, "loo", group=4)
    assert [r.reward for r in rollouts] == [1.0, 1.0, 1.0, 0.0]
    assert [r.credit for r in rollouts] == [{"A": 1.0, "B": 0.0}, {"A": 0.0, "B": 0.0}, {"A": 0.0, "B": 1.0},
                                            {"A": 0.0, "B": 0.0}]
    assert {r.group for r in rollouts} == {0}


def test_a_sub_team_too_small_for_the_protocol_is_worth_zero_without_running():
    # PairQuorum needs two members: F alone (no seat) cannot play it. F and A say 7, B says 7.
    rollouts, cost = run(PairQuorum(), {"A": ["7"], "B": ["7"]}, "shapley", frozen="7")
    (r,) = rollouts
    assert r.values == {S("AB"): 1.0, S("A"): 1.0, S("B"): 1.0, S(): 0.0}
    assert r.credit == pytest.approx({"A": 0.5, "B": 0.5})
    assert cost.counterfactuals == 2  # {A} and {B}; the empty sub-team never ran
    # with no frozen collaborator at all the empty team has no member and is worth 0 too
    system, items, policies = team(Quorum(), {"A": ["7"], "B": ["7"]})
    system = system.replace(members=("A", "B"))
    (r,), cost = collect_with_cost(system, items, policies, RolloutPlan(1, 0), "shapley")
    assert r.values[S()] == 0.0 and r.values[S("A")] == 0.0 and r.values[S("AB")] == 1.0
    assert cost.counterfactuals == 2


@dataclass
class NeedsA(Highest):
    """Highest, but a program without member A fails (as a bug or a bad reply would)."""

    name: ClassVar[str] = "needs_a"

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        if "A" not in ctx.members:
            raise RuntimeError("no A")
        return (yield from super().program(ctx))


def test_a_failed_counterfactual_scores_zero_and_is_counted():
    (r,), cost = run(NeedsA(), {"A": ["1"], "B": ["7"]}, "loo")
    assert r.error is None and r.reward == 1.0
    assert r.values == {S("AB"): 1.0, S("A"): 0.0, S("B"): 0.0}  # {B} failed: 0, like a failed episode
    assert r.credit == {"A": 1.0, "B": 1.0} and cost.failed == 1 and cost.counterfactuals == 2
