"""Intervals for a paired difference X - Y of two means of values in [0, 1] (so the difference is in
[-1, 1]): a reward component against another on the same rollouts (`stats`), or run B against run A on
the same tasks (`compare`'s pass@k, pass^k, GRPO-informative share and components).

A t interval on the paired differences has zero width when every difference is the same (5 rollouts
where correctness is 1 and format 0 gave +1.000 [+1.000, +1.000]), and it ignores the bounds near them,
where it is too narrow, as it is for a single rate near 0 or 1 (pass^8 on hard tasks: most per-task
values 0 in both runs). So:

- Rates (0/1 values, and per-task rates made of them: pass@k, pass^k, P(informative)): MOVER, the
  "method of variance estimates recovery" (Zou and Donner 2008; Newcombe's square-and-add interval for
  paired proportions, 1998, is the same construction from Wilson intervals). The difference's limits are
  recovered from each mean's own bounded interval (l, u) and the correlation r of the two mean estimates,
      low  = (x - y) - sqrt((x - l_x)^2 + (u_y - y)^2 - 2 r (x - l_x)(u_y - y)),
      high = (x - y) + sqrt((u_x - x)^2 + (y - l_y)^2 - 2 r (u_x - x)(y - l_y)).
  Each mean's interval is the one `stats` gives that mean (`intervals.rate_interval`: Korn-Graubard on the
  task-clustered SE, a one-sided bound at 0 or 1), so the difference is never at odds with the two
  intervals printed beside it, and it inherits their asymmetry near the edges; with symmetric intervals
  it is the t interval of the difference (its variance is recovered). r is the correlation of the two
  means' task-clustered sampling errors (0 when either has none: Newcombe's rule); the limits stay
  within [-1, 1].
- Other values in [0, 1] (a fractional component): the t interval of the differences, as each such mean
  gets t (MOVER from two t intervals is exactly that interval).
- Every paired difference the same value c, values in [0, 1] (no spread: t has zero width, and MOVER's r
  is 1 or undefined): an exact bound on the T tasks. If each task's differences all equal c with
  probability q, the mean difference lies within c q +- (1 - q) (a difference other than c is somewhere
  in [-1, 1]), and T tasks all showing c has chance at most q^T; so q >= (1 - level)^(1/T) and the
  interval is [c q - (1 - q), c q + (1 - q)] cut to [-1, 1]. At c = 1 it is the one-sided bound of a rate
  on the shifted difference (d + 1) / 2: [2 * 0.05^(1/T) - 1, 1], +0.099 at T = 5. It holds for any
  values in [0, 1], independent across tasks.

Coverage in simulation with known truth (0/1 components independent, correlated, near the edges, with
rare discordance, opposite; fractional components; paired task means of two runs: pass rates, pass^8,
P(informative at 8)), 5 to 200 tasks: tests/difference_coverage.py; the table is in
references/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .distributions import t_ppf
from .intervals import Bounds, carrying, rate_interval
from .methods import CONSTANT_DIFFERENCE, MOVER, T


@dataclass(frozen=True)
class Difference:
    value: float
    low: float
    high: float
    method: str


def mover(x: float, bx: Bounds, y: float, by: Bounds, r: float) -> tuple[float, float]:
    """Zou and Donner's MOVER limits of x - y from each estimate's interval and their correlation r."""
    r = 0.0 if not math.isfinite(r) else max(-1.0, min(1.0, r))
    below_x, above_x = x - bx.low, bx.high - x
    below_y, above_y = y - by.low, by.high - y
    low = (x - y) - math.sqrt(max(0.0, below_x**2 + above_y**2 - 2 * r * below_x * above_y))
    high = (x - y) + math.sqrt(max(0.0, above_x**2 + below_y**2 - 2 * r * above_x * below_y))
    return max(-1.0, low), min(1.0, high)


def constant_difference(c: float, n_tasks: int, level: float) -> tuple[float, float]:
    """Every one of `n_tasks` tasks showed the difference c: [c q - (1 - q), c q + (1 - q)] within [-1, 1],
    q = (1 - level)^(1/T) (the module docstring)."""
    q = (1.0 - level) ** (1.0 / n_tasks)
    return max(-1.0, c * q - (1.0 - q)), min(1.0, c * q + (1.0 - q))


def _cluster_sums(tasks: Sequence[int], values: Sequence[float], mean: float) -> dict[int, float]:
    """Per task, sum(value - mean) over its rows: the task's contribution to the CR1 sandwich."""
    out: dict[int, float] = {}
    for task, value in zip(tasks, values, strict=True):
        out[task] = out.get(task, 0.0) + (value - mean)
    return out


