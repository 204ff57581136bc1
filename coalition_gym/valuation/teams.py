"""Team picking: the best coalition of size K among those evaluated, against the K members with the
highest Shapley values. They differ when members are redundant (negative pairwise interaction: two
strong models that fail on the same items) or complementary (positive: a weaker model that covers the
others' blind spots); the pairwise interactions inside each team say which.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from .exact import ValuationResult
from .game import Game
from .interactions import PairMatrix
from .stats import signed


def _within(team: list[str], matrix: PairMatrix | None) -> float | None:
    """The sum of the Shapley interactions of the pairs inside ``team`` (None without a matrix)."""
    if matrix is None:
        return None
    return float(sum(matrix[a, b] for k, a in enumerate(team) for b in team[k + 1:]))


def best_team(game: Game, k: int, values: ValuationResult, matrix: PairMatrix | None = None) -> dict[str, Any]:
    """The coalition of size ``k`` with the highest v among the evaluated ones (exact when every one of
    size k is known), next to the top-``k`` members by ``values`` (its coalition is evaluated if it was
    not), and whether they differ; ``matrix`` (the pairwise Shapley interactions) explains why."""
    n = len(game.players)
    if not 1 <= k <= n:
        raise ConfigError(f"--best-team {k}: a team has between 1 and {n} members (the pool's size)")
    order = sorted(range(n), key=lambda i: (-float(values.values[i]), i))
    top = frozenset(game.players[i] for i in order[:k])
    game.evaluate([top])
    known = [c for c in game.known() if len(c) == k]
    best = max(known, key=lambda c: (game.value(c), top == c))  # ties: the top-k team

    def team(c: frozenset) -> dict[str, Any]:
        members = [p for p in game.players if p in c]
        per_item = game.per_item(c)
        se = float(per_item.std(ddof=1) / math.sqrt(len(per_item))) if len(per_item) > 1 else 0.0
        return {"members": members, "value": game.value(c), "stderr": se,
                "shapley_sum": float(sum(values[p] for p in members)), "interaction_sum": _within(members, matrix)}

    total = math.comb(n, k)
    diff = game.per_item(best) - game.per_item(top)
    return {"k": k, "best": team(best), "top_shapley": team(top), "ranked_by": values.estimator,
            "differ": best != top, "exact": len(known) == total, "coalitions_compared": len(known),
            "coalitions_of_size_k": total,
            "gap": float(diff.mean()), "gap_stderr": float(diff.std(ddof=1) / math.sqrt(len(diff)))
            if len(diff) > 1 else 0.0}


def best_team_sentence(result: dict[str, Any]) -> str:
    """One or two sentences: the best team, the top-k by value, and (when they differ) why."""
    best, top, k = result["best"], result["top_shapley"], result["k"]
    scope = (f"all {result['coalitions_of_size_k']} teams of {k} evaluated" if result["exact"] else
             f"best of the {result['coalitions_compared']} of {result['coalitions_of_size_k']} teams of {k} "
             "evaluated")
    head = f"Best team of {k}: {', '.join(best['members'])} (v = {best['value']:.3f}; {scope})"
    if not result["differ"]:
        return head + f"; the same as the top {k} by {result['ranked_by']}."
    text = (f"{head}; the top {k} by {result['ranked_by']}, {', '.join(top['members'])}, reach v = "
            f"{top['value']:.3f} ({signed(result['gap'])} for the best team).")
    if best["interaction_sum"] is not None and top["interaction_sum"] is not None:
        text += (f" Pairwise Shapley interactions inside the teams sum to {signed(best['interaction_sum'])} (best) "
                 f"and {signed(top['interaction_sum'])} (top by value): "
                 + ("the top members overlap (redundant)." if top["interaction_sum"] < best["interaction_sum"]
                    else "the difference is not in the pairs alone (higher-order effects)."))
    return text


__all__ = ["best_team", "best_team_sentence"]
