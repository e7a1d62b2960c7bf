"""Numeric kernels that reproduce pandas' NaN-skipping statistics (as Gym 0.7.0 calls them) with numpy.

`describe_groups` is the vectorised per-group `mean/max/min/median/std` of Gym's `describe_dataframe`;
`series_stats` is the 1-D `Series` arithmetic of its repeat-level metrics. Every sum is numpy's pairwise
1-D sum of a group's values in Gym's row order, as pandas sums them, so the floats are the same to the bit.
"""

from __future__ import annotations

import functools
from typing import Any

from ..stats.distributions import t_interval_from_sem

STATS = ("mean", "max", "min", "median", "std")
CONFIDENCE = 0.95


def describe_groups(
    matrix: Any, starts: Any, *, uniform: bool | None = None, std_rule: bool = True
) -> dict[str, Any]:
    """Per-group stats of each column of `matrix` (rows sorted by group; group g: rows starts[g]:starts[g+1]).

    NaN marks a missing value and is skipped. Returns (groups x columns) arrays keyed by stat (and "count",
    the values per group and column), NaN where pandas gives NaN. Columns are independent, so a matrix can
    be described a column (or a slice of groups) at a time, except for two things decided over the whole:
    `uniform` (every group the same size, no NaN anywhere; None: decide from `matrix`), which picks the
    median method (both give the same numbers, but may order -0.0 and 0.0 differently), and Gym's std rule
    (`std_rule`, see `gym_std_rule`), which looks across columns.
    """
    import numpy as np

    n_rows, n_cols = matrix.shape
    sizes = np.diff(np.append(starts, n_rows))
    group_of_row = np.repeat(np.arange(len(starts)), sizes)
    missing = np.isnan(matrix)
    filled = np.where(missing, 0.0, matrix)
    counts = np.add.reduceat(~missing, starts, axis=0) if n_rows else np.zeros((0, n_cols))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = segment_sums(filled, starts, sizes) / counts
        dev = np.where(missing, 0.0, (mean[group_of_row] - matrix) ** 2)
        var = segment_sums(dev, starts, sizes) / (counts - 1)
    var[counts < 2] = np.nan
    std = np.sqrt(var)
    if std_rule:
        gym_std_rule(std, counts, sizes)
    if uniform is None:
        uniform = _uniform(n_rows, starts, counts)
    return {
        "mean": mean,
        "max": np.fmax.reduceat(matrix, starts, axis=0),
        "min": np.fmin.reduceat(matrix, starts, axis=0),
        "median": _group_medians(matrix, starts, group_of_row, counts, uniform),
        "std": std,
        "count": counts,
    }


def segment_sums(matrix: Any, starts: Any, sizes: Any) -> Any:
    """(groups x columns) sums of each group's rows, each the very float numpy's 1-D `sum` gives for that
    group's column in row order: pandas sums a group's column that way (pairwise, in blocks of 8), and a
    running sum down the rows (`np.add.reduceat`) differs in the last bits from 9 values on.

    Groups of one size are summed together: their rows gathered into (groups, columns, size), C-contiguous,
    so that `sum(axis=2)` runs numpy's pairwise loop along each group's own values."""
    import numpy as np

    n_cols = matrix.shape[1]
    out = np.zeros((len(starts), n_cols))
    for size in np.unique(sizes).tolist():
        if size == 0:
            continue
        groups = np.flatnonzero(sizes == size)
        rows = (starts[groups][:, None] + np.arange(size)).ravel()
        block = np.ascontiguousarray(matrix[rows].reshape(len(groups), size, n_cols).transpose(0, 2, 1))
        out[groups] = block.sum(axis=2)
    return out


def gym_std_rule(std: Any, counts: Any, sizes: Any) -> None:
    """Gym's rule, in place: when every std of a group is NaN, columns without a missing value in that group
    get std 0."""
    import numpy as np

    all_nan = np.isnan(std).all(axis=1)
    complete = counts == np.asarray(sizes)[:, None]
    std[all_nan[:, None] & complete] = 0.0


