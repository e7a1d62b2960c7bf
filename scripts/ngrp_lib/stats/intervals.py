"""Intervals for a benchmark-level rate: the mean over tasks of per-task values in [0, 1].

The headline is Korn and Graubard's interval: Clopper-Pearson on the effective sample size
n_eff = p(1 - p) / se^2 (se: the task-clustered SE), with n_eff shrunk by (z / t_{T-1})^2 so that few
tasks widen it as the t interval would, and capped at the rollouts behind the estimate. It never leaves
[0, 1], and it was chosen by simulation among the alternatives here (references/statistics.md has the
figures; tests/interval_coverage.py reproduces them).

A value of exactly 0 or 1 has no SE to work with (every task agrees), so it gets a one-sided bound on
the tasks behind it: 0 of T gives [0, 1 - (1 - level)^(1/T)]. It holds for any per-task values in [0, 1]
that are independent across tasks: P(all T are 0) <= prod(1 - p_i) <= (1 - mean p)^T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .distributions import beta_ppf, norm_ppf, t_ppf

KORN_GRAUBARD = "korn_graubard"
WILSON = "wilson_effective_n"
LOGIT_T = "logit_t"
UPPER_BOUND = "one_sided_upper"  # the value is 0
LOWER_BOUND = "one_sided_lower"  # the value is 1
T = "t"


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


def effective_n(p: float, se: float, n_tasks: int, level: float, cap: float) -> float:
    """Korn-Graubard effective sample size: p(1-p)/se^2, capped, times (z/t_{T-1})^2."""
    n_eff = cap if se <= 0 else min(cap, p * (1.0 - p) / (se * se))
    z = norm_ppf(0.5 + level / 2)
    t = t_ppf(0.5 + level / 2, n_tasks - 1)
    return n_eff * (z / t) ** 2


def korn_graubard(p: float, se: float, n_tasks: int, level: float, cap: float) -> Bounds:
    """Clopper-Pearson on (p n*, n*) with n* the df-adjusted effective sample size."""
    n = effective_n(p, se, n_tasks, level, cap)
    x = p * n
    alpha = 1.0 - level
    low = beta_ppf(alpha / 2, x, n - x + 1.0) if x > 0 else 0.0
    high = beta_ppf(1.0 - alpha / 2, x + 1.0, n - x) if x < n else 1.0
    return Bounds(low, high, KORN_GRAUBARD)


def wilson(p: float, se: float, n_tasks: int, level: float, cap: float) -> Bounds:
    """Wilson's score interval on the df-adjusted effective sample size (cluster-adjusted Wilson)."""
    n = effective_n(p, se, n_tasks, level, cap)
    z = norm_ppf(0.5 + level / 2)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return Bounds(max(0.0, centre - half), min(1.0, centre + half), WILSON)


def logit_t(p: float, se: float, n_tasks: int, level: float, cap: float) -> Bounds:
    """t interval on the logit scale (delta-method SE se / (p(1-p))), mapped back."""
    del cap
    t = t_ppf(0.5 + level / 2, n_tasks - 1)
    centre, half = math.log(p / (1.0 - p)), t * se / (p * (1.0 - p))
    return Bounds(_expit(centre - half), _expit(centre + half), LOGIT_T)


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


CANDIDATES = {KORN_GRAUBARD: korn_graubard, WILSON: wilson, LOGIT_T: logit_t}


def headline(
    value: float,
    se: float,
    n_tasks: int,
    t_bounds: tuple[float, float],
    *,
    rate: bool,
    cap: float,
    level: float,
    method: str,
) -> Bounds:
    """The interval an estimate leads with: `rate_interval` for a rate under --interval bounded, else the
    t interval given (method None when undefined)."""
    if rate and method != T:
        bounds = rate_interval(value, se, n_tasks, level, cap)
        return bounds if bounds is not None else Bounds(math.nan, math.nan, "")
    low, high = t_bounds
    return Bounds(low, high, T if not math.isnan(low) else "")


def rate_interval(
    p: float, se: float, n_tasks: int, level: float, cap: float, method: str = KORN_GRAUBARD
) -> Bounds | None:
    """The interval of a rate estimated from `n_tasks` tasks (and at most `cap` rollouts); None when
    undefined (no task, or one task and a value strictly between 0 and 1)."""
    if n_tasks < 1 or math.isnan(p):
        return None
    if p <= 0.0 or p >= 1.0:
        return one_sided(p, n_tasks, level)
    if n_tasks < 2 or math.isnan(se):
        return None
    return CANDIDATES[method](p, se, n_tasks, level, max(cap, 1.0))
