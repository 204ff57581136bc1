"""Small-sample statistics for comparing solo strength with compositional strength.

The pools compared here are small (n is often 3-12 models), so correlation p-values come from
permutation tests rather than the asymptotic t approximation, multiple settings are corrected with
Benjamini-Hochberg, and per-item contributions get a paired item bootstrap. Numpy only; every
function is pure and raises :class:`~coalition_gym.errors.ConfigError` on malformed input.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, NamedTuple, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ConfigError

EXACT_MAX_N = 8  # enumerate all n! permutations up to here (8! = 40320), sample above
_TIE_TOL = 1e-12  # a permuted |r| counts as "at least as extreme" when >= |r_obs| - _TIE_TOL
_BLOCK = 1 << 20  # elements per vectorised block, bounds memory for large inputs


@dataclass(frozen=True)
class Correlation:
    """A correlation with its two-sided permutation p-value.

    ``method`` is ``"exact"`` (all n! permutations enumerated) or ``"permutation"`` (seeded
    random permutations with the +1 correction).
    """

    statistic: float
    p_value: float
    n: int
    method: str


@dataclass(frozen=True)
class RescueDrag:
    """Fractions of items the system rescues (model wrong, system right) and drags (the reverse)."""

    rescue: float
    drag: float
    n_items: int


class BootstrapMean(NamedTuple):
    """Per-player mean, bootstrap standard error and percentile confidence interval."""

    mean: NDArray[np.float64]
    stderr: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]


# ----------------------------------------------------------------------------- validation helpers


#: bootstrap resamples of every CI unless a caller asks for another number (the one default)
N_BOOT = 2000


def _numbers(values: ArrayLike, name: str, ndim: int = 1,
             shape: str = "a 1-D sequence of numbers") -> NDArray[np.float64]:
    """``values`` as a float array of ``ndim`` dimensions and finite numbers only, else a ConfigError naming
    ``name``, what it must be (``shape``) and the first bad number's index."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be {shape}, got {values!r}") from exc
    if arr.ndim != ndim:
        raise ConfigError(f"{name} must be {shape}, got an array of shape {arr.shape}")
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        at = tuple(int(k) for k in bad[0])
        raise ConfigError(f"{name} must contain only finite numbers (no NaN or inf); "
                          f"got {arr[at]} at index {at[0] if ndim == 1 else at}")
    return arr


def _int_at_least(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _open_unit(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def _paired(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    xa, ya = _numbers(x, "x"), _numbers(y, "y")
    if xa.size != ya.size:
        raise ConfigError(f"x and y must have the same length (paired values), got {xa.size} and {ya.size}")
    if xa.size < 3:
        raise ConfigError(f"a correlation needs at least 3 paired values, got {xa.size}")
    return xa, ya


#: Student-t 97.5% quantiles for 1-4 degrees of freedom, where the series below is off by more than 1e-3
_T975_SMALL = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764}
#: degrees of freedom this close below an integer are that integer (round-off of a sum of ratios)
DF_ROUNDOFF = 1e-9
_Z975 = 1.959963984540054


def t_quantile_975(df: float) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (two-sided 95%): below 5, the quantile at
    ``df`` rounded down (Satterthwaite's fractional df, conservatively: the intervals' coverage on the estimators
    benchmark was measured so) after a round-off allowance (a sum that is 2 in exact arithmetic and
    1.9999999999999987 in floating point is 2: 4.30, not 12.71); the Cornish-Fisher series in 1/df of Abramowitz &
    Stegun 26.7.5 from 5 on (within 3e-4 there), the normal quantile for infinite df. NaN below 1."""
    if not df >= 1:
        return math.nan
    if df < 5:
        return _T975_SMALL[int(df + DF_ROUNDOFF)]
    z = _Z975
    terms = [(z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160]
    return z + sum(g / df ** (k + 1) for k, g in enumerate(terms))


def satterthwaite_df(components: ArrayLike, dfs: ArrayLike) -> NDArray[np.float64]:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates: ``components`` is
    groups x k (each group's estimate, for k quantities), ``dfs`` each group's degrees of freedom. A sum carried
    by one group has that group's few degrees of freedom, not the total; a sum that is exactly zero gets
    infinitely many (nothing to be uncertain about)."""
    d = np.asarray(dfs, dtype=float).reshape(-1, 1)
    v = np.asarray(components, dtype=float).reshape(len(d), -1)
    if np.any(d < 1):
        raise ConfigError(f"every group's degrees of freedom must be at least 1, got {list(np.ravel(dfs))}")
    total, spread = v.sum(axis=0), (v ** 2 / d).sum(axis=0)
    return np.divide(total ** 2, spread, out=np.full(total.shape, np.inf), where=spread > 0)


# ----------------------------------------------------------------------------- correlations


def rankdata(values: ArrayLike) -> NDArray[np.float64]:
    """1-based ranks of a 1-D array; tied values all get the average of the ranks they span."""
    a = _numbers(values, "values")
    n = a.size
    order = np.argsort(a, kind="mergesort")
    ordered = a[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ordered) != 0) + 1]
    ends = np.r_[starts[1:], n]
    ranks = np.empty(n, dtype=float)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)  # mean of ranks start+1..end
    return ranks


