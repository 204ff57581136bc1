"""Regression-adjusted Shapley: a fitted proxy game as a control variate (``--sampler proxy``).

Shapley values are linear in the game, so for any proxy game h,
``phi(v) = phi(h) + phi(v - h)``. The proxy is chosen so that phi(h) is exact in closed form and the
residual ``v - h`` is small; only the residual is estimated from the sampled coalitions (the paired
kernel design and the calibrated hybrid estimate of :mod:`.sampling`, unchanged). This is regression
adjustment in the sense of MSR / RegressionMSR (Witter et al. 2025), with a proxy that sees what a
black-box approximator cannot: the per-item structure of a coalition game.

**The proxy.** A coalition's value is the mean of per-item scores, and on one item a protocol's outcome
depends mostly on how many of the coalition's members get that item right alone. The kernel design
always evaluates the n singletons, so each player has a *type* on each item (its solo score >= 1/2 or
not), known for free. On item t, with ``a`` members of S of the high type and ``b`` of the low type,

    h_t(S) = g(a, b) + sum_{i in S} beta_i,        g(0, 0) = 0,

a table g over (a, b) shared by all items (ridge-shrunk towards a few smooth features of (a, b): the
share a / |S|, a > b, a = b, |S| / n, so cells no coalition reached stay sensible) plus one additive
effect per player. phi(h) is exact: the additive part gives beta_i, and the table part depends on the
item only through the number p of high players, so for each p it is a sum over (a, b) weighted by
C(p - 1, a) C(n - p, b) (or C(p, a) C(n - p - 1, b)) times the Shapley weight of size a + b.

**The selection proxy.** Some protocols answer with one member's answer (SLM-MUX: the most
self-consistent member; cascade: the first confident one): on item t, v_t(S) is the solo value of the
member of S that comes first in an item-specific priority. Once every pair has been evaluated (the kernel
design enumerates size 2 at about 25n coalitions for n = 8, 50n for n = 10 and 12), each item's priority is
read off its pairs (who answered for {i, j} when one is right alone and the other not; within a type, where
scores are graded, when their solo scores differ), and
``h_t(S) = x_t(first of S)``, whose Shapley value and pair interactions are exact in closed form (a player
adds ``x_r - v(S)`` to the coalitions S it leads). Read off enumerated sizes only, it needs no cross-fit.
The two proxies are blended with non-negative weights fitted on out-of-fold values of the coalitions of
size 3 and more; before the pairs are all known the vote-like proxy is used alone below :data:`SOLO_SHARE_FROM`
players, and from there the selection proxy takes one priority for all items, read greedily off the coalitions
of the other item folds (:func:`shared_priorities`): the trained router's and SLM-MUX's per-item priorities are
mostly one order (a mean Spearman correlation of 0.88 over 64 members for the router), and without it the
router over 64 members was behind shapiq 1.8 at 25n-50n (issue 51); the interval adds that priority's own
sampling error (:meth:`ProxySampler.priority_variance`). From 13 players the pairs are enumerated once they take
at most half of the budget left, or, short of that but with room, after a pilot of n coalitions finds the game
selection-like (:func:`selection_like`).

**A control variate, not a belief.** The estimate is ``c phi(h) + H(v - c h)`` (H the hybrid estimate):
c in [0, 1] and the hybrid's kernel weight are chosen together to minimise the bootstrap variance over
resampled units, so a proxy that does not track the game is used less (c = 1 when too few units to
calibrate on).

**Known coalitions exactly.** The difference estimate D = ``c phi(h) + H(v - c h)`` re-estimates the residual
of every coalition, the sampled ones included, from the sample's mean residuals: where the residual is noise (a
proxy that tracks the game up to per-coalition idiosyncrasies, such as random tie-breaks) that extrapolated noise
is all it adds. The prediction estimate ``P = phi(h) + sum over the evaluated S of map[i, S] (v(S) - h(S))``
(:func:`.exact.shapley_map`) takes the evaluated coalitions' values exactly and h's for the rest. The final
estimate is ``P + kappa (D - P)``, kappa a positive-part James-Stein share chosen from the jackknife
(:func:`shrunk_to_prediction`): kappa near 0 where D - P is within its own noise, near 1 where the proxy misses
systematically. On nine games it was not designed on (benchmarks/estimators.py ``--games fresh``: sim pools drawn
with seed 1, n = 8-11, six protocols, SLM-MUX with random tie-breaks at three sizes; 20 seeds) its mean absolute
error was 0.81-0.94x D's at 5n, 0.89-0.95x at 10n, 0.90-1.02x at 25n and 0.94-1.15x at 50n (the ratios above 1 at
errors of 0.0003-0.0024).

**Many players, few coalitions.** From :data:`SOLO_SHARE_FROM` (13) players the final estimate is shrunk towards
the solo shares (each item's v(N) split in proportion to the players' solo values: known exactly from the
singletons and the grand coalition, which the design always evaluates) as far as its own sampling variance says,
positive-part James-Stein as above (:func:`shrunk_to_solo_shares`). At 2n-5n coalitions over 32-64 players the
estimate's sampling error is larger than the solo shares' bias; from 10n it is mostly kept.

**Honesty.** The proxy is *cross-fitted over items*: the items are split into folds and each fold's
proxy is fitted on the other folds' values, so no item's residual is fitted on its own values (the
residual estimate keeps the sampling estimator's behaviour, not an overfitted one). It is not cross-fitted
over coalitions, though: fitted on the sampled coalitions, it tracks the game better there than elsewhere.
So the interval (the sampling module's grouped jackknife over the sampled units) refits the vote-like proxy on
every replicate's coalitions (:class:`TypeFit` keeps the least squares as sparse sufficient statistics, a refit
is a few small matrix products; the jackknife reads each replicate's item means, with the fit's Schur complement
updated on the cells the replicate changes: :class:`ReplicateMeans`); c, the kernel weight and the blend weights
stay. Holding the fitted proxy
fixed instead, the interval for the value on the game's own items covered 0.44-0.61 of the players at 5n on
the benchmark's games. A game the proxy represents exactly has zero
residual and is estimated exactly. Settings
(``FOLDS``, ``RIDGE``, ``HIGH``) were fixed before any run and not tuned; the selection proxy was added
after the benchmark's first run showed SLM-MUX and cascade behind RegressionMSR at 25n, and is judged on
protocols and pools added after it was written (benchmarks/estimators.py, ``GAMES``).
"""

from __future__ import annotations

import functools
import math
import typing
from typing import Callable

import numpy as np
from scipy import sparse

from ..errors import ConfigError
from .exact import shapley_map, shapley_weight
from .sampling import (
    Design,
    HybridSampler,
    KernelSampler,
    Unit,
    ValueTable,
    _bits,
    _calibratable,
    jackknife_replicates,
    jackknife_variance,
    register_sampler,
    replicate_rows,
    replicate_rows_of_counts,
    replicate_unit_counts,
    resampled_counts,
    unit_counts,
    unit_numbers,
)

#: the proxy's table has (n + 1)^2 cells and its exact Shapley value costs O(n^3); masks are 64-bit: refused above this
MAX_PLAYERS = 64
FOLDS = 5  # item folds of the cross-fit
RIDGE = 3.0  # shrinkage of the table cells towards the smooth features (in units of one item-coalition)
HIGH = 0.5  # a player is of the high type on an item when its solo score is at least this
ZERO_RESIDUAL = 1e-9
#: ReplicateMeans.many solves replicates together while replicates x cells reached stays below this (memory: each
#: (replicate, fold, cell) holds a row of k + n numbers)
MANY_CELLS = 1024
#: the calibration's bootstrap replicates estimated this many at a time (memory: players x sizes per column)
#: ReplicateMeans.many builds and solves the Schur complements of this many replicates at a time (their arrays stay
#: in cache; the numbers do not depend on it)
SCHUR_CHUNK = 4
CALIBRATION_CHUNK = 25  # a residual this small is the proxy fitting the coalition exactly (float round-off)


def binomials(size: int) -> np.ndarray:
    """C(m, k) for m, k < size (a size x size table; zero above the diagonal)."""
    return np.array([[math.comb(m, k) for k in range(size)] for m in range(size)], dtype=float)