def _in_unit(values: Any) -> bool:
    return all(0.0 <= v <= 1.0 for v in values)


def _is_rate(values: Any) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def clustered_difference(
    tasks: Sequence[int], xs: Sequence[float], ys: Sequence[float], level: float = 0.95
) -> Difference | None:
    """X - Y over rows that each hold both, rollout-weighted, clustered by task (`stats`' component
    differences). Both 0/1 (rates): MOVER from each mean's interval as `stats` gives it (Korn-Graubard on
    the CR1 SE, capped at the rows, one-sided at 0 or 1) and their correlation from the same CR1 sandwich.
    Otherwise the CR1 t interval of the differences (MOVER from two t intervals is that interval). Every
    difference the same and the values in [0, 1]: the constant-difference bound. None with fewer than 2
    tasks (no clustered SE) unless that bound applies."""
    n = len(xs)
    if n == 0:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    diffs = [x - y for x, y in zip(xs, ys, strict=True)]
    groups = len(set(tasks))
    unit = _in_unit(xs) and _in_unit(ys)
    if unit and max(diffs) - min(diffs) <= 1e-12:
        low, high = constant_difference(diffs[0], groups, level)
        return Difference(mx - my, low, high, CONSTANT_DIFFERENCE)
    if groups < 2:
        return None
    sx, sy = _cluster_sums(tasks, xs, mx), _cluster_sums(tasks, ys, my)
    factor = groups / (groups - 1) / n**2
    vx = factor * sum(v * v for v in sx.values())
    vy = factor * sum(v * v for v in sy.values())
    cov = factor * sum(sx[t] * sy[t] for t in sx)
    if not (_is_rate(xs) and _is_rate(ys)):
        half = t_ppf(0.5 + level / 2, groups - 1) * math.sqrt(max(0.0, vx + vy - 2 * cov))
        return Difference(mx - my, mx - my - half, mx - my + half, T)
    bx = _bounds(tasks, xs, mx, vx, groups, n, level)
    by = _bounds(tasks, ys, my, vy, groups, n, level)
    if bx is None or by is None:
        return None
    r = cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else 0.0
    low, high = mover(mx, bx, my, by, r)
    return Difference(mx - my, low, high, MOVER)


def _bounds(
    tasks: Sequence[int], values: Sequence[float], mean: float, var: float, groups: int, n: int, level: float
) -> Bounds | None:
    """A 0/1 mean's interval as `stats` gives a component's: `rate_interval` on the CR1 SE, capped at the
    rows, the skew credit from the tasks carrying it."""
    per_task: dict[int, list[float]] = {}
    for task, value in zip(tasks, values, strict=True):
        per_task.setdefault(task, []).append(value)
    means = [sum(v) / len(v) for v in per_task.values()]
    return rate_interval(mean, math.sqrt(var), groups, level, float(n), spread=carrying(means, mean))


def paired_task_difference(
    a: Any, b: Any, rollouts_a: Any, rollouts_b: Any, level: float = 0.95
) -> Difference | None:
    """B - A of task-weighted means of per-task rates in [0, 1] (a pass rate, pass@k, pass^k, P(informative),
    a 0/1 component's task mean: one value per task in each run, paired by task; NaN where undefined, left
    out with its pair): each run's mean with `stats`' interval of a rate (Korn-Graubard on the task SE,
    capped at the run's rollouts behind it, one-sided at 0 or 1), the correlation of the per-task values,
    then MOVER; the constant-difference bound when every task's difference is the same. None with fewer
    than 2 tasks unless that bound applies."""
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    n = int(a.size)
    if n == 0:
        return None
    d = b - a
    if float(d.max() - d.min()) <= 1e-12:
        low, high = constant_difference(float(d[0]), n, level)
        return Difference(float(d.mean()), low, high, CONSTANT_DIFFERENCE)
    if n < 2:
        return None
    ma, mb = float(a.mean()), float(b.mean())
    sa, sb = float(a.std(ddof=1)), float(b.std(ddof=1))
    cap_a = float(np.asarray(rollouts_a, dtype=float)[both].sum())
    cap_b = float(np.asarray(rollouts_b, dtype=float)[both].sum())
    ba = rate_interval(ma, sa / math.sqrt(n), n, level, cap_a, spread=carrying(a, ma))
    bb = rate_interval(mb, sb / math.sqrt(n), n, level, cap_b, spread=carrying(b, mb))
    if ba is None or bb is None:
        return None
    r = float(np.corrcoef(a, b)[0, 1]) if sa > 0 and sb > 0 else 0.0
    low, high = mover(mb, bb, ma, ba, r)
    return Difference(mb - ma, low, high, MOVER)
