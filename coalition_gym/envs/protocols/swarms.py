"""Heterogeneous Swarms (Feng et al., 2025): members take roles in a DAG decoded from a continuous
adjacency matrix; nodes run in topological order; the end node's answer is the system answer.

Every coalition member is one node. The DAG is decoded from ``graph`` (see ``swarm_graph``) once per
coalition and reused for every item, as upstream decodes one DAG per evaluation run. Start nodes
answer the question alone; every other node sees its predecessors' responses; the end node is told
it gives the final answer. Nodes of one layer run in one wave.

``graph``:
- a :class:`~.swarm_graph.SwarmGraph`, its ``to_dict`` mapping, or a path to its saved JSON: the
  optimised graph (``coalition_gym.training.swarm_search.optimise_swarm`` finds one by particle swarm
  optimisation on dev
  items and saves it). A coalition uses the graph restricted to its members; pairs involving a
  member the graph does not name (e.g. a gym policy seat) get ``default_weight``.
- ``None`` (default, also what ``gym.make`` and ``cgym eval`` use unless told otherwise): no
  optimisation is run; every weight is ``default_weight`` (0.5), the swarm before any search, and
  the decoded DAG is a seeded random tree (seed: ``decode_seed`` and the coalition's members).

A coalition of one is a single node: the member answers the question alone.

Seeds: a member is asked once per episode, always with its round-0 seed, whatever layer the graph
puts it in, so seeds never depend on the coalition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...agents.base import stable_hash
from ...prompts import node_prompt
from ...settings_check import setting
from ...types import Outcome
from .base import EpisodeContext, ProgramGen, Protocol, answer_turns
from .swarm_graph import SwarmGraph, as_graph, decode, layers, predecessors
from .utils import ask_with_seed_round


@dataclass
class HeterogeneousSwarms(Protocol):
    name: ClassVar[str] = "heterogeneous_swarms"
    description: ClassVar[str] = ("Heterogeneous Swarms: members act in a DAG decoded from an optimised "
                                  "adjacency matrix; the end node answers")

    graph: Any = None
    top_p: float = setting(0.7, ge=0, le=1, doc="nucleus of the DAG decoding draws")
    default_weight: float = setting(0.5, ge=0, le=1, doc="edge weight where the graph names no weight")
    decode_seed: int = setting(0, ge=0, doc="seeds the decoded DAG (with the coalition's members)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._graph: SwarmGraph | None = as_graph(self.graph)
        self._structures: dict[tuple[str, ...], tuple[list[int | None], list[int]]] = {}

    @property
    def loaded_graph(self) -> SwarmGraph | None:
        return self._graph

    def weights(self, members: tuple[str, ...]) -> np.ndarray:
        if self._graph is None:
            out = np.full((len(members), len(members)), self.default_weight)
            np.fill_diagonal(out, 0.0)
            return out
        return self._graph.restricted(members, self.default_weight)

    def structure(self, members: tuple[str, ...]) -> tuple[list[int | None], list[int]]:
        """(successor of each member, layer of each member) of the coalition's decoded DAG."""
        if members not in self._structures:
            rng = np.random.default_rng(stable_hash("swarm-decode", self.decode_seed, *members))
            successor = decode(self.weights(members), self.top_p, rng)
            self._structures[members] = (successor, layers(successor))
        return self._structures[members]

    def program(self, ctx: EpisodeContext) -> ProgramGen:
        members = ctx.members
        successor, layer = self.structure(tuple(members))
        preds = predecessors(successor)
        texts: dict[int, str] = {}
        answers: dict[int, str | None] = {}
        transcript = []
        for depth in range(max(layer) + 1):
            nodes = [k for k in range(len(members)) if layer[k] == depth]
            asks = []
            for k in nodes:
                m = members[k]
                previous = [texts[j] for j in preds[k]]
                messages = node_prompt(ctx.item, previous, ctx.style(m), final=successor[k] is None and bool(previous))
                asks.append(ask_with_seed_round(ctx, m, messages, self.params, shown_round=depth,
                                                role="debate" if previous else "answer",
                                                peer_answers=tuple(answers[j] for j in preds[k])))
            samples = yield asks
            turns = answer_turns(ctx, asks, samples)
            transcript += turns
            for k, s, t in zip(nodes, samples, turns):
                texts[k], answers[k] = s.text, t.answer
        end = successor.index(None)
        details = {"end": members[end], "graph": "given" if self._graph is not None else "default",
                   "edges": [[members[k], members[n]] for k, n in enumerate(successor) if n is not None],
                   "layers": dict(zip(members, layer))}
        return Outcome(answer=answers[end], text=texts[end], transcript=tuple(transcript), details=details)
