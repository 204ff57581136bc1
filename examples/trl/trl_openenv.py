"""Train the policy seat of a protocol *served over the wire* with TRL's ``GRPOTrainer``: the frozen members run in
one or two ``cgym serve`` processes, the trainer's model answers the seat through OpenEnv's WebSocket sessions.

    python examples/trl/trl_openenv.py                      # starts 2 local `cgym serve` servers itself, 2 steps
    cgym serve coalition_gym/Debate-v0 --pool sim:demo --members delta --task zoo:arith --size 200 \\
        --set rounds=2 --policy-style compact --port 8123 &
    python examples/trl/trl_openenv.py --server http://127.0.0.1:8123   # against a server you started

The path is ``GRPOTrainer(rollout_func=ServedRollout(...))`` (coalition_gym/integrations/openenv_rollout.py says
why not TRL's async OpenEnv harness: it samples through a vLLM server and drives tool-calling agents). Episode seeds
are the item's and TRL's step's, so the rewards are those the in-process environment gives the same replies; the
record written to ``<out>/served.json`` holds every row (item, episode seed, the seat's replies, the reward) so that
anyone can replay it in-process (tests/integrations/test_trl_served.py does).
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

from coalition_gym.integrations.openenv_rollout import ServedRollout
from coalition_gym.integrations.processes import ServerProcess
from coalition_gym.training.policy_model import resolve_policy


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--server", action="append", default=[], metavar="URL",
                   help="a running `cgym serve` server, repeatable (default: start --servers local ones)")
    p.add_argument("--servers", type=int, default=2, help="local servers to start when no --server is given")
    p.add_argument("--token", default=None, help="the servers' bearer token, if they require one")
    p.add_argument("--env-id", default="coalition_gym/Debate-v0")
    p.add_argument("--pool", default="sim:demo")
    # one frozen peer, the weakest: the seat's reply often decides the vote, so groups differ and TRL's gradient is
    # not 0 (with atlas and delta the pair outvotes the seat and every group scores alike)
    p.add_argument("--members", default="delta")
    p.add_argument("--task", default="zoo:arith")
    p.add_argument("--task-size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--policy", default="zoo:tiny/pico", help="zoo:<recipe>/<member> or an HF model folder")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--watch-steps", type=int, default=1,
                   help="warn after this many consecutive steps in which no group's rewards differed (0: never)")
    p.add_argument("--out", default="trl_openenv_out")
    return p.parse_args(argv)


def server_args(args: argparse.Namespace) -> list[str]:
    """What a local `cgym serve` is started with: the system the trainer's dataset assumes."""
    return ["--pool", args.pool, "--members", args.members, "--task", args.task, "--size", str(args.task_size),
            "--set", f"rounds={args.rounds}", "--policy-style", "compact"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        raise SystemExit("this example needs TRL: pip install 'coalition-gym[trl,serve]'") from None

    hf_logging.disable_progress_bar()
    with ExitStack() as stack:
        urls = list(args.server)
        if not urls:
            servers = [ServerProcess(args.env_id, server_args(args)).launch() for _ in range(args.servers)]
            for server in servers:
                stack.callback(server.stop)
            urls = [server.wait_ready().url for server in servers]
        rollout = ServedRollout(urls, task=args.task, task_kwargs={"size": args.task_size, "seed": 0},
                                token=args.token, policy_style="compact", seed=args.seed,
                                watch_steps=args.watch_steps)
        stack.callback(rollout.close)
        steps: list[list[dict[str, Any]]] = []

        def rollout_func(prompts: Any, trainer: Any) -> dict[str, list]:
            out = rollout(prompts, trainer)
            steps.append([r.as_dict() for r in rollout.last_episodes])
            return out

        path = resolve_policy(args.policy)
        model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
        batch = args.prompts_per_step * args.num_generations
        config = GRPOConfig(output_dir=args.out, per_device_train_batch_size=batch,
                            num_generations=args.num_generations, max_completion_length=args.max_new_tokens,
                            max_steps=args.steps, learning_rate=args.lr, temperature=1.0, seed=args.seed,
                            use_cpu=True, bf16=False, report_to="none", logging_steps=1, save_strategy="no",
                            disable_tqdm=True)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=rollout.reward, args=config,
                              rollout_func=rollout_func, train_dataset=rollout.dataset("train", limit=16))
        trainer.train()
    logs = [row for row in trainer.state.log_history if "reward" in row]
    rewards = [row["reward"] for row in logs]
    record = {"servers": urls, "env_id": args.env_id, "server_args": server_args(args), "steps": steps,
              "mean_reward_per_step": rewards, "grad_norm_per_step": [row.get("grad_norm") for row in logs],
              "informative_groups_per_step": [row.get("informative_groups") for row in logs]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "served.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"trained {len(steps)} steps against {len(urls)} server(s); mean system reward per step: "
          f"{', '.join(f'{r:.3f}' for r in rewards)}; grad norm per step: "
          f"{', '.join(f'{g:.3g}' for g in record['grad_norm_per_step'] if g is not None)}; wrote {out}/served.json")
    return record


if __name__ == "__main__":
    main()
