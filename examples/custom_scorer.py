"""A new scorer: numeric answers count as right within a relative tolerance (1%), with partial credit
up to 10%, and say why they scored what they did.

A scorer is an answer kind (a parser and a rubric) that writes one method, its rubric ``score``: from a
readable final answer and the item to a ``ScoreResult`` (score in 0..1, whether the answer could be
read, a reason). Reading the final "Answer: ..." line, scoring unreadable or hostile answers 0 and the
batch call every driver makes (``Task.score_batch``) are inherited. ``register_answer_kind`` gives it a
name; a task takes it by naming it as its ``answer_kind``: here a reasoning-gym task keeps its items
and prompts and changes only that.

    python examples/custom_scorer.py
    cgym --import examples/custom_scorer.py eval --task tolerant_decimal_arithmetic --protocol majority_vote --items 30
"""

from __future__ import annotations

from coalition_gym import (
    AnswerKind,
    Item,
    ScoreResult,
    System,
    SystemSpec,
    load_pool,
    make_task,
    register_answer_kind,
    register_task,
    run_episodes,
)
from coalition_gym.tasks.reasoning_gym import ReasoningGymTask


def within_tolerance(answer: str | None, gold: str, exact: float = 0.01, partial: float = 0.10) -> ScoreResult:
    if answer is None:
        return ScoreResult(0.0, False, "no answer")
    try:
        value, target = float(answer.replace(",", "")), float(gold)
    except ValueError:
        return ScoreResult(0.0, False, f"not a number: {answer!r}")
    error = abs(value - target) / max(abs(target), 1e-9)
    if error <= exact:
        return ScoreResult(1.0, True, f"within {exact:.0%}")
    if error >= partial:
        return ScoreResult(0.0, True, f"off by {error:.1%}")
    return ScoreResult(round(1 - (error - exact) / (partial - exact), 4), True, f"off by {error:.1%}: partial credit")


class WithinTolerance(AnswerKind):
    name = "within_tolerance"

    def score(self, answer: str, item: Item) -> ScoreResult:  # the rubric: the one method a scorer writes
        return within_tolerance(answer, item.gold)


register_answer_kind("within_tolerance", WithinTolerance())  # now any task can name it as its answer_kind


class TolerantArithmetic(ReasoningGymTask):
    answer_kind = "within_tolerance"  # reasoning-gym's decimal arithmetic, scored with the rubric above

    def __init__(self, **kwargs):
        super().__init__("decimal_arithmetic", name="tolerant_decimal_arithmetic", **kwargs)


register_task("tolerant_decimal_arithmetic", TolerantArithmetic)


if __name__ == "__main__":
    for answer in ("12.3", "12.5", "13.0", "x"):
        print(f"{answer!r} for gold 12.3 ->", within_tolerance(answer, "12.3"))
    task, pool = make_task("tolerant_decimal_arithmetic", size=30), load_pool("sim:demo")
    strict = make_task("rg/decimal_arithmetic", size=30)
    for t in (strict, task):
        system = System.build(SystemSpec("majority_vote", t, pool, split="test"))
        results = run_episodes(system, system.items, seed=0)
        print(f"{t.name}: {sum(r.score for r in results) / len(results):.3f}")
