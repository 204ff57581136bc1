"""Shapley values from a sample of coalitions: samplers, stopping rules, estimates with honest intervals.

The parts compose as in pyDVL: a **sampler** proposes coalitions in rounds, the game evaluates them
(distinct coalitions and the generations they cost are the budget), **stopping rules** end the loop
(``Budget(coalitions=...)``, ``Budget(generations=...)``, ``Tolerance(stderr)``, ``MaxRounds(k)``,
combined with ``|``), and the result carries per-item contributions and an interval that includes
the sampling error as well as item uncertainty.

Samplers (all sample coalitions *without replacement* within a size, since a coalition evaluated
twice costs nothing and tells nothing new):

- ``proxy`` (the default, :mod:`.proxy`, registered there): regression adjustment. A per-item proxy game
  (fitted on the sampled coalitions, cross-fitted over items) whose Shapley value is exact in closed form,
  plus the residual: the evaluated coalitions' exactly, the others' extrapolated by the ``hybrid`` estimate
  (the proxy's coefficient estimated as a control variate) only as far as that extrapolation stands out of its
  own jackknife noise (:func:`.proxy.shrunk_to_prediction`).
- ``hybrid``: the ``kernel`` design below, estimated both ways (kernel regression and
  the stratified estimate on the same coalitions) and combined with the variance-minimising weight.

- ``kernel``: paired KernelSHAP. Coalitions are drawn size by size, each with its complement; whole
  sizes are enumerated while the budget allows, largest Shapley-kernel mass first (the "border
  trick"); the rest of the budget goes to the other sizes in proportion to their kernel mass. The
  estimate solves the kernel-weighted least squares problem under efficiency (sum = v(N)), each sampled
  coalition weighted by its size's kernel mass over the number sampled in that size, so enumerating
  every size gives exact Shapley. Needs n + 1 coalitions (the full one and the n singletons).
- ``stratified``: SVARM-style stratified estimate without marginal contributions:
  phi_i = 1/n * sum_k (mean v(S) over |S| = k + 1 with i in S  -  mean v(S) over |S| = k without i),
  sizes 1 and n - 1 enumerated first, the budget spread evenly over the other sizes, each coalition
  with its complement. A player never sampled inside (outside) a size gets that size's overall mean.
- ``permutation``: antithetic permutation sampling (each permutation and its reverse), the
  classic estimator; kept for comparison.

An estimate switches to the **exact** Shapley value as soon as the budget reaches all 2^n - 1
coalitions (or all are already known). The sampled units (a coalition and its complement, or a permutation
pair) are grouped by size (sizes with a single unit pooled into one group: alone, a unit would show no error);
enumerated sizes carry no sampling error. The sampling error is a **grouped jackknife**: within each group, a
block of its units is left out at a time (at most :data:`JACKKNIFE_BLOCKS` blocks) and the estimate re-solved;
the groups' variance components add, and Student's t is taken at their Satterthwaite degrees of freedom, so
a variance carried by one size with three units gets t at 2, not at units minus groups. Weights are calibrated
only once some size has two units. A budget that leaves fewer than two units gives no interval (NaN) and says
why (``interval_note``) rather than a falsely narrow one. Two intervals come back: ``ci_low``/``ci_high`` for the
value over the item population (the item bootstrap of the estimate, with the sampling error added in
quadrature), and ``sampling_halfwidth`` for the value on the game's own items (what exact Shapley on them would
give: the sampling error alone). Measured on the 15 games of benchmarks/estimators.py at 5n: the unit bootstrap
it replaced (400 replicates, Rao-Wu, t at units minus groups) covered 0.84-0.93 of the players on their items,
this 0.94-0.99 (0.92-1.00 at 2n-50n), with at most 20 re-solves per size.
"""

from __future__ import annotations

import bisect
import functools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.linalg
from scipy import sparse

from ..errors import ConfigError, did_you_mean
from .exact import EXACT_LIMIT, exact_shapley
from .game import Game
from .stats import bootstrap_mean, satterthwaite_df, t_quantile_975

#: the built-in samplers; :data:`SAMPLER_CLASSES` holds every sampler, :func:`register_sampler` adds one
SAMPLERS = ("hybrid", "kernel", "stratified", "permutation", "proxy")  # proxy: registered by .proxy


# -- stopping rules -------------------------------------------------------------------------------------


@dataclass
class Progress:
    """What a stopping rule sees after each round."""

    coalitions: int  # distinct coalitions this estimate has evaluated (known ones are free)
    generations: int  # backend generations those cost
    rounds: int
    stderr: float  # the largest player's sampling standard error so far (inf before two units)


class StopRule(ABC):
    @abstractmethod
    def done(self, progress: Progress) -> bool:
        """Whether sampling should stop now."""

    def __or__(self, other: "StopRule") -> "StopRule":
        return AnyOf([self, other])


@dataclass
class AnyOf(StopRule):
    rules: list[StopRule]

    def done(self, progress: Progress) -> bool:
        return any(rule.done(progress) for rule in self.rules)

    def __or__(self, other: StopRule) -> StopRule:
        return AnyOf(self.rules + [other])


@dataclass
class Budget(StopRule):
    """Stop when this many distinct coalitions or generations have been spent."""

    coalitions: int | None = None
    generations: int | None = None

    def done(self, progress: Progress) -> bool:
        return ((self.coalitions is not None and progress.coalitions >= self.coalitions)
                or (self.generations is not None and progress.generations >= self.generations))


@dataclass
class Tolerance(StopRule):
    stderr: float

    def done(self, progress: Progress) -> bool:
        return progress.stderr <= self.stderr


@dataclass
class MaxRounds(StopRule):
    rounds: int

    def done(self, progress: Progress) -> bool:
        return progress.rounds >= self.rounds


# -- coalitions as bitmasks ---------------------------------------------------------------------------


def _size(mask: int) -> int:
    return mask.bit_count()


def _bits(masks: list[int], n: int) -> np.ndarray:
    """coalitions x n membership matrix (0/1 floats) of bitmasks."""
    # unsigned: with 64 players the full coalition's mask is 2^64 - 1
    return ((np.asarray(masks, dtype=np.uint64)[:, None] >> np.arange(n, dtype=np.uint64)) & np.uint64(1)).astype(float)


@functools.lru_cache(maxsize=256)
def _all_of_size(n: int, k: int) -> tuple[int, ...]:
    """Every k-subset of range(n) as a bitmask, in colexicographic order."""
    return tuple(_combination(r, n, k) for r in range(math.comb(n, k)))


@functools.lru_cache(maxsize=64)
def _binomial_columns(n: int) -> tuple[tuple[int, ...], ...]:
    """``[k][t]`` = C(t, k) for t, k <= n (each column non-decreasing in t)."""
    return tuple(tuple(math.comb(t, k) for t in range(n + 1)) for k in range(n + 1))


def _combination(rank: int, n: int, k: int) -> int:
    """The ``rank``-th k-subset of range(n) in colexicographic order, as a bitmask (unranking lets us
    sample k-subsets without replacement without listing all C(n, k)): for each size from k down, the largest
    t with C(t, size) <= what remains of the rank is the next member (found by bisection)."""
    columns = _binomial_columns(n)
    mask, remaining = 0, rank
    for size in range(k, 0, -1):
        if not remaining:  # nothing left: the members are the lowest ``size`` (C(t, size) = 0 for t < size)
            return mask | ((1 << size) - 1)
        column = columns[size]
        top = bisect.bisect_right(column, remaining) - 1
        remaining -= column[top]
        mask |= 1 << top
    return mask


@dataclass
class Unit:
    """A sampled unit: coalitions that enter the estimate together (a coalition and its complement, or
    the chain of a permutation pair)."""

    stratum: int  # size (kernel, stratified) or 0 (permutation)
    masks: list[int]
    orders: list[np.ndarray] = field(default_factory=list)  # permutation sampler only


@dataclass
class ValueTable:
    """A value function over a fixed set of coalitions held as one table (``values``: coalitions x items, rows in
    the order of ``index``), which the estimators read without a call per coalition."""

    index: dict[int, int]  # mask -> row
    bits: np.ndarray  # coalitions x n membership
    values: np.ndarray

    def __call__(self, mask: int) -> np.ndarray:
        return np.zeros(self.values.shape[1]) if mask == 0 else self.values[self.index[mask]]


@dataclass
class Design:
    """What has been evaluated: enumerated sizes (exact, no sampling error) and sampled units."""

    n: int
    complete: set[int] = field(default_factory=set)  # sizes whose every coalition is evaluated
    units: list[Unit] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # sampled masks so far (no repeats)

    def add(self, proposal: list["Unit | int"]) -> None:
        """Record a round of a sampler's proposal once evaluated: whole sizes (ints; their sampled units dropped)
        and units."""
        for p in proposal:
            if isinstance(p, int):
                self.complete.add(p)
                self.units = [u for u in self.units if u.stratum != p]
            else:
                self.units.append(p)

    def masks(self) -> set[int]:
        out = {(1 << self.n) - 1}
        for s in self.complete:
            out |= set(_all_of_size(self.n, s))
        for u in self.units:
            out |= set(u.masks)
        return out


