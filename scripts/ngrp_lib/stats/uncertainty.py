"""Task-clustered uncertainty: t intervals over per-task values and a seeded cluster bootstrap.

Each task contributes one number (its mean reward, its pass@k...), so the task is the resampling unit:
resampling rollouts iid would ignore the clustering and give intervals that are too narrow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError
from .distributions import t_interval_from_sem
from .methods import T

MAX_BOOTSTRAP = 100_000  # replicates x columns of float64: 100,000 x 50 columns is 40 MB


def check_resampling(n_bootstrap: int, seed: int) -> None:
    """The --bootstrap and --seed rule that stats, report and compare share (for library callers; the CLI
    types refuse the same values first)."""
    if not 0 <= n_bootstrap <= MAX_BOOTSTRAP:
        raise UsageError(f"--bootstrap must be from 0 (off) to {MAX_BOOTSTRAP}, not {n_bootstrap}")
    if seed < 0:
        raise UsageError("--seed must be >= 0")


@dataclass
class Interval:
    """A task-weighted estimate with its t interval. `n` is the number of tasks with a defined value."""

    value: float
    se: float
    ci_low: float
    ci_high: float
    n: int
    ci_method: str | None = T  # None when the interval is undefined


def t_interval(values, level: float = 0.95) -> Interval:
    """Mean of the defined values, SE = sd/sqrt(n) (ddof=1), and a Student-t interval with n-1 df."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0, None)
    mean = float(v.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, n, None)
    se = float(v.std(ddof=1) / math.sqrt(n))
    bounds = t_interval_from_sem(mean, se, n, level)
    assert bounds is not None  # n >= 2
    return Interval(mean, se, bounds[0], bounds[1], n)


def _resample_counts(rng, n_tasks: int, size: int):
    import numpy as np

    draws = rng.integers(0, n_tasks, size=(size, n_tasks))
    offsets = draws + (np.arange(size)[:, None] * n_tasks)
    return np.bincount(offsets.ravel(), minlength=size * n_tasks).reshape(size, n_tasks).astype(float)


def bootstrap_means(values, n_boot: int, seed: int):
    """Replicate means of each column of `values` (tasks x columns, NaN = undefined) under task resampling.

    Each column resamples the tasks where it is defined (its own n, as its t and Korn-Graubard intervals
    have): pass@7 defined on 4 of 30 tasks resamples those 4, not all 30 (a domain bootstrap, whose
    replicates would hold 0 to 30 eligible tasks and swing to the ends). Columns defined on every task
    share one set of resamples, drawn from `seed`; a column with gaps draws its own from (seed, its
    position).
    Returns a (n_boot, columns) array; every replicate of a column with fewer than two defined tasks is NaN
    (like the t interval, which needs n >= 2).
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    out = np.full((n_boot, v.shape[1]), np.nan)
    if v.shape[0] == 0 or n_boot <= 0:
        return out
    defined = ~np.isnan(v)
    out[:] = _resampled_means(v, n_boot, np.random.default_rng(seed))
    for j in np.flatnonzero(~defined.all(axis=0)):
        rows = defined[:, j]
        rng = np.random.default_rng([seed, int(j)])
        out[:, j] = _resampled_means(v[rows, j][:, None], n_boot, rng)[:, 0]
    out[:, defined.sum(axis=0) < 2] = np.nan  # one task resampled is always itself: no interval, not a point
    return out


def _resampled_means(v, n_boot: int, rng):
    """Means of the defined entries of every column over `n_boot` resamples of the rows."""
    import numpy as np

    n_tasks = v.shape[0]
    out = np.full((n_boot, v.shape[1]), np.nan)
    if n_tasks == 0:
        return out
    defined = (~np.isnan(v)).astype(float)
    filled = np.nan_to_num(v)
    chunk = max(1, min(n_boot, 4_000_000 // n_tasks))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        weights = _resample_counts(rng, n_tasks, size)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + size] = (weights @ filled) / (weights @ defined)
    return out


def percentile_interval(replicates, level: float = 0.95):
    """Percentile interval per column, ignoring NaN replicates. Returns (low, high) arrays."""
    import numpy as np

    reps = np.asarray(replicates, dtype=float)
    if reps.ndim == 1:
        reps = reps[:, None]
    alpha = (1 - level) / 2
    low = np.full(reps.shape[1], np.nan)
    high = np.full(reps.shape[1], np.nan)
    for j in range(reps.shape[1]):
        col = reps[:, j][~np.isnan(reps[:, j])]
        if col.size:
            low[j], high[j] = np.quantile(col, [alpha, 1 - alpha])
    return low, high


def bootstrap_interval(values, n_boot: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Cluster-bootstrap percentile interval for the mean of one vector of per-task values."""
    low, high = percentile_interval(bootstrap_means(values, n_boot, seed), level)
    return float(low[0]), float(high[0])
