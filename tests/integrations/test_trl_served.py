"""TRL over the wire: GRPOTrainer trains a policy seat served by two `cgym serve` processes (examples/trl/
trl_openenv.py), and every reward it got equals the in-process environment's for the same item, episode seed and
replies."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("openenv.core.env_server")
pytest.importorskip("trl")

from conftest import REPO  # noqa: E402

from coalition_gym.envs.gym_env import CollaborationEnv  # noqa: E402
from coalition_gym.envs.system import SystemSpec  # noqa: E402


def load_example():
    spec = importlib.util.spec_from_file_location("trl_openenv", REPO / "examples" / "trl" / "trl_openenv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay_in_process(env: CollaborationEnv, row: dict) -> float:
    env.reset(options={"item_id": row["item_id"], "episode_seed": row["episode_seed"]})
    replies = list(row["replies"])
    while True:
        _, reward, done, _, _ = env.step(replies.pop(0) if replies else "")
        if done:
            assert replies == []  # the seat was asked exactly as often over the wire
            return reward


def test_grpo_trains_two_steps_against_two_servers_with_the_in_process_rewards(tmp_path):
    record = load_example().main(["--out", str(tmp_path), "--steps", "2", "--servers", "2"])
    assert len(record["servers"]) == 2 and len(record["steps"]) == 2
    assert len(record["mean_reward_per_step"]) == 2
    env = CollaborationEnv(SystemSpec("debate", task="zoo:arith", collaborators="sim:demo", members=["delta"],
                                      task_kwargs={"size": 200, "seed": 0}, protocol_settings={"rounds": 2}),
                           policy_style="compact")
    for step, rows in enumerate(record["steps"]):
        assert len(rows) == 16  # 4 prompts x G=4
        assert all(row["system_score"] is not None for row in rows)
        assert [replay_in_process(env, row) for row in rows] == [row["system_score"] for row in rows]
        assert all(len(row["replies"]) == 2 for row in rows)  # debate of 2 rounds: the seat answered twice
        mean = sum(row["system_score"] for row in rows) / len(rows)
        assert record["mean_reward_per_step"][step] == pytest.approx(mean)
    assert (tmp_path / "served.json").exists()
    assert any(g for g in record["grad_norm_per_step"])  # some group's rewards differed: TRL really trained


def test_a_served_run_whose_groups_cannot_teach_anything_says_so(tmp_path):
    """Two frozen members that outvote the seat: every group scores alike, and the run warns while it trains."""
    from coalition_gym.training.trl_adapter import NoSignalWarning

    with pytest.warns(NoSignalWarning, match="no learning signal"):
        record = load_example().main(["--out", str(tmp_path), "--steps", "1", "--servers", "1",
                                      "--members", "atlas,delta"])
    assert record["informative_groups_per_step"] == [0.0]
