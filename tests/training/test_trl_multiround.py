"""TRL's GRPOTrainer inside multi-round protocols: ProtocolRollout as its rollout_func, the system outcome as reward."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from coalition_gym.agents.zoo import zoo_task
from coalition_gym.envs.protocols.base import Protocol
from coalition_gym.errors import ConfigError
from coalition_gym.training.policy_model import load_policy, resolve_policy
from coalition_gym.training.trl_rollouts import ProtocolRollout, replay
from coalition_gym.types import Outcome

POLICY = "zoo:tiny/0"


def make_rollout(protocol="debate", members=("atlas", "delta"), **kw):
    return ProtocolRollout(protocol, task=zoo_task("arith", size=30), collaborators="sim:demo", members=list(members),
                           policy_style="compact", **kw)


@pytest.fixture(scope="module")
def policy():
    return load_policy(POLICY, "cpu", "float32")


def fake_trainer(model, tokenizer, step=0, max_completion_length=8, temperature=0.9):
    """What ProtocolRollout reads of a GRPOTrainer, without building one."""
    args = SimpleNamespace(max_completion_length=max_completion_length, temperature=temperature, top_p=1.0)
    accelerator = SimpleNamespace(unwrap_model=lambda m: m, process_index=0)
    return SimpleNamespace(model=model, processing_class=tokenizer, args=args, accelerator=accelerator,
                           state=SimpleNamespace(global_step=step))


@dataclasses.dataclass
class FirstMemberOnly(Protocol):
    name = "first_member_only"

    def program(self, ctx):
        replies = yield [ctx.ask(ctx.members[0], ctx.question(ctx.members[0]), self.params, round_=0)]
        return Outcome(answer=ctx.task.extract(replies[0].text), text=replies[0].text, transcript=())


def test_bad_settings_and_prompts_are_refused_before_any_work(monkeypatch, policy):
    from coalition_gym.envs import protocols

    with pytest.raises(ConfigError, match="turns="):
        make_rollout(turns="every")
    monkeypatch.setitem(protocols.PROTOCOLS, "first_member_only", FirstMemberOnly)
    with pytest.raises(ConfigError, match="never asks the policy"):
        make_rollout("first_member_only")
    rollout = make_rollout()
    with pytest.raises(ConfigError, match="not in task"):
        rollout._item("zoo:arith/train/999")
    with pytest.raises(ConfigError, match="is not one of"):
        rollout.dataset("validation")
    model, tokenizer = policy
    with pytest.raises(ConfigError, match="not the first prompt of any item"):
        rollout(["Calculate 1 + 1.\nAnswer:", "What is the capital of France?"], fake_trainer(model, tokenizer))
    assert rollout.last_episodes == []  # refused before any execution ran
    with pytest.raises(ConfigError, match="rollout_func"):
        rollout.reward(["p"], ["c"])  # the reward without its rollout_func
    # turns="all" keeps every call in one context: default debate (3 rounds, long peer prompts) overflows pico
    long = make_rollout(turns="all")
    prompts = list(long.dataset("train", limit=1)["prompt"]) * 2
    with pytest.raises(ConfigError, match="turns='first'"):
        long(prompts, fake_trainer(model, tokenizer))


@pytest.mark.parametrize("turns", ["first", "all"])
def test_rows_hold_exactly_what_the_policy_sampled_and_replay_to_their_rewards(policy, turns):
    """Each row's policy tokens (env_mask 1) have, under the model on the row's own prefix, the log-probs
    they were sampled with: the context TRL's loss scores them in is the one they were sampled in. The G rows
    of a prompt share the episode seed; replaying each row's replies through a SeatedEpisode gives its reward."""
    from coalition_gym.agents.hf import sequence_logprobs

    model, tokenizer = policy
    rollout = make_rollout(members=("atlas",), rounds=2, turns=turns) if turns == "all" else make_rollout()
    ds = rollout.dataset("train", limit=3)
    group = 3
    prompts = [p for p in list(ds["prompt"]) for _ in range(group)]
    temperature = 0.9
    out = rollout(prompts, fake_trainer(model, tokenizer, step=4, temperature=temperature))
    records = rollout.last_episodes
    assert len(out["completion_ids"]) == len(records) == len(prompts)
    assert out["system_score"] == [r.system_score for r in records]
    assert [records[i].item_id for i in range(0, len(prompts), group)] == list(ds["item_id"])
    for g in range(0, len(prompts), group):  # common random numbers: one episode seed per group, step-derived
        seeds = {r.episode_seed for r in records[g:g + group]}
        assert seeds == {rollout.episode_seed(records[g].item_id, 5)}
    assert len({r.replies for r in records}) > len(ds)  # yet the policy's own draws differ inside a group
    calls = rollout.system.protocol.rounds if hasattr(rollout.system.protocol, "rounds") else 1
    for i, record in enumerate(records):
        prompt_ids, completion_ids, mask = out["prompt_ids"][i], out["completion_ids"][i], out["env_mask"][i]
        assert len(record.replies) == calls
        assert len(completion_ids) == len(mask) == len(out["logprobs"][i])
        recomputed = sequence_logprobs(model, [prompt_ids], [completion_ids], temperature,
                                       pad_id=tokenizer.pad_token_id)[0]
        trained = [k for k, m in enumerate(mask) if m]
        assert trained and all(abs(recomputed[k] - out["logprobs"][i][k]) < 1e-4 for k in trained)
        policy_text = tokenizer.decode([completion_ids[k] for k in trained if completion_ids[k] not in
                                        (tokenizer.eos_token_id,)], skip_special_tokens=True)
        expected = record.replies if turns == "all" else record.replies[:1]
        assert policy_text == "".join(expected)  # "first": the first call only; "all": every call
        assert replay(rollout, record) == (record.system_score, record.policy_score)


