"""The TRL adapter: a protocol's system outcome as a GRPOTrainer reward, on a tiny zoo model."""

import pytest

from coalition_gym.agents.zoo import zoo_task
from coalition_gym.errors import ConfigError
from coalition_gym.training.trl_adapter import SystemOutcomeReward


def reward_fn(protocol="llm_blender", **kw):
    return SystemOutcomeReward(protocol, task=zoo_task("arith", size=30), collaborators="sim:demo",
                               members=["atlas", "delta"], policy_style="compact", **kw)


def test_rewards_are_system_scores_with_the_completion_seated():
    reward = reward_fn("majority_vote", tie_break="first")
    ds = reward.dataset("train", limit=3)
    assert ds[0]["prompt"].endswith("Answer:") and ds[0]["item_id"].startswith("zoo:arith/train/")
    item = reward._item(ds[0]["item_id"])
    right, wrong = f" {item.gold}", " 12345"
    system_right, own_right = reward.score_completion(item.id, right, episode_seed=1)
    system_wrong, own_wrong = reward.score_completion(item.id, wrong, episode_seed=1)
    assert own_right == 1.0 and own_wrong == 0.0
    assert system_right >= system_wrong  # a right policy answer never hurts a vote
    logged = {}
    out = reward([ds[0]["prompt"]] * 2, [right, [{"role": "assistant", "content": wrong}]], [item.id] * 2,
                 log_metric=lambda k, v: logged.setdefault(k, v))
    assert len(out) == 2 and logged["policy_score"] == 0.5


def test_multi_round_protocols_are_refused():
    reward = reward_fn("debate")
    ds = reward.dataset("train", limit=1)
    with pytest.raises(ConfigError, match="one-shot"):
        reward(ds["prompt"], [" 3"], ds["item_id"])


@pytest.mark.slow
def test_grpo_trainer_runs_a_few_steps_on_a_zoo_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from coalition_gym.training.trainer import resolve_policy

    path = resolve_policy("zoo:tiny/pico")
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    reward = reward_fn()
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, max_steps=2, learning_rate=1e-4, use_cpu=True, report_to="none",
                      logging_steps=1, save_strategy="no", bf16=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=args,
                          train_dataset=reward.dataset("train", limit=16))
    trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == 2 and all(0.0 <= row["reward"] <= 1.0 for row in logs)
    assert "policy_score" in logs[0] and reward.calls >= 2
