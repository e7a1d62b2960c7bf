"""Intervals for a benchmark-level rate: the mean over tasks of per-task values in [0, 1].

The headline is Korn and Graubard's interval: Clopper-Pearson on the effective sample size
n_eff = p(1 - p) / se^2 (se: the task-clustered SE), with n_eff shrunk by (z / t_{T-1})^2 so that few
tasks widen it as the t interval would, and capped at the rollouts behind the estimate. It never leaves
[0, 1], and it was chosen by simulation among the alternatives here (references/statistics.md has the
figures; tests/interval_coverage.py reproduces them).

Skewed per-task values (pass^k with 1 < k < K on hard tasks: most tasks 0, a few with small fractions)
make p(1 - p)/se^2 exceed the number of tasks while the SE rests on the few tasks off the edge. The part
of n_eff above T (what fractional values earn over all-or-nothing ones) is then discounted by
(t_{T-1} / t_{m-1})^2, m = the tasks away from the edge nearer p (`off_edge`): the variance has about
m - 1 degrees of freedom, not T - 1. Per-task values of 0 and 1 only (pass^K, the pass rate at K = 1)
never reach past T, so their interval is the plain Korn-Graubard one.

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


def off_edge(values, p: float) -> int:
    """The tasks whose value is not at the edge nearer `p` (not 0 when p < 0.5, not 1 otherwise)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return int((v > 0.0).sum() if p < 0.5 else (v < 1.0).sum())


def effective_n(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: int | None = None
) -> float:
    """Korn-Graubard effective sample size: p(1-p)/se^2, capped, times (z/t_{T-1})^2; the part above
    n_tasks is discounted by (t_{T-1}/t_{spread-1})^2 (`spread`: tasks off the edge, None = all)."""
    n_eff = cap if se <= 0 else min(cap, p * (1.0 - p) / (se * se))
    q = 0.5 + level / 2
    t = t_ppf(q, n_tasks - 1)
    if spread is not None and n_eff > n_tasks and spread < n_tasks:
        n_eff = n_tasks + (n_eff - n_tasks) * (t / t_ppf(q, max(1, spread - 1))) ** 2
    return n_eff * (norm_ppf(q) / t) ** 2


def korn_graubard(
    p: float, se: float, n_tasks: int, level: float, cap: float, spread: int | None = None
) -> Bounds:
    """Clopper-Pearson on (p n*, n*) with n* the df-adjusted effective sample size."""
    n = effective_n(p, se, n_tasks, level, cap, spread)
    x = p * n
    alpha = 1.0 - level
    low = beta_ppf(alpha / 2, x, n - x + 1.0) if x > 0 else 0.0
    high = beta_ppf(1.0 - alpha / 2, x + 1.0, n - x) if x < n else 1.0
    return Bounds(low, high, KORN_GRAUBARD)


def wilson(p: float, se: float, n_tasks: int, level: float, cap: float, spread: int | None = None) -> Bounds:
    """Wilson's score interval on the df-adjusted effective sample size (cluster-adjusted Wilson)."""
    n = effective_n(p, se, n_tasks, level, cap, spread)
    z = norm_ppf(0.5 + level / 2)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return Bounds(max(0.0, centre - half), min(1.0, centre + half), WILSON)


def logit_t(p: float, se: float, n_tasks: int, level: float, cap: float, spread: int | None = None) -> Bounds:
    """t interval on the logit scale (delta-method SE se / (p(1-p))), mapped back."""
    del cap, spread
    t = t_ppf(0.5 + level / 2, n_tasks - 1)
    centre, half = math.log(p / (1.0 - p)), t * se / (p * (1.0 - p))
    return Bounds(_expit(centre - half), _expit(centre + half), LOGIT_T)


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


CANDIDATES = {KORN_GRAUBARD: korn_graubard, WILSON: wilson, LOGIT_T: logit_t}


def headline(
    iv: Interval, *, rate: bool, cap: float, level: float, method: str, spread: int | None
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
    spread: int | None = None,
) -> Bounds | None:
    """The interval of a rate estimated from `n_tasks` tasks (and at most `cap` rollouts, `spread` of the
    tasks off the edge: `off_edge`); None when undefined (no task, or one task and a value strictly
    between 0 and 1)."""
    if n_tasks < 1 or math.isnan(p):
        return None
    if p <= 0.0 or p >= 1.0:
        return one_sided(p, n_tasks, level)
    if n_tasks < 2 or math.isnan(se):
        return None
    return CANDIDATES[method](p, se, n_tasks, level, max(cap, 1.0), spread)