@functools.lru_cache(maxsize=16)
def _type_shapley_maps(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A table proxy's Shapley value as linear maps of its table: ``hi @ g.ravel()`` is, for each number p of
    high players, the value of a high player (``lo``: of a low one). A high player adds ``g(a + 1, b) - g(a, b)``
    to each of the C(p - 1, a) C(n - p, b) coalitions of a highs and b lows without it, at the Shapley weight
    of their size (a low player: ``g(a, b + 1) - g(a, b)``, C(p, a) C(n - p - 1, b) coalitions)."""
    weight = np.array([shapley_weight(s, n) for s in range(n)])
    comb = binomials(n + 1)
    a, b = np.arange(n + 1)[:, None], np.arange(n + 1)[None, :]
    size_weight = weight[np.minimum(a + b, n - 1)]
    hi, lo = np.zeros((n + 1, n + 1, n + 1)), np.zeros((n + 1, n + 1, n + 1))
    for p in range(n + 1):
        q = n - p
        if p > 0:
            coef = (comb[p - 1][a] * comb[q][b] * size_weight)[:n, :]
            hi[p, 1:, :] += coef
            hi[p, :n, :] -= coef
        if q > 0:
            coef = (comb[p][a] * comb[q - 1][b] * size_weight)[:, :n]
            lo[p, :, 1:] += coef
            lo[p, :, :n] -= coef
    return hi.reshape(n + 1, -1), lo.reshape(n + 1, -1)


class TypeProxy:
    """The fitted vote-like proxy of one fold: table g[a, b] and additive effects beta (see the module doc).
    Its methods take the players' solo values on some items (items x n); a player's type on an item is
    whether its solo value is at least :data:`HIGH`."""

    def __init__(self, n: int, table: np.ndarray, beta: np.ndarray):
        self.n, self.table, self.beta = n, table, beta

    def values(self, bits: np.ndarray, solo: np.ndarray) -> np.ndarray:
        """h_t(S) on the items of ``solo``, for one coalition (``bits``: n 0/1; gives items) or several
        (coalitions x n; gives coalitions x items)."""
        many = np.atleast_2d(bits)
        a = (many @ (solo >= HIGH).T).astype(int)
        size = many.sum(axis=1).astype(int)[:, None]
        out = self.table[a, size - a] + (many @ self.beta)[:, None]
        return out if bits.ndim == 2 else out[0]

    def shapley(self, solo: np.ndarray) -> np.ndarray:
        """Exact Shapley values of the proxy on the items of ``solo``: players x items."""
        hi, lo = _type_shapley_maps(self.n)
        high = solo >= HIGH
        p_of_item = high.sum(axis=1)
        phi_hi, phi_lo = hi @ self.table.ravel(), lo @ self.table.ravel()
        return np.where(high.T, phi_hi[p_of_item][None, :], phi_lo[p_of_item][None, :]) + self.beta[:, None]

    def pair_values(self, solo: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Exact pairwise interactions of the proxy, pairs (i < j, in order) x items: the mean over S without
        i, j of g(S + ij) - g(S + i) - g(S + j) + g(S), ``weight[s]`` per coalition S of size s (the additive
        effects cancel). It depends on the item only through p and how many of i, j are of the high type."""
        n, high = self.n, (solo >= HIGH).astype(int)
        table = (_pair_table_map(n, np.asarray(weight, dtype=float).tobytes()) @ self.table.ravel()).reshape(n + 1, 3)
        i, j = np.triu_indices(n, 1)
        return table[high.sum(axis=1)[None, :], (high[:, i] + high[:, j]).T]


@functools.lru_cache(maxsize=16)
def _pair_table_map(n: int, weight: bytes) -> np.ndarray:
    """:meth:`TableProxy.pair_values`' table as a linear map of the proxy's table g (flattened): row (p, k) is
    the weighted sum, over the a high and b low others in S (p - k high players besides i and j, of which k are
    high), of C(p - k, a) C(n - 2 - p + k, b) weight[a + b] (g(S + ij) - g(S + i) - g(S + j) + g(S)).
    Built once per n and weights: the jackknife refits only change g."""
    w, comb = np.frombuffer(weight), binomials(n + 1)
    a, b = np.meshgrid(np.arange(n - 1), np.arange(n - 1), indexing="ij")
    size = np.minimum(a + b, n - 2)
    out = np.zeros((n + 1, 3, (n + 1) ** 2))
    for p in range(n + 1):
        for k in range(3):
            others = p - k  # high players among the others
            if others < 0 or n - 2 - others < 0:
                continue
            mask = (a <= others) & (b <= n - 2 - others)
            coef = (mask * comb[others][a] * comb[n - 2 - others][b] * w[size]).ravel()
            k1 = min(k, 1)
            for da, db, sign in ((k, 2 - k, 1.0), (k1, 1 - k1, -1.0), (k - k1, 1 - (k - k1), -1.0), (0, 0, 1.0)):
                np.add.at(out[p, k], ((a + da) * (n + 1) + b + db).ravel(), sign * coef)
    return out.reshape((n + 1) * 3, (n + 1) ** 2)


def _smooth_features(n: int) -> np.ndarray:
    """(n + 1) x (n + 1) x k: the features the table cells are shrunk towards (zero at the empty cell)."""
    a, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    size = a + b
    share = np.divide(a, size, out=np.zeros((n + 1, n + 1)), where=size > 0)
    nonempty = size > 0
    return np.stack([share, (a > b) * 1.0, (a == b) * nonempty * 1.0, size / n], axis=-1)


class TypeFit:
    """The vote-like proxies' ridge least squares on a design's coalitions (one fit per item fold, on the other
    folds' items), kept as per-fold sufficient statistics, so that a replicate of the sampled units (the same
    coalitions, each counted as often as the replicate holds its unit) refits in a few small matrix products.

    ``masks``: the coalitions, ``values``: coalitions x items (v_t of each mask), ``solo``: items x n solo
    values, ``folds``: items -> fold."""

    def __init__(self, n: int, masks: list[int], values: np.ndarray, solo: np.ndarray, folds: np.ndarray,
                 ridge: float = RIDGE):
        self.n, self.folds, self.masks, self.values = n, folds, masks, values
        self.bits = _bits(masks, n)  # coalitions x n
        a = (self.bits @ (solo >= HIGH).T).astype(int)  # coalitions x items
        size = self.bits.sum(axis=1).astype(int)[:, None]
        self.cell = a * (n + 1) + (size - a)  # coalitions x items
        cells, count, n_folds = (n + 1) ** 2, len(masks), int(folds.max()) + 1
        self.smooth = _smooth_features(n).reshape(cells, -1)
        # per fold f and coalition c, over the fold's items: how many fall in each cell, and their values' sum;
        # kept (fold, cell) x coalition, so a refit's statistics are matrix products with the multiplicities
        # (sparse: each coalition's items fall in at most items of the folds x cells rows)
        row = (folds[None, :] * cells + self.cell).ravel()
        column = np.repeat(np.arange(count), values.shape[1])
        shape = (n_folds * cells, count)
        self.hits = sparse.csr_matrix((np.ones(row.size), (row, column)), shape=shape)  # duplicates summed
        self.sums = sparse.csr_matrix((values.ravel(), (row, column)), shape=shape)
        self.fold_sizes = np.bincount(folds, minlength=n_folds).astype(float)
        self.fold_totals = values @ np.eye(n_folds)[folds]  # coalitions x folds: v summed over each fold's items
        self.penalty = np.concatenate([np.full(cells, ridge), np.full(self.smooth.shape[1] + n, 1e-6)])
        self.penalty[0] = 1e12  # g(0, 0) = 0: the empty coalition is worth nothing
        self.cells, self.high = cells, solo >= HIGH
        self._means: ReplicateMeans | None = None

    def proxies(self, multiplicity: np.ndarray | None = None) -> list[TypeProxy]:
        """One :class:`TypeProxy` per fold, fitted on the other folds' items, each coalition counted
        ``multiplicity`` times (default: once)."""
        n, smooth, k = self.n, self.smooth, self.smooth.shape[1]
        m = np.ones(len(self.bits)) if multiplicity is None else multiplicity
        cnt, cw, tot, gram, member_y = self.statistics(m)
        # the normal equations of [cell one-hot | smooth features of the cell | membership], solved through their
        # diagonal cell block (the Schur complement on the k + n other columns)
        others, cross, y_others = self.blocks(cnt, cw, tot, gram, member_y, smooth)
        others += np.diag(self.penalty[self.cells:])
        diagonal = cnt + self.penalty[:self.cells]  # folds x cells
        scaled = cross / diagonal[:, :, None]
        coef = np.linalg.solve(others - cross.transpose(0, 2, 1) @ scaled,
                               (y_others - np.einsum("fcd,fc->fd", scaled, tot))[:, :, None])[:, :, 0]
        tables = (tot - np.einsum("fcd,fd->fc", cross, coef)) / diagonal + coef[:, :k] @ smooth.T
        tables[:, 0] = 0.0
        return [TypeProxy(n, table.reshape(n + 1, n + 1), c[k:]) for table, c in zip(tables, coef)]

    def statistics(self, m: np.ndarray, columns: np.ndarray | None = None, cells: np.ndarray | None = None
                   ) -> tuple[np.ndarray, ...]:
        """The least squares' statistics with each coalition counted ``m`` times, each fold's on the other folds'
        items: rows per cell (folds x cells), those with each player (folds x cells x n), the values per cell, the
        membership gram (n x n, per item) and the values per player (folds x n). Linear in ``m``: ``columns``
        (the few coalitions ``m`` is given for) and ``cells`` (the sorted cells they reach) give the statistics of a
        change of the multiplicities on those coalitions."""
        hits, sums, bits, totals = self.hits, self.sums, self.bits, self.fold_totals
        if columns is not None and cells is not None:
            hits, sums = self._reached(columns, cells)
            bits, totals = bits[columns], totals[columns]
        n_folds, n = len(self.fold_sizes), self.n
        weighted = m[:, None] * bits
        per_cell = (hits @ np.hstack([m[:, None], weighted])).reshape(n_folds, -1, n + 1)
        own = (per_cell[:, :, 0], per_cell[:, :, 1:], (sums @ m).reshape(n_folds, -1), (weighted.T @ totals).T)
        # every fold's fit is on the other folds: the totals minus its own (all folds solved at once)
        cnt, cw, tot, member_y = (x.sum(0) - x for x in own)
        return cnt, cw, tot, bits.T @ weighted, member_y

    def _reached(self, columns: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`hits` and :attr:`sums` on a few coalitions (``columns``) and the sorted ``cells`` they reach, dense:
        (folds x cells) x coalitions."""
        n_folds, items = len(self.fold_sizes), len(self.folds)
        row = (self.folds[None, :] * len(cells) + np.searchsorted(cells, self.cell[columns])).ravel()
        # (row, column) as one index; bincount adds in the order given, from zero, as np.add.at would
        at = row * len(columns) + np.repeat(np.arange(len(columns)), items)
        shape, size = (n_folds * len(cells), len(columns)), n_folds * len(cells) * len(columns)
        hits = np.bincount(at, minlength=size).astype(float).reshape(shape)
        sums = np.bincount(at, weights=self.values[columns].ravel(), minlength=size).reshape(shape)
        return hits, sums

    def blocks(self, cnt: np.ndarray, cw: np.ndarray, tot: np.ndarray, gram: np.ndarray, member_y: np.ndarray,
               smooth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The normal equations' parts that are linear in the statistics (of :meth:`statistics`, on the cells whose
        smooth features are ``smooth``): the block of the k + n other columns (folds x (k + n) x (k + n), without
        its ridge), the cells' cross block (folds x cells x (k + n)) and the other columns' right-hand side."""
        k = smooth.shape[1]
        others = np.zeros(cnt.shape[:-1] + (k + self.n, k + self.n))  # cnt: [replicates x] folds x cells
        others[..., :k, :k] = smooth.T @ (cnt[..., None] * smooth)
        others[..., :k, k:] = smooth.T @ cw
        others[..., k:, :k] = others[..., :k, k:].swapaxes(-1, -2)
        others[..., k:, k:] = gram[..., None, :, :] * (self.fold_sizes.sum() - self.fold_sizes)[:, None, None]
        cross = np.concatenate([cnt[..., None] * smooth, cw], axis=-1)
        return others, cross, np.concatenate([tot @ smooth, member_y], axis=-1)

    def means(self, multiplicity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The item means of the proxies refitted with ``multiplicity`` (:class:`ReplicateMeans`): on the fit's
        coalitions, and their Shapley values."""
        if self._means is None:
            self._means = ReplicateMeans(self)
        return self._means(multiplicity)

    def on_fit(self, proxies: list[TypeProxy]) -> np.ndarray:
        """Each fold's proxy (of :meth:`proxies`) on its own items at the fit's coalitions (coalitions x items),
        read off the cells the fit already knows: what ``TypeProxy.values`` gives, without recomputing them."""
        tables = np.stack([p.table.ravel() for p in proxies])  # folds x cells
        betas = np.stack([p.beta for p in proxies])  # folds x n
        return tables[self.folds[None, :], self.cell] + (self.bits @ betas.T)[:, self.folds]


class ReplicateMeans:
    """The vote-like proxies refitted on a replicate of the sampled units, as the item means of what the estimate
    needs: h on the fit's coalitions (each fold's proxy on its own items) and h's exact Shapley value (the hybrid
    estimate and the prediction estimate are linear in the values, so their item means are the estimates of the
    item-mean values). A jackknife replicate drops a unit or a block: a few coalitions' multiplicities change, so
    the Schur complement of the fit (:meth:`TypeFit.proxies`) is updated on the cells those coalitions reach
    instead of rebuilt over every cell, and h is read off the cells any coalition reaches. The same numbers as
    ``TypeFit.proxies(multiplicity)`` read off (up to float round-off; tests/valuation/test_proxy.py pins them)."""

    def __init__(self, fit: TypeFit):
        self.fit, k = fit, fit.smooth.shape[1]
        cnt, cw, tot, gram, member_y = fit.statistics(np.ones(len(fit.bits)))
        others, cross, y_others = fit.blocks(cnt, cw, tot, gram, member_y, fit.smooth)
        self.diagonal = cnt + fit.penalty[:fit.cells]
        self.cross, self.tot = cross, tot
        scaled = cross / self.diagonal[:, :, None]
        self.schur = others + np.diag(fit.penalty[fit.cells:]) - cross.transpose(0, 2, 1) @ scaled
        self.rhs = y_others - np.einsum("fcd,fc->fd", scaled, tot)
        del scaled  # folds x cells x (k + n): not needed further (memory)
        # the cells some coalition reaches on some item: h's table elsewhere is its smooth part alone
        self.reached = np.unique(fit.cell)
        hi, lo = _type_shapley_maps(fit.n)
        self.maps = np.stack([hi[:, self.reached], lo[:, self.reached]])  # 2 x (n + 1) x reached
        self.maps_smooth = np.stack([hi @ fit.smooth, lo @ fit.smooth])  # 2 x (n + 1) x k
        n_folds, items = len(fit.fold_sizes), len(fit.folds)
        # per fold, player and number p of high players: the items of the fold where the player is high (low)
        p_of_item = fit.high.sum(axis=1)
        self.type_counts = np.zeros((2, n_folds, fit.n, fit.n + 1))
        for t in range(items):
            self.type_counts[0, fit.folds[t], :, p_of_item[t]] += fit.high[t]
            self.type_counts[1, fit.folds[t], :, p_of_item[t]] += ~fit.high[t]
        # h's Shapley value as linear maps of the folds' tables (reached cells) and smooth coefficients: per player,
        # summed over the items of each type and number of high players (times items)
        by_type = self.type_counts.transpose(2, 1, 0, 3).reshape(fit.n * n_folds, -1)  # (i, f) x (t, p): one product
        self.phi_of_table = (by_type @ self.maps.reshape(len(by_type.T), -1)).reshape(fit.n, -1)
        self.phi_of_smooth = (by_type @ self.maps_smooth.reshape(len(by_type.T), -1)).reshape(fit.n, -1)
        rows = (np.arange(n_folds)[:, None] * fit.cells + self.reached[None, :]).ravel()
        self.hits_reached = fit.hits[rows].T.tocsr() / items  # coalitions x (folds x reached cells), per item
        self.k = k
        # the full fit's parts on the reached cells, and the smooth features there
        self.reached_parts = (self.cross[:, self.reached], self.tot[:, self.reached], self.diagonal[:, self.reached])
        self.smooth_reached = fit.smooth[self.reached]
        # phi_of_table times the table (tot - cross coef) / diagonal, as a constant and a linear map of each fold's
        # coefficients (players x (folds x (k + n)))
        reached_cross, reached_tot, reached_diagonal = self.reached_parts
        by_fold = self.phi_of_table.reshape(fit.n, n_folds, -1)
        self.phi_base, of_coef = np.zeros(fit.n), np.empty((fit.n, n_folds, k + fit.n))
        for f in range(n_folds):  # a fold at a time (memory)
            per_cell = by_fold[:, f] / reached_diagonal[f]  # players x reached
            self.phi_base += per_cell @ reached_tot[f]
            of_coef[:, f] = per_cell @ reached_cross[f]
        self.phi_of_coef = of_coef.reshape(fit.n, -1)

    def __call__(self, multiplicity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(h's item means on the fit's coalitions, h's Shapley values' item means) refitted with each coalition
        counted ``multiplicity`` times."""
        h, phi = self.many(multiplicity[None])
        return h[0], phi[0]

    def many(self, multiplicities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`__call__` for several replicates (``multiplicities``: replicates x coalitions; a jackknife group's
        blocks) solved together: replicates x coalitions and replicates x players. The statistics of each replicate's
        change are taken on the cells any of them reaches (zero where its own coalitions do not)."""
        fit, k, count = self.fit, self.k, len(multiplicities)
        changed = np.flatnonzero((multiplicities != 1.0).any(axis=0))
        schur, rhs = self.schur[None], self.rhs[None]
        cells = np.unique(fit.cell[changed]) if changed.size else np.zeros(0, dtype=int)
        if count > 1 and count * len(cells) > MANY_CELLS:  # replicates reaching many cells (a pooled group): halves
            halves = [self.many(part) for part in np.array_split(multiplicities, 2)]
            return np.vstack([h for h, _ in halves]), np.vstack([phi for _, phi in halves])
        if changed.size:
            d_cnt, d_cw, d_tot, d_gram, d_member_y = self._changes(multiplicities[:, changed] - 1.0, changed, cells)
            smooth = fit.smooth[cells]
            old_cross, old_diagonal, old_tot = self.cross[:, cells], self.diagonal[:, cells], self.tot[:, cells]
            tot = old_tot + d_tot
            diagonal = old_diagonal + d_cnt
            cross = np.empty(d_cw.shape[:-1] + (k + fit.n,))  # [cells' smooth features x their count | cw]
            np.multiply((old_diagonal + d_cnt - fit.penalty[cells])[..., None], smooth, out=cross[..., :k])
            np.add(old_cross[..., k:], d_cw, out=cross[..., k:])
            d_y = np.concatenate([d_tot @ smooth, d_member_y], axis=-1)
            rhs = rhs + d_y - _outer_sum(cross, tot[..., None], diagonal)[..., 0] \
                + _outer_sum(old_cross, old_tot[..., None], old_diagonal)[..., 0]
            old_outer = _outer_sum(old_cross, old_cross, old_diagonal)
            # the change of the other columns' block on the smooth features (the rest: the gram's change)
            corner, edge = smooth.T @ (d_cnt[..., None] * smooth), smooth.T @ d_cw
            coef = np.empty(rhs.shape)
            for start in range(0, count, SCHUR_CHUNK):  # a few replicates at a time: their arrays stay in cache
                part = slice(start, start + SCHUR_CHUNK)
                # schur + the change of the other columns' block - the new cells' outer sum + the old cells' (in
                # that order, element by element), in one array
                schur = self._changed_others(corner[part], edge[part], d_gram[part])
                schur += self.schur
                schur -= _outer_sum(cross[part], cross[part], diagonal[part])
                schur += old_outer
                coef[part] = np.linalg.solve(schur, rhs[part][..., None])[..., 0]
        else:
            coef = np.linalg.solve(np.broadcast_to(schur, (count,) + self.schur.shape),
                                   np.broadcast_to(rhs, (count,) + self.rhs.shape)[..., None])[..., 0]
        by_fold = coef.transpose(1, 2, 0)  # folds x (k + n) x replicates
        reached_cross, reached_tot, reached_diagonal = self.reached_parts
        table = reached_cross @ by_fold  # then (tot - cross coef) / diagonal: folds x reached x replicates
        np.subtract(reached_tot[..., None], table, out=table)
        table /= reached_diagonal[..., None]
        # the table's part of h's Shapley values: linear in the coefficients off the changed cells (phi_of_coef),
        # plus the changed cells' change
        phi_table = self.phi_base[:, None] - self.phi_of_coef @ coef.reshape(count, -1).T  # players x replicates
        if changed.size:
            where = np.searchsorted(self.reached, cells)
            new = ((tot - (cross @ coef[..., None])[..., 0]) / diagonal).transpose(1, 2, 0)  # folds x cells x r
            at = (np.arange(len(fit.fold_sizes))[:, None] * len(self.reached) + where[None, :]).ravel()
            phi_table += self.phi_of_table[:, at] @ (new - table[:, where]).reshape(len(at), count)
            table[:, where] = new
        return self._means(by_fold, table, phi_table)

    def _changes(self, delta: np.ndarray, columns: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`TypeFit.statistics` of each replicate's change of the multiplicities (``delta``: replicates x the
        coalitions ``columns``) on the sorted ``cells`` they reach, each with a leading replicates axis."""
        fit, n = self.fit, self.fit.n
        n_folds, count = len(fit.fold_sizes), len(delta)
        hits, sums = fit._reached(columns, cells)  # (folds x cells) x coalitions
        bits, totals = fit.bits[columns], fit.fold_totals[columns]
        weighted = delta[:, :, None] * bits[None]  # replicates x coalitions x n
        cnt = (delta @ hits.T).reshape(count, n_folds, -1)
        # cw and the gram are whole numbers, exact in any order: each replicate's from the coalitions it changes
        # (its first ``most`` coalitions by change, the rest of them unchanged: zero rows of ``weighted``)
        changes = delta != 0
        most = int(changes.sum(axis=1).max())
        at = np.argsort(~changes, axis=1, kind="stable")[:, :most]  # replicates x most
        scaled = np.take_along_axis(weighted, at[:, :, None], axis=1)  # replicates x most x n
        cw = (hits.T[at].transpose(0, 2, 1) @ scaled).reshape(count, n_folds, -1, n)
        gram = bits[at].transpose(0, 2, 1) @ scaled
        tot = (delta @ sums.T).reshape(count, n_folds, -1)
        member_y = weighted.swapaxes(1, 2) @ totals  # replicates x n x folds
        # every fold's fit is on the other folds: the totals minus its own (cw's in place: it is not needed after)
        d_cnt, d_tot, d_member_y = (x.sum(1, keepdims=True) - x for x in (cnt, tot, member_y.swapaxes(1, 2)))
        d_cw = np.subtract(cw.sum(1, keepdims=True), cw, out=cw)
        return d_cnt, d_cw, d_tot, gram, d_member_y

    def _changed_others(self, corner: np.ndarray, edge: np.ndarray, gram: np.ndarray) -> np.ndarray:
        """The change of the block of the k + n other columns (:meth:`TypeFit.blocks`' first part), replicates x
        folds x (k + n) x (k + n) (a new array), from its smooth features' corner (replicates x folds x k x k) and
        edge (replicates x folds x k x n) and the change of the membership gram (replicates x n x n)."""
        fit, k = self.fit, self.k
        out = np.empty(corner.shape[:-2] + (k + fit.n, k + fit.n))
        out[..., :k, :k] = corner
        out[..., :k, k:] = edge
        out[..., k:, :k] = edge.swapaxes(-1, -2)
        np.multiply(gram[:, None, :, :], (fit.fold_sizes.sum() - fit.fold_sizes)[:, None, None], out=out[..., k:, k:])
        return out

    def _means(self, coef: np.ndarray, table: np.ndarray, phi_table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The item means of h (replicates x coalitions) and of its Shapley values (replicates x players) from each
        fold's coefficients (folds x (k + n) x replicates), its table's non-smooth part on the reached cells
        (folds x reached x replicates; overwritten) and that part's share of the Shapley values (``phi_of_table``
        times it: players x replicates)."""
        fit, k = self.fit, self.k
        smooth_part, betas = coef[:, :k], coef[:, k:]
        reached_table = np.add(table, self.smooth_reached @ smooth_part, out=table)  # folds x reached x replicates
        items, count = len(fit.folds), coef.shape[2]
        additive = np.einsum("f,fir->ri", fit.fold_sizes, betas) / items  # replicates x players
        h = (self.hits_reached @ reached_table.reshape(-1, count)).T + additive @ fit.bits.T
        phi = (phi_table + self.phi_of_smooth @ smooth_part.reshape(-1, count)).T
        return h, phi / items + additive


def _outer_sum(left: np.ndarray, right: np.ndarray, diagonal: np.ndarray) -> np.ndarray:
    """Per fold, sum over cells of left_c right_c^T / diagonal_c: folds x cells x a, folds x cells x b -> folds x
    a x b."""
    return left.swapaxes(-1, -2) @ (right / diagonal[..., None])


class SelectionProxy:
    """A selection proxy: on item t the system answers as the member of S that comes first in that item's
    priority, so h_t(S) is that member's solo value (see the module doc). ``rank``: items x n, lower first;
    its rows are the items of the ``solo`` rows the methods are given."""

    def __init__(self, n: int, rank: np.ndarray):
        self.n, self.rank = n, np.asarray(rank, dtype=float)
        self.shared = bool(len(self.rank)) and bool((self.rank == self.rank[0]).all())  # one priority, every item

    def values(self, bits: np.ndarray, solo: np.ndarray) -> np.ndarray:
        """h_t(S): the solo value of S's first member on each item, for one coalition (``bits``: n 0/1; gives
        items) or several (coalitions x n; gives coalitions x items)."""
        many = np.atleast_2d(bits).astype(bool)
        if self.shared:  # the same first member on every item: coalitions x n, not x items too
            first = np.broadcast_to(np.argmin(np.where(many, self.rank[0], np.inf), axis=1)[:, None],
                                    (len(many), solo.shape[0]))
        else:
            first = np.argmin(np.where(many[:, None, :], self.rank[None], np.inf), axis=2)  # coalitions x items
        nonempty = many.sum(axis=1) > 0
        out = solo[np.arange(solo.shape[0])[None, :], first] * nonempty[:, None]
        return out if bits.ndim == 2 else out[0]

    def _lower_sums(self, solo: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The players in priority order (items x n) and, per item and position r, ``sum_{S after r} weight[|S|]
        (v(S) - x_r)`` over the coalitions S of players after r. v(S) is the value of S's first player l, and
        the S led by l are l with any subset of the players after l, so ``sum_S weight[|S|] v(S) = sum_{l > r}
        x_l sum_k C(after l, k) weight[k + 1]``."""
        n = self.n
        order = np.argsort(self.rank, axis=1, kind="stable")
        x = np.take_along_axis(solo, order, axis=1)
        after = n - 1 - np.arange(n)  # players after position r
        comb = binomials(n)
        padded = np.concatenate([weight, np.zeros(n + 1 - len(weight))])
        total = comb @ padded[:n]  # total[m] = sum_k C(m, k) weight[k]
        led = comb @ padded[1:n + 1]  # led[m] = sum_k C(m, k) weight[k + 1]
        contribution = x * led[after][None, :]
        later = np.cumsum(contribution[:, ::-1], axis=1)[:, ::-1] - contribution  # sum over l > r
        return order, later - x * total[after][None, :]

    def shapley(self, solo: np.ndarray) -> np.ndarray:
        """Exact Shapley values on the items of ``solo``: players x items. A player adds ``x_r - v(S)`` to
        the coalitions S it leads (every S of players after it) and nothing elsewhere."""
        n = self.n
        weight = np.array([shapley_weight(s, n) for s in range(n)])
        order, by_position = self._lower_sums(solo, weight)
        out = np.zeros(solo.shape, dtype=float)
        np.put_along_axis(out, order, -by_position, axis=1)
        return out.T

    def pair_values(self, solo: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Exact pairwise interactions, pairs (i < j, in order) x items, ``weight[s]`` per coalition S of size s
        without i, j. With i before j the four terms cancel unless S is led by a player after j, where they
        are ``v(S) - x_j``: the interaction depends only on the later of the two."""
        n = self.n
        order, by_position = self._lower_sums(solo, weight)
        position = np.argsort(order, axis=1)  # items x n: each player's place
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        later = np.stack([np.maximum(position[:, i], position[:, j]) for i, j in pairs])  # pairs x items
        return np.take_along_axis(by_position, later.T, axis=1).T


def pair_priorities(n: int, value: Callable[[int], np.ndarray], solo: np.ndarray, graded: bool = True) -> np.ndarray:
    """Each item's priority (items x n, lower first) read off the pairs: in {i, j} with one member of each
    type, the one whose solo value the pair's value is closer to answered. A priority that puts each
    high-type player i above exactly the low-type players it beat is ``key_i = lows beaten``, and each
    low-type player j at ``0.5 + the lows beaten by more highs than j``; for a game that selects by a fixed
    per-item order it reproduces every selection. ``graded=False``: a type's ties stay unbroken where scores are
    graded (the rule before partial credit was handled)."""
    high = solo >= HIGH
    wins = np.zeros((solo.shape[0], n, n))  # wins[t, i, j]: i answered for {i, j} on item t
    first, second = np.triu_indices(n, 1)  # every pair i < j
    v = np.stack([value((1 << i) | (1 << j)) for i, j in zip(first.tolist(), second.tolist())], axis=1)
    differ = high[:, first] != high[:, second]
    near_i, near_j = np.abs(v - solo[:, first]), np.abs(v - solo[:, second])
    wins[:, first, second] = differ & (near_i < near_j)
    wins[:, second, first] = differ & (near_j < near_i)
    lows_beaten = (wins * ~high[:, None, :]).sum(axis=2)  # for a high-type player
    highs_winning = (wins * high[:, :, None]).sum(axis=1)  # for a low-type player: the highs that beat it
    below = ((highs_winning[:, None, :] > highs_winning[:, :, None]) & ~high[:, None, :]).sum(axis=2)
    key = -np.where(high, lows_beaten, below + 0.5).astype(float)  # distinct keys differ by 0.5 or more
    # graded scores (e.g. 0.5 and 1 both of the high type): the order within a type, from its pairs whose solo
    # values differ, breaks the ties above; nothing changes where scores are 0/1
    within = ~differ & (solo[:, first] != solo[:, second])
    if within.any() and graded:
        beats = np.zeros((solo.shape[0], n, n))
        beats[:, first, second] = within & (near_i < near_j)
        beats[:, second, first] = within & (near_j < near_i)
        key = key + 0.5 * _ancestors(beats) / n
    return key


def _ancestors(beats: np.ndarray) -> np.ndarray:
    """Per item, how many players beat each player directly or through others (``beats``: items x n x n, 1 where
    the row player beats the column player). Where the relation has no cycle, a player beaten by another has more
    than it: an order by this count respects every win."""
    reach = beats > 0
    while True:  # the transitive closure by squaring: at most log2(n) rounds
        wider = reach | (np.matmul(reach.astype(float), reach.astype(float)) > 0)
        if (wider == reach).all():
            return reach.sum(axis=1)
        reach = wider


def shared_priorities(bits: np.ndarray, values: np.ndarray, solo: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """One priority for all items, per item fold (folds x n, lower first), read off coalitions of two or more
    (``bits``: coalitions x n, ``values``: their per-item values) on the other folds' items, for a selection game
    whose pairs are not all known. Greedily from the top: the next player is the one whose solo values are closest
    to the outcomes, the least mean ``|x_i - v(S)|`` over the coalitions S it is in that hold no player placed
    before it (on the items where S's members' solo values differ: elsewhere every
    member matches); the coalitions it is in are then set aside (it answered for them). Players in none of the
    remaining coalitions go last, in the order of that mean over all coalitions.

    Measured before use (the seen games of benchmarks/estimators.py, 5 seeds): the priority it reads over the
    trained router on 64 members, whose per-item priorities have a mean Spearman correlation of 0.88 with their
    item average, served the selection proxy as well as that item average did (errors 0.00183 and 0.00178 at
    25n)."""
    return PrioritySums(bits, values, solo, folds).ranks()


class PrioritySums:
    """:func:`shared_priorities`' per-coalition sums, kept so that the priority can be read again off a subset of
    the coalitions (:meth:`ranks`, as :meth:`ProxySampler.priority_variance` does)."""

    def __init__(self, bits: np.ndarray, values: np.ndarray, solo: np.ndarray, folds: np.ndarray):
        take = bits.astype(float)
        size = take.sum(axis=1)[:, None]
        first, second = take @ solo.T, take @ (solo ** 2).T  # coalitions x items
        differ = (second - first ** 2 / np.maximum(size, 1)) > ZERO_RESIDUAL  # the members' solo values vary
        n_folds = int(folds.max()) + 1
        miss, seen = np.zeros((n_folds, len(bits), bits.shape[1])), np.zeros((n_folds, len(bits)))
        for t in range(values.shape[1]):  # an item at a time: coalitions x players, not x items too
            miss[folds[t]] += differ[:, t, None] * np.abs(solo[t][None, :] - values[:, t, None])
            seen[folds[t]] += differ[:, t]
        miss, seen = miss * take, seen[:, :, None] * take
        self.take, self.holds = take, np.ascontiguousarray(take.T > 0)  # holds: players x coalitions
        # each fold's priority is read off the other folds' items: their sums, per coalition (folds x coalitions x n)
        self.miss, self.seen = miss.sum(axis=0) - miss, seen.sum(axis=0) - seen

    def ranks(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Folds x n: each fold's priority, read off the other folds' items on the coalitions ``rows`` (None:
        all)."""
        alive = np.ones(len(self.take), dtype=bool)
        if rows is not None:
            alive[:] = False
            alive[rows] = True
        return np.stack([_peeled_rank(self.miss[f], self.seen[f], self.holds, alive) for f in range(len(self.miss))])


def _peeled_rank(miss: np.ndarray, seen: np.ndarray, holds: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """:func:`shared_priorities`' greedy order on one fold's sums (coalitions x players) over the coalitions
    ``alive`` (``holds``: players x coalitions, who is in which), as each player's rank. The remaining
    coalitions' sums are kept up to date as players are placed (each coalition set aside once)."""
    n, alive = len(holds), alive.copy()
    left, order = np.ones(n, dtype=bool), []
    weight = alive.astype(float)  # float vectors: a matrix product with bools does not use BLAS
    count, missed = weight @ seen, weight @ miss
    overall = missed / np.maximum(count, ZERO_RESIDUAL)
    while left.any():
        rate = np.where(left & (count > ZERO_RESIDUAL), missed / np.maximum(count, ZERO_RESIDUAL), np.inf)
        if not np.isfinite(rate).any():  # the rest are in no remaining coalition
            rest = np.flatnonzero(left)
            order.extend(rest[np.argsort(overall[rest], kind="stable")].tolist())
            break
        k = int(np.argmin(rate))
        order.append(k)
        left[k] = False
        gone = np.flatnonzero(alive & holds[k])  # the coalitions k answered for
        alive[gone] = False
        count, missed = count - seen[gone].sum(axis=0), missed - miss[gone].sum(axis=0)
    rank = np.empty(n)
    rank[order] = np.arange(n)
    return rank


Proxy = TypeProxy | SelectionProxy  # a proxy family's member: values, shapley and pair_values on some items


class CrossFitted:
    """The proxies of every item fold, as one proxy game over all items: a non-negative blend of the proxy
    families (vote-like and selection), the blend weights fitted on the families' out-of-fold values. ``fit``
    (the vote-like family's least squares) lets a replicate of the sampled units refit that family (:meth:`refit`)."""

    def __init__(self, families: list[list[Proxy]], weights: np.ndarray, folds: np.ndarray, solo: np.ndarray,
                 fit: TypeFit, kept: dict[tuple[int, str], np.ndarray] | None = None,
                 shared: tuple[np.ndarray, PrioritySums] | None = None):
        self.families, self.weights, self.folds, self.solo, self.fit = families, weights, folds, solo, fit
        self.shared = shared  # the fit's rows a shared priority was read off, and their sums (None: none was)
        self._memo: dict[int, np.ndarray] = {0: np.zeros(len(folds))}
        self._family_parts = dict(kept or {})  # (family, "shapley" | "on_fit") -> its part, computed once
        self._kept_means: dict[int, tuple[np.ndarray, np.ndarray]] | None = None  # refit_means_many's, once

    def _blend(self, part: Callable[[Proxy, np.ndarray], np.ndarray], rows: int,
               cached: str | None = None) -> np.ndarray:
        """sum over families of weight x the family's ``part`` (rows x items, each fold's items from its proxy)."""
        out = np.zeros((rows, len(self.folds)))
        for j, (weight, proxies) in enumerate(zip(self.weights, self.families)):
            if weight == 0:
                continue
            if cached is None or (j, cached) not in self._family_parts:
                whole = out_of_fold(proxies, part, rows, self.solo, self.folds)
                if cached is None:
                    out += weight * whole
                    continue
                self._family_parts[j, cached] = whole
            out += weight * self._family_parts[j, cached]
        return out

    def value(self, mask: int) -> np.ndarray:
        """h(S) on every item."""
        if mask not in self._memo:
            bits = _bits([mask], self.solo.shape[1])
            self._memo[mask] = self._blend(lambda proxy, solo: proxy.values(bits, solo), 1)[0]
        return self._memo[mask]

    def on_fit(self) -> np.ndarray:
        """h on the coalitions it was fitted on (``fit.bits``): coalitions x items."""
        bits = self.fit.bits
        if (0, "on_fit") not in self._family_parts:  # the vote-like family, read off the fit's cells
            self._family_parts[0, "on_fit"] = self.fit.on_fit(typing.cast(list[TypeProxy], self.families[0]))
        return self._blend(lambda proxy, solo: proxy.values(bits, solo), len(bits), "on_fit")

    def shapley(self) -> np.ndarray:
        """Exact Shapley values of h: players x items."""
        return self._blend(lambda proxy, solo: proxy.shapley(solo), self.solo.shape[1], "shapley")

    def pair_values(self, weight: np.ndarray) -> np.ndarray:
        """Exact pairwise interactions of h (``weight[s]`` per coalition of size s): pairs x items."""
        n = self.solo.shape[1]
        return self._blend(lambda proxy, solo: proxy.pair_values(solo, weight), n * (n - 1) // 2)

    def refit(self, multiplicity: np.ndarray) -> "CrossFitted":
        """The vote-like family refitted with the fit's coalitions counted ``multiplicity`` times (a replicate of
        the sampled units); the selection family (read off enumerated pairs, with its parts) and
        the blend weights stay."""
        self.on_fit()  # computes (and caches) every family's parts, which the kept families then carry over
        self.shapley()
        kept = {key: part for key, part in self._family_parts.items() if key[0] > 0}
        refitted: list[Proxy] = list(self.fit.proxies(multiplicity))
        return CrossFitted([refitted, *self.families[1:]], self.weights, self.folds, self.solo, self.fit, kept,
                           self.shared)

    def reread(self, keep: np.ndarray) -> "CrossFitted":
        """The shared priority read off the fit's coalitions where ``keep`` (a mask over them) alone; the vote-like
        family (with its parts) and the blend weights stay."""
        assert self.shared is not None
        rows, sums = self.shared
        kept = {key: part for key, part in self._family_parts.items() if key[0] == 0}
        family = shared_family(self.fit.n, sums.ranks(np.flatnonzero(keep[rows])), self.folds)
        return CrossFitted([self.families[0], family, *self.families[2:]], self.weights, self.folds, self.solo,
                           self.fit, kept, self.shared)


    def refit_means(self, multiplicity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The item means of :meth:`refit`'s ``on_fit()`` and ``shapley()`` (coalitions, players), computed from the
        vote-like family's :meth:`TypeFit.means` and the other families' kept parts."""
        h, phi = self.refit_means_many(multiplicity[None])
        return h[0], phi[0]

    def refit_means_many(self, multiplicities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`refit_means` of several replicates (``multiplicities``: replicates x coalitions): replicates x
        coalitions and replicates x players."""
        if self._kept_means is None:  # the other families' parts stay: their item means, once
            self.on_fit()
            self.shapley()
            self._kept_means = {j: (self._family_parts[j, "on_fit"].mean(axis=1),
                                    self._family_parts[j, "shapley"].mean(axis=1))
                                for j, weight in enumerate(self.weights) if j > 0 and weight != 0}
        count = len(multiplicities)
        h, phi = np.zeros((count, len(self.fit.bits))), np.zeros((count, self.solo.shape[1]))
        for j, weight in enumerate(self.weights):
            if weight == 0:
                continue
            parts = self._replicate_means().many(multiplicities) if j == 0 else self._kept_means[j]
            h, phi = h + weight * parts[0], phi + weight * parts[1]
        return h, phi

    def _replicate_means(self) -> "ReplicateMeans":
        if self.fit._means is None:
            self.fit._means = ReplicateMeans(self.fit)
        return self.fit._means


class ReplicateCounts:
    """How often each of a fit's coalitions (``fit.masks``) is in a replicate of the design's sampled units: the
    enumerated ones always once, a sampled one as often as the replicate holds its unit (for
    :meth:`CrossFitted.refit`); ``index`` maps a coalition to its row."""

    def __init__(self, fit: TypeFit, design: Design):
        self.index = {m: k for k, m in enumerate(fit.masks)}
        sampled = {m for u in design.units for m in u.masks}
        self.enumerated = np.array([0.0 if m in sampled else 1.0 for m in fit.masks])
        self.number = unit_numbers(design.units)  # the design's units, numbered
        self.unit_rows = [np.array([self.index[m] for m in u.masks], dtype=np.int64) for u in design.units]
        self.row_unit = np.repeat(np.arange(len(design.units)), [len(r) for r in self.unit_rows])
        self.rows = np.concatenate(self.unit_rows) if self.unit_rows else np.zeros(0, dtype=np.int64)
        self._unit_rows: sparse.csr_matrix | None = None  # units x the fit's coalitions, for many()

    def many(self, held: np.ndarray) -> np.ndarray:
        """:meth:`__call__` of replicates given as how often each holds each of the design's units (``held``:
        replicates x units, numbered as :attr:`number`): replicates x the fit's coalitions (whole numbers: exact)."""
        if self._unit_rows is None:
            self._unit_rows = sparse.csr_matrix((np.ones(len(self.rows)), (self.row_unit, self.rows)),
                                                shape=(len(self.unit_rows), len(self.enumerated)))
        return self.enumerated + (self._unit_rows.T @ held.T).T

    def __call__(self, units: list[Unit]) -> np.ndarray:
        counts = unit_counts(self.number, units)
        if counts is None:  # units that are not the design's
            rows = np.fromiter(map(self.index.__getitem__, (m for u in units for m in u.masks)), dtype=np.int64)
            return self.enumerated + np.bincount(rows, minlength=len(self.enumerated))
        return self.enumerated + np.bincount(self.rows, weights=counts[self.row_unit], minlength=len(self.enumerated))


def out_of_fold(proxies: list[Proxy], part: Callable[[Proxy, np.ndarray], np.ndarray], rows: int,
                solo: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """rows x items: ``part(proxy, solo of its fold's items)`` of each fold's proxy (fitted without those items)."""
    out = np.zeros((rows, len(folds)))
    for f, proxy in enumerate(proxies):
        out[:, folds == f] = part(proxy, solo[folds == f])
    return out


def cross_fitted(n: int, design: Design, value: Callable[[int], np.ndarray],
                 shared_from: int | None = None, graded: bool = True) -> CrossFitted | None:
    """The proxy fitted on ``design``'s coalitions (in the order of ``sorted(design.masks())``), cross-fitted
    over item folds; None without the singletons (no types) or with fewer than two items (nothing to
    cross-fit on). Short of every pair, from ``shared_from`` players (None: never) the selection family takes one
    priority for all items (:func:`shared_priorities`). ``graded``: as :func:`pair_priorities`."""
    if 1 not in design.complete or n < 2:
        return None
    masks = sorted(design.masks())
    values = np.stack([value(m) for m in masks])
    items = values.shape[1]
    if items < 2:
        return None
    solo = np.stack([value(1 << k) for k in range(n)], axis=1)  # items x n
    # fixed folds (seeded by the item count): the same items share a fold in every estimate of a game
    folds = (np.arange(items) % min(FOLDS, items))[np.random.default_rng(items).permutation(items)]
    fit = TypeFit(n, masks, values, solo, folds)
    families: list[list[Proxy]] = [list(fit.proxies())]
    if n < 3 or (2 not in design.complete and (shared_from is None or n < shared_from)):
        return CrossFitted(families, np.ones(1), folds, solo, fit)
    shared = None
    if 2 in design.complete:  # every pair is known: each item's priority, read off its pairs (no sampled coalition)
        rank = pair_priorities(n, value, solo, graded)
        families.append([SelectionProxy(n, rank[folds == f]) for f in range(int(folds.max()) + 1)])
    else:  # one priority for all items, read off the other folds' items (its sampling error: priority_variance)
        larger = np.flatnonzero(fit.bits.sum(axis=1) >= 2)
        shared = (larger, PrioritySums(fit.bits[larger], values[larger], solo, folds))
        families.append(shared_family(n, shared[1].ranks(), folds))
    rows = [k for k, m in enumerate(masks) if m.bit_count() > 2]  # not the sizes a selection proxy is read off
    bits = fit.bits[rows]
    predictions = np.stack([out_of_fold(f, lambda proxy, solo: proxy.values(bits, solo), len(rows), solo, folds)
                            .ravel() for f in families], axis=1)
    return CrossFitted(families, blend(predictions, values[rows].ravel()), folds, solo, fit, shared=shared)


def shared_family(n: int, ranks: np.ndarray, folds: np.ndarray) -> list[Proxy]:
    """The selection family of one priority for all items per item fold (``ranks``: folds x n)."""
    return [SelectionProxy(n, np.tile(ranks[f], (int((folds == f).sum()), 1))) for f in range(len(ranks))]


SELECTION_WEIGHT = 0.2  # the pilot's bar for a selection-like game (selection_like)


def selection_like(n: int, design: Design, value: Callable[[int], np.ndarray],
                   bar: float | None = SELECTION_WEIGHT) -> bool:
    """The pilot's test (:meth:`ProxySampler.propose`): whether the proxy cross-fitted on ``design``, with one
    priority for all items, gives its selection family a blend weight of at least ``bar`` (None: above the vote-like
    family's, the first rule).

    Chosen on the seen games (the pilot at 24-64 members, 2-3 seeds): majority vote got 0.00-0.07, the selection
    games 0.29-0.89 except cascade over two pools (0.00-0.16: its order is mostly by type, which the vote-like
    proxy reads). The first rule, the selection family above the vote-like one, missed the trained router over 64
    members on two pools (0.34-0.38 against 0.6). Tried and dropped: a test of whether every item's known
    coalitions fit some per-item order, true of every selection game but also of 97-100% of the vote's items over
    64 members, whose pilot coalitions barely overlap."""
    fitted = cross_fitted(n, design, value, shared_from=n)
    if fitted is None or len(fitted.weights) < 2:
        return False
    return bool(fitted.weights[1] > fitted.weights[0] if bar is None else fitted.weights[1] >= bar)


def blend(predictions: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Non-negative least-squares weights of a few columns (every subset of columns tried: there are two),
    on out-of-fold predictions, so no item's own proxy is weighted by its own fit."""
    k = predictions.shape[1]
    best = (float(target @ target), np.zeros(k))
    for subset in range(1, 1 << k):
        cols = [j for j in range(k) if subset >> j & 1]
        coef = np.linalg.lstsq(predictions[:, cols], target, rcond=None)[0]
        if np.all(coef >= 0):
            weights = np.zeros(k)
            weights[cols] = coef
            best = min(best, (float(((target - predictions @ weights) ** 2).sum()), weights), key=lambda b: b[0])
    return best[1]


#: the fewest players whose proxy estimate is shrunk towards the solo shares: above the exact estimators' default
#: limit, where sampling is what a user gets and the large games measured it (below it the benchmark's games were
#: run without it, and at 2n-5n coalitions there the proxy estimate was already ahead of the solo shares)
SOLO_SHARE_FROM = 13
#: from SOLO_SHARE_FROM players on, the pairs are enumerated once they take at most half of the budget left: a
#: selection game's proxy reads its priorities off them, and short of every pair it was behind shapiq 1.8 at 14-32
#: members and 25n-50n (issue 51; fixed before the games drawn with seed 3 were run)
PAIRS_ROOM = 0.5
PAIRS_PILOT = 1.0
PRIORITY_BLOCKS = 10


@register_sampler
class ProxySampler(HybridSampler):
    """The hybrid design and estimate applied to ``v - c h`` for a cross-fitted proxy h, plus ``c`` times h's
    exact Shapley value (see the module doc)."""

    name = "proxy"
    max_players = MAX_PLAYERS
    #: the jackknife's replicates as item means (:class:`ReplicateMeans`); False: the per-item refit they equal
    replicate_means = True
    #: the fewest players from which the estimate is shrunk towards the solo shares (None: never)
    solo_share_from: int | None = SOLO_SHARE_FROM
    #: the pairs are also enumerated when they take at most this share of the budget left (None: only when the
    #: kernel's share of sizes 2 and n - 2 covers them)
    pairs_room: float | None = PAIRS_ROOM
    #: short of every pair, from this many players the selection family takes one priority for all items (None:
    #: the vote-like proxy alone)
    shared_priority_from: int | None = SOLO_SHARE_FROM
    #: the interval's bias term per player floored at the players' mean (:func:`shrunk_to_prediction`)
    bias_floor = True
    #: from SOLO_SHARE_FROM players, pairs beyond pairs_room of what is left are still enumerated when a pilot of
    #: this many multiples of n coalitions finds the game selection-like (:meth:`propose`; None: never)
    pairs_pilot: float | None = PAIRS_PILOT
    #: blocks of the jackknife that gives a shared priority's own sampling variance (:meth:`priority_variance`;
    #: 0: none)
    priority_blocks: int = PRIORITY_BLOCKS
    #: the pilot's bar on the selection family's blend weight (:func:`selection_like`)
    selection_weight: float | None = SELECTION_WEIGHT
    #: a type's ties in the pairs' priorities broken by the pairs whose graded scores differ (:func:`pair_priorities`)
    graded_pairs = True

    @property
    def linear(self) -> bool:  # type: ignore[override]
        """The plain hybrid's estimate (linear) until :meth:`finish` fits a proxy (refitted per replicate)."""
        return self._fitted is None
    description = ("regression-adjusted: exact Shapley of a per-item proxy (solo types + player effects, "
                   "cross-fitted over items; blended with a selection proxy read off the pairs, which it "
                   "enumerates once the budget's share covers them, or from 13 players half of what is left; "
                   "short of them, from 13 players, one priority for all items read off the sampled coalitions) "
                   "plus the evaluated coalitions' residuals exactly and a James-Stein share of the hybrid's "
                   "extrapolation of them to the rest")

    def __init__(self, n: int, rng: np.random.Generator):
        if n > MAX_PLAYERS:
            raise ConfigError(f"the proxy sampler handles up to {MAX_PLAYERS} players, got n={n}; "
                              "use --sampler hybrid")
        super().__init__(n, rng)
        self.coefficient = 0.0  # c: how much of the proxy is subtracted; set by finish()
        self.proxy_shapley: np.ndarray | None = None  # c * phi(h), players x items
        self._residual: ValueTable | None = None  # v - c h on the design's coalitions
        # h, and how often each of its coalitions is in a replicate of the sampled units
        self._fitted: tuple[CrossFitted, ReplicateCounts] | None = None
        self._shapley_map = np.zeros((n, 0))  # each fitted coalition's coefficient in phi (exact.shapley_map)
        self._kept_value_means: tuple[TypeFit, np.ndarray] | None = None  # _value_means()
        self._value: Callable[[int], np.ndarray] | None = None  # the game's values, as observe() was told them
        self._pilot: str | None = None  # None, then "drawn", then "selection" or "other"

    def observe(self, masks: set[int], value: Callable[[int], np.ndarray]) -> None:
        super().observe(masks, value)
        self._value = value

    def enumerate_alone(self, first: int, missing: list[int], share: float, room: float) -> int | None:
        """Size 2 on its own (every pair: the selection proxy reads its priorities off them) when the share
        of sizes 2 and n - 2 covers it, or (from :data:`SOLO_SHARE_FROM` players) the pairs take at most
        :attr:`pairs_room` of what is left, ``room``, or fit in it after a pilot found the game selection-like
        (:meth:`propose`); the rest of that share goes to sampling size n - 2."""
        if not (first == 2 and 2 in missing):
            return None
        pairs = math.comb(self.n, 2)
        wanted = pairs <= share or self._pairs_in_room(pairs, room) or (self._pilot == "selection" and pairs <= room)
        return 2 if wanted else None

    def _pairs_in_room(self, pairs: int, room: float) -> bool:
        return self.pairs_room is not None and self.n >= SOLO_SHARE_FROM and pairs <= self.pairs_room * room

    def propose(self, design: Design, room: int, step: int) -> list[Unit | int]:
        """The kernel design, with one detour from :data:`SOLO_SHARE_FROM` players: where the pairs take more
        than :attr:`pairs_room` of what is left, yet fit with twice the pilot to spare, a pilot of
        :attr:`pairs_pilot` x n coalitions of the other sizes is sampled first. Its cross-fitted proxy decides
        (:func:`selection_like`: a selection family of one priority for all items that takes a share of the
        blend), and the pairs are then enumerated, which makes the selection proxy exact for a game that selects
        by a per-item order. A vote-like game loses nothing but the draw: the pilot's coalitions are of the kind
        the design would have sampled anyway."""
        if self._pilot is None and self.pairs_pilot is not None and self._pilot_due(design, room, self.pairs_pilot):
            self._pilot = "drawn"
            pilot = self._fill_by_mass(design, int(self.pairs_pilot * self.n), self._open_beyond_pairs(design))
            if pilot:
                return pilot
        if self._pilot == "drawn" and self._value is not None:
            self._pilot = "selection" if selection_like(self.n, design, self._value, self.selection_weight) else "other"
        return super().propose(design, room, step)

    def _pilot_due(self, design: Design, room: int, pilot: float) -> bool:
        """The pairs are next (sizes 1 and n - 1 done, none of 2 or n - 2 yet) and the pilot's rule applies."""
        pairs, n, open_pairs = math.comb(self.n, 2), self.n, self._open_pairs(design)
        if n < SOLO_SHARE_FROM or open_pairs[:1] != [2] or len(open_pairs) < 2:
            return False
        if 2 in design.complete or self._sampled(design.units, 2) > 0:
            return False
        return not self._pairs_in_room(pairs, room) and pairs + 2 * pilot * n <= room

    def _open_beyond_pairs(self, design: Design) -> list[int]:
        return [s for s in self._open_pairs(design) if s != 2]

    def finish(self, design: Design, value: Callable[[int], np.ndarray]) -> None:
        fitted = cross_fitted(self.n, design, value, self.shared_priority_from, self.graded_pairs)
        if fitted is None:  # no proxy: the plain hybrid
            self.calibrate(design, value)
            return
        fit, counts = fitted.fit, ReplicateCounts(fitted.fit, design)
        index = counts.index
        h, phi = fitted.on_fit(), fitted.shapley()
        if _calibratable(design):  # v and h side by side (item means: the estimates are linear): one table, one solve
            means = np.column_stack([fit.values.mean(axis=1), h.mean(axis=1)])
            self.weight, self.coefficient = self._calibrate(design, ValueTable(index, fit.bits, means), phi)
        else:  # too few units to calibrate on: the proxy as fitted, the two estimates weighted equally
            self.coefficient = 1.0
        c = self.coefficient
        self.proxy_shapley, self._residual = c * phi, ValueTable(index, fit.bits, fit.values - c * h)
        self._fitted, self._shapley_map = (fitted, counts), shapley_map(fit.bits)

    def model_error(self, design: Design, value: Callable[[int], np.ndarray],
                    estimate: np.ndarray) -> np.ndarray | None:
        """The hybrid's thin-design widening, plus what the coalitions not sampled can hide where the proxy fit
        every sampled one exactly (:meth:`unseen_residual`). The widening is the disagreement of the two plain
        estimates of what is estimated, the residual (the proxy's part is exact): measured on the tests' synthetic
        and selection games at 2n (10 seeds each), it narrowed the interval on the items from 0.11-0.31 to
        0.07-0.27 and still covered every player, as the plain estimates of the game itself did."""
        if self._residual is None or self.proxy_shapley is None:
            thin = super().model_error(design, value, estimate)
        else:
            thin = super().model_error(design, self._residual, estimate - self.proxy_shapley)
        unseen = self.unseen_residual(design)
        if unseen == 0.0:
            return thin
        return np.full(self.n, unseen) if thin is None else thin + unseen

    def unseen_residual(self, design: Design) -> float:
        """A bound (95%) on what the residual of the coalitions not sampled adds to any player's value, over the
        sampled sizes where the residual ``v - c h`` is zero on every item of every sampled coalition (0.0 when
        there are none). There the jackknife sees no error at all, yet a proxy can miss a few rare coalitions (a
        selection proxy whose priorities are wrong where members tie). If a share q_s of the coalitions of size s
        is missed, seeing none in m_s draws has probability (1 - q_s)^m_s; the shares where that is at least 5%
        satisfy sum_s m_s q_s <= ln 20 (as -ln(1 - q) >= q). A missed coalition's residual, at most M, moves a
        player's value by at most M q_s (1/s + 1/(n - s)) per size (a share q_s n / s of the size's coalitions
        with the player, q_s n / (n - s) of those without, at Shapley weight 1/n a size), so by at most
        ln 20 x M x max_s (1/s + 1/(n - s)) / m_s over those shares. M: the largest item-mean residual on any
        coalition the proxy was fitted on, or one item's whole score (1/items) where all are zero (an assumption:
        a missed coalition misses about one item). Measured: SLM-MUX over sim:random-12 at 25n and 50n, where the
        proxy fit every sampled coalition in 14 and 6 of 20 runs, the interval on the items covered 0.30 and 0.69
        of the players without this bound."""
        if self._residual is None:
            return 0.0
        residual, n = self._residual, self.n
        sampled: dict[int, list[int]] = {}
        for u in design.units:
            for m in u.masks:
                if m.bit_count() not in design.complete:
                    sampled.setdefault(m.bit_count(), []).append(residual.index[m])
        exact = [s for s, rows in sampled.items() if np.abs(residual.values[rows]).max() <= ZERO_RESIDUAL]
        if not exact:
            return 0.0
        items = residual.values.shape[1]
        largest = max(float(np.abs(residual.values.mean(axis=1)).max()), 1.0 / items)
        return math.log(20) * largest * max((1 / s + 1 / (n - s)) / len(sampled[s]) for s in exact)

    def _calibrate(self, design: Design, stacked: ValueTable, phi: np.ndarray, reps: int = 100
                   ) -> tuple[float, float]:
        """(w, c) minimising the bootstrap variance (over resampled units, summed over players) of
        ``H_w(v) - c (H_w(h) - phi(h))``, H_w the hybrid with kernel weight w: a control variate whose
        coefficient is estimated, so a proxy that does not track the game is used less (c in [0, 1]).
        ``stacked``: the item means of v and h side by side (coalitions x 2)."""
        m = replicate_rows_of_counts(self, design, resampled_counts(design, self.rng, reps))
        kernel, stratified = [], []
        for chunk in np.array_split(np.arange(reps), -(-reps // CALIBRATION_CHUNK)):  # bounded memory
            tiled = ValueTable(stacked.index, stacked.bits, np.tile(stacked.values, len(chunk)))  # v, h each
            kernel.append(KernelSampler.estimate_columns(self, design, tiled, m[:, chunk]))
            stratified.append(self.stratified.estimate_columns(design, tiled, m[:, chunk]))
        kv, kh, sv, sh = (np.hstack(e)[:, column::2].T for e in (kernel, stratified) for column in (0, 1))  # reps x n
        best = (math.inf, self.weight, 1.0)
        for w in np.linspace(0.0, 1.0, 21):
            x = w * kv + (1 - w) * sv
            d = w * kh + (1 - w) * sh - phi.mean(axis=1)
            x, d = x - x.mean(axis=0), d - d.mean(axis=0)
            c = float(np.clip((x * d).sum() / max(float((d * d).sum()), 1e-30), 0.0, 1.0))
            best = min(best, (float(((x - c * d) ** 2).sum()), float(w), c))
        return best[1], best[2]

    def estimate(self, design: Design, value: Callable[[int], np.ndarray],
                 units: list[Unit] | None = None) -> np.ndarray:
        """The difference estimate ``c phi(h) + H(v - c h)``; on a replicate of the sampled units (``units``: the
        jackknife's), with the vote-like proxy refitted on the replicate's coalitions, so the interval sees the
        proxy's own sampling error (c, w and the blend weights stay). The final estimate is :meth:`settle`'s."""
        if self._fitted is None:
            return super().estimate(design, value, units)
        return self._parts(design, units)[0]

    def _parts(self, design: Design, units: list[Unit] | None, means: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(difference estimate, prediction estimate), players x items, on the design's sampled units (None) or a
        replicate of them (the vote-like proxy refitted on its coalitions). The prediction is
        ``phi(h) + sum over the known coalitions S of map[i, S] (v(S) - h(S))``: the known coalitions' values
        exactly and h's elsewhere (no coalition's residual is extrapolated). ``means``: a replicate's item means
        alone (players x 1), from the item means of v and of the refitted h (both estimates are linear in the
        values: :class:`ReplicateMeans`), what the jackknife reads."""
        assert self._fitted is not None  # called only after finish() fitted a proxy
        fitted, counts = self._fitted
        fit, c = fitted.fit, self.coefficient
        multiplicity = None if units is None else counts(units)
        if multiplicity is not None and means:
            h, phi = (x[:, None] for x in fitted.refit_means(multiplicity))
            values = fit.values.mean(axis=1, keepdims=True)
        else:
            proxy = fitted if multiplicity is None else fitted.refit(multiplicity)
            h, phi, values = proxy.on_fit(), proxy.shapley(), fit.values
        residual = ValueTable(counts.index, fit.bits, values - c * h)
        difference = c * phi + super().estimate(design, residual, units)
        known = 1.0 if multiplicity is None else (multiplicity > 0)[:, None]
        return difference, phi + self._shapley_map @ (known * (values - h))

    def _parts_many(self, design: Design, replicates: list[list[Unit]]) -> np.ndarray | None:
        """The item means of ``_parts(design, units, means=True)`` stacked as :func:`shrunk_to_prediction` reads
        them (prediction, then difference - prediction), for a jackknife group's replicates at once (replicates x
        2 players): one refit of the proxy for all (:meth:`ReplicateMeans.many`) and one estimate per column
        (``estimate_columns``). None when a replicate holds units that are not the design's."""
        assert self._fitted is not None
        fitted, counts = self._fitted
        fit, c = fitted.fit, self.coefficient
        held = replicate_unit_counts(counts.number, replicates)  # replicates x the design's units
        if held is None:
            return None
        rows = replicate_rows(self, design, replicates, (counts.number, held))
        if rows is None:
            return None
        multiplicities = counts.many(held)  # replicates x the fit's coalitions
        h, phi = fitted.refit_means_many(multiplicities)
        values = self._value_means(fit)
        residual = ValueTable(counts.index, fit.bits, (values[None] - c * h).T)  # coalitions x replicates
        difference = c * phi.T + super().estimate_columns(design, residual, rows)
        prediction = phi.T + self._shapley_map @ ((multiplicities > 0) * (values[None] - h)).T
        return np.vstack([prediction, difference - prediction]).T

    def priority_variance(self, design: Design, rng: np.random.Generator) -> np.ndarray:
        """Per player, the sampling variance the shared priority adds (zero without one): the jackknife kept it
        fixed. A delete-a-block jackknife over the sampled units (:attr:`priority_blocks` blocks): the priority
        read off the coalitions left, the estimate ``P + kappa (D - P)`` recomputed with it and everything else
        as fitted. Measured before use (the seen SLM-MUX over sim:random-16, 10 seeds): the interval on the items
        covered 0.88 and 0.86 of the players at 5n and 10n without it."""
        if self._fitted is None or self._fitted[0].shared is None or self._fitted[0].weights[1] == 0 \
                or not self.priority_blocks or len(design.units) < 2:  # no shared priority in the estimate
            return np.zeros(self.n)
        fitted, counts = self._fitted
        fit, c, kappa = fitted.fit, self.coefficient, self.shrink if self.shrink is not None else 1.0
        values = self._value_means(fit)
        blocks = min(self.priority_blocks, len(design.units))
        block_of = rng.permutation(len(design.units)) % blocks
        estimates = []
        for b in range(blocks):
            keep = np.ones(len(fit.masks), dtype=bool)
            keep[[counts.index[m] for u, k in zip(design.units, block_of) if k == b for m in u.masks]] = False
            proxy = fitted.reread(keep)
            h, phi = proxy.on_fit().mean(axis=1), proxy.shapley().mean(axis=1)  # item means: both are linear
            residual = ValueTable(counts.index, fit.bits, (values - c * h)[:, None])
            difference = c * phi + super().estimate(design, residual)[:, 0]
            prediction = phi + self._shapley_map @ (values - h)
            estimates.append(prediction + kappa * (difference - prediction))
        stacked = np.stack(estimates)
        return (blocks - 1) / blocks * ((stacked - stacked.mean(axis=0)) ** 2).sum(axis=0)

    def _value_means(self, fit: TypeFit) -> np.ndarray:
        """The item means of the fit's values (kept while the fit is)."""
        if self._kept_value_means is None or self._kept_value_means[0] is not fit:
            self._kept_value_means = (fit, fit.values.mean(axis=1))
        return self._kept_value_means[1]

    def settle(self, design: Design, value: Callable[[int], np.ndarray], groups: list[list[Unit]],
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The final estimate: the prediction estimate plus a share kappa of the difference estimate's correction
        to it (:func:`shrunk_to_prediction`, kappa pooled over the players and kept as ``shrink``); from
        :attr:`solo_share_from` players on, shrunk towards the solo shares (:func:`shrunk_to_solo_shares`)."""
        if self._fitted is None:
            per_item, variance, df = super().settle(design, value, groups, rng)
        else:
            means = self.replicate_means
            many = (lambda replicates: self._parts_many(design, replicates)) if means else None
            per_item, variance, df, kappa = shrunk_to_prediction(lambda units: self._parts(design, units, means),
                                                                 groups, rng, [slice(0, self.n)], many,
                                                                 self.bias_floor)
            self.shrink = float(kappa[0])
        # the shared priority's own sampling error widens the interval; it does not move the estimate (measured:
        # fed to the solo shares' shrinkage, it cost 5-9% in error on the seen SLM-MUX and router over 16)
        priority = self.priority_variance(design, rng)
        if self.solo_share_from is not None and self.n >= self.solo_share_from and 1 in design.complete:
            per_item, variance, self.solo_share_weight = shrunk_to_solo_shares(
                per_item, variance, solo_shares(self.n, value))
            priority = (1 - self.solo_share_weight) ** 2 * priority
        return per_item, variance + priority, df


def solo_shares(n: int, value: Callable[[int], np.ndarray]) -> np.ndarray:
    """Each item's grand-coalition value split in proportion to the players' solo values on it (equally where no
    player is right alone): players x items. It needs the singletons and the grand coalition only, is efficient
    (sums to v(N) per item), and ranks players by what they do alone."""
    full = value((1 << n) - 1)
    solo = np.stack([value(1 << k) for k in range(n)])
    total = solo.sum(axis=0)
    return np.where(total > 0, solo / np.where(total > 0, total, 1.0) * full, full / n)


def shrunk_to_solo_shares(per_item: np.ndarray, variance: np.ndarray,
                          prior: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``Q + lambda (E - Q)``: the estimate E (players x items, with its sampling variance per player) shrunk towards
    the solo shares Q (:func:`solo_shares`, exact on the items: no sampling error), ``lambda = max(0, 1 - sum var(E)
    / sum (E - Q)^2)`` over the players (positive-part James-Stein, as :func:`shrunk_to_prediction`); the variance
    ``lambda^2 var + (1 - lambda)^2 ((E - Q)^2 + var)`` (the bias left, sized conservatively as there). Returns the
    estimate, its variance and the solo shares' weight ``1 - lambda``.

    Why: at a few coalitions per player and many players (2n-5n at n = 32-64) the proxy estimate's sampling error
    is larger than the solo shares' bias. On the large games of benchmarks/estimators.py (seen when this was
    written: vote, SLM-MUX and cascade over 64) its mean absolute error at 2n was 0.019-0.027 against 0.003-0.006 for
    the solo shares, and shrunk it was 0.003-0.005 (lambda 0); at 10n and more lambda is 0.3-1.0 and the error
    unchanged within 0.0003."""
    estimate, shares = per_item.mean(axis=1), prior.mean(axis=1)
    distance = float(((estimate - shares) ** 2).sum())
    if not distance > 0 or not np.isfinite(variance).all():
        return per_item, variance, 0.0
    keep = max(0.0, 1.0 - float(variance.sum()) / distance)
    shrunk = prior + keep * (per_item - prior)
    return shrunk, keep ** 2 * variance + (1 - keep) ** 2 * ((estimate - shares) ** 2 + variance), 1.0 - keep


def shrunk_to_prediction(parts: Callable[[list[Unit] | None], tuple[np.ndarray, np.ndarray]],
                         groups: list[list[Unit]], rng: np.random.Generator, pooled: list[slice],
                         many: Callable[[list[list[Unit]]], np.ndarray | None] | None = None,
                         floor: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``P + kappa (D - P)`` from ``parts(units)`` = (difference estimate D, prediction estimate P), rows x items,
    on the design's sampled units (None) or a jackknife replicate of them: the estimate, its sampling variance and
    degrees of freedom (one jackknife pass over both), and kappa (one per slice of rows in ``pooled``).

    The difference estimate D (the control variate) extrapolates the sampled coalitions' residuals to the
    coalitions not sampled: unbiased, but where the residual is noise (a proxy that tracks the game up to
    per-coalition idiosyncrasies, as random tie-breaks make) the extrapolated noise is all it adds. The
    prediction estimate P takes the known coalitions' values exactly and the proxy's elsewhere: no extrapolated
    noise, but biased where the proxy misses systematically. D - P estimates that bias b; shrinking it by
    ``kappa = max(0, 1 - sum var(D - P) / sum (D - P)^2)`` over a slice's rows (positive-part James-Stein; var
    from the jackknife) keeps the correction where it stands out of its own noise and drops it where it does
    not. The variance: the jackknife of ``P + kappa (D - P)`` plus the bias left, ``(1 - kappa)^2 ((D - P)^2 +
    var)``. As E (D - P)^2 = b^2 + var, that overstates b^2 by 2 var on average, on purpose: one draw of D - P
    sizes b poorly, and with the unbiased ``(D - P)^2 - var`` the Shapley interval for the value on the items
    covered 0.84 and 0.89 of the players at 10n on mixture-of-agents and LLM-Blender over sim:random-8 (0.97 and
    1.00 this way; both still narrower than the difference estimate's interval, 0.0110 and 0.0093 against 0.0118
    and 0.0097 on average). A row's ``(D - P)^2`` is floored at the slice's mean: where the proxy is near exact
    (selection games with every pair known, errors of 2e-05 to 4e-05) a player whose one draw of D - P fell
    near zero kept almost no bias term, and the interval on the items covered 0.85-0.89 of the players in three
    such cells of the large games (0.96-1.00 with the floor; issue 51). ``floor=False``: without it."""
    def stacked(units: list[Unit] | None) -> np.ndarray:  # P, then D - P
        difference, prediction = parts(units)
        return np.vstack([prediction, difference - prediction])

    full = stacked(None)
    rows = len(full) // 2
    means = full.mean(axis=1)
    def stacked_many(replicates: list) -> np.ndarray:  # a group's replicates at once, where ``many`` can
        out = many(replicates) if many is not None else None
        return np.stack([stacked(units).mean(axis=1) for units in replicates]) if out is None else out

    replicates = jackknife_replicates(stacked, groups, rng, stacked_many)
    correction = means[rows:]
    correction_var = jackknife_variance([r[:, rows:] for r in replicates], correction, rows)[0]
    kappa, per_row, square = np.ones(len(pooled)), np.ones(rows), correction ** 2
    for k, part in enumerate(pooled):
        spread = float(square[part].sum())
        if spread > 0:
            kappa[k] = per_row[part] = max(0.0, 1.0 - float(correction_var[part].sum()) / spread)
        if floor:  # one row's draw sizes its bias poorly
            square[part] = np.maximum(square[part], square[part].mean())
    per_item = full[:rows] + per_row[:, None] * full[rows:]
    variance, df = jackknife_variance([r[:, :rows] + per_row * r[:, rows:] for r in replicates],
                                      per_item.mean(axis=1), rows)
    bias = (1 - per_row) ** 2 * (square + correction_var)
    return per_item, variance + bias, df, kappa


__all__ = ["MAX_PLAYERS", "SOLO_SHARE_FROM", "CrossFitted", "ProxySampler", "ReplicateCounts", "SelectionProxy",
           "TypeFit", "TypeProxy", "cross_fitted", "pair_priorities", "shared_priorities", "shrunk_to_prediction",
           "shrunk_to_solo_shares", "solo_shares"]
