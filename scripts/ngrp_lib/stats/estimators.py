"""Per-task estimators over counts and arrays. Undefined is NaN (for example pass@k when n < k).

Notation: a task has n measured rollouts (null rewards excluded) and c successes.
"""

from __future__ import annotations

import math
from functools import lru_cache

Z_95 = 1.959963984540054  # standard normal quantile at 0.975


def successes(rewards, threshold: float | None):
    """Binary outcome matrix (NaN kept) or None when rewards are not binary and no threshold is given.

    Without a threshold, rewards must be exactly 0 or 1; with one, success means reward >= threshold.
    """
    import numpy as np

    r = np.asarray(rewards, dtype=float)
    defined = ~np.isnan(r)
    if threshold is None:
        if not np.isin(r[defined], (0.0, 1.0)).all():
            return None
        return r.copy()
    out = np.where(r >= threshold, 1.0, 0.0)
    out[~defined] = np.nan
    return out


def counts(matrix):
    """(n, c): defined entries and their sum, per task row."""
    import numpy as np

    m = np.asarray(matrix, dtype=float)
    return (~np.isnan(m)).sum(axis=1), np.nansum(m, axis=1)


def _falling_ratio(a, n, k: int):
    """prod_{i<k} (a - i) / (n - i) = C(a, k) / C(n, k), vectorised; 0 when a < k. Requires n >= k."""
    import numpy as np

    a = np.asarray(a, dtype=float)
    n = np.asarray(n, dtype=float)
    out = np.ones(np.broadcast(a, n).shape)
    # Past the largest n every factor is 0 (a <= n), and rows with n < k are NaN at the caller: stopping
    # there changes no value and keeps a huge k (--k 10**20) from looping for ever.
    steps = min(k, int(np.nanmax(n, initial=0)) + 1) if n.size else 0
    for i in range(steps):
        out = out * np.clip(a - i, 0, None) / np.where(n - i > 0, n - i, 1)
    return out


def pass_at_k_one(n: int, c: int, k: int) -> float:
    """Chen et al. (2021) unbiased pass@k = 1 - C(n-c, k) / C(n, k) for one task, as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n  # the product below telescopes to this; keep it exact
    fail_all = 1.0
    for i in range(n - c + 1, n + 1):
        fail_all *= 1.0 - k / i
    return 1.0 - fail_all


def pass_at_k(n, c, k: int):
    """`pass_at_k_one` per task over arrays of counts; NaN where n < k."""
    import numpy as np

    n, c = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    pairs = zip(n.ravel(), c.ravel(), strict=True)
    values = [pass_at_k_one(int(ni), int(ci), k) if ni >= k else math.nan for ni, ci in pairs]
    return np.array(values, dtype=float).reshape(n.shape)


def pass_hat_k(n, c, k: int):
    """Unbiased pass^k = C(c, k)/C(n, k): probability that k draws without replacement all succeed."""
    import numpy as np

    n = np.asarray(n, dtype=float)
    value = _falling_ratio(c, n, k)
    return np.where(n >= k, value, np.nan)


def p_informative(n, c, group: int):
    """Unbiased P(a GRPO group of `group` rollouts has both a success and a failure).

    1 - [C(c, G) + C(n-c, G)] / C(n, G), from the observed n >= G rollouts (hypergeometric); NaN if n < G.
    """
    import numpy as np

    n = np.asarray(n, dtype=float)
    c = np.asarray(c, dtype=float)
    return 1.0 - pass_hat_k(n, c, group) - pass_hat_k(n, n - c, group)


@lru_cache(maxsize=256)
def _order_weights(n: int, k: int, best: bool) -> tuple[float, ...]:
    # Weight of the m-th smallest value (1-based) in E[max of a random k-subset]: C(m-1, k-1)/C(n, k).
    total = math.comb(n, k)
    if best:
        return tuple(math.comb(m - 1, k - 1) / total for m in range(1, n + 1))
    return tuple(math.comb(n - m, k - 1) / total for m in range(1, n + 1))


def expected_extreme_of_k(rewards, k: int, best: bool = True):
    """E[max] (or E[min]) of k rewards drawn without replacement from each task's n defined rewards.

    Exact order-statistic form, independent of rollout order; NaN where n < k.
    """
    import numpy as np

    r = np.asarray(rewards, dtype=float)
    n = (~np.isnan(r)).sum(axis=1)
    ordered = np.sort(r, axis=1)  # NaN sorts last, so the first n entries are the defined values
    out = np.full(r.shape[0], np.nan)
    for size in np.unique(n):
        if size < k or size == 0:
            continue
        rows = n == size
        weights = np.asarray(_order_weights(int(size), k, best))
        out[rows] = ordered[rows, :size] @ weights
    return out


def wilson_one(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion, clipped to [0, 1]; None when n is 0."""
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_interval(c, n, z: float = Z_95):
    """`wilson_one` per task over arrays of counts: (lows, highs), NaN where n == 0."""
    import numpy as np

    c, n = np.broadcast_arrays(np.asarray(c), np.asarray(n))
    bounds = [wilson_one(int(ci), int(ni), z) for ci, ni in zip(c.ravel(), n.ravel(), strict=True)]
    low = np.array([b[0] if b else math.nan for b in bounds], dtype=float).reshape(n.shape)
    high = np.array([b[1] if b else math.nan for b in bounds], dtype=float).reshape(n.shape)
    return low, high


def difficulty_band(n, c):
    """'all_fail' (c = 0), 'all_pass' (c = n), 'mixed', or 'none' (no defined rollout), per task."""
    import numpy as np

    n = np.asarray(n)
    c = np.asarray(c)
    return np.where(n == 0, "none", np.where(c == 0, "all_fail", np.where(c == n, "all_pass", "mixed")))


def row_means(matrix):
    """Mean of the defined entries per row; NaN for a row with none (without numpy's empty-slice warning)."""
    import numpy as np

    n, total = counts(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.where(n > 0, n, 1), np.nan)


def beta_binomial_shrinkage(n, c, between_variance: float):
    """Empirical-Bayes pass rates for ranking with small n: (c + a) / (n + a + b).

    Beta(a, b) is fitted across tasks by the method of moments: mean m of the per-task rates and the
    between-task variance v_b give a + b = m(1 - m)/v_b - 1. With no between-task variance every task
    shrinks to m; when the moments admit no prior (a + b <= 0) the raw rates are returned.
    Returns (a, b, shrunk rates); a and b are NaN when undefined.
    """
    import numpy as np

    n = np.asarray(n, dtype=float)
    c = np.asarray(c, dtype=float)
    scored = n > 0
    if not scored.any() or math.isnan(between_variance):
        return math.nan, math.nan, np.where(scored, c / np.where(scored, n, 1), np.nan)
    m = float((c[scored] / n[scored]).mean())
    if between_variance <= 0:
        return math.inf, math.inf, np.where(scored, m, np.nan)
    total = m * (1 - m) / between_variance - 1
    if total <= 0:
        return math.nan, math.nan, np.where(scored, c / np.where(scored, n, 1), np.nan)
    a, b = m * total, (1 - m) * total
    return a, b, np.where(scored, (c + a) / (n + a + b), np.nan)
