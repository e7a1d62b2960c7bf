"""Intervals for a benchmark-level rate: the mean over tasks of per-task values in [0, 1].

The headline is Korn and Graubard's interval: Clopper-Pearson on the effective sample size
n_eff = p(1 - p) / se^2 (se: the task-clustered SE), with n_eff shrunk by (z / t_{T-1})^2 so that few
tasks widen it as the t interval would, and capped at the rollouts behind the estimate. It never leaves
[0, 1], and it was chosen by simulation among the alternatives here (references/statistics.md has the
figures; tests/interval_coverage.py reproduces them).

Fractional per-task values (pass@k, pass^k with 1 < k < K, a pass rate over K repeats) can make
p(1 - p)/se^2 exceed the number of tasks T: values in [0, 1] vary less than 0/1 ones of the same mean (a
0/1 value is the most variable: variance p(1 - p)), and n_eff = T is what all-or-nothing tasks would
earn. On skewed values (pass^k on hard tasks: most tasks 0, a few small fractions; pass@k on easy ones)
the estimate rests on the few tasks that carry it, the mean's spread is skewed, and that credit is not
earned: with K = 16 to 64 repeats the truth fell outside on one side in up to 1 run of 3. So the part of
n_eff above T is scaled by m / (m + 10 (1 - m/T)), m = the tasks that carry the estimate (`carrying`:
(sum d)^2 / sum d^2 over the tasks' distances d from the edge nearer p; the count of tasks off that edge
when the values are 0 or 1, fewer when a handful of values dominate): in full when every task carries an
equal part, about m / (m + 10) when few of many do. With few tasks carrying it the interval tends
to the Clopper-Pearson one on T all-or-nothing tasks (conservative for values in [0, 1]). The form and the
10 were chosen by simulation over K = 4 to 64, k in {2, K/4, K/2}, 8 to 200 tasks, populations skewed both
ways (references/statistics.md; tests/interval_coverage.py). Per-task values of 0 and 1 only (pass^K, the
pass rate at K = 1) never reach past T, so their interval is the plain Korn-Graubard one.

A value of exactly 0 or 1 has no SE to work with (every task agrees), so it gets a one-sided bound on
the tasks behind it: 0 of T gives [0, 1 - (1 - level)^(1/T)]. It holds for any per-task values in [0, 1]
that are independent across tasks: P(all T are 0) <= prod(1 - p_i) <= (1 - mean p)^T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .distributions import beta_ppf, norm_ppf, t_ppf
from .methods import KORN_GRAUBARD, LOGIT_T, LOWER_BOUND, UPPER_BOUND, WILSON, T
from .uncertainty import Interval


@dataclass
class Bounds:
    low: float
    high: float
    method: str


def one_sided(value: float, n_tasks: int, level: float) -> Bounds:
    """0 of n: [0, 1 - (1-level)^(1/n)]; n of n: [(1-level)^(1/n), 1]. Exact (Clopper-Pearson, one-sided)."""
    bound = (1.0 - level) ** (1.0 / n_tasks)
    if value <= 0.0:
        return Bounds(0.0, 1.0 - bound, UPPER_BOUND)
    return Bounds(bound, 1.0, LOWER_BOUND)


SKEW_TASKS = 10.0  # the credit above T is m / (m + SKEW_TASKS (1 - m/T)), m: the tasks carrying the estimate


def carrying(values, p: float) -> float:
    """The tasks that carry an estimate `p` of per-task values in [0, 1]: (sum d)^2 / sum d^2 with d each
    task's distance from the edge nearer p (v when p < 0.5, else 1 - v). For 0/1 values the tasks off
    that edge; m equal distances give m; one dominant value gives about 1."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    d = v if p < 0.5 else 1.0 - v
    square = float((d * d).sum())
    return 0.0 if square <= 0 else float(d.sum()) ** 2 / square


def effective_n(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: float | None = None
) -> float:
    """Korn-Graubard effective sample size: p(1-p)/se^2, capped, times (z/t_{T-1})^2; the part above
    n_tasks is scaled by m / (m + SKEW_TASKS (1 - m / n_tasks)) (m = `spread`: `carrying`, None = no
    scaling)."""
    n_eff = cap if se <= 0 else min(cap, p * (1.0 - p) / (se * se))
    q = 0.5 + level / 2
    t = t_ppf(q, n_tasks - 1)
    if spread is not None and n_eff > n_tasks:
        m = min(max(0.0, spread), float(n_tasks))
        rest = SKEW_TASKS * (1.0 - m / n_tasks)
        n_eff = n_tasks + (n_eff - n_tasks) * (m / (m + rest) if m + rest > 0 else 1.0)
    return n_eff * (norm_ppf(q) / t) ** 2


def korn_graubard(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: float | None = None
) -> Bounds:
    """Clopper-Pearson on (p n*, n*) with n* the df-adjusted effective sample size."""
    n = effective_n(p, se, n_tasks, level, cap, spread)
    x = p * n
    alpha = 1.0 - level
    low = beta_ppf(alpha / 2, x, n - x + 1.0) if x > 0 else 0.0
    high = beta_ppf(1.0 - alpha / 2, x + 1.0, n - x) if x < n else 1.0
    return Bounds(low, high, KORN_GRAUBARD)


def wilson(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: float | None = None
) -> Bounds:
    """Wilson's score interval on the df-adjusted effective sample size (cluster-adjusted Wilson)."""
    n = effective_n(p, se, n_tasks, level, cap, spread)
    z = norm_ppf(0.5 + level / 2)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return Bounds(max(0.0, centre - half), min(1.0, centre + half), WILSON)


def logit_t(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: float | None = None
) -> Bounds:
    """t interval on the logit scale (delta-method SE se / (p(1-p))), mapped back."""
    del cap, spread
    t = t_ppf(0.5 + level / 2, n_tasks - 1)
    centre, half = math.log(p / (1.0 - p)), t * se / (p * (1.0 - p))
    return Bounds(_expit(centre - half), _expit(centre + half), LOGIT_T)


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


CANDIDATES = {KORN_GRAUBARD: korn_graubard, WILSON: wilson, LOGIT_T: logit_t}


def headline(
    iv: Interval, *, rate: bool, cap: float, level: float, method: str, spread: float | None
) -> Bounds:
    """The interval an estimate leads with: `rate_interval` for a rate under --interval bounded, else the
    t interval of `iv` (method "" when undefined)."""
    if rate and method != T:
        bounds = rate_interval(iv.value, iv.se, iv.n, level, cap, spread=spread)
        return bounds if bounds is not None else Bounds(math.nan, math.nan, "")
    return Bounds(iv.ci_low, iv.ci_high, T if not math.isnan(iv.ci_low) else "")


def rate_interval(
    p: float,
    se: float,
    n_tasks: int,
    level: float,
    cap: float,
    method: str = KORN_GRAUBARD,
    spread: float | None = None,
) -> Bounds | None:
    """The interval of a rate estimated from `n_tasks` tasks (and at most `cap` rollouts, `spread` of the
    tasks carrying it: `carrying`); None when undefined (no task, or one task and a value strictly
    between 0 and 1)."""
    if n_tasks < 1 or math.isnan(p):
        return None
    if p <= 0.0 or p >= 1.0:
        return one_sided(p, n_tasks, level)
    if n_tasks < 2 or math.isnan(se):
        return None
    return CANDIDATES[method](p, se, n_tasks, level, max(cap, 1.0), spread)
