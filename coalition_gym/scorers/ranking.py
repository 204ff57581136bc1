"""Rankings (e.g. AssayBench gene lists): nDCG@k where unmatched or invented items get zero relevance.

``ndcg_at_k(ranked, relevance, k)``: DCG over the first k *distinct* items of the ranking, each
item's gain its relevance (0 for any item not in ``relevance``: invented or unmeasured; a repeated
item gains nothing the second time, so padding a list with one good item earns nothing), divided
by the ideal DCG (relevances clipped at 0, sorted, first k). Negative relevance (an item linked
to the opposite effect) lowers the score; the result is clipped to [0, 1].

``adjusted=True`` subtracts the expected nDCG@k of a uniformly random ranking of the measured
items and rescales, so 0 means "no better than chance" and 1 a perfect ranking (AssayBench's
"adjusted" idea; unlike its condensed variant, unmeasured items here still take a slot and gain 0,
as this project's issue asks).
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

from .result import ScoreResult, as_text, unparsed

_ITEM_SPLIT = re.compile(r"[\n,;]+")
_BULLET = re.compile(r"^\s*(?:\d+\s*[.)\]:-]|[-*•])\s*")
MAX_ITEMS = 10_000


def _discounts(k: int) -> list[float]:
    return [1.0 / math.log2(i + 2) for i in range(k)]


def parse_ranking(text: object, max_items: int = MAX_ITEMS) -> list[str]:
    """Items of a ranked list written one per line or comma-separated, numbering and bullets
    stripped, upper-cased (gene symbols), first occurrence kept."""
    reply = as_text(text)
    if reply is None:
        return []
    items: list[str] = []
    seen = set()
    for raw in _ITEM_SPLIT.split(reply):
        item = _BULLET.sub("", raw).strip().strip("*`'\".").strip().upper()
        if item and " " not in item and item not in seen:
            seen.add(item)
            items.append(item)
            if len(items) >= max_items:
                break
    return items


def ndcg_at_k(ranked: Sequence[str], relevance: Mapping[str, float], k: int = 100, adjusted: bool = False) -> float:
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    rel = {str(g).upper(): float(v) for g, v in relevance.items()}
    discounts = _discounts(k)
    seen: set[str] = set()
    dcg, pos = 0.0, 0
    for item in ranked:
        if pos >= k:
            break
        key = str(item).upper()
        gain = 0.0 if key in seen else rel.get(key, 0.0)
        seen.add(key)
        dcg += gain * discounts[pos]
        pos += 1
    ideal = sorted((max(v, 0.0) for v in rel.values()), reverse=True)[:k]
    idcg = sum(v * d for v, d in zip(ideal, discounts))
    if idcg <= 0:
        return 0.0
    score = min(1.0, max(0.0, dcg / idcg))
    if not adjusted:
        return score
    n = len(rel)
    mean_gain = sum(rel.values()) / n if n else 0.0
    baseline = max(0.0, min(1.0, mean_gain * sum(discounts[:min(k, n)]) / idcg))
    if baseline >= 1.0:
        return 0.0
    return max(0.0, (score - baseline) / (1.0 - baseline))


def score_ranking(answer: object, relevance: Mapping[str, float], k: int = 100, adjusted: bool = True) -> ScoreResult:
    ranked = answer if isinstance(answer, (list, tuple)) else parse_ranking(answer)
    if not ranked:
        return unparsed("no ranked items")
    value = ndcg_at_k(ranked, relevance, k=k, adjusted=adjusted)
    return ScoreResult(value, True, f"{'adjusted ' if adjusted else ''}nDCG@{k} {value:.3f}")


__all__ = ["parse_ranking", "ndcg_at_k", "score_ranking", "MAX_ITEMS"]
