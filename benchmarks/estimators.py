"""Sampling Shapley estimators against shapiq's, at equal numbers of distinct coalitions, with their cost
in generations and the coverage of their intervals.

Games (fixed before any estimator was run): majority vote over ``sim:random-8``, ``-10`` and ``-12``
(the calibration games the default sampler is chosen on) and debate (2 rounds) over ``sim:random-8``
(held out: it is only reported), each on 40 items of ``rg/basic_arithmetic``. Every coalition is run
once, up front, recording its per-item scores and the cache keys of every generation it asks for, so
an estimate's cost in generations is the number of distinct keys of the coalitions it evaluated (what
a shared generation cache would have generated). Exact Shapley on the same table is the truth.

For each game, budget (2n, 5n, 10n, 25n, 50n distinct coalitions, capped at 2^n - 1) and seed:
ours (``hybrid``, the default, ``kernel``, ``stratified``, ``permutation``) and shapiq's SV approximators
(PermutationSamplingSV, KernelSHAP with pairing, kADD-SHAP, SVARM, StratifiedSamplingSV,
UnbiasedKernelSHAP; shapiq from ``benchmarks/.shapiq`` when installed there, or the environment:
``pip install --target benchmarks/.shapiq shapiq``; skipped with a note when absent). shapiq gets a
budget of b + 1 evaluations because it spends one on the empty coalition, which ours get for free;
the distinct non-empty coalitions it actually queried are recorded.

    .venv/bin/python benchmarks/estimators.py [--quick] [--seeds 20] [--out benchmarks/results/estimators.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from coalition_gym import load_pool, make_protocol, make_task
from coalition_gym.agents.cache import ask_key
from coalition_gym.envs.runner import episode_seed, run_programs, score_outcomes
from coalition_gym.envs.system import System
from coalition_gym.valuation.game import Game
from coalition_gym.valuation.sampling import Budget, choose_sampler, sampled_shapley

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import elapsed_seconds, machine_info, write_json  # noqa: E402

SHAPIQ_DIR = Path(__file__).resolve().parent / ".shapiq"
MULTIPLES = (2, 5, 10, 25, 50)
OURS = ("hybrid", "kernel", "stratified", "permutation")  # hybrid is the default (choose_sampler)


class KeyRecorder:
    """Wraps a backend and records the cache key of every Ask it is given."""

    def __init__(self, inner, keys: set):
        self.inner, self.keys, self.identity = inner, keys, inner.identity

    def generate(self, asks):
        self.keys.update(hash(ask_key(self.identity, a)) for a in asks)
        return self.inner.generate(asks)


def build_table(protocol_name: str, pool_name: str, n_items: int, **settings) -> dict:
    pool = load_pool(pool_name)
    task = make_task("rg/basic_arithmetic", size=n_items)
    items = list(task.items("test"))
    protocol = make_protocol(protocol_name, **settings)
    players = pool.member_names
    n = len(players)
    values, keys = {}, {}
    learned = protocol.fresh_learned()  # one protocol learning across every coalition, as one game would
    for mask in range(1, 1 << n):
        members = tuple(p for k, p in enumerate(players) if mask >> k & 1)
        if len(members) < protocol.min_members:
            values[mask], keys[mask] = np.zeros(n_items), set()
            continue
        recorded: set = set()
        backends = {name: KeyRecorder(g, recorded) for name, g in pool.backends().items()}
        system = System.from_backends(protocol, task, backends, members, styles=pool.styles,
                                      dev_scores=pool.dev_scores, learned=learned)
        contexts = [system.context(it, episode_seed(0, it)) for it in items]
        outcomes = run_programs([protocol.start(c) for c in contexts], backends)
        values[mask] = np.array([r.score for r in score_outcomes(task, contexts, outcomes)])
        keys[mask] = recorded
    return {"players": players, "n": n, "values": values, "keys": keys, "items": n_items}


class TableGame(Game):
    """A coalition game read from a table, costing what a shared generation cache would generate."""

    def __init__(self, table: dict):
        super().__init__()
        self.table = table
        self.players = tuple(table["players"])
        self.n_items = table["items"]
        self.index = {p: k for k, p in enumerate(self.players)}
        self._keys: set = set()

    def mask(self, coalition) -> int:
        return sum(1 << self.index[p] for p in coalition)

    def _compute(self, coalitions):
        out = {}
        for c in coalitions:
            m = self.mask(c)
            out[c] = self.table["values"][m]
            self._keys |= self.table["keys"][m]
        return out

    @property
    def generations(self) -> int:
        return len(self._keys)


def exact_values(table: dict) -> np.ndarray:
    from coalition_gym.valuation.estimators import exact_shapley

    return exact_shapley(TableGame(table), n_boot=10).values


def load_shapiq():
    if SHAPIQ_DIR.is_dir():
        sys.path.append(str(SHAPIQ_DIR))  # after our own packages: ours win where both exist
    try:
        import shapiq  # noqa: F401
        from shapiq.approximator import (
            SVARM,
            KernelSHAP,
            PermutationSamplingSV,
            StratifiedSamplingSV,
            UnbiasedKernelSHAP,
        )
        from shapiq.approximator.regression.kadd_shap import kADDSHAP
    except ImportError as exc:
        return None, f"shapiq not importable ({exc}); install it with pip install --target benchmarks/.shapiq shapiq"
    from importlib import metadata

    makers = {"shapiq PermutationSamplingSV": lambda n, s: PermutationSamplingSV(n, random_state=s),
              "shapiq KernelSHAP (paired)": lambda n, s: KernelSHAP(n, pairing_trick=True, random_state=s),
              "shapiq kADD-SHAP": lambda n, s: kADDSHAP(n, random_state=s),
              "shapiq SVARM": lambda n, s: SVARM(n, random_state=s),
              "shapiq StratifiedSamplingSV": lambda n, s: StratifiedSamplingSV(n, random_state=s),
              "shapiq UnbiasedKernelSHAP": lambda n, s: UnbiasedKernelSHAP(n, random_state=s)}
    try:
        version = metadata.version("shapiq")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return makers, f"shapiq {version}"


def run_shapiq(make, table: dict, budget: int, seed: int) -> tuple[np.ndarray, int, int]:
    n = table["n"]
    means = {m: float(v.mean()) for m, v in table["values"].items()}
    seen: set[int] = set()

    def game(z):
        z = np.atleast_2d(np.asarray(z, dtype=bool))
        masks = [int(sum(1 << k for k in range(n) if row[k])) for row in z]
        seen.update(m for m in masks if m)
        return np.array([means[m] if m else 0.0 for m in masks])

    values = make(n, seed).approximate(budget + 1, game)
    estimate = np.array([values[(k,)] for k in range(n)])
    generations = len(set().union(*(table["keys"][m] for m in seen))) if seen else 0
    return estimate, len(seen), generations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 8 and 10 only, 5 seeds")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--out", default="benchmarks/results/estimators.json")
    args = parser.parse_args()
    seeds = 5 if args.quick else args.seeds
    games = [("majority_vote", "sim:random-8", {}), ("majority_vote", "sim:random-10", {})]
    if not args.quick:
        games += [("majority_vote", "sim:random-12", {}), ("debate", "sim:random-8", {"rounds": 2})]
    makers, shapiq_note = load_shapiq()
    print(f"# {shapiq_note}", flush=True)
    rows, tables = [], {}
    for protocol, pool, settings in games:
        start = time.perf_counter()
        table = build_table(protocol, pool, args.items, **settings)
        truth = exact_values(table)
        n = table["n"]
        game_name = f"{protocol} {pool}"
        exact_gens = len(set().union(*table["keys"].values()))
        tables[game_name] = {"n": n, "coalitions": 2 ** n - 1, "exact_generations": exact_gens,
                             "full_coalition_generations": len(table["keys"][(1 << n) - 1]),
                             "build_seconds": time.perf_counter() - start}
        print(f"# {game_name}: n={n}, exact Shapley costs {2 ** n - 1} coalitions and {exact_gens} generations "
              f"(the full coalition alone: {tables[game_name]['full_coalition_generations']})", flush=True)
        for mult in MULTIPLES:
            budget = min(mult * n, 2 ** n - 1)
            estimators = {f"ours {name}": name for name in OURS}
            if makers:
                estimators.update({name: make for name, make in makers.items()})
            for label, impl in estimators.items():
                errors, maxes, covers, costs, gens, secs = [], [], [], [], [], []
                note = ""
                for seed in range(seeds):
                    t0 = time.perf_counter()
                    try:
                        if isinstance(impl, str):
                            game = TableGame(table)
                            result = sampled_shapley(game, sampler=impl, stop=Budget(coalitions=budget), seed=seed,
                                                     n_boot=200)
                            estimate = result.per_item.mean(axis=1)
                            covers.append(float(np.mean((result.ci_low <= truth) & (truth <= result.ci_high))))
                            costs.append(game.coalitions_evaluated)
                            gens.append(game.generations)
                        else:
                            estimate, used, generations = run_shapiq(impl, table, budget, seed)
                            costs.append(used)
                            gens.append(generations)
                    except Exception as exc:  # reported, never hidden
                        note = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
                        break
                    secs.append(time.perf_counter() - t0)
                    errors.append(float(np.abs(estimate - truth).mean()))
                    maxes.append(float(np.abs(estimate - truth).max()))
                row = {"game": game_name, "n": n, "budget": budget, "multiple": mult, "estimator": label,
                       "mae": float(np.mean(errors)) if errors else None,
                       "mae_se": float(np.std(errors, ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else None,
                       "max_error": float(np.mean(maxes)) if maxes else None,
                       "coverage": float(np.mean(covers)) if covers else None,
                       "coalitions_used": float(np.mean(costs)) if costs else None,
                       "generations_used": float(np.mean(gens)) if gens else None,
                       "seconds": float(np.mean(secs)) if secs else None, "seeds": len(errors), "note": note}
                rows.append(row)
                cov = "-" if row["coverage"] is None else f"{row['coverage']:.2f}"
                mae = "-" if row["mae"] is None else f"{row['mae']:.4f}"
                print(f"{game_name:28s} b={budget:5d} {label:32s} mae={mae} cov={cov} "
                      f"coal={row['coalitions_used'] or 0:.0f} gens={row['generations_used'] or 0:.0f} {note}",
                      flush=True)
    summary = summarise(rows)
    print("\n" + table_markdown(rows, tables, summary))
    write_json(args.out, {"machine": machine_info(), "shapiq": shapiq_note, "seeds": seeds, "items": args.items,
                          "games": tables, "rows": rows, "summary": summary,
                          "default_rule": "choose_sampler(n, budget) in coalition_gym/valuation/sampling.py",
                          "total_seconds": elapsed_seconds()})
    Path(args.out).with_suffix(".md").write_text(table_markdown(rows, tables, summary) + "\n")


def summarise(rows: list[dict]) -> list[dict]:
    """Per game and budget: our default's error, our best's, shapiq's best, and whether ours lead."""
    out = []
    for key in dict.fromkeys((r["game"], r["budget"]) for r in rows):
        group = [r for r in rows if (r["game"], r["budget"]) == key and r["mae"] is not None]
        ours = [r for r in group if r["estimator"].startswith("ours ")]
        theirs = [r for r in group if r["estimator"].startswith("shapiq ")]
        best_ours = min(ours, key=lambda r: r["mae"])
        default = next(r for r in ours if r["estimator"] == f"ours {choose_sampler(r['n'], r['budget'])}")
        best_theirs = min(theirs, key=lambda r: r["mae"]) if theirs else None
        out.append({"game": key[0], "budget": key[1], "default": default["mae"],
                    "default_sampler": default["estimator"][5:],
                    "default_coverage": default["coverage"], "best_ours": best_ours["estimator"],
                    "best_ours_mae": best_ours["mae"],
                    "best_shapiq": best_theirs["estimator"] if best_theirs else None,
                    "best_shapiq_mae": best_theirs["mae"] if best_theirs else None,
                    "default_leads": best_theirs is None or default["mae"] <= best_theirs["mae"]})
    return out


def table_markdown(rows: list[dict], tables: dict, summary: list[dict]) -> str:
    lines = ["| game | budget (coalitions) | ours (default: sampler) | coverage | best of ours | best of shapiq | "
             "default / best shapiq |", "|---|---|---|---|---|---|---|"]
    for s in summary:
        ratio = "-" if not s["best_shapiq_mae"] else f"{s['default'] / s['best_shapiq_mae']:.2f}"
        shapiq = "-" if s["best_shapiq"] is None else f"{s['best_shapiq_mae']:.4f} ({s['best_shapiq'][7:]})"
        lines.append(f"| {s['game']} | {s['budget']} | {s['default']:.4f} ({s['default_sampler']}) | "
                     f"{s['default_coverage']:.2f} | {s['best_ours_mae']:.4f} ({s['best_ours'][5:]}) | {shapiq} | {ratio} |")
    lines += ["", "| game | exact Shapley: coalitions | exact: generations | full coalition alone: generations |",
              "|---|---|---|---|"]
    lines += [f"| {g} | {t['coalitions']} | {t['exact_generations']} | {t['full_coalition_generations']} |"
              for g, t in tables.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