def item_mean_table(design: Design, value: Callable[[int], np.ndarray]) -> ValueTable:
    """The design's coalitions' values averaged over the items (one column). An estimate linear in the values
    (the plain samplers', the stratified pairs') has as item mean the estimate from these: a stop rule's bootstrap
    or a jackknife replicate, which needs only item means, then costs as one item does."""
    masks = sorted(design.masks())
    return ValueTable({m: k for k, m in enumerate(masks)}, _bits(masks, design.n),
                      np.stack([value(m) for m in masks]).mean(axis=1, keepdims=True))


class DesignRows:
    """A design's coalitions as rows for the estimates: the enumerated sizes' coalitions, then the sampled units'
    masks sorted by size (a mask of both kinds is a row of each), so that a replicate of the sampled units (the
    jackknife's, a bootstrap's) is a multiplicity per row and sums per size are per-block sums. The rows' per-size
    membership grams at multiplicity one are kept (:meth:`gram`): a replicate recomputes only the sizes whose
    multiplicities it changes. ``units``: the units the sampled rows come from (default: the design's)."""

    def __init__(self, design: Design, units: list[Unit] | None = None):
        n, units = design.n, design.units if units is None else units
        enumerated = [m for s in sorted(design.complete) for m in _all_of_size(n, s)]
        sampled = [(m.bit_count(), k, m) for k, u in enumerate(units) for m in u.masks]
        sampled.sort(key=lambda row: row[0])  # stable: a unit's masks keep their order within a size
        self.n, self.units, self.key = n, units, (len(design.units), frozenset(design.complete))
        self.masks = enumerated + [m for _, _, m in sampled]
        self.enumerated = len(enumerated)
        self.unit_of = np.array([k for _, k, _ in sampled], dtype=np.int64)
        self.number = unit_numbers(units)
        self.bits = _bits(self.masks, n) if self.masks else np.zeros((0, n))
        self.size = self.bits.sum(axis=1).astype(np.int64)
        # blocks of rows sharing a kernel weight: each enumerated size, then each sampled size
        kind = np.arange(len(self.masks)) >= self.enumerated
        starts = np.flatnonzero(np.r_[True, (self.size[1:] != self.size[:-1]) | (kind[1:] != kind[:-1])]) \
            if self.masks else np.zeros(0, dtype=np.int64)
        self.starts, self.block_sampled = starts, kind[starts]
        self.block_lengths = np.diff(np.r_[starts, len(self.masks)]).astype(np.int64)
        self.block_size = self.size[starts]
        self.by_size = sparse.csr_matrix((np.ones(len(self.masks)), (self.size, np.arange(len(self.masks)))),
                                         shape=(n + 1, len(self.masks)))  # sizes x rows, one-hot
        self._grams = self._block_grams(np.ones(len(self.masks)))
        self._index: tuple[dict[int, int], np.ndarray] | None = None
        self._weighted: tuple[np.ndarray, np.ndarray] | None = None  # gram(): the last base weights and their sum
        self._members: np.ndarray | None = None  # member_counts() at multiplicity one
        self._redundant: tuple[frozenset, np.ndarray] | None = None  # redundant(): the sizes and the rows
        self._last_values: tuple[np.ndarray, np.ndarray] | None = None  # values(): a table's values, its rows'

    def multiplicity(self, units: list[Unit]) -> np.ndarray | None:
        """How often each row is in ``units`` (enumerated rows: once); None when a unit is not one of the rows'."""
        counts = unit_counts(self.number, units)
        return None if counts is None else np.concatenate([np.ones(self.enumerated), counts[self.unit_of]])

    def multiplicities(self, counts: np.ndarray) -> np.ndarray:
        """:meth:`multiplicity` of replicates given as how often each holds each unit (``counts``: replicates x
        units, numbered as :attr:`number`): rows x replicates."""
        return np.vstack([np.ones((self.enumerated, len(counts))), counts[:, self.unit_of].T])

    def redundant(self, complete: set[int]) -> np.ndarray:
        """The sampled rows of sizes in ``complete`` (enumerated as well: the stratified estimate counts them once)."""
        key = frozenset(complete)
        if self._redundant is None or self._redundant[0] != key:
            self._redundant = (key, (np.arange(len(self.masks)) >= self.enumerated) & np.isin(self.size, list(key)))
        return self._redundant[1]

    def _block_grams(self, m: np.ndarray, blocks: np.ndarray | None = None) -> np.ndarray:
        """Per block (all, or ``blocks``): sum over its rows of m z z^T (blocks x n x n)."""
        ends = np.r_[self.starts[1:], len(self.masks)]
        chosen = range(len(self.starts)) if blocks is None else blocks
        out = np.zeros((len(chosen), self.n, self.n))
        for j, b in enumerate(chosen):
            z = self.bits[self.starts[b]:ends[b]]
            out[j] = z.T @ (m[self.starts[b]:ends[b], None] * z)
        return out

    def gram(self, m: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """sum over blocks of weight[block] x :meth:`_block_grams` at multiplicities ``m`` (n x n): the sum at the
        last weights and multiplicity one is kept, and only the blocks whose weight or multiplicities differ from
        those are recomputed (a jackknife replicate changes a size or two)."""
        if not len(self.starts):
            return np.zeros((self.n, self.n))
        if self._weighted is None or len(self._weighted[0]) != len(weight):
            self._weighted = (weight, np.tensordot(weight, self._grams, axes=1))
        base_weight, out = self._weighted
        multiplied = np.add.reduceat(m != 1.0, self.starts) > 0
        changed = np.flatnonzero(multiplied | (weight != base_weight))
        if 2 * changed.size > len(self.starts):  # most blocks (a bootstrap's replicate): one product is cheaper
            return self.bits.T @ ((m * np.repeat(weight, self.block_lengths))[:, None] * self.bits)
        if changed.size:
            grams = self._grams[changed].copy()
            recomputed = multiplied[changed]
            grams[recomputed] = self._block_grams(m, changed[recomputed])
            out = out + np.tensordot(weight[changed], grams, axes=1) \
                - np.tensordot(base_weight[changed], self._grams[changed], axes=1)
        return out

    def grams(self, m: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """:meth:`gram` of each column of the multiplicities (rows x replicates) and block weights (blocks x
        replicates): replicates x n x n, each the gram at multiplicity one changed on the rows and blocks the
        replicates change."""
        if self._weighted is None or len(self._weighted[0]) != len(weight):
            self._weighted = (weight[:, 0], np.tensordot(weight[:, 0], self._grams, axes=1))
        base_weight, out = self._weighted
        changed = np.flatnonzero(((m != 1.0).any(axis=1)))
        blocks = np.flatnonzero((weight != base_weight[:, None]).any(axis=1)
                                | (np.add.reduceat((m != 1.0).any(axis=1), self.starts) > 0))
        if 2 * blocks.size > len(self.starts):  # most blocks (a bootstrap's replicates): one product each
            w = m * np.repeat(weight, self.block_lengths, axis=0)
            return np.stack([self.bits.T @ (w[:, j, None] * self.bits) for j in range(m.shape[1])])
        # per block and replicate, the block's gram at its multiplicities: the kept one plus the changed rows'
        block_of_row = np.repeat(np.arange(len(self.starts)), self.block_lengths)[changed]
        z, change = self.bits[changed], m[changed] - 1.0
        grams = np.broadcast_to(self._grams[blocks], (m.shape[1],) + self._grams[blocks].shape).copy()
        for j, blk in enumerate(blocks):
            rows = block_of_row == blk
            grams[:, j] += (z[rows].T[None] * change[rows].T[:, None, :]) @ z[rows]
        return out + np.einsum("kr,rkij->rij", weight[blocks], grams) \
            - np.tensordot(base_weight[blocks], self._grams[blocks], axes=1)[None]

    def member_counts(self, m: np.ndarray) -> np.ndarray:
        """Per size and player, the rows of that size with the player, each counted ``m`` times ((n + 1) x n)."""
        if self._members is None:
            self._members = self.by_size @ self.bits
        multiplied = np.flatnonzero(m != 1.0)
        if not multiplied.size:
            return self._members
        out = self._members.copy()
        np.add.at(out, self.size[multiplied], (m[multiplied] - 1.0)[:, None] * self.bits[multiplied])
        return out

    def member_counts_columns(self, m: np.ndarray) -> np.ndarray:
        """:meth:`member_counts` of each column of multiplicities (rows x columns), players x sizes x columns: the
        counts at multiplicity one changed on the rows a jackknife group changes (all sums where most change)."""
        changed = np.flatnonzero((m != 1.0).any(axis=1))
        if 2 * changed.size > len(m):
            return self.sums_by_size(m)
        # per size, the changed rows' membership times their change (whole numbers: exact in any order)
        change = np.zeros((self.n, self.n + 1, m.shape[1]))
        sizes, z, delta = self.size[changed], self.bits[changed], m[changed] - 1.0
        for size in np.unique(sizes):
            at = sizes == size
            change[:, size] = z[at].T @ delta[at]
        return self.member_counts(np.ones(len(m))).T[:, :, None] + change

    def sums_by_size(self, weighted: np.ndarray) -> np.ndarray:
        """Per player and size, the sum of ``weighted`` (rows x items) over the rows of that size with the player
        (n x (n + 1) x items): one sparse product for a few columns, a loop over the blocks for many (whose
        product would hold rows x n x items numbers)."""
        n, items = self.n, weighted.shape[1]
        if items <= 4:
            spread = (self.bits[:, :, None] * weighted[:, None, :]).reshape(len(self.masks), n * items)
            return (self.by_size @ spread).reshape(n + 1, n, items).transpose(1, 0, 2)
        out = np.zeros((n, n + 1, items))
        for start, end, size in zip(self.starts, np.r_[self.starts[1:], len(self.masks)], self.block_size):
            out[:, size] += self.bits[start:end].T @ weighted[start:end]
        return out

    def values(self, sampler: "Sampler", value: Callable[[int], np.ndarray]) -> np.ndarray:
        """The rows' values (rows x items), read through ``sampler.rows`` (a table's row numbers kept; the last
        table's rows too: the kernel and the stratified estimate read the same one)."""
        if isinstance(value, ValueTable):
            if self._index is None or self._index[0] is not value.index:
                self._index = (value.index, np.fromiter(map(value.index.__getitem__, self.masks), dtype=np.int64,
                                                        count=len(self.masks)))
            if self._last_values is None or self._last_values[0] is not value.values:
                self._last_values = (value.values, value.values[self._index[1]])
            return self._last_values[1]
        return sampler.rows(value, self.masks)[1]


_LAST_COUNTS: list = []  # the last unit_counts call: (number, units, their length, the counts)
_LAST_NUMBERS: list = []  # the last unit_numbers call: (units, their length, the numbers)


def unit_numbers(units: list[Unit]) -> dict[int, int]:
    """``id(unit)`` -> its place in ``units`` (a design's sampled units); the same dict while that list is
    unchanged, so the estimates that share it share :func:`unit_counts`' answers."""
    if not (_LAST_NUMBERS and _LAST_NUMBERS[0] is units and _LAST_NUMBERS[1] == len(units)):
        _LAST_NUMBERS[:] = [units, len(units), {id(u): k for k, u in enumerate(units)}]
    return _LAST_NUMBERS[2]


def unit_counts(number: dict[int, int], units: list[Unit]) -> np.ndarray | None:
    """How often each unit numbered in ``number`` (``id(unit)`` -> its number) is in ``units``; None when one of
    ``units`` is not numbered. The estimates of one replicate share its list, so the last answer is kept."""
    if _LAST_COUNTS and _LAST_COUNTS[0] is number and _LAST_COUNTS[1] is units and _LAST_COUNTS[2] == len(units):
        return _LAST_COUNTS[3]
    if isinstance(units, Replicate) and len(units) + len(units.left_out) == len(number):  # every unit but a few
        dropped = [number.get(id(u)) for u in units.left_out]
        if None in dropped:
            return None
        counts = np.ones(len(number))
        np.subtract.at(counts, np.array(dropped, dtype=np.int64), 1.0)
    else:
        numbers = [number.get(id(u)) for u in units]
        if None in numbers:
            return None
        counts = np.bincount(np.array(numbers, dtype=np.int64), minlength=len(number)).astype(float)
    _LAST_COUNTS[:] = [number, units, len(units), counts]
    return counts


def design_rows(sampler: "Sampler", design: Design, units: list[Unit] | None) -> tuple[DesignRows, np.ndarray]:
    """The design's rows (kept on the sampler while the design is unchanged) and the multiplicity of each in
    ``units`` (default: the design's sampled units); units that are not the design's get rows of their own."""
    rows = sampler._design_rows
    if rows is None or rows.key != (len(design.units), frozenset(design.complete)):
        rows = sampler._design_rows = DesignRows(design)
    m = rows.multiplicity(design.units if units is None else units)
    if m is None:
        rows = DesignRows(design, units)
        m = np.ones(len(rows.masks))
    return rows, m


def replicate_unit_counts(number: dict[int, int], replicates: list[list[Unit]]) -> np.ndarray | None:
    """:func:`unit_counts` of each replicate (replicates x the units numbered in ``number``); None when a replicate
    holds a unit that is not numbered."""
    out = np.ones((len(replicates), len(number)))
    for j, units in enumerate(replicates):
        if isinstance(units, Replicate) and len(units) + len(units.left_out) == len(number):  # all but a few
            dropped = [number.get(id(u)) for u in units.left_out]
            if None in dropped:
                return None
            np.subtract.at(out[j], np.array(dropped, dtype=np.int64), 1.0)
        else:
            counts = unit_counts(number, units)
            if counts is None:
                return None
            out[j] = counts
    return out


def _kept_rows(sampler: "Sampler", design: Design) -> DesignRows:
    """The design's rows, kept on ``sampler`` while the design is unchanged (and on its ``stratified`` part, if any,
    for their ``estimate_columns``)."""
    rows = sampler._design_rows
    if rows is None or rows.key != (len(design.units), frozenset(design.complete)):
        rows = sampler._design_rows = DesignRows(design)
    stratified = getattr(sampler, "stratified", None)
    if isinstance(stratified, Sampler):
        stratified._design_rows = rows
    return rows


def replicate_rows(sampler: "Sampler", design: Design, replicates: list[list[Unit]],
                   held: tuple[dict[int, int], np.ndarray] | None = None) -> np.ndarray | None:
    """Each replicate's multiplicities of the design's rows (rows x replicates; the rows kept on ``sampler`` and on
    its ``stratified`` part, if any, for their ``estimate_columns``); None when a replicate holds units that are not
    the design's. ``held``: the replicates' :func:`replicate_unit_counts` under a numbering of the units, when the
    caller has them (used when it is the rows' numbering)."""
    rows = _kept_rows(sampler, design)
    if held is not None and (held[0] is rows.number or held[0] == rows.number):
        return rows.multiplicities(held[1])
    counts = replicate_unit_counts(rows.number, replicates)
    return None if counts is None else rows.multiplicities(counts)


def replicate_rows_of_counts(sampler: "Sampler", design: Design, counts: np.ndarray) -> np.ndarray:
    """:func:`replicate_rows` of replicates given as how often each holds each of the design's sampled units
    (``counts``: replicates x units, :func:`resampled_counts`): rows x replicates."""
    return _kept_rows(sampler, design).multiplicities(counts)


# -- samplers: propose the next round of units ------------------------------------------------------------


class Sampler(ABC):
    """Proposes coalitions in rounds and estimates from them; a new one is made usable by name
    (``sampled_shapley(sampler=...)``, ``cgym eval --sampler``) with :func:`register_sampler`."""

    name = "sampler"
    description = ""  # one line, for listings (`cgym estimators`)
    min_coalitions = 1
    max_players: int | None = None  # the most players the sampler takes (None: any); auto picks another above it
    linear = False  # whether estimate() is linear in the values (see item_mean_table); a new sampler says so itself
    shrink: float | None = None  # set by a settle() that shrinks one estimate towards another (the proxy sampler)
    solo_share_weight: float | None = None  # set by a settle() that shrinks towards the solo shares (the proxy sampler)

    def __init__(self, n: int, rng: np.random.Generator):
        self.n, self.rng = n, rng
        self._rows: tuple[Callable[[int], np.ndarray], dict[int, int], np.ndarray, np.ndarray] | None = None
        self._design_rows: DesignRows | None = None  # the design's rows for the estimates (design_rows)

    def rows(self, value: Callable[[int], np.ndarray], masks: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(membership, values) of ``masks``: coalitions x n and coalitions x items, from a table of every mask
        asked of this ``value`` before (the jackknife and the calibration re-estimate from the same coalitions)."""
        if isinstance(value, ValueTable):  # already one table
            idx = np.fromiter(map(value.index.__getitem__, masks), dtype=np.int64, count=len(masks))
            return value.bits[idx], value.values[idx]
        if self._rows is None or self._rows[0] is not value:
            self._rows = (value, {}, np.zeros((0, self.n)), np.zeros((0, value((1 << self.n) - 1).shape[0])))
        _, index, bits, values = self._rows
        new = list(dict.fromkeys(m for m in masks if m not in index))
        if new:
            index.update({m: len(index) + k for k, m in enumerate(new)})
            bits = np.vstack([bits, _bits(new, self.n)])
            values = np.vstack([values, np.stack([value(m) for m in new])])
            self._rows = (value, index, bits, values)
        idx = np.fromiter(map(index.__getitem__, masks), dtype=np.int64, count=len(masks))
        return bits[idx], values[idx]

    @abstractmethod
    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        """The next round: whole sizes (ints) or units, at most ``room`` new coalitions (what the budget
        has left) and about ``step`` unless a whole size is enumerated; [] when nothing fits."""

    @abstractmethod
    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        """players x items estimate from the design (``units`` replaces the sampled units: a jackknife or bootstrap
        replicate)."""

    def observe(self, masks: set[int], value: Callable[[int], np.ndarray]) -> None:
        """Told the coalitions of each round once they are evaluated (default: nothing)."""

    def finish(self, design: Design, value: Callable[[int], np.ndarray]) -> None:
        """Called once sampling stopped, before the final estimate (default: nothing)."""

    def model_error(self, design: Design, value: Callable[[int], np.ndarray],
                    estimate: np.ndarray) -> np.ndarray | None:
        """Per player, an error the resampling of units cannot see, added to each side of the interval (default:
        none); ``estimate`` is the final estimate (players x items)."""
        return None

    def settle(self, design: Design, value: Callable[[int], np.ndarray], groups: list[list[Unit]],
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The final estimate (players x items), its sampling variance and degrees of freedom (called after
        :meth:`finish`; default: the estimate and the grouped jackknife of it)."""
        per_item = self.estimate(design, value)
        variance, df = grouped_jackknife(lambda units: self.estimate(design, value, units), groups, self.n, rng,
                                         per_item.mean(axis=1))
        return per_item, variance, df

    def _fill(self, design: Design, budget: int, next_size: Callable[[list[Unit]], int | None],
              exhausted: Callable[[int], None], paired: Callable[[int, int], bool]) -> list[Unit | int]:
        """Draw units until ``budget`` coalitions are used: ``next_size(drawn)`` names the size to draw
        from given the units drawn so far this round (None: stop), ``exhausted(size)`` is told when a
        size has nothing new left, ``paired(size, budget)`` says whether to take the complement too."""
        out: list[Unit] = []
        while budget > 0:
            size = next_size(out)
            if size is None:
                break
            unit = self._draw(design, size, pair=paired(size, budget))
            if unit is None:
                exhausted(size)
                continue
            if len(unit.masks) > budget:
                break
            design.seen.update(unit.masks)
            out.append(unit)
            budget -= len(unit.masks)
        return list(out)

    # shared: a random coalition of size s (and its complement) not sampled before
    def _draw(self, design: Design, s: int, pair: bool) -> Unit | None:
        total, full = math.comb(self.n, s), (1 << self.n) - 1

        def fresh(mask: int) -> bool:
            return mask not in design.seen and (not pair or full ^ mask not in design.seen)

        for _ in range(32):  # rejection sampling while the size is mostly unsampled ...
            mask = _combination(int(self.rng.integers(total)), self.n, s)
            if fresh(mask):
                break
        else:  # ... then a uniform draw among the coalitions still unsampled
            left = [m for m in (_combination(r, self.n, s) for r in range(total)) if fresh(m)]
            if not left:
                return None
            mask = left[int(self.rng.integers(len(left)))]
        comp = full ^ mask
        return Unit(s, [mask, comp] if pair and comp != mask else [mask])


class KernelSampler(Sampler):
    name = "kernel"
    linear = True
    description = "paired KernelSHAP: sizes by kernel mass, each coalition with its complement"

    def __init__(self, n: int, rng: np.random.Generator):
        super().__init__(n, rng)
        self.min_coalitions = n + 1
        self.mass = {s: (n - 1) / (s * (n - s)) for s in range(1, n)}
        self._mass_of_size = np.array([self.mass.get(s, 0.0) for s in range(n + 1)])
        self._sizes_count = np.array([float(math.comb(n, s)) for s in range(n + 1)])  # C(n, s) as floats
        # size pairs (s, n - s), most Shapley-kernel mass first: the order of enumeration
        self.pairs = sorted(range(1, n // 2 + 1), key=lambda s: -self._pair_mass(s))

    def _pair_mass(self, s: int) -> float:
        return self.mass[s] + (self.mass[self.n - s] if self.n - s != s else 0.0)

    def _sizes(self, s: int) -> list[int]:
        return [s] if 2 * s == self.n else [s, self.n - s]

    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        n = self.n
        open_pairs = self._open_pairs(design)
        if not open_pairs or room <= 0:
            return []
        first = open_pairs[0]
        missing = [k for k in self._sizes(first) if k not in design.complete]
        if self._sampled(design.units, first) == 0:
            # border trick: enumerate the pair of sizes when its share of what is left (by kernel mass)
            # would cover it anyway; a pair that only fits would starve the others of samples
            share = self._pair_mass(first) / sum(self._pair_mass(k) for k in open_pairs) * room
            if sum(math.comb(n, k) for k in missing) <= min(share, room) or len(open_pairs) == 1 and \
                    sum(math.comb(n, k) for k in missing) <= room:
                return list(missing)
            alone = self.enumerate_alone(first, missing, min(share, room), room)
            if alone is not None:
                return [alone]
            if first == 1 and 1 in missing and n <= room:  # at least the singletons: n + 1 coalitions
                return [1]
        return self._fill_by_mass(design, min(room, step), open_pairs)

    def _fill_by_mass(self, design: Design, budget: int, open_pairs: list[int]) -> list[Unit | int]:
        """Sampled units of the ``open_pairs`` of sizes, ``budget`` coalitions: the pairs share them in
        proportion to their kernel mass (with what was sampled of them before), next the one furthest behind."""
        n, open_pairs = self.n, list(open_pairs)
        pair_of = {k: s for s in open_pairs for k in self._sizes(s)}
        # coalitions sampled per open pair so far, kept up to date as the round draws (one pass over the units)
        count = dict.fromkeys(open_pairs, 0)
        for u in design.units:
            if u.stratum in pair_of:
                count[pair_of[u.stratum]] += len(u.masks)
        counted = [0]  # the round's drawn units already in count
        masses = {k: self._pair_mass(k) for k in open_pairs}

        def next_size(drawn: list[Unit]) -> int | None:
            if not open_pairs:
                return None
            for u in drawn[counted[0]:]:
                count[pair_of[u.stratum]] += len(u.masks)
            counted[0] = len(drawn)
            # furthest behind its kernel mass, random ties (one draw per open pair, in order, as k draws of one):
            # the first pair with the least (count / mass, draw)
            behind = np.array([count[k] / masses[k] for k in open_pairs])
            draws = self.rng.random(len(open_pairs))
            tied = np.flatnonzero(behind == behind.min())
            s = open_pairs[int(tied[np.argmin(draws[tied])])]
            sizes = [k for k in self._sizes(s) if k not in design.complete]
            return sizes[int(self.rng.integers(len(sizes)))]

        return self._fill(design, budget, next_size, lambda size: open_pairs.remove(pair_of[size]),
                          lambda size, left: (n - size) not in design.complete and left >= 2)

    def enumerate_alone(self, first: int, missing: list[int], share: float, room: float) -> int | None:
        """A size of the next pair of sizes to enumerate on its own when the pair does not fit its ``share``
        of what is left, ``room`` (default: none; the proxy sampler enumerates the pairs)."""
        return None

    def _open_pairs(self, design: Design) -> list[int]:
        """The pairs of sizes not yet enumerated, in the order of enumeration."""
        return [s for s in self.pairs if not set(self._sizes(s)) <= design.complete]

    def _sampled(self, units: list[Unit], s: int) -> int:
        sizes = self._sizes(s)
        return sum(len(u.masks) for u in units if u.stratum in sizes)

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        n = self.n
        rows, m = design_rows(self, design, units)
        full = value((1 << n) - 1)
        if not m.any():
            return np.tile(full / n, (n, 1))
        block_weight = self._block_weights(rows, m)
        w = m * np.repeat(block_weight, rows.block_lengths)
        b = rows.bits.T @ (w[:, None] * rows.values(self, value))  # v(empty) = 0
        return _efficient_solution(rows.gram(m, block_weight), b, full)

    def estimate_columns(self, design: Design, value: Callable[[int], np.ndarray], m: np.ndarray) -> np.ndarray:
        """:meth:`estimate` of the columns of ``value`` with the multiplicities of the design's rows of a replicate
        each (``m``: rows x replicates, :func:`replicate_rows`; replicate j's values are the columns j q to
        j q + q - 1 of ``value``, q of them each): players x columns. The replicates of a jackknife group or of a
        bootstrap at once (one product for the right-hand sides; a solve each)."""
        n, count = self.n, m.shape[1]
        rows = self._design_rows
        assert rows is not None  # replicate_rows() made them
        full = value((1 << n) - 1)
        q = len(full) // count
        weight = self._block_weights(rows, m)
        w = m * np.repeat(weight, rows.block_lengths, axis=0)
        b = rows.bits.T @ (_each_column(w, q, 1) * rows.values(self, value))
        if m.any(axis=0).all():  # every replicate has rows: their systems solved together
            solved = _efficient_solution(rows.grams(m, weight), b.T.reshape(count, q, n).swapaxes(1, 2),
                                         full.reshape(count, q))  # replicates x n x q
            return solved.transpose(1, 0, 2).reshape(n, -1)
        out = np.empty((n, len(full)))
        for j in range(count):
            at = slice(j * q, j * q + q)
            out[:, at] = _efficient_solution(rows.gram(m[:, j], weight[:, j]), b[:, at], full[at]) \
                if m[:, j].any() else full[at] / n
        return out

    def _block_weights(self, rows: DesignRows, m: np.ndarray) -> np.ndarray:
        """Each block's kernel weight (blocks, or blocks x columns for multiplicities per column): an enumerated
        coalition at its size's kernel mass over the size's count, a sampled one at its size's mass over the
        coalitions sampled at that size (as often as the replicate holds it)."""
        mass = self._mass_of_size[rows.block_size]
        enumerated = mass / self._sizes_count[rows.block_size]
        sampled, per_column = rows.block_sampled, (slice(None),) + (None,) * (m.ndim - 1)  # blocks -> blocks x 1
        return np.where(sampled[per_column], mass[per_column] / np.maximum(np.add.reduceat(m, rows.starts), 1),
                        enumerated[per_column])


def _each_column(x: np.ndarray, q: int, axis: int) -> np.ndarray:
    """``x`` with each entry along ``axis`` repeated ``q`` times (a replicate's for each of its q columns)."""
    return x if q == 1 else np.repeat(x, q, axis=axis)


def _efficient_solution(a: np.ndarray, b: np.ndarray, full: np.ndarray) -> np.ndarray:
    """The kernel regression's solution (players x columns) under efficiency (the players sum to ``full``): the
    unconstrained one, shifted along A^-1 1. With a leading replicates axis on all three: one per replicate."""
    ones = np.ones(a.shape[-1])
    a_inv_b, a_inv_ones = _solve_psd(a, b, ones) if a.ndim == 2 else _solve_psd_many(a, b, ones)
    correction = (a_inv_b.sum(axis=-2) - full) / a_inv_ones.sum(axis=-1, keepdims=True)
    return a_inv_b - a_inv_ones[..., :, None] * correction[..., None, :]


def _solve_psd_many(a: np.ndarray, b: np.ndarray, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_solve_psd` of a stack of systems (a: r x n x n, b: r x n x q): together where every A is definite
    (checked by its Cholesky factor), else one by one."""
    try:
        np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        pairs = [_solve_psd(a_j, b_j, ones) for a_j, b_j in zip(a, b)]
        return np.stack([x for x, _ in pairs]), np.stack([y for _, y in pairs])
    both = np.linalg.solve(a, np.concatenate([b, np.broadcast_to(ones[:, None], b.shape[:-1] + (1,))], axis=-1))
    return both[..., :-1], both[..., -1]


def _solve_psd(a: np.ndarray, b: np.ndarray, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A^-1 b, A^-1 ones) for a symmetric positive semi-definite A: by Cholesky where A is definite, else by the
    pseudo-inverse (a player no weighted coalition separates)."""
    try:
        factor = scipy.linalg.cho_factor(a)
    except np.linalg.LinAlgError:
        a_inv = np.linalg.pinv(a)
        return a_inv @ b, a_inv @ ones
    both = scipy.linalg.cho_solve(factor, np.column_stack([b, ones]))
    return both[:, :-1], both[:, -1]


class StratifiedSampler(Sampler):
    name = "stratified"
    linear = True
    description = "SVARM-style stratified estimate, sizes 1 and n-1 enumerated first"

    def __init__(self, n: int, rng: np.random.Generator):
        super().__init__(n, rng)
        self.spread_of: dict[int, float] = {}  # mask -> item-mean value, filled by the estimate loop
        self.min_coalitions = 2 * n + 1 if n > 2 else 2 ** n - 1

    def observe(self, masks: set[int], value: Callable[[int], np.ndarray]) -> None:
        self.spread_of.update({m: float(value(m).mean()) for m in masks})  # for the Neyman allocation

    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        n = self.n
        for border in (1, n - 1):  # sizes 1 and n-1 first, whole
            if border not in design.complete and 0 < border < n:
                return [border] if math.comb(n, border) <= room else []
        open_sizes = [s for s in range(2, n - 1) if s not in design.complete]

        def next_size(drawn: list[Unit]) -> int | None:
            while open_sizes:
                # Neyman allocation: sizes whose sampled values spread more get more samples (even at first)
                count = {s: sum(len(u.masks) for u in design.units + drawn if _size(u.masks[0]) in (s, n - s))
                         for s in open_sizes}
                s = min(open_sizes, key=lambda k: (count[k] / self._spread(design, k), self.rng.random()))
                if math.comb(n, s) + (math.comb(n, n - s) if n - s != s else 0) > count[s]:
                    return s
                open_sizes.remove(s)
            return None

        # the last coalition of a budget goes alone
        return self._fill(design, min(room, step), next_size, open_sizes.remove, lambda size, budget: budget >= 2)

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        rows, m = design_rows(self, design, units)
        return self._from_rows(design, rows, m, value)

    def estimate_columns(self, design: Design, value: Callable[[int], np.ndarray], m: np.ndarray) -> np.ndarray:
        """:meth:`estimate` of the columns of ``value`` with a replicate's multiplicities each (see
        :meth:`KernelSampler.estimate_columns`): players x columns."""
        assert self._design_rows is not None  # replicate_rows() made them
        return self._from_rows(design, self._design_rows, m, value)

    def _from_rows(self, design: Design, rows: DesignRows, m: np.ndarray,
                   value: Callable[[int], np.ndarray]) -> np.ndarray:
        """The estimate from the design's rows at multiplicities ``m``: one for every column of the values (rows), or
        one column each (rows x columns)."""
        n = self.n
        full = value((1 << n) - 1)
        # the enumerated sizes' coalitions and the sampled ones of the other sizes, as often as the replicate holds them
        redundant = rows.redundant(design.complete)
        m = np.where(redundant if m.ndim == 1 else redundant[:, None], 0.0, m)
        if not m.any():  # [player, size]: mean v(S) over sampled S of that size with i (without i)
            inside, outside = np.zeros((2, n, n + 1, full.shape[0]))
        else:
            values = rows.values(self, value)
            if m.ndim == 1:
                per_size = np.bincount(rows.size, weights=m, minlength=n + 1)[:, None]  # rows of each size
                has = rows.member_counts(m).T[:, :, None]  # n x sizes x 1: rows of that size with i
                weighted = m[:, None] * values
            else:  # a replicate's multiplicities for each of its q columns of values
                q = values.shape[1] // m.shape[1]
                per_size = _each_column(rows.by_size @ m, q, 1)
                has = _each_column(rows.member_counts_columns(m), q, 2)
                weighted = _each_column(m, q, 1) * values
            by_size = rows.by_size @ weighted
            overall = by_size / np.maximum(per_size, 1)
            lacks = per_size[None] - has
            with_i = rows.sums_by_size(weighted)  # [i, s]: sum of v(S) over the rows of size s with i
            without_i = by_size[None] - with_i
            # a size no row reached stays 0 (has, lacks and its sums are 0 there)
            inside = np.where(has > 0, with_i / np.maximum(has, 1), overall[None])
            outside = np.where(lacks > 0, without_i / np.maximum(lacks, 1), overall[None])
        inside[:, n] = full
        # phi_i = 1/n sum_{s=0}^{n-1} (inside[i, s+1] - outside[i, s]); outside[i, 0] = v(empty) = 0
        return (inside[:, 1:].sum(axis=1) - outside[:, :n].sum(axis=1)) / n


    def _spread(self, design: Design, s: int) -> float:
        """Standard deviation of the sampled item-mean values of size s (1 until there are two)."""
        values = [self.spread_of[m] for u in design.units if u.stratum == s for m in u.masks if m in self.spread_of]
        return max(float(np.std(values, ddof=1)), 1e-3) if len(values) >= 2 else 1.0

class HybridSampler(KernelSampler):
    """The paired-KernelSHAP design, estimated twice on the same coalitions (kernel regression and the
    stratified estimate) and combined with the weight that minimises the variance of the combination,
    ``w = (var_s - cov) / (var_k + var_s - 2 cov)``, from a bootstrap over the sampled units (pooled
    over players, clipped to [0, 1]). Their errors are far from perfectly correlated, and which one
    is better depends on the game and the budget; the combination follows the better one and beats
    both where they are close (measured in benchmarks/estimators.py)."""

    name = "hybrid"
    description = "the kernel design estimated both ways, combined with the variance-minimising weight"

    def __init__(self, n: int, rng: np.random.Generator):
        super().__init__(n, rng)
        self.stratified = StratifiedSampler(n, rng)
        self.weight = 0.5  # of the kernel estimate; set by calibrate()

    def both(self, design: Design, value: Callable[[int], np.ndarray],
             units: list[Unit] | None = None) -> tuple[np.ndarray, np.ndarray]:
        return super().estimate(design, value, units), self.stratified.estimate(design, value, units)

    def calibrate(self, design: Design, value: Callable[[int], np.ndarray], reps: int = 100) -> float:
        if _calibratable(design):
            draws = [self.both(design, value, _resample_units(design, self.rng)) for _ in range(reps)]
            k = np.stack([d[0].mean(axis=1) for d in draws])
            s = np.stack([d[1].mean(axis=1) for d in draws])
            var_k, var_s = k.var(axis=0, ddof=1), s.var(axis=0, ddof=1)
            cov = ((k - k.mean(axis=0)) * (s - s.mean(axis=0))).sum(axis=0) / (reps - 1)
            denominator = float((var_k + var_s - 2 * cov).sum())
            if denominator > 1e-15:
                self.weight = float(np.clip((var_s - cov).sum() / denominator, 0.0, 1.0))
        return self.weight

    def finish(self, design: Design, value: Callable[[int], np.ndarray]) -> None:
        self.calibrate(design, value)

    def model_error(self, design: Design, value: Callable[[int], np.ndarray],
                    estimate: np.ndarray) -> np.ndarray | None:
        """While the design is thin the jackknife cannot see the error of what it extrapolates (sizes no
        coalition was evaluated at), sees it coarsely where most sampled units are alone in their size (pooled),
        and has nothing to weigh the estimates by before any size has two units. Then the distance to the
        farther of the two plain estimates (kernel, stratified) widens the interval; the estimate is unchanged.
        Measured for the proxy sampler at 2n on the continuous synthetic game of the tests, 20 seeds: coverage
        0.72 -> 0.97 (n = 10), 0.94 -> 1.00 (n = 8); on a synthetic selection game with random tie-breaks (n = 9,
        3 games x 5 seeds): one run 0.56 -> 1.00. The hybrid got it later (its interval for the value on the
        items covered 0.00 of the players at 2n on SLM-MUX with random tie-breaks over 9 members)."""
        if _calibratable(design) and not unseen_sizes(design) and not mostly_lone(design):
            return None
        # against each plain estimate (the hybrid lies between them)
        return np.max([np.abs(estimate - plain).mean(axis=1) for plain in self.both(design, value)], axis=0)

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        kernel, stratified = self.both(design, value, units)
        return self.weight * kernel + (1 - self.weight) * stratified

    def estimate_columns(self, design: Design, value: Callable[[int], np.ndarray], m: np.ndarray) -> np.ndarray:
        """:meth:`estimate` of each column of ``value`` with its own multiplicities (see
        :meth:`KernelSampler.estimate_columns`): players x columns."""
        kernel = super().estimate_columns(design, value, m)
        return self.weight * kernel + (1 - self.weight) * self.stratified.estimate_columns(design, value, m)


class PermutationSampler(Sampler):
    name = "permutation"
    linear = True
    description = "antithetic permutation sampling, the classic estimator"

    def __init__(self, n: int, rng: np.random.Generator):
        super().__init__(n, rng)
        self.min_coalitions = 2 * n - 1

    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        known = design.masks()
        out: list[Unit | int] = []
        budget = room  # whole permutation pairs; the round is at most 8 of them
        for _ in range(8):
            order = self.rng.permutation(self.n)
            orders = [order, order[::-1].copy()]
            masks = [sum(1 << int(j) for j in o[:k]) for o in orders for k in range(1, self.n + 1)]
            new = {m for m in masks if m not in known}
            if len(new) > budget:
                break
            known |= new
            budget -= len(new)
            out.append(Unit(0, masks, orders))
        return out

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        units = design.units if units is None else units
        total = np.zeros((self.n, value((1 << self.n) - 1).shape[0]))
        for u in units:
            for order in u.orders:
                previous, mask = np.zeros_like(total[0]), 0
                marginal = np.zeros((self.n, value((1 << self.n) - 1).shape[0]))
                for j in order:
                    mask |= 1 << int(j)
                    current = value(mask)
                    marginal[int(j)] = current - previous
                    previous = current
                total = total + marginal
        return total / (2 * len(units))


#: sampler name -> class, built-ins first; extended by :func:`register_sampler`
SAMPLER_CLASSES: dict[str, type[Sampler]] = {}


def register_sampler(cls: type[Sampler]) -> type[Sampler]:
    """Make a :class:`Sampler` subclass usable by its ``name``: ``sampled_shapley(sampler=name)``,
    ``sampled_shapley_values(game, sampler=name)`` and ``cgym eval --estimator mc --sampler name``. The class
    is built as ``cls(n_players, rng)``; returns it, so it can decorate the class."""
    if not (isinstance(cls, type) and issubclass(cls, Sampler)) or cls is Sampler:
        raise ConfigError(f"register_sampler takes a Sampler subclass, not {cls!r}")
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name in ("sampler", "auto"):
        raise ConfigError(f"{cls.__name__} needs its own class attribute name (e.g. name = 'my_sampler')")
    if SAMPLER_CLASSES.get(name, cls) is not cls:
        raise ConfigError(f"sampler {name!r} is already registered ({SAMPLER_CLASSES[name].__name__})")
    SAMPLER_CLASSES[name] = cls
    return cls


for _builtin in (HybridSampler, KernelSampler, StratifiedSampler, PermutationSampler):
    register_sampler(_builtin)


def sampler_names() -> list[str]:
    """Every sampler's name, built-ins first (``auto`` chooses one of them)."""
    return list(SAMPLER_CLASSES)


def check_sampler(name: str) -> str:
    """``name`` if it is ``auto`` or a registered sampler; else a clear error."""
    if name != "auto" and name not in SAMPLER_CLASSES:
        known = ["auto", *SAMPLER_CLASSES]
        raise ConfigError(f"unknown sampler {name!r}.{did_you_mean(name, known)} Use one of {', '.join(known)}")
    return name


# -- the estimate -------------------------------------------------------------------------------------------


@dataclass
class SampledShapley:
    per_item: np.ndarray  # players x items
    ci_low: np.ndarray
    ci_high: np.ndarray
    stderr: np.ndarray  # over items and sampling: the item bootstrap's and the jackknife's in quadrature
    sampling_stderr: np.ndarray  # the grouped jackknife's, over the sampled units alone
    # per player, the half-width of the 95% interval for the value on *these* items (the sampling error alone:
    # Student-t at the jackknife's Satterthwaite degrees of freedom x sampling_stderr, plus model_error);
    # ci_low / ci_high are for the value over the item population
    sampling_halfwidth: np.ndarray
    exact: bool
    sampler: str
    coalitions: int
    generations: int
    rounds: int
    stop_reason: str
    interval_note: str = ""  # why there is no interval (ci and stderr NaN), when the budget cannot give one
    model_error: np.ndarray | None = None  # per player, what the interval was widened by (Sampler.model_error)
    # the share kappa of the difference estimate's extrapolation the final estimate kept (Sampler.shrink: the proxy
    # sampler's, when it fitted a proxy; None for the others)
    shrink: float | None = None
    # the solo shares' weight in the estimate (1 - lambda of proxy.shrunk_to_solo_shares; None where not used)
    solo_share_weight: float | None = None


#: what ``auto`` picks, in words (``cgym estimators`` prints it)
AUTO_RULE = ("proxy from n = 2 (hybrid for a lone player): the lowest error at every budget 2n-50n on the "
             "calibration games of benchmarks/estimators.py, about half the hybrid's, intervals covering from 2n; "
             "on selection protocols (SLM-MUX, cascade) exact or nearly once the pairs are enumerated (10n for "
             "n = 8, 25n for n = 10-12); ahead of shapiq 1.8's best approximator at every budget of every game "
             "(0.94x at the closest: SLM-MUX with random tie-breaks, 9 members, 25n); from 13 members shrunk "
             "towards the solo shares as far as its own sampling error says (ahead in 95 of 100 held-out cells at "
             "14-64 members)")


def choose_sampler(n: int, budget: int | None) -> str:
    """The default sampler (:data:`AUTO_RULE`): the regression-adjusted ``proxy`` sampler wherever its proxy
    can be fitted (two players or more: it needs the singletons' per-item scores) and it takes the pool (up to its
    ``max_players``, 64), else ``hybrid``.
    Measured on the calibration games of benchmarks/estimators.py (majority vote, n = 8, 10, 12)."""
    proxy = SAMPLER_CLASSES.get("proxy")
    return "proxy" if n >= 2 and proxy is not None and n <= (proxy.max_players or n) else "hybrid"


#: the narrowest sampling interval (half-width): values are means of scores in [0, 1], and the estimates' least
#: squares leave round-off of about 1e-15 to 1e-13 even where the proxy makes them exact
ROUNDOFF = 1e-12

#: the sampling interval's jackknife deletes one of at most this many random blocks of a group's units at a time
#: (fixed before any run): each group keeps up to 19 degrees of freedom, and the cost stays at most 20 re-solves a size
JACKKNIFE_BLOCKS = 20

#: a sampling estimator without a budget stops at this many coalitions per player (or earlier, at its tolerance):
#: on the benchmark's games 25n puts the default within a few thousandths of exact (docs/evaluate/estimators.md)
DEFAULT_BUDGET_PER_PLAYER = 25


def default_budget(n: int, budget: int | None, budget_generations: int | None) -> tuple[int | None, bool]:
    """The coalition budget a sampling estimator runs with: the given one, else, above the exact estimators'
    limit (where sampling is what a user gets) and with no budget in coalitions or generations given,
    :data:`DEFAULT_BUDGET_PER_PLAYER` x n; and whether it is the default. Up to the limit the tolerance and
    round limit stop it, as they always did."""
    if budget is None and budget_generations is None and n > EXACT_LIMIT:
        return DEFAULT_BUDGET_PER_PLAYER * n, True
    return budget, False


class _Coalitions:
    """A game's coalitions by bitmask (bit k: player k): their names, their per-item values (memoised) and the
    coalitions and generations the game spent on them since this was made."""

    def __init__(self, game: Game):
        self.game, self.players = game, game.players
        self.memo: dict[int, np.ndarray] = {0: np.zeros(game.n_items)}
        self._start = (game.coalitions_evaluated, game.generations)
        # per byte of a mask (lowest first) and its value: the names of its set bits, lowest first
        players = self.players
        self._byte_names = [[tuple(players[j + b] for b in range(min(8, len(players) - j)) if v >> b & 1)
                             for v in range(256)] for j in range(0, len(players), 8)]
        self._names: dict[int, frozenset] = {}

    def names(self, mask: int) -> frozenset:
        """The coalition's players (built from the set bits, lowest first; kept: the game's key for it)."""
        found = self._names.get(mask)
        if found is None:
            out: list[str] = []
            rest, byte = mask, 0
            while rest:
                out += self._byte_names[byte][rest & 255]
                rest >>= 8
                byte += 1
            found = self._names[mask] = frozenset(out)
        return found

    def value(self, mask: int) -> np.ndarray:
        if mask not in self.memo:
            self.memo[mask] = self.game.per_item(self.names(mask))
        return self.memo[mask]

    def spent(self) -> tuple[int, int]:
        return self.game.coalitions_evaluated - self._start[0], self.game.generations - self._start[1]


def sampled_shapley(game: Game, sampler: str = "auto", stop: StopRule | None = None, seed: int = 0,
                    n_boot: int = 1000, round_coalitions: int | None = None) -> SampledShapley:
    """Shapley values of ``game``'s players from sampled coalitions (see the module doc)."""
    n = len(game.players)
    stop = stop or (Tolerance(0.005) | MaxRounds(500))
    budget = _coalition_budget(stop)
    name = choose_sampler(n, budget) if check_sampler(sampler) == "auto" else sampler
    rng = np.random.default_rng(seed)
    impl = SAMPLER_CLASSES[name](n, rng)
    if budget is not None and budget < impl.min_coalitions and budget < 2 ** n - 1:
        raise ConfigError(f"a budget of {budget} coalitions is too small for the {name} sampler with n={n}: "
                          f"it needs at least {impl.min_coalitions}")
    coalitions = _Coalitions(game)
    all_known = all(coalitions.names(m) in game._values for m in range(1, 1 << n)) if n <= 16 else False
    if all_known or (budget is not None and budget >= 2 ** n - 1):
        return _exact(game, coalitions.value, n, seed, n_boot, name, coalitions.spent,
                      "every coalition is known already" if all_known else "every coalition fits the budget")
    game.evaluate([coalitions.names((1 << n) - 1)])
    design = Design(n)
    rounds, reason = _sample_rounds(impl, design, coalitions, stop, budget, round_coalitions or 2 * n, rng)
    if len(design.masks()) >= 2 ** n - 1:
        return _exact(game, coalitions.value, n, seed, n_boot, name, coalitions.spent, reason)
    return _sampled_result(impl, design, coalitions, name, seed, n_boot, rounds, reason)


def _sample_rounds(impl: Sampler, design: Design, coalitions: _Coalitions, stop: StopRule, budget: int | None,
                   step: int, rng: np.random.Generator) -> tuple[int, str]:
    """Sample rounds of coalitions into ``design`` until the stop rule, the budget or the sampler says so, or every
    coalition was sampled; the rounds run and why they stopped."""
    n = design.n
    rounds, sampling_se = 0, np.full(n, np.inf)
    while True:
        used, gens = coalitions.spent()
        # without a coalition budget, the room grows with what was spent, so whole sizes are enumerated
        # only when small next to it and a tolerance can stop the sampling early
        room = max(4 * step, 2 * used) if budget is None else budget - used
        proposal = impl.propose(design, room, step)
        if not proposal:
            return rounds, "budget" if budget is not None else "no new coalitions"
        masks: set[int] = set()
        for p in proposal:
            if isinstance(p, int):
                masks |= set(_all_of_size(n, p))
            else:
                masks |= set(p.masks)
        coalitions.game.evaluate([coalitions.names(m) for m in masks])
        impl.observe(masks, coalitions.value)
        design.add(proposal)
        rounds += 1
        if len(design.masks()) >= 2 ** n - 1:
            return rounds, "every coalition was sampled"
        if _has_tolerance(stop):  # costs a small bootstrap per round; only a tolerance rule needs it
            sampling_se = _sampling_stderr(impl, design, coalitions.value, rng, 60)
        used, gens = coalitions.spent()
        progress = Progress(used, gens, rounds, float(np.max(sampling_se)))
        if stop.done(progress):
            return rounds, _which(stop, progress)


def _sampled_result(impl: Sampler, design: Design, coalitions: _Coalitions, name: str, seed: int, n_boot: int,
                    rounds: int, reason: str) -> SampledShapley:
    """The estimate from the sampled ``design``: per-item values, the interval over the items widened by the
    sampling error and the proxy's model error, or no interval where no sampling error is measurable."""
    n, value = design.n, coalitions.value
    impl.finish(design, value)
    groups = _bootstrap_groups(design)
    per_item, variance, df = impl.settle(design, value, groups, np.random.default_rng(seed + 1))
    s_se, spread = np.sqrt(variance), t_spread(variance, df)
    low, high, se = interval_over_items(per_item, spread, s_se, n_boot, seed)
    widen = impl.model_error(design, value, per_item)
    if widen is not None:
        low, high, se = low - widen, high + widen, np.sqrt(se ** 2 + (widen / 1.96) ** 2)
    # an estimate exact but for float round-off (a selection game once its pairs are known) has no narrower interval
    halfwidth = spread + (0.0 if widen is None else widen) + ROUNDOFF
    used, gens = coalitions.spent()
    note = ""
    if all(len(group) < 2 for group in groups):  # no sampling error measurable
        note = (f"no interval: {used} coalitions leave fewer than two sampled units to measure the sampling "
                f"error from (sizes {sorted(design.complete)} whole, the rest extrapolated); raise the budget "
                f"(2n = {2 * n} gives one)")
        low, high, se, s_se, halfwidth = (np.full(n, np.nan) for _ in range(5))
    return SampledShapley(per_item, low, high, se, s_se, halfwidth, False, name, used, gens, rounds, reason, note,
                          widen, impl.shrink, impl.solo_share_weight)


def _coalition_budget(stop: StopRule) -> int | None:
    rules = stop.rules if isinstance(stop, AnyOf) else [stop]
    budgets = [r.coalitions for r in rules if isinstance(r, Budget) and r.coalitions is not None]
    return min(budgets) if budgets else None


def _has_tolerance(stop: StopRule) -> bool:
    return any(isinstance(r, Tolerance) for r in (stop.rules if isinstance(stop, AnyOf) else [stop]))


def _which(stop: StopRule, progress: Progress) -> str:
    rules = stop.rules if isinstance(stop, AnyOf) else [stop]
    for rule in rules:
        if rule.done(progress):
            names = {Budget: "budget", Tolerance: "tolerance", MaxRounds: "max_rounds"}
            return names.get(type(rule), type(rule).__name__)
    return "stopped"


def _exact(game: Game, value: Callable[[int], np.ndarray], n: int, seed: int, n_boot: int, name: str,
           spent: Callable[[], tuple[int, int]], why: str) -> SampledShapley:
    result = exact_shapley(game, n_boot=n_boot, seed=seed)
    used, gens = spent()
    zero = np.zeros(n)
    return SampledShapley(result.per_item, result.ci_low, result.ci_high, result.stderr, zero, zero, True, name, used,
                          gens, 0, f"exact: {why}")


def _bootstrap_groups(design: Design) -> list[list[Unit]]:
    """The groups the jackknife and the bootstraps resample units within: each sampled size with two units or more,
    and the sizes with a single unit pooled (one unit alone would resample to itself: no sampling error seen)."""
    by_stratum: dict[int, list[Unit]] = {}
    for u in design.units:
        by_stratum.setdefault(u.stratum, []).append(u)
    groups = [units for units in by_stratum.values() if len(units) >= 2]
    single = [units[0] for units in by_stratum.values() if len(units) == 1]
    return groups + ([single] if single else [])


def unseen_sizes(design: Design) -> list[int]:
    """Coalition sizes (1 to n - 1) neither enumerated nor met in a sampled unit."""
    seen = design.complete | {m.bit_count() for u in design.units for m in u.masks}
    return [k for k in range(1, design.n) if k not in seen]


def mostly_lone(design: Design) -> bool:
    """Whether most sampled units are alone in their size: the jackknife pools those and sees their error only
    coarsely, so then it sees most of the design coarsely."""
    count: dict[int, int] = {}
    for u in design.units:
        count[u.stratum] = count.get(u.stratum, 0) + 1
    return 2 * sum(c for c in count.values() if c == 1) > len(design.units)


def _calibratable(design: Design) -> bool:
    """Whether some sampled size has two units: below that a bootstrap (of pooled single units) can size an
    interval but is too coarse to choose between estimates by (measured: it lowered coverage at 2n)."""
    return any(len(units) >= 2 and units[0].stratum == units[1].stratum for units in _bootstrap_groups(design))


def _resample_units(design: Design, rng: np.random.Generator, rescaled: bool = False) -> list[Unit]:
    """A bootstrap replicate of the sampled units, drawn with replacement within each group (the calibration of the
    weights and the tolerance rule's standard error). ``rescaled``: m - 1 draws from a group of m (Rao-Wu): the
    plain bootstrap's variance of a group mean is (m - 1) / m of the unbiased one, which matters with the two to
    five units per size of a small budget. The tolerance rule uses it; calibrating a weight only compares
    variances and does not."""
    out: list[Unit] = []
    for units in _bootstrap_groups(design):
        draws = len(units) - 1 if rescaled else len(units)
        out += [units[int(k)] for k in rng.integers(len(units), size=draws)]
    return out


def resampled_counts(design: Design, rng: np.random.Generator, reps: int, rescaled: bool = False) -> np.ndarray:
    """How often each of ``reps`` replicates of :func:`_resample_units` holds each of the design's sampled units
    (replicates x units, in the order of ``design.units``), drawn from ``rng`` as ``reps`` calls of it draw."""
    number, total = unit_numbers(design.units), len(design.units)
    groups = _bootstrap_groups(design)
    places = np.array([number[id(u)] for units in groups for u in units], dtype=np.int64)
    sizes = np.array([len(units) for units in groups], dtype=np.int64)
    draws = sizes - 1 if rescaled else sizes
    # one replicate's draws, group by group: each from its group's units (its first place and its size)
    first, high = np.repeat(np.cumsum(sizes) - sizes, draws), np.repeat(sizes, draws)
    if not high.size:
        return np.zeros((reps, total))
    # every replicate's draws at once: Generator.integers with an array of bounds draws them one by one in order,
    # from the same stream as a call per group and replicate would (tests/valuation/test_sampling.py checks it)
    drawn = places[np.tile(first, reps) + rng.integers(0, np.tile(high, reps))]
    replicate = np.repeat(np.arange(reps), high.size)
    return np.bincount(replicate * total + drawn, minlength=reps * total).reshape(reps, total).astype(float)


def _sampling_stderr(impl: Sampler, design: Design, value: Callable[[int], np.ndarray],
                     rng: np.random.Generator, reps: int) -> np.ndarray:
    """Bootstrap standard error of the item-mean estimate from resampling the sampled units only."""
    if len(design.units) < 2:  # no sampling error measurable yet: never "within tolerance"
        return np.full(impl.n, np.inf)
    if impl.linear:
        value = item_mean_table(design, value)
    draws = np.stack([impl.estimate(design, value, _resample_units(design, rng, rescaled=True)).mean(axis=1)
                      for _ in range(reps)])
    return draws.std(axis=0, ddof=1)


def grouped_jackknife(estimate: Callable[[list[Unit]], np.ndarray], groups: list[list[Unit]], rows: int,
                      rng: np.random.Generator, full: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The sampling variance of each row of an estimate's item means, and its degrees of freedom. ``estimate``
    re-solves from a replicate of the sampled units (``rows`` x items). Within each group of m >= 2 units (the
    other groups kept whole), a delete-a-block jackknife over min(m, :data:`JACKKNIFE_BLOCKS`) random blocks gives
    the group's variance component, with blocks - 1 degrees of freedom: for an estimate linear in the units, the
    textbook variance of the group's mean. The groups are sampled independently, so the components add, and the
    sum's degrees of freedom are Satterthwaite's: with two to five units per size one or two sizes can carry
    most of the variance, and t must then be taken at their few degrees of freedom, not at the total (the unit
    bootstrap with t at units minus groups covered 0.84-0.93 at 5n on the benchmark's games).

    The replicates' spread is taken about the full estimate, not about their own mean (the "mse" form of a
    replication variance: never smaller). The two agree for a smooth estimate; they part where deleting a block
    empties a stratum of the estimate (a size's coalitions with or without a player) and every replicate falls
    back alike, far from the full estimate but close to each other: at 3n and 4n on the tests' synthetic and
    selection games the centred form covered 0.80-0.92 of the players on the items, this 0.91-0.99. ``full``: the
    full estimate's item means, when the caller has them (else one more re-solve). Costs at most blocks x groups
    re-solves."""
    if full is None and any(len(units) >= 2 for units in groups):
        full = estimate([u for units in groups for u in units]).mean(axis=1)
    return jackknife_variance(jackknife_replicates(estimate, groups, rng), full, rows)


def jackknife_replicates(estimate: Callable[[list[Unit]], np.ndarray], groups: list[list[Unit]],
                         rng: np.random.Generator,
                         many: Callable[[list["Replicate"]], np.ndarray] | None = None) -> list[np.ndarray]:
    """The delete-a-block replicates of :func:`grouped_jackknife`: per group of two units or more, blocks x rows
    (each replicate's item means). ``many``: the item means of a group's replicates at once (blocks x rows), the
    same numbers as ``estimate``'s one by one."""
    out = []
    for g, units in enumerate(groups):
        if len(units) < 2:
            continue
        blocks = min(len(units), JACKKNIFE_BLOCKS)
        block_of = rng.permutation(len(units)) % blocks
        others = [u for h, rest in enumerate(groups) if h != g for u in rest]
        replicates = [Replicate(others + [u for u, k in zip(units, block_of) if k != b],
                                [u for u, k in zip(units, block_of) if k == b]) for b in range(blocks)]
        out.append(many(replicates) if many is not None else
                   np.stack([estimate(replicate).mean(axis=1) for replicate in replicates]))
    return out


class Replicate(list):
    """A jackknife replicate's units (a list), which also says which units it leaves out of all the groups', so
    that :func:`unit_counts` need not look every unit up."""

    def __init__(self, units: list[Unit], left_out: list[Unit]):
        super().__init__(units)
        self.left_out = left_out


def jackknife_variance(replicates: list[np.ndarray], full: np.ndarray | None, rows: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's variance from the groups' replicates (:func:`jackknife_replicates`) about the full estimate's item
    means, and its Satterthwaite degrees of freedom; (0, inf) without replicates."""
    if not replicates or full is None:
        return np.zeros(rows), np.full(rows, np.inf)
    components = [(len(r) - 1) / len(r) * ((r - full) ** 2).sum(axis=0) for r in replicates]
    return np.sum(components, axis=0), satterthwaite_df(np.array(components), [len(r) - 1 for r in replicates])


def t_spread(variance: np.ndarray, df: np.ndarray) -> np.ndarray:
    """The half-width of a 95% interval for the sampling error alone: Student's t at ``df`` x the standard error."""
    return np.array([t_quantile_975(d) for d in df]) * np.sqrt(variance)


def interval_over_items(per_item: np.ndarray, spread: np.ndarray, sampling_se: np.ndarray, n_boot: int,
                        seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, stderr) of each row's value over the item population: the item bootstrap of the estimate
    (percentile: its skew kept) with the sampling error's half-width ``spread`` added in quadrature."""
    mean, item_se, item_low, item_high = bootstrap_mean(per_item, n_boot=max(n_boot, 2), seed=seed)
    low, high = mean - np.hypot(mean - item_low, spread), mean + np.hypot(item_high - mean, spread)
    return low, high, np.hypot(item_se, sampling_se)
