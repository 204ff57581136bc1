"""The collaborative-training methods on the tiny zoo (CPU): the full coalition before and after each
method, leave-one-out of every member with training inside (n + 1 trainings per method), which
members the training helped, and what training cost.

Settings, fixed before any result was seen: pool ``zoo:default`` (abacus, quill, polymath, sprout),
task ``mix:zoo:arith,zoo:reverse,zoo:sum`` (the zoo's three tasks, so no single member covers it),
200 test items, 96 training prompts (train split) and 60 dev items, the methods' default iterations
(Sparta 3, multi-agent finetuning 1), DPO beta 0.1, batch 16, one epoch, and learning rate 1e-4 for
both methods: the references' 1e-6 (Sparta) and 1e-5 (multi-agent finetuning) are for 7B models
trained with LoRA; the zoo models were trained from scratch at 3e-3 to 5e-3, and 1e-4 is a small step
at their scale. Seed 0.

- before: the method's evaluation program on the untrained members (Sparta: the member with the best
  dev score answers alone; multi-agent finetuning: a 2-round debate with majority vote).
- after: the same program on the members the method trained in the full coalition.
- helped: each member's solo test score (one greedy answer per item) after vs before training in the
  full coalition, with a paired bootstrap CI of the difference.

    .venv/bin/python benchmarks/collab_training.py [--quick] [--out benchmarks/results/collab_training.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import elapsed_seconds, machine_info, write_json  # noqa: E402

from coalition_gym.agents.pools import Pool, load_pool  # noqa: E402
from coalition_gym.envs.protocols import make_protocol  # noqa: E402
from coalition_gym.envs.system import System, SystemSpec  # noqa: E402
from coalition_gym.tasks import make as make_task  # noqa: E402
from coalition_gym.training.collaborative import TrainedCoalitionGame, make_coalition_settings  # noqa: E402
from coalition_gym.training.collaborative.common import dev_score  # noqa: E402
from coalition_gym.training.collaborative.members import copy_member  # noqa: E402
from coalition_gym.types import SamplingParams  # noqa: E402
from coalition_gym.valuation.estimators import ESTIMATORS  # noqa: E402
from coalition_gym.valuation.game import CoalitionGame  # noqa: E402
from coalition_gym.valuation.stats import bootstrap_mean  # noqa: E402

METHODS = ("sparta", "multiagent_finetuning")


def ci(per_item: np.ndarray, seed: int = 0) -> list[float]:
    b = bootstrap_mean(per_item[None, :], n_boot=2000, seed=seed)
    return [float(b.mean[0]), float(b.ci_low[0]), float(b.ci_high[0])]


def on_test_items(protocol, task, pool: Pool, items) -> System:
    """``protocol`` over ``pool`` on ``items``, the first test items of ``task``."""
    return System.build(SystemSpec(protocol, task, pool, split="test", n_items=len(items)))


def solo_per_item(pool: Pool, task, items, seed: int) -> dict[str, np.ndarray]:
    """Each member's single greedy answer per item."""
    single = make_protocol("majority_vote", temperature=0.0, max_new_tokens=16)
    game = CoalitionGame(on_test_items(single, task, pool, items), seed=seed)
    return {m: game.per_item([m]) for m in pool.member_names}


def before(method: str, pool: Pool, task, items, dev, seed: int) -> np.ndarray:
    if method == "sparta":
        greedy = SamplingParams(temperature=0.0, max_new_tokens=16)
        scores = {m: dev_score(copy_member(m, pool), task, dev, greedy, seed) for m in pool.member_names}
        best = max(scores, key=lambda m: (scores[m], -pool.member_names.index(m)))
        return CoalitionGame(on_test_items(make_protocol("majority_vote", max_new_tokens=16), task, pool, items),
                             seed=seed).per_item([best])
    debate = make_protocol("debate", rounds=2, max_new_tokens=16)
    return CoalitionGame(on_test_items(debate, task, pool, items), seed=seed).per_item(pool.member_names)


def run(method: str, pool: Pool, task, items, settings: dict, seed: int) -> dict:
    recipe = make_coalition_settings(method, **settings)
    game = TrainedCoalitionGame(recipe, on_test_items(recipe.evaluation, task, pool, items), seed=seed, progress=True)
    start = time.perf_counter()
    loo = ESTIMATORS["loo"](game, n_boot=2000, seed=seed)
    full = frozenset(game.players)
    trained = game.trained[full]
    trained_pool = Pool(members={n: m.generator for n, m in trained.members.items()},
                        styles=dict(pool.styles), name=f"{pool.name}+{method}")
    solo_before = solo_per_item(pool, task, items, seed)
    solo_after = solo_per_item(trained_pool, task, items, seed)
    helped = {m: {"before": ci(solo_before[m]), "after": ci(solo_after[m]),
                  "difference": ci(solo_after[m] - solo_before[m])} for m in pool.member_names}
    return {"method": method, "settings": recipe.settings(),
            "before": ci(before(method, pool, task, items, game.dev_items, seed)),
            "after": ci(game.per_item(full)), "answered_by": trained.answerers,
            "loo": {m: [float(loo.values[k]), float(loo.ci_low[k]), float(loo.ci_high[k])]
                    for k, m in enumerate(game.players)},
            "helped": helped, "cost": game.training_summary() | {"wall_seconds": time.perf_counter() - start},
            "record": trained.record}


def fmt(x: list[float]) -> str:
    return f"{x[0]:.3f} [{x[1]:.3f}, {x[2]:.3f}]"


def markdown(result: dict) -> str:
    lines = [f"# Collaborative training on {result['pool']}, {result['task']} ({result['items']} test items)", "",
             "| method | full coalition before | after | answered by | trainings | training s | training generations |",
             "|---|---|---|---|---|---|---|"]
    for r in result["methods"]:
        c = r["cost"]
        lines.append(f"| {r['method']} | {fmt(r['before'])} | {fmt(r['after'])} | {', '.join(r['answered_by'])} | "
                     f"{c['trainings']} | {c['training_seconds']:.0f} | {c['training_generations']} |")
    lines += ["", "Leave-one-out with training inside (95% bootstrap CIs over items), and each member's solo test "
              "score before and after the training it got in the full coalition:", "",
              "| method | member | LOO | solo before | solo after | after - before |", "|---|---|---|---|---|---|"]
    for r in result["methods"]:
        for m, h in r["helped"].items():
            lines.append(f"| {r['method']} | {m} | {fmt(r['loo'][m])} | {fmt(h['before'])} | {fmt(h['after'])} | "
                         f"{fmt(h['difference'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="zoo:tiny, few items: checks the script runs")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    quick = args.quick
    pool_name = "zoo:tiny" if quick else "zoo:default"
    task_name = "zoo:arith" if quick else "mix:zoo:arith,zoo:reverse,zoo:sum"
    n_items, settings = (12, dict(train_items=8, dev_items=6)) if quick else (200, dict(train_items=96, dev_items=60))
    settings |= dict(lr=1e-4, max_new_tokens=16, batch_size=16, epochs=1)
    pool = load_pool(pool_name)
    task = make_task(task_name, size=max(n_items, 200))
    items = list(task.items("test"))[:n_items]
    result = {"machine": machine_info(), "pool": pool_name, "task": task_name, "items": len(items), "seed": 0,
              "methods": [run(m, pool, task, items, dict(settings), 0) for m in METHODS]}
    result["total_seconds"] = elapsed_seconds()
    text = markdown(result)
    print(text)
    out = Path(args.out or f"benchmarks/results/collab_training{'.quick' if quick else ''}.json")
    write_json(out, result)
    out.with_suffix(".md").write_text(text)
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
