"""Exact Shapley values without enumerating the 2^n coalitions, for games whose structure is known.

Two structures cover the one-shot protocols whose system answer depends on each member's own answer only:

- :class:`PriorityGame`: on each item the system answer is the one of the coalition's member ranked highest
  *on that item* (SLM-MUX: the most self-consistent, ties by dev accuracy then coalition order; cascade: the
  first confident member in cost order, else the last; trained router: the member its classifier, fitted on every
  member's dev outcomes, scores highest on the item, ties by dev accuracy then coalition order). With the item's
  members sorted best first and their
  scores ``s_0, s_1, ...``, the member at rank r has the closed form
  ``phi = s_r / (r + 1) - sum_{q > r} s_q / (q (q + 1))`` (it is pivotal when it precedes every better-ranked
  member; the q-th ranked member is the one it displaces when it comes first, and r second, among ranks 0..q).
- :class:`PluralityGame`: on each item a member's vote is its answer (a label; -1 abstains), the plurality
  wins, and a tie is settled by a rule of the tied labels alone (majority vote with seeded random ties).
  The value depends only on how many members of each label the coalition holds, so the Shapley value of a
  label's members is a sum over those counts (a grid of ``prod (m_a + 1)`` points, not 2^n coalitions).

:func:`structured_game` reads either structure off a System's members (each answering alone), so a pool of
64 members has an exact truth that no estimator's proxy enters. Both games are ordinary :class:`Game` s: their
``values(bits)`` give every coalition's per-item values, so the exact values can be checked against
enumeration (``tests/valuation/test_closed_form.py``).
"""

from __future__ import annotations

import itertools
import math
import random
from typing import TYPE_CHECKING, Callable, Sequence, cast

import numpy as np

from ..envs.runner import episode_seed, run_programs, score_outcomes
from ..envs.system import System, with_pool_defaults
from ..errors import ConfigError
from .game import Game

if TYPE_CHECKING:
    from ..envs.protocols.trained_router import TrainedRouter


class StructuredGame(Game):
    """A game given per item by a rule over its members' answers: ``values(bits)`` for membership rows, and
    :meth:`exact` (players x items) without enumeration."""

    def __init__(self, players: Sequence[str], n_items: int):
        super().__init__()
        self.players = tuple(players)
        self.n_items = n_items
        self._index = {p: k for k, p in enumerate(self.players)}

    def values(self, bits: np.ndarray) -> np.ndarray:
        """Per-item values (coalitions x items) of the membership rows ``bits`` (coalitions x n)."""
        raise NotImplementedError

    def exact(self) -> np.ndarray:
        """The exact per-item Shapley values (players x items)."""
        raise NotImplementedError

    def _compute(self, coalitions):
        bits = np.zeros((len(coalitions), len(self.players)), dtype=bool)
        sizes = [len(c) for c in coalitions]
        members = np.fromiter(map(self._index.__getitem__, itertools.chain.from_iterable(coalitions)), dtype=np.intp,
                              count=sum(sizes))
        bits[np.repeat(np.arange(len(coalitions)), sizes), members] = True
        return dict(zip(coalitions, self.values(bits)))


class PriorityGame(StructuredGame):
    """v_x(S) = the score on item x of the member of S ranked highest on x; ``order[x]``: the players' indices,
    best first; ``scores``: players x items."""

    def __init__(self, players: Sequence[str], order: np.ndarray, scores: np.ndarray):
        super().__init__(players, scores.shape[1])
        self.order = np.asarray(order, dtype=int)
        self.scores = np.asarray(scores, dtype=float)
        n = len(self.players)
        if self.order.shape != (self.n_items, n) or self.scores.shape[0] != n:
            raise ConfigError(f"PriorityGame: order must be items x players {(self.n_items, n)} and scores players "
                              f"x items, got {self.order.shape} and {self.scores.shape}")
        self.rank = np.argsort(self.order, axis=1)  # items x players: each player's place on each item

    def values(self, bits: np.ndarray) -> np.ndarray:
        place = np.where(bits[:, None, :], self.rank[None, :, :], len(self.players))  # coalitions x items x n
        top = place.min(axis=2)
        best = np.take_along_axis(self.order, np.minimum(top, len(self.players) - 1).T, axis=1).T
        return np.where(top < len(self.players), self.scores[best, np.arange(self.n_items)[None, :]], 0.0)

    def exact(self) -> np.ndarray:
        n = len(self.players)
        ranked = np.take_along_axis(self.scores.T, self.order, axis=1)  # items x ranks
        q = np.arange(1, n)
        displaced = ranked[:, 1:] / (q * (q + 1))  # rank q's share when it is the one displaced
        later = np.concatenate([np.cumsum(displaced[:, ::-1], axis=1)[:, ::-1], np.zeros((self.n_items, 1))], axis=1)
        by_rank = ranked / np.arange(1, n + 1) - later
        phi = np.empty((n, self.n_items))
        np.put_along_axis(phi.T, self.order, by_rank, axis=1)
        return phi


