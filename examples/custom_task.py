"""A new task: count the vowels of a word. Items per split, and the kind of answer they expect.

A task owns its items (``items(split)``: train, dev and test must not share questions; here each split
is its own slice of the shuffled question space) and names its answer kind (``answer_kind``), which
shows the question, reads the final answer from a reply (the last "Answer: ..." line) and scores it
(0..1): here the built-in ``numeric`` kind; a new rubric is an answer kind of your own
(examples/custom_scorer.py). Every protocol, env and the leaderboard take a Task object wherever
they take a task name, and ``register_task`` gives it a name. A factory gets only the options it
declares: this one takes ``size``, so ``--task-seed`` is simply not passed to it.

    python examples/custom_task.py
    cgym --import examples/custom_task.py eval --task vowel_count --protocol majority_vote --items 30
"""

from __future__ import annotations

import itertools
import random

import gymnasium as gym

from coalition_gym import Item, System, SystemSpec, Task, load_pool, make_task, register_task, run_episodes
from coalition_gym.errors import ConfigError

WORDS = ("collaboration", "shapley", "gymnasium", "protocol", "coalition", "leaderboard", "transformer",
         "bootstrap", "reinforcement", "aggregator", "debate", "router", "cascade", "mixture", "consensus")
SPLIT_ORDER = ("test", "dev", "train")
QUESTIONS = [a + b for a, b in itertools.permutations(WORDS, 2)]  # 210 two-word questions
random.Random(0).shuffle(QUESTIONS)


class VowelCount(Task):
    name = "vowel_count"
    category = "counting"
    source = "generated in examples/custom_task.py"
    answer_kind = "numeric"  # read the final "Answer:" line, right when it is the gold number

    def __init__(self, size: int = 50):
        if not 1 <= size <= len(QUESTIONS) // len(SPLIT_ORDER):
            raise ConfigError(f"vowel_count: size {size} out of range; three disjoint splits of "
                              f"{len(QUESTIONS)} questions hold at most {len(QUESTIONS) // len(SPLIT_ORDER)} each")
        self.size = size

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        start = SPLIT_ORDER.index(split) * self.size  # disjoint slices: no test question is a train question
        return [Item(id=f"{self.name}/{split}/{k}", question=f"How many vowels (a, e, i, o, u) are in the word "
                     f"'{word}'?", gold=str(sum(c in "aeiou" for c in word)), category=self.category)
                for k, word in enumerate(QUESTIONS[start:start + self.size])]


register_task("vowel_count", VowelCount)  # now make_task("vowel_count"), --task vowel_count, cgym tasks


if __name__ == "__main__":
    task, pool = make_task("vowel_count", size=30), load_pool("sim:independent")
    system = System.build(SystemSpec("majority_vote", task, pool, split="test"))
    results = run_episodes(system, system.items, seed=0)
    print(f"majority vote on {task.name}: {sum(r.score for r in results) / len(results):.3f}")
    env = gym.make("coalition_gym/Debate-v0", task="vowel_count", collaborators="sim:independent", rounds=2)
    obs, info = env.reset(seed=0)  # a training split item: environments are for training
    print(info["item_id"], "|", obs.splitlines()[-3])
