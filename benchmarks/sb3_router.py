"""Stable-Baselines3 PPO learns a router over simulated specialists, judged on held-out items.

The policy takes the router's seat in ``PromptRouting-v0`` (``helper_seat="router"``) through
``DiscreteChoiceWrapper`` (hashed n-grams of the question -> which member answers). Compared on the
test split with random routing, every single member, and the simulated description-reading router.

    .venv/bin/python benchmarks/sb3_router.py [--timesteps 4096] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from statistics import fmean

import gymnasium as gym
import numpy as np
from _common import elapsed_seconds, machine_info, write_json

import coalition_gym  # noqa: F401  (registers the ids)
from coalition_gym.envs.wrappers import DiscreteChoiceWrapper

TASK = "mix:rg/basic_arithmetic,rg/letter_counting,rg/syllogism"
MEMBERS = ["mathy", "wordy", "logician"]


def make_env(split: str, size: int, seat: bool = True):
    kwargs = {"helper_seat": "router"} if seat else {}
    return gym.make("coalition_gym/PromptRouting-v0", task=TASK, task_kwargs={"size": size},
                    collaborators="sim:specialists", split=split, **kwargs)


def held_out(env, pick, n: int) -> float:
    scores = []
    for i, item in enumerate(env.unwrapped.system.items[:n]):
        obs, _ = env.reset(seed=i, options={"item_id": item.id})
        scores.append(env.step(pick(obs))[1])
    return fmean(scores)


def main() -> None:
    from stable_baselines3 import PPO

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=4096)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--items", type=int, default=300, help="items per task and split")
    parser.add_argument("--out", default="benchmarks/results/sb3_router.json")
    args = parser.parse_args()
    test = DiscreteChoiceWrapper(make_env("test", args.items), MEMBERS)
    n = len(test.unwrapped.system.items)
    rows: dict[str, list[float]] = {"PPO router": [], "random routing": []}
    train_seconds = []
    for seed in range(args.seeds):
        start = time.perf_counter()
        model = PPO("MlpPolicy", DiscreteChoiceWrapper(make_env("train", args.items), MEMBERS), n_steps=256,
                    batch_size=64, learning_rate=3e-3, gamma=0.0, seed=seed, verbose=0).learn(args.timesteps)
        train_seconds.append(time.perf_counter() - start)
        rows["PPO router"].append(held_out(test, lambda o: int(model.predict(o, deterministic=True)[0]), n))
        rng = np.random.default_rng(seed)
        rows["random routing"].append(held_out(test, lambda o: int(rng.integers(len(MEMBERS))), n))
    for k, member in enumerate(MEMBERS):
        rows[f"always {member}"] = [held_out(test, lambda o, k=k: k, n)]
    judge = make_env("test", args.items, seat=False)  # the simulated judge reading member descriptions
    rows["simulated description router"] = [held_out(judge, lambda o: "", n)]
    best_single = max(fmean(v) for name, v in rows.items() if name.startswith("always"))
    print(f"PromptRouting on {TASK}, sim:specialists, {n} held-out items, PPO {args.timesteps} steps x "
          f"{args.seeds} seeds ({fmean(train_seconds):.0f} s each)\n")
    print("| router | held-out system score | vs best single member |\n|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {fmean(values):.3f} | {fmean(values) - best_single:+.3f} |")
    write_json(args.out, {
        "benchmark": "sb3_router", "task": TASK, "held_out_items": n, "timesteps": args.timesteps,
        "train_seconds": train_seconds, "scores": rows, "best_single": best_single,
        "machine": machine_info(), "total_seconds": elapsed_seconds()})
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