class PluralityGame(StructuredGame):
    """v_x(S) = the score on item x of the plurality label among the votes of S (``labels``: players x items,
    -1 abstains; ``label_scores[x][a]``: label a's score on item x); a tie goes to ``tie_break(x, tied)``
    (``tied``: the tied labels, ascending), which may depend on the item and the tied labels only."""

    def __init__(self, players: Sequence[str], labels: np.ndarray, label_scores: Sequence[Sequence[float]],
                 tie_break: Callable[[int, tuple[int, ...]], int]):
        labels = np.asarray(labels, dtype=int)
        super().__init__(players, labels.shape[1])
        self.labels, self.tie_break = labels, tie_break
        self.label_scores = [np.asarray(s, dtype=float) for s in label_scores]
        if len(self.label_scores) != self.n_items or any(labels[:, x].max() >= len(self.label_scores[x])
                                                          for x in range(self.n_items)):
            raise ConfigError("PluralityGame: every label needs a score on its item")
        self._winners = [self._winner_table(x) for x in range(self.n_items)]

    def _winner_table(self, x: int) -> np.ndarray:
        """Score of the winner for each set of tied labels (a bitmask; 0: nobody voted)."""
        k = len(self.label_scores[x])
        table = np.zeros(1 << k)
        for mask in range(1, 1 << k):
            tied = tuple(a for a in range(k) if mask >> a & 1)
            table[mask] = self.label_scores[x][self.tie_break(x, tied) if len(tied) > 1 else tied[0]]
        return table

    def _score_of_counts(self, x: int, counts: np.ndarray) -> np.ndarray:
        """Value of each row of label counts (rows x labels) on item x."""
        top = counts.max(axis=1, keepdims=True)
        mask = ((counts == top) & (top > 0)) @ (1 << np.arange(counts.shape[1]))
        return self._winners[x][mask]

    def values(self, bits: np.ndarray) -> np.ndarray:
        out = np.zeros((bits.shape[0], self.n_items))
        for x in range(self.n_items):
            k = len(self.label_scores[x])
            onehot = self.labels[:, x, None] == np.arange(k)[None, :]  # players x labels (abstainers: none)
            out[:, x] = self._score_of_counts(x, bits.astype(int) @ onehot.astype(int))
        return out

    def exact(self) -> np.ndarray:
        phi = np.zeros((len(self.players), self.n_items))
        for x in range(self.n_items):
            per_label = self._exact_item(x)
            voted = self.labels[:, x] >= 0
            phi[voted, x] = per_label[self.labels[voted, x]]  # abstainers are null players: 0
        return phi

    def _exact_item(self, x: int) -> np.ndarray:
        """Each label's member's Shapley value on item x, summed over the grid of label counts (the
        abstainers' count is the last axis: it enters the coalition's size, not its value)."""
        k, n = len(self.label_scores[x]), len(self.players)
        sizes = [int(np.sum(self.labels[:, x] == a)) for a in range(k)] + [int(np.sum(self.labels[:, x] < 0))]
        grid = np.indices([m + 1 for m in sizes]).reshape(len(sizes), -1).T  # points x (labels + abstain)
        value = self._score_of_counts(x, grid[:, :k]).reshape([m + 1 for m in sizes])
        log_weight = np.array([_log_shapley_weight(s, n) for s in range(n)])
        per_label = np.zeros(k)
        for a in range(k):
            if sizes[a] == 0:
                continue
            others = [m - (b == a) for b, m in enumerate(sizes)]  # the label's own member is not among them
            gain = np.diff(value, axis=a)  # v(c + e_a) - v(c) for c_a <= m_a - 1
            counts = np.indices(gain.shape).reshape(len(sizes), -1)
            log_ways = sum(_log_binomial(others[b], counts[b]) for b in range(len(sizes)))
            per_label[a] = float(np.exp(log_weight[counts.sum(axis=0)] + log_ways) @ gain.reshape(-1))
        return per_label


def _log_shapley_weight(size: int, n: int) -> float:
    return math.lgamma(size + 1) + math.lgamma(n - size) - math.lgamma(n + 1)


def _log_binomial(m: int, c: np.ndarray) -> np.ndarray:
    return np.array([math.lgamma(m + 1) - math.lgamma(j + 1) - math.lgamma(m - j + 1) for j in range(m + 1)])[c]


#: the protocols (and tie rules) :func:`structured_game` reads a structure off
STRUCTURED = {"majority_vote": "plurality, tie_break random", "slm_mux": "priority, tie_break dev or first",
              "cascade": "priority", "trained_router": "priority"}


def _alone(system: System, seed: int) -> tuple[list, np.ndarray]:
    """Each member answering alone on every item: the outcomes (members x items) and their scores."""
    items, players = list(system.items), list(system.members)
    contexts = [system.context(it, episode_seed(seed, it), (m,)) for m in players for it in items]
    outcomes = run_programs([system.protocol.start(c) for c in contexts], system.pool.backends())
    scores = np.array([r.score for r in score_outcomes(system.task, contexts, outcomes)])
    shaped = [outcomes[k * len(items):(k + 1) * len(items)] for k in range(len(players))]
    return shaped, scores.reshape(len(players), len(items))


