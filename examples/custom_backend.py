"""A new backend: any Python callable that writes text can be a pool member (here a calculator that
evaluates the question's arithmetic expression), next to simulated agents, HF models or servers.

A backend is a ``Generator``: ``generate(asks)`` returns one ``Sample`` per ``Ask``, in order, and the
sample may depend only on that Ask (its messages, sampling parameters and seed), never on the rest of
the batch. ``identity`` names the model behind it (generation-cache keys and run records use it).
``register_backend`` makes it a ``backend:`` kind of pool files.

    python examples/custom_backend.py
    cgym --import examples/custom_backend.py eval --pool calculator_pool.yaml --protocol debate --items 40

with calculator_pool.yaml listing ``{name: calculator, backend: calculator}`` among its members.
"""

from __future__ import annotations

from typing import Sequence

from coalition_gym import (
    Ask,
    CoalitionGame,
    EvalOptions,
    Generator,
    Sample,
    System,
    SystemSpec,
    evaluate,
    load_pool,
    make_protocol,
    make_task,
    register_backend,
)
from coalition_gym.reports.demo import calculator_policy
from coalition_gym.reports.leaderboard import format_leaderboard


class Calculator(Generator):
    identity = "example:calculator-v1"

    def generate(self, asks: Sequence[Ask]) -> list[Sample]:
        return [Sample(text=calculator_policy(ask.messages[-1].content)) for ask in asks]


# `backend: calculator` now works in pool files and config dicts, next to sim, hf, openai and vllm members
register_backend("calculator", lambda model, **options: Calculator())


if __name__ == "__main__":
    pool = load_pool({"name": "calculator+sim", "members": [
        {"name": "calculator", "backend": "calculator"},
        {"name": "atlas", "backend": "sim", "model": "sim:demo/atlas"},
        {"name": "delta", "backend": "sim", "model": "sim:demo/delta"}]})
    task = make_task("rg/basic_arithmetic", size=40)
    game = CoalitionGame(System.build(SystemSpec(make_protocol("debate", rounds=2), task, pool, split="test")))
    report = evaluate(game, ["shapley"], EvalOptions(n_boot=200))
    print(format_leaderboard(report))
    print("recorded as:", report.record["pool"]["members"]["calculator"])