@pytest.mark.parametrize("turns", ["first", "all"])
def test_grpo_trainer_in_debate_logs_the_replayed_system_scores(tmp_path, turns):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    path = resolve_policy(POLICY)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    # one frozen peer (delta, the weakest): the policy's replies sometimes decide the vote, so some groups
    # differ in reward and TRL takes real gradient steps
    rollout = make_rollout(members=("delta",), rounds=2 if turns == "all" else 3, turns=turns)
    batches, rewards = [], []

    def rollout_func(prompts, trainer):
        out = rollout(prompts, trainer)
        batches.append(rollout.last_episodes)
        return out

    def reward(*args, **kwargs):
        values = rollout.reward(*args, **kwargs)
        rewards.append(values)
        return values

    reward.__name__ = rollout.reward.__name__
    steps = 3
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=16, num_generations=4,
                      max_completion_length=8, max_steps=steps, learning_rate=1e-3, use_cpu=True, report_to="none",
                      logging_steps=1, save_strategy="no", bf16=False, temperature=1.0, seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=args,
                          rollout_func=rollout_func, train_dataset=rollout.dataset("train", limit=16))
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logs) == len(batches) == len(rewards) == steps
    for step, (log, records, given) in enumerate(zip(logs, batches, rewards)):
        replayed = [replay(rollout, r) for r in records]
        assert given == [system for system, _ in replayed]  # TRL got the protocol's system scores...
        assert log["reward"] == pytest.approx(sum(given) / len(given))  # ...and logged them
        assert log["policy_score"] == pytest.approx(sum(own for _, own in replayed) / len(replayed))
        assert {r.episode_seed for r in records} == {rollout.episode_seed(r.item_id, step + 1) for r in records}
    informative = sum(log["frac_reward_zero_std"] < 1 for log in logs)
    changed = any(not bool((p.detach() == b).all()) for p, b in zip(model.parameters(), before))
    assert informative >= 1 and changed  # a group with unequal system scores moved the weights


@pytest.mark.parametrize("protocol,settings,calls", [("mixture_of_agents", {"layers": 2}, 2),
                                                     ("feedback", {}, 2)])
def test_other_multi_round_protocols_replay_to_their_rewards(policy, protocol, settings, calls):
    """Mixture-of-Agents with the policy as a proposer of every layer, and feedback (answer, then revise after
    the reviews): several policy calls per execution; every row replays to its reward."""
    model, tokenizer = policy
    rollout = make_rollout(protocol, **settings)
    prompts = [p for p in list(rollout.dataset("train", limit=2)["prompt"]) for _ in range(2)]
    rollout(prompts, fake_trainer(model, tokenizer))
    assert all(len(r.replies) >= calls for r in rollout.last_episodes)
    for record in rollout.last_episodes:
        assert replay(rollout, record) == (record.system_score, record.policy_score)
