"""A new training recipe: a settings class and a strategy, named once by ``register_recipe`` (every recipe
is called as ``train(settings, RecipeContext(out, options))``; ``train_policy_recipe`` runs the trainer's
loop with the strategy). This one is a prompt nudge that tries system prompts asking for a terse final
answer: no weight update, the trainer scores each candidate on dev inside the protocol and keeps the best
(a strategy that trains instead overrides ``update(updates, rollouts, rewards)`` and calls
``updates.policy_gradient`` or ``updates.sft``). ``cgym train --method terse_nudge`` and
``make_config("terse_nudge", ...)`` then know it, with its settings (``--set prompts=...``) checked like
the built-ins'.

    python examples/custom_training_recipe.py
    cgym --import examples/custom_training_recipe.py train --method terse_nudge --policy zoo:tiny/pico \
        --task zoo:arith --protocol majority_vote --set eval_items=8 --set test_items=8
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coalition_gym import RecipeContext, register_recipe
from coalition_gym.training.builtin_recipes import train_policy_recipe
from coalition_gym.training.config import TrainConfig, make_config
from coalition_gym.training.strategies import Strategy
from coalition_gym.training.trainer import RunOptions

TERSE = ("", "Answer with the number only.", "Reply in one line: Answer: <number>.")


@dataclass
class TerseNudgeConfig(TrainConfig):
    prompts: list[str] = field(default_factory=lambda: list(TERSE))


class TerseNudge(Strategy):
    trains = False  # the trainer selects among candidate_prompts() on dev instead of updating weights

    def candidate_prompts(self) -> list[str]:
        return list(self.config.prompts)


register_recipe("terse_nudge", TerseNudgeConfig, train_policy_recipe, strategy=TerseNudge,
                description="Prompt nudge toward terse answers (an example: examples/custom_training_recipe.py)")

if __name__ == "__main__":
    config = make_config("terse_nudge", preset="tiny", policies=["zoo:tiny/pico"], task="zoo:arith",
                         protocol="majority_vote", eval_items=8, test_items=8)
    report = train_policy_recipe(config, RecipeContext("runs/terse_nudge", RunOptions(progress=False)))
    print(f"chose {report['system_prompt']!r}: system score {report['collab']['mean']:.3f} on the test items")
