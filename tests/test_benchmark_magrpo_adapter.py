"""benchmarks/magrpo_adapter.py: CoMLRL's MAGRPO rewarded by our protocol's system score.

The reward part needs no comlrl (it is checked everywhere); the end-to-end MAGRPO step runs where the
``bench`` extra is installed (``pip install -e '.[bench]'``) and skips elsewhere."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from magrpo_adapter import SystemReward, train_magrpo  # noqa: E402

from coalition_gym.agents.hf import HFGenerator  # noqa: E402
from coalition_gym.envs.system import System, SystemSpec  # noqa: E402
from coalition_gym.errors import ConfigError  # noqa: E402
from coalition_gym.training.policy_model import load_policy  # noqa: E402

SEATS = ["a", "b"]


def team_system():
    spec = SystemSpec("majority_vote", "zoo:arith", "sim:split", ["ana"], "train", {"size": 40},
                      {"tie_break": "random", "temperature": 1.0, "max_new_tokens": 8})
    return System.build(spec, {s: "compact" for s in SEATS})


@pytest.fixture(scope="module")
def pico():
    return load_policy("zoo:tiny/pico", "cpu")


def test_the_reward_is_the_system_score_of_the_seated_completions(pico):
    system = team_system()
    _, tokenizer = pico
    reward = SystemReward(system, SEATS, {s: tokenizer for s in SEATS}, seed=0)
    items = list(system.task.items("train"))[:3]
    rows = reward.dataset(items)
    formatters = reward.formatters()
    for row, item in zip(rows, items):
        prompts = [f(row) for f in formatters]
        ask = reward._episode(row["item_id"]).pending("a")
        assert prompts[0] == HFGenerator(pico[0], tokenizer).render(ask.messages)  # what our backend feeds the seat
        right, wrong = f"Answer: {item.gold}", f"Answer: {int(item.gold) + 7}"
        assert reward([right], [right], batch_items=[row]) == [1.0]  # two of three votes
        # two equal wrong votes beat ana's one: the system answers theirs, scored as the task scores it
        expected = system.task.score_batch([str(int(item.gold) + 7)], [item])[0].score
        assert expected < 1.0 and reward([wrong], [wrong], batch_items=[row]) == [expected]
    assert reward.calls == 6 and reward.solo["a"][0::2] == [1.0] * 3


def test_the_collaborators_draw_once_per_group(pico):
    system = team_system()
    reward = SystemReward(system, SEATS, {s: pico[1] for s in SEATS}, seed=0)
    (row,) = reward.dataset(list(system.task.items("train"))[:1])
    first = reward.formatters()[0]
    first(row)
    seed = reward._episode_seed(row["item_id"])
    assert reward._episode_seed(row["item_id"]) == seed  # the G completions of a row share the draw
    first(row)  # the same item drawn again: a new group
    assert reward._episode_seed(row["item_id"]) != seed


def test_a_protocol_asking_a_seat_twice_is_refused(pico):
    spec = SystemSpec("slm_mux", "zoo:arith", "sim:split", ["ana"], "train", {"size": 40}, {"samples": 2})
    system = System.build(spec, {s: "compact" for s in SEATS})
    reward = SystemReward(system, SEATS, {s: pico[1] for s in SEATS}, seed=0)
    (row,) = reward.dataset(list(system.task.items("train"))[:1])
    with pytest.raises(ConfigError, match="one-shot"):
        reward(["Answer: 1"], ["Answer: 1"], batch_items=[row])


def test_magrpo_trains_both_seats_on_the_system_reward():
    pytest.importorskip("comlrl")
    import torch

    system = team_system()
    models = {"a": load_policy("zoo:tiny/pico", "cpu"), "b": load_policy("zoo:tiny/nano", "cpu")}
    before = {s: [p.detach().clone() for p in m.parameters()] for s, (m, _) in models.items()}
    items = list(system.task.items("train"))[:4]
    out = train_magrpo(system, SEATS, models, items, {"seed": 0, "lr": 1e-2, "group_size": 2, "items_per_step": 2,
                                                      "max_new_tokens": 8, "temperature": 1.0})
    assert out["optimiser_steps"] == 2 and out["reward_calls"] == len(items) * 2
    for s, (m, _) in models.items():
        assert any(not torch.equal(a, b) for a, b in zip(before[s], m.parameters())), f"seat {s} did not change"