def _uniform(n_rows: int, starts: Any, counts: Any) -> bool:
    size = n_rows // len(starts) if len(starts) else 0
    return size > 0 and size * len(starts) == n_rows and bool((counts == size).all())


def _group_medians(matrix: Any, starts: Any, group_of_row: Any, counts: Any, uniform: bool) -> Any:
    import numpy as np

    n_rows, n_cols = matrix.shape
    size = n_rows // len(starts) if len(starts) else 0
    if uniform and len(starts) and (starts == np.arange(0, n_rows, size)).all():
        # every group has the same size and no missing value (the usual complete run): one sort
        ordered = np.sort(matrix.reshape(len(starts), size, n_cols), axis=1)
        lo_v, hi_v = ordered[:, (size - 1) // 2, :], ordered[:, size // 2, :]
        return lo_v.copy() if size % 2 == 1 else (lo_v + hi_v) / 2.0
    out = np.full(counts.shape, np.nan)
    for col in range(n_cols):
        order = np.lexsort((matrix[:, col], group_of_row))  # by group, then value; NaN last in each group
        ordered = matrix[order, col]
        k = counts[:, col]
        has = k > 0
        lo = starts + (k - 1) // 2
        hi = starts + k // 2
        lo_v = ordered[np.where(has, lo, 0)]
        hi_v = ordered[np.where(has, hi, 0)]
        out[:, col] = np.where(has, (lo_v + hi_v) / 2.0, np.nan)
        odd = has & (k % 2 == 1)
        out[odd, col] = lo_v[odd]
    return out


def series_stats(values: Any) -> dict[str, float] | None:
    """pandas `Series.dropna()` then mean/median/std(ddof=1, 0 for n=1)/min/max/p25/p75, as Gym uses them."""
    import numpy as np

    x = values[~np.isnan(values)]
    n = len(x)
    if n == 0:
        return None
    mean = float(np.sum(x) / n)
    std = float(np.sqrt(np.sum((mean - x) ** 2) / (n - 1))) if n > 1 else 0.0
    p25, p75 = np.percentile(x, [25.0, 75.0])
    return {
        "n": n,
        "mean": mean,
        "median": float(np.median(x)),
        "std": std,
        "min": float(np.min(x)),
        "max": float(np.max(x)),
        "p25": float(p25),
        "p75": float(p75),
    }


def gym_confidence_interval(mean: float, sem: float, n: float) -> tuple[float, float] | None:
    """Gym's `_confidence_interval`: None for n <= 1, a point when sem is 0, else scipy's `t.interval`
    (`ppf(q) * sem + mean` at q = 0.025 and 0.975).

    The quantiles are scipy's own (`scipy.special.stdtrit`, what `t.ppf` calls) when scipy is installed,
    as it is wherever Gym is. scipy's are not correctly rounded (its 0.025 and 0.975 quantiles are not
    even each other's negatives), so no other code gives their bits, and releases before 1.17 give other
    last bits than Gym 0.7.0's 1.18. Without scipy, ngrp's own `t_ppf`, within about 1e-13 relative for n
    up to 10^4 (about 1e-10 at 10^7): the interval ends then match
    Gym's to that precision, not to the bit."""
    n = int(n)
    if n <= 1:
        return None
    if sem == 0:
        return mean, mean
    quantiles = gym_t_quantiles(n - 1)
    if quantiles is None:
        return t_interval_from_sem(mean, sem, n, CONFIDENCE)
    low, high = quantiles
    return low * sem + mean, high * sem + mean


@functools.lru_cache(maxsize=4096)
def gym_t_quantiles(df: int) -> tuple[float, float] | None:
    """scipy's t quantiles at (1 -+ CONFIDENCE) / 2 for `df` degrees of freedom; None without scipy."""
    try:
        from scipy.special import stdtrit
    except ImportError:
        return None
    return float(stdtrit(df, (1.0 - CONFIDENCE) / 2.0)), float(stdtrit(df, (1.0 + CONFIDENCE) / 2.0))


def sem_of(std: float, n: float) -> float:
    return std / n**0.5
