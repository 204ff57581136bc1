"""Train a zoo policy with TRL's ``GRPOTrainer``, rewarded by the *system* outcome of majority vote.

TRL samples the policy's reply; ``SystemOutcomeReward`` seats it in the protocol next to frozen simulated
collaborators and returns the system's score. One process, or several with ``torchrun`` (CPU: gloo)::

    python examples/trl/trl_grpo.py                                       # 2 steps of 4 prompts x G=4, seconds
    torchrun --nproc_per_node 2 examples/trl/trl_grpo.py --out runs/trl   # the same global batch over 2 ranks
    python examples/trl/trl_grpo.py --steps 50 --lr 3e-4 --lora-r 8       # longer, with a LoRA adapter (peft)

On GPUs (not run on the development machine, which has none): ``accelerate launch --config_file <a DeepSpeed
ZeRO-2/3 config> --num_processes 8 examples/trl/trl_grpo.py --gpu --policy <model folder> --lora-r 16``, and
with ``--vllm-server http://HOST:8000`` TRL generates through a ``trl vllm-serve --model <model folder>``
server on its own GPU. ``--lora-r`` hands TRL a ``peft_config`` on every linear layer.

Use ``torchrun``: ``accelerate launch --num_processes 2 --cpu`` started a single process on the development
machine. ``--prompts-per-step`` and ``--num-generations`` set the *global* batch (prompts x G completions per
optimiser step); each rank gets ``prompts x G / world_size`` completions, whole groups when the prompts divide
evenly, so the ranks' prompts are disjoint and together the one-process batch.

Episode seeds: the adapter draws the collaborators from the item and TRL's optimiser step (it reads
``trainer_state``), so every rank agrees, the split of prompts over ranks does not matter, and a resumed run
draws what an uninterrupted one would.

Prompts are chat messages when the tokenizer has a chat template (the zoo models' adds the BOS token they were
trained with), so TRL renders them as the project's own trainer does; as plain text the BOS would be missing.

Before training, the adapter's probe rolls out ``--probe-groups`` prompts x G with the untrained policy and stops
with the likely cause when no group's rewards differ (``--force`` trains anyway); during training the adapter
warns when every group scored alike for 5 consecutive steps.

Each rank writes ``<out>/rank<r>.json``: rank, world size, its step-1 shard (item ids, completions,
rewards, the reward call the seeds came from) and the logged mean reward per step.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Sequence

from coalition_gym.training.policy_model import resolve_policy
from coalition_gym.training.probe import NoSignalError
from coalition_gym.training.trl_adapter import SystemOutcomeReward, completion_text


class RecordedReward:
    """``SystemOutcomeReward`` with a record of its first call (this rank's step-1 shard)."""

    def __init__(self, reward: SystemOutcomeReward):
        self.reward = reward
        self.__name__ = reward.__name__  # TRL names the reward column by it
        self.first: dict[str, Any] | None = None

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], item_id: Sequence[str],
                 **kwargs: Any) -> list[float]:
        rewards = self.reward(prompts, completions, item_id, **kwargs)
        if self.first is None:
            self.first = {"item_ids": list(item_id), "completions": [completion_text(c) for c in completions],
                          "rewards": [float(r) for r in rewards], "reward_call": self.reward.calls}
        return rewards


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--policy", default="zoo:tiny/0", help="zoo:<recipe>/<member> or an HF model folder")
    p.add_argument("--protocol", default="majority_vote", help="a one-shot protocol")
    p.add_argument("--task", default="zoo:arith")
    p.add_argument("--task-size", type=int, default=200)
    p.add_argument("--collaborators", default="sim:demo")
    p.add_argument("--members", default="atlas,delta", help="comma-separated; '' for the whole pool")
    p.add_argument("--train-items", type=int, default=64, help="first N train items form the dataset")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--prompts-per-step", type=int, default=4, help="global, over all ranks")
    p.add_argument("--num-generations", type=int, default=4, help="G completions per prompt")
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--temperature", type=float, default=0.7, help="majority vote's default")
    p.add_argument("--greedy", action="store_true", help="greedy decoding (a deterministic check, no learning; "
                                                         "no probe)")
    p.add_argument("--probe-groups", type=int, default=8, help="prompts x G completions probed before training; 0: "
                                                               "no probe")
    p.add_argument("--force", action="store_true", help="train even when the probe finds no learning signal")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--lora-r", type=int, default=0, help="0: full fine-tuning; >0: a peft LoRA adapter")
    p.add_argument("--lora-alpha", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpu", action="store_true", help="train on the GPU in bf16 (default: CPU, float32)")
    p.add_argument("--vllm-server", default=None, metavar="URL",
                   help="generate with a `trl vllm-serve` server at URL (TRL's server mode; GPU only)")
    p.add_argument("--out", default="trl_grpo_out")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        raise SystemExit("this example needs TRL: pip install 'coalition-gym[trl]'") from None

    hf_logging.disable_progress_bar()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))  # ranks share the cores
    completions_per_step = args.prompts_per_step * args.num_generations
    if completions_per_step % world:
        raise SystemExit(f"{args.prompts_per_step} prompts x G={args.num_generations} do not split over {world} ranks")

    members = [m for m in args.members.split(",") if m] or None
    reward = RecordedReward(SystemOutcomeReward(
        args.protocol, task=args.task, task_kwargs={"size": args.task_size}, collaborators=args.collaborators,
        members=members, policy_style="compact", seed=args.seed))
    path = resolve_policy(args.policy)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    # chat-shaped prompts where the tokenizer has a chat template (the zoo's opens with BOS): TRL then applies it,
    # and the policy reads the prompt the project's own trainer gives it; plain text would drop the BOS
    conversational = bool(getattr(tokenizer, "chat_template", None))
    peft_config = None
    if args.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    if args.probe_groups > 0 and not args.greedy:  # no informative group: TRL would log grad_norm 0 throughout
        try:
            reward.reward.probe(model, tokenizer, groups=args.probe_groups, group_size=args.num_generations,
                                max_new_tokens=args.max_new_tokens, temperature=args.temperature, force=args.force)
        except NoSignalError as exc:
            raise SystemExit(f"{exc}\n(this example: --force trains anyway)") from None
    config = GRPOConfig(
        output_dir=args.out, per_device_train_batch_size=completions_per_step // world,
        num_generations=args.num_generations, max_completion_length=args.max_new_tokens, max_steps=args.steps,
        learning_rate=args.lr, temperature=args.temperature, seed=args.seed, use_cpu=not args.gpu, bf16=args.gpu,
        **({"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": args.vllm_server}
           if args.vllm_server else {}),
        report_to="none", logging_steps=1, save_strategy="no", disable_tqdm=True,
        generation_kwargs={"do_sample": False} if args.greedy else None)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=config,
                          train_dataset=reward.reward.dataset("train", limit=args.train_items,
                                                              conversational=conversational),
                          peft_config=peft_config)
    trainer.train()

    rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
    rewards_per_step = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    first = reward.first or {}
    record = {"rank": rank, "world_size": world, "policy": args.policy, "protocol": args.protocol,
              "per_device_batch": config.per_device_train_batch_size, "step1": first,
              "step1_prompts": sorted(set(first.get("item_ids", []))), "mean_reward_per_step": rewards_per_step}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(record, indent=2) + "\n")
    shard = record["step1_prompts"]
    print(f"rank {rank}/{world}: step 1 scored {len(first.get('rewards', []))} completions of {len(shard)} prompts "
          f"({', '.join(i.rsplit('/', 1)[-1] for i in shard)}), system reward mean "
          f"{sum(first.get('rewards', [0])) / max(1, len(first.get('rewards', []))):.3f}")
    if rank == 0:
        print(f"mean system reward per step: {', '.join(f'{r:.3f}' for r in rewards_per_step)}")
        print(f"wrote {out}/rank*.json")
    return record


if __name__ == "__main__":
    main()
