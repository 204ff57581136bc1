"""The zoo's tasks: reasoning-gym datasets with the small settings the tiny zoo models are trained and
scored on (``zoo:arith``, ``zoo:sum``, ``zoo:reverse``). They live with the tasks (the zoo's models in
``agents/zoo.py`` read them), so the task layer never imports a backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UnknownNameError


@dataclass(frozen=True)
class ZooTask:
    """A reasoning-gym dataset with the small settings the zoo trains and is scored on."""

    name: str
    dataset: str
    config: Mapping[str, Any]
    max_split_overlap: float = 0.05  # one-digit arithmetic has 360 questions: independent splits share most

    def task(self, size: int = 200, seed: int = 0) -> Any:
        """The project Task (``rg/<dataset>`` with these settings, named ``zoo:<name>``): usable with every
        protocol and env."""
        from .reasoning_gym import ReasoningGymTask

        task = ReasoningGymTask(self.dataset, size=size, seed=seed, config=dict(self.config), name=f"zoo:{self.name}")
        task.max_split_overlap = self.max_split_overlap
        return task


ZOO_TASKS: dict[str, ZooTask] = {
    # "Calculate 7 * 8." : one-digit operands, +, -, *.
    "arith": ZooTask("arith", "basic_arithmetic",
                     {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
                      "operators": ("+", "-", "*"), "allow_parentheses": False, "allow_negation": False},
                     max_split_overlap=1.0),
    # "State the final answer to the following arithmetic problem: 4 + 7 ="
    "sum": ZooTask("sum", "chain_sum", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
                   max_split_overlap=1.0),
    # "Spell this word backward (example: sun -> nus): chess"
    # 3-5 letter words: a 4,000-item train split (the zoo's) holds 49 of 200 test words
    "reverse": ZooTask("reverse", "spell_backward", {"min_word_len": 3, "max_word_len": 5}, max_split_overlap=0.3),
}


def zoo_task(name: str, size: int = 200, seed: int = 0) -> Any:
    """The Task behind a zoo task name (``arith``, ``sum``, ``reverse``)."""
    if name not in ZOO_TASKS:
        raise UnknownNameError("zoo task", name, ZOO_TASKS)
    return ZOO_TASKS[name].task(size=size, seed=seed)