def _priority_order(system: System, alone: list, seed: int) -> np.ndarray:
    """Per item, the members best first, as the protocol picks among them (see the module's docstring)."""
    protocol, players = system.protocol, list(system.members)
    confidence = np.array([[o.details["confidence"][m] for o in row] for m, row in zip(players, alone)])
    index = np.broadcast_to(np.arange(len(players))[:, None], confidence.shape)
    if protocol.name == "slm_mux":
        dev = system.dev.scores if getattr(protocol, "tie_break") == "dev" else {}
        first = -confidence
        second = np.broadcast_to(np.array([-dev.get(m, -math.inf) for m in players])[:, None], confidence.shape)
    else:  # cascade: the confident in cost order, then (the fallback is the last asked) the rest in reverse
        place = {m: k for k, m in enumerate(getattr(protocol, "order")(tuple(players)))}
        sure = confidence >= getattr(protocol, "threshold")
        first = (~sure).astype(float)
        second = np.where(sure, 1, -1) * np.array([place[m] for m in players])[:, None]
    return np.lexsort((index, second, first), axis=0).T  # the last key sorts first


def _router_order(system: System) -> np.ndarray:
    """Per item, the members best first as the trained router picks among them (``TrainedRouter.choose``): its
    predicted score, then dev accuracy, then coalition order. The router of a coalition is fitted on its members'
    dev outcomes alone, one column each, so a member's predicted score is the same in every coalition: the
    scores are read off one router fitted on every member."""
    protocol, players = cast("TrainedRouter", system.protocol), list(system.members)
    known = system.learned
    protocol.fit(known, system.task, system.pool.backends(), players, system.styles)
    key, dev = protocol.dev_set(system.task)
    questions = [it.question for it in dev]
    rows = [known.scores(key, players, questions, it.question) for it in system.items]
    scores = np.stack([r[0] for r in rows])  # items x players
    accuracy = rows[0][1] if rows else np.zeros(len(players))
    # choose() ties predicted scores within 1e-12 (a member's score can differ in the last bits between routers
    # fitted on different columns): near-equal scores sort by the other keys
    tied = np.round(scores, 11)
    index = np.broadcast_to(np.arange(len(players)), scores.shape)
    return np.lexsort((index, np.broadcast_to(-accuracy, scores.shape), -tied), axis=1)


def _plurality(system: System, alone: list, seed: int) -> PluralityGame:
    items = list(system.items)
    answers = [[o.answer for o in row] for row in alone]
    labels = np.full((len(answers), len(items)), -1)
    label_scores, names = [], []
    for x, item in enumerate(items):
        found = sorted({row[x] for row in answers if row[x] is not None})  # labels ascend with the answers
        labels[:, x] = [found.index(row[x]) if row[x] is not None else -1 for row in answers]
        label_scores.append([r.score for r in system.task.score_batch(found, [item] * len(found))])
        names.append(found)
    seeds = [system.context(it, episode_seed(seed, it), tuple(system.members)).seed_for("tie-break", 0)
             for it in items]

    def tie_break(x: int, tied: tuple[int, ...]) -> int:  # voting.break_tie's "random": sorted answers, seeded
        return names[x].index(random.Random(seeds[x]).choice(sorted(names[x][a] for a in tied)))

    return PluralityGame(system.members, labels, label_scores, tie_break)


def structured_game(system: System, seed: int = 0) -> StructuredGame:
    """The game of ``system``'s members (majority vote with random ties, SLM-MUX, cascade, trained router) as a
    structured
    game read off each member answering alone: its :meth:`~StructuredGame.exact` values are the exact Shapley
    values of the protocol's coalition game with episode seed ``seed`` (checked against enumeration)."""
    system = system.replace(protocol=with_pool_defaults(system.protocol, system.pool))  # as CoalitionGame runs it
    protocol = system.protocol
    rule = getattr(protocol, "tie_break", None)
    refused = {("majority_vote", "dev"), ("majority_vote", "first"), ("slm_mux", "random")}  # depend on who ties
    if protocol.name not in STRUCTURED or (protocol.name, rule) in refused:
        raise ConfigError(f"structured_game reads {'; '.join(f'{k} ({v})' for k, v in STRUCTURED.items())}; "
                          f"got {protocol.name!r} with tie_break {rule!r}")
    alone, scores = _alone(system, seed)
    if protocol.name == "majority_vote":
        return _plurality(system, alone, seed)
    if protocol.name == "trained_router":
        return PriorityGame(system.members, _router_order(system), scores)
    return PriorityGame(system.members, _priority_order(system, alone, seed), scores)


__all__ = ["STRUCTURED", "PluralityGame", "PriorityGame", "StructuredGame", "structured_game"]
