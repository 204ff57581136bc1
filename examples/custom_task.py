"""A new task: count the vowels of a word. Items per split, a prompt, answer extraction, a score.

A task owns its items (``items(split)``: train, dev and test must not overlap), how a question is
asked (``prompt``, inherited here), how a final answer is read from a reply (``extract``, inherited:
the last "Answer: ..." line) and how it is scored (``score``: 0..1). Every protocol, env and the
leaderboard take a Task object wherever they take a task name, and ``register_task`` gives it a name.

    python examples/custom_task.py
"""

from __future__ import annotations

import random

import gymnasium as gym

from coalition_gym import Item, Task, load_pool, make_protocol, make_task, register_task, run_episodes

WORDS = ("collaboration", "shapley", "gymnasium", "protocol", "coalition", "leaderboard", "transformer",
         "bootstrap", "reinforcement", "aggregator", "debate", "router", "cascade", "mixture", "consensus")
SPLIT_SEEDS = {"test": 0, "dev": 1, "train": 2}


class VowelCount(Task):
    name = "vowel_count"
    category = "counting"
    source = "generated in examples/custom_task.py"

    def __init__(self, size: int = 50):
        self.size = size

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        rng = random.Random(SPLIT_SEEDS[split])  # one seed per split: the splits are drawn independently
        items = []
        for k in range(self.size):
            word = "".join(rng.sample(WORDS, 2))
            items.append(Item(id=f"{self.name}/{split}/{k}", question=f"How many vowels (a, e, i, o, u) are "
                              f"in the word '{word}'?", gold=str(sum(c in "aeiou" for c in word)),
                              category=self.category))
        return items

    def score(self, answer: str | None, item: Item) -> float:
        return float(answer is not None and answer.strip() == item.gold)


register_task("vowel_count", VowelCount)  # now make_task("vowel_count"), --task vowel_count, cgym tasks


if __name__ == "__main__":
    task, pool = make_task("vowel_count", size=30), load_pool("sim:independent")
    results = run_episodes(make_protocol("majority_vote"), task, task.items("test"), pool.member_names,
                           pool.backends(), seed=0)
    print(f"majority vote on {task.name}: {sum(r.score for r in results) / len(results):.3f}")
    env = gym.make("coalition_gym/Debate-v0", task="vowel_count", collaborators="sim:independent", rounds=2)
    obs, info = env.reset(seed=0)  # a training split item: environments are for training
    print(info["item_id"], "|", obs.splitlines()[-3])