@lru_cache(maxsize=EXACT_MAX_N)
def _all_permutations(n: int) -> NDArray[np.intp]:
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.intp).reshape(-1, n)
    perms.flags.writeable = False
    return perms


def _permutation_correlation(x: NDArray[np.float64], y: NDArray[np.float64], n_resamples: int,
                             seed: int) -> Correlation:
    n = x.size
    method = "exact" if n <= EXACT_MAX_N else "permutation"
    xc, yc = x - x.mean(), y - y.mean()
    if np.all(x == x[0]) or np.all(y == y[0]):
        return Correlation(statistic=math.nan, p_value=1.0, n=n, method=method)
    # Permuting y leaves its mean and norm unchanged, so the denominator is shared by all permutations.
    denom = math.sqrt(float(xc @ xc) * float(yc @ yc))
    r_obs = float(np.clip((xc @ yc) / denom, -1.0, 1.0))
    cutoff = abs(r_obs) - _TIE_TOL

    if method == "exact":
        perms = _all_permutations(n)
        count = int(np.count_nonzero(np.abs(yc[perms] @ xc) / denom >= cutoff))
        p_value = count / perms.shape[0]
    else:
        rng = np.random.default_rng(seed)
        block = max(1, _BLOCK // n)
        count, done = 0, 0
        while done < n_resamples:
            k = min(block, n_resamples - done)
            shuffled = rng.permuted(np.tile(yc, (k, 1)), axis=1)
            count += int(np.count_nonzero(np.abs(shuffled @ xc) / denom >= cutoff))
            done += k
        p_value = (count + 1) / (n_resamples + 1)
    return Correlation(statistic=r_obs, p_value=float(min(p_value, 1.0)), n=n, method=method)


def pearson(x: ArrayLike, y: ArrayLike, *, n_resamples: int = 20000, seed: int = 0) -> Correlation:
    """Pearson r with a two-sided permutation p-value (y permuted, x fixed).

    p = share of permutations with |r_perm| >= |r_obs| - 1e-12. For n <= 8 all n! permutations are
    enumerated (``method="exact"``, p = count / n!); for n > 8, ``n_resamples`` random permutations
    drawn with ``numpy.random.default_rng(seed)`` give p = (count + 1) / (n_resamples + 1)
    (``method="permutation"``). If x or y is constant, r is undefined: statistic is nan, p_value 1.0.
    Needs >= 3 paired finite values.
    """
    xa, ya = _paired(x, y)
    n_resamples = _int_at_least(n_resamples, "n_resamples", 1)
    seed = _int_at_least(seed, "seed", 0)
    return _permutation_correlation(xa, ya, n_resamples, seed)


def smallest_p(n: int, n_resamples: int = 20000) -> float:
    """The smallest p-value :func:`pearson` and :func:`spearman` can give with ``n`` observations: 2 / n! for
    an exact test (only the observed order and its reverse reach |r| = 1), 1 / (n_resamples + 1) for a
    sampled one. When it exceeds alpha, no data can be significant at alpha: too few observations to test."""
    if n < 3:
        return 1.0
    return min(1.0, 2.0 / math.factorial(n)) if n <= EXACT_MAX_N else 1.0 / (n_resamples + 1)


def spearman(x: ArrayLike, y: ArrayLike, *, n_resamples: int = 20000, seed: int = 0) -> Correlation:
    """Spearman rho: Pearson r on average ranks (ties share the mean rank), same permutation test.

    The p-value rule, the exact/permutation switch at n = 8 and the constant-input result
    (statistic nan, p_value 1.0) are those of :func:`pearson`.
    """
    xa, ya = _paired(x, y)
    n_resamples = _int_at_least(n_resamples, "n_resamples", 1)
    seed = _int_at_least(seed, "seed", 0)
    return _permutation_correlation(rankdata(xa), rankdata(ya), n_resamples, seed)


# ----------------------------------------------------------------------------- multiple testing


def benjamini_hochberg(p_values: Sequence[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Benjamini-Hochberg step-up procedure over m p-values, in the input order.

    With p sorted ascending as p_(1) <= ... <= p_(m), let k be the largest i with
    p_(i) <= i * alpha / m; the k smallest are rejected (none if no such i). Adjusted p-values are
    p_adj_(i) = min(1, min_{j >= i} m * p_(j) / j), so they are monotone in p and p_adj <= alpha
    exactly for the rejected ones. An empty input gives ([], []).
    """
    alpha = _open_unit(alpha, "alpha")
    p = _numbers(p_values, "p_values")
    out_of_range = np.flatnonzero((p < 0.0) | (p > 1.0))
    if out_of_range.size:
        i = int(out_of_range[0])
        raise ConfigError(f"p_values must lie in [0, 1], got {p[i]} at index {i}")
    m = p.size
    if m == 0:
        return [], []
    order = np.argsort(p, kind="mergesort")
    ordered = p[order]
    rank = np.arange(1, m + 1)
    passing = np.flatnonzero(ordered <= rank * alpha / m)
    rejected_sorted = rank <= (passing[-1] + 1 if passing.size else 0)
    adjusted_sorted = np.minimum(np.minimum.accumulate((m * ordered / rank)[::-1])[::-1], 1.0)
    rejected = np.empty(m, dtype=bool)
    adjusted = np.empty(m, dtype=float)
    rejected[order], adjusted[order] = rejected_sorted, adjusted_sorted
    return [bool(r) for r in rejected], [float(a) for a in adjusted]


def summarise_settings(p_values: Mapping[str, float], alpha: float = 0.05) -> dict:
    """Benjamini-Hochberg across settings, summarised for a report.

    Returns ``{"alpha", "settings": {name: {"p_value", "adjusted_p", "significant"}}, "significant",
    "not_significant", "total", "sentence"}`` with settings in the mapping's order; ``sentence``
    reads "in K of M settings the solo-vs-compositional correlation is not significant after
    Benjamini-Hochberg (alpha=A)", K counting the settings not rejected.
    """
    if not isinstance(p_values, Mapping) or not p_values:
        raise ConfigError(f"p_values must be a non-empty mapping of setting name to p-value, got {p_values!r}")
    names = list(p_values)
    rejected, adjusted = benjamini_hochberg([p_values[k] for k in names], alpha)
    settings = {name: {"p_value": float(p_values[name]), "adjusted_p": adj, "significant": rej}
                for name, adj, rej in zip(names, adjusted, rejected)}
    total, significant = len(names), sum(rejected)
    sentence = (f"in {total - significant} of {total} setting{'s' if total != 1 else ''} the "
                f"solo-vs-compositional correlation is not significant after Benjamini-Hochberg "
                f"(alpha={alpha:g})")
    return {"alpha": float(alpha), "settings": settings, "significant": significant,
            "not_significant": total - significant, "total": total, "sentence": sentence}


# ----------------------------------------------------------------------------- reporting


P_FLOOR = 1e-4


def format_p(p: float | None) -> str:
    """A p-value as printed: never "0" (a permutation p is at least 1/(resamples+1)), "< 1e-4" below
    that, three significant digits otherwise, "undefined" for None."""
    if p is None or not math.isfinite(p):
        return "undefined"
    return f"< {P_FLOOR:g}" if p < P_FLOOR else f"{p:.3g}"


def fmt_number(value: float, fmt: str = ".3f") -> str:
    """``value`` in format ``fmt``, a value that rounds to zero read as zero: ``0.000`` (``+0.000`` with a ``+``
    format), never ``-0.000``."""
    text = format(value, fmt)
    try:
        zero = float(text) == 0.0
    except ValueError:  # a format that float() does not read back (e.g. with a thousands separator)
        return text
    return format(0.0, fmt) if zero else text


def signed(value: float) -> str:
    """``+0.123``, ``-0.123`` or ``+0.000``: a difference or an interaction as reports print it."""
    return fmt_number(value, "+.3f")


def signed_ci(ci: Sequence[float]) -> str:
    """``[-0.012, +0.034]``: a signed value's 95% CI."""
    return f"[{signed(ci[0])}, {signed(ci[1])}]"


def shared_ranks(values: Sequence[float], tol: float = 1e-12) -> list[int]:
    """Competition ranks, best (largest) first: tied values share the best rank of their group
    (1, 2, 2, 4), so pool order never decides a tie."""
    return [1 + sum(other > v + tol for other in values) for v in values]


# ----------------------------------------------------------------------------- per-item effects


def rescue_drag(model_scores: ArrayLike, system_scores: ArrayLike, threshold: float = 1.0) -> RescueDrag:
    """Item-level rescue and drag of a system relative to one of its members alone.

    An item is right when its score >= ``threshold``. rescue = fraction of items where the system is
    right and the model alone was wrong; drag = fraction where the model alone was right and the
    system is wrong. Both are over all n_items, paired by position.
    """
    model, system = _numbers(model_scores, "model_scores"), _numbers(system_scores, "system_scores")
    if model.size != system.size:
        raise ConfigError(f"model_scores and system_scores must have the same length (paired items), "
                          f"got {model.size} and {system.size}")
    if model.size == 0:
        raise ConfigError("rescue_drag needs at least 1 item, got empty score lists")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or not math.isfinite(threshold):
        raise ConfigError(f"threshold must be a finite number, got {threshold!r}")
    model_right, system_right = model >= threshold, system >= threshold
    n = model.size
    return RescueDrag(rescue=float(np.count_nonzero(system_right & ~model_right) / n),
                      drag=float(np.count_nonzero(model_right & ~system_right) / n), n_items=n)


def bootstrap_mean(per_item: ArrayLike, n_boot: int = N_BOOT, seed: int = 0,
                   confidence: float = 0.95) -> BootstrapMean:
    """Paired item bootstrap of each player's mean contribution.

    ``per_item`` is players x items. Each of ``n_boot`` resamples draws n_items item indices with
    replacement (``numpy.random.default_rng(seed)``), the same indices for every player. stderr is
    the standard deviation (ddof=1) of the bootstrap means; the CI is their (1 - confidence) / 2 and
    (1 + confidence) / 2 percentiles (numpy's linear interpolation). Values are shifted by each
    player's first item before averaging, so constant rows (and a single item) give stderr exactly 0
    and a CI equal to the mean.
    """
    data = _numbers(per_item, "per_item", 2, "a 2-D array of numbers (players x items)")
    if data.size == 0:
        raise ConfigError(f"per_item needs at least 1 player and 1 item, got shape {data.shape}")
    n_boot = _int_at_least(n_boot, "n_boot", 2)
    seed = _int_at_least(seed, "seed", 0)
    confidence = _open_unit(confidence, "confidence")

    n_players, n_items = data.shape
    anchor = data[:, :1]
    shifted = data - anchor
    mean = anchor[:, 0] + shifted.mean(axis=1)
    rng = np.random.default_rng(seed)
    boot = np.empty((n_players, n_boot))  # kept shifted by the anchor until the end
    block = max(1, _BLOCK // n_items)
    for start in range(0, n_boot, block):
        k = min(block, n_boot - start)
        idx = rng.integers(0, n_items, size=(k, n_items))
        counts = np.bincount((idx + n_items * np.arange(k)[:, None]).ravel(),
                             minlength=k * n_items).reshape(k, n_items)
        boot[:, start:start + k] = (shifted @ counts.T) / n_items  # bootstrap means minus anchor
    stderr = boot.std(axis=1, ddof=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(boot, [tail, 100.0 - tail], axis=1)
    ci_low, ci_high = anchor[:, 0] + low, anchor[:, 0] + high
    return BootstrapMean(mean=mean, stderr=stderr, ci_low=ci_low, ci_high=ci_high)
