"""Heterogeneous Swarms graphs: a continuous adjacency matrix over named members, its decoding to a
DAG, and the DAG's execution layers.

Decoding (the method's G-decode; weights are clipped to [0, 1], a zero weight is "no edge"):

1. The end node is drawn with probabilities softmax(1 / out-degree) (out-degree = row sum), so the
   member that points least to others tends to be the one that answers last.
2. Until every node is placed: the next node is drawn among the unplaced ones with probabilities
   softmax(out-degree); it gets one edge to an already placed node, drawn with probabilities
   softmax over its weights to the placed nodes.

Every draw is top-p (nucleus) selection, default p = 0.7: the most probable options up to
cumulative probability p (at least one) are kept and one is drawn in proportion to its probability;
p = 0 takes the most probable option. Equal probabilities are ordered at random (seeded), so with
equal weights every node can end the graph. The result is a tree whose edges all lead to the end node,
hence a DAG; nodes without predecessors are the start nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import ConfigError
from ...result_files import write_json

EPS = 1e-6


@dataclass(frozen=True)
class SwarmGraph:
    """A continuous adjacency matrix: ``adjacency[i][j]`` weighs the edge members[i] -> members[j]."""

    members: tuple[str, ...]
    adjacency: tuple[tuple[float, ...], ...]
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        n = len(self.members)
        if n == 0 or len(set(self.members)) != n:
            raise ConfigError(f"swarm graph: members {list(self.members)} must be non-empty and distinct")
        if len(self.adjacency) != n or any(len(row) != n for row in self.adjacency):
            raise ConfigError(f"swarm graph: adjacency must be {n} x {n} for members {list(self.members)}")
        if not np.all(np.isfinite(np.asarray(self.adjacency, dtype=float))):
            raise ConfigError("swarm graph: adjacency holds a non-finite weight")

    @classmethod
    def from_matrix(cls, members: Sequence[str], matrix: Any, **meta: Any) -> "SwarmGraph":
        rows = np.asarray(matrix, dtype=float).copy()
        if rows.ndim == 1:
            rows = rows.reshape(len(members), -1)
        if rows.ndim != 2 or rows.shape[0] != rows.shape[1]:
            raise ConfigError(f"swarm graph: a square matrix is needed, got shape {rows.shape}")
        np.fill_diagonal(rows, 0.0)
        return cls(tuple(members), tuple(tuple(float(v) for v in row) for row in rows), dict(meta))

    def matrix(self) -> np.ndarray:
        return np.asarray(self.adjacency, dtype=float)

    def restricted(self, members: Sequence[str], default_weight: float) -> np.ndarray:
        """The matrix over ``members`` (in that order); a pair involving a member the graph does not
        name (e.g. a policy seat) gets ``default_weight``."""
        index = {m: k for k, m in enumerate(self.members)}
        full = self.matrix()
        out = np.full((len(members), len(members)), float(default_weight))
        for a, ma in enumerate(members):
            for b, mb in enumerate(members):
                if ma in index and mb in index:
                    out[a, b] = full[index[ma], index[mb]]
        np.fill_diagonal(out, 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"members": list(self.members), "adjacency": [list(r) for r in self.adjacency],
                "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SwarmGraph":
        if "members" not in data or "adjacency" not in data:
            raise ConfigError(f"swarm graph: a mapping with 'members' and 'adjacency' is needed, got keys "
                              f"{sorted(data)}")
        return cls.from_matrix(list(data["members"]), data["adjacency"], **dict(data.get("meta") or {}))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, path: str | Path) -> "SwarmGraph":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"swarm graph: cannot read {str(path)!r}: {exc}") from exc
        return cls.from_dict(data)


def as_graph(spec: Any) -> SwarmGraph | None:
    """A graph from None, a SwarmGraph, a mapping (``to_dict`` form) or a path to a saved JSON file."""
    if spec is None or isinstance(spec, SwarmGraph):
        return spec
    if isinstance(spec, Mapping):
        return SwarmGraph.from_dict(spec)
    if isinstance(spec, (str, Path)):
        return SwarmGraph.load(spec)
    raise ConfigError(f"swarm graph: expected None, a SwarmGraph, a mapping or a JSON path, not {type(spec).__name__}")


# -- decoding ------------------------------------------------------------------------------------

def _softmax(values: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Softmax over the ``live`` entries (the others get 0)."""
    out = np.zeros(len(values))
    if not live.any():
        return out
    shifted = values[live] - values[live].max()
    weights = np.exp(shifted)
    out[live] = weights / weights.sum()
    return out


def top_p_pick(probs: np.ndarray, top_p: float, rng: np.random.Generator) -> int:
    """Nucleus draw: keep the most probable options up to cumulative ``top_p`` (at least one), draw
    one in proportion to its probability. Options of equal probability are ordered at random (by
    ``rng``), so that no node is favoured for its position in the coalition."""
    shuffle = rng.random(len(probs))
    order = sorted(range(len(probs)), key=lambda k: (-probs[k], shuffle[k]))
    kept: list[int] = []
    total = 0.0
    for k in order:
        if probs[k] <= 0 and kept:
            break
        kept.append(k)
        total += probs[k]
        if total > top_p:
            break
    if len(kept) == 1:
        return kept[0]
    p = np.array([probs[k] for k in kept])
    return kept[int(rng.choice(len(kept), p=p / p.sum()))]


def decode(weights: np.ndarray, top_p: float, rng: np.random.Generator) -> list[int | None]:
    """The successor of each node (None for the end node) of the DAG decoded from ``weights``."""
    w = np.clip(np.asarray(weights, dtype=float), 0.0, 1.0)
    n = w.shape[0]
    np.fill_diagonal(w, 0.0)
    successor: list[int | None] = [None] * n
    out_degree = w.sum(axis=1)
    everyone = np.ones(n, dtype=bool)
    end = top_p_pick(_softmax(1.0 / np.maximum(out_degree, EPS), everyone), top_p, rng)
    placed = np.zeros(n, dtype=bool)
    placed[end] = True
    while not placed.all():
        node = top_p_pick(_softmax(out_degree, ~placed), top_p, rng)
        edges = w[node] > 0
        targets = placed & edges if (placed & edges).any() else placed  # no edge to any placed node: uniform
        values = np.where(edges, w[node], 0.0)
        successor[node] = top_p_pick(_softmax(values, targets), top_p, rng)
        placed[node] = True
    return successor


def layers(successor: Sequence[int | None]) -> list[int]:
    """Execution layer of each node: 0 for start nodes, else 1 + the latest predecessor's layer.
    Nodes of one layer run together; the end node is alone in the last layer."""
    preds = predecessors(successor)
    depth: list[int | None] = [None] * len(successor)

    def layer_of(node: int, trail: frozenset = frozenset()) -> int:
        if node in trail:
            raise ConfigError(f"swarm graph: successors {list(successor)} contain a cycle")
        if depth[node] is None:
            depth[node] = 1 + max((layer_of(p, trail | {node}) for p in preds[node]), default=-1)
        return depth[node]  # type: ignore[return-value]
    return [layer_of(k) for k in range(len(successor))]


def predecessors(successor: Sequence[int | None]) -> list[list[int]]:
    """The nodes whose successor is each node, in node order."""
    preds: list[list[int]] = [[] for _ in successor]
    for node, nxt in enumerate(successor):
        if nxt is not None:
            preds[nxt].append(node)
    return preds
