"""Within- and between-task variance (one-way random effects), ICC, design effect, repeats needed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .distributions import norm_ppf


@dataclass
class VarianceDecomposition:
    sigma2_within: float  # mean over tasks (n >= 2) of the per-task sample variance (ddof=1)
    sigma2_between: float  # max(0, Var(task means) - mean(s_i^2 / n_i))
    var_task_means: float  # sample variance (ddof=1) of the per-task means
    icc: float
    mean_rollouts_per_task: float
    design_effect: float  # 1 + (mean n - 1) * ICC
    n_rollouts: int
    n_effective: float  # n_rollouts / design_effect
    n_tasks: int  # tasks with at least one scored rollout
    n_tasks_within: int  # tasks with n >= 2 (the ones that inform within-task variance)
    se_conditional: float  # sqrt(mean(s_i^2/n_i) / n_tasks_within): rerun noise on these same tasks


def decompose(values) -> VarianceDecomposition:
    import numpy as np

    v = np.asarray(values, dtype=float)
    n = (~np.isnan(v)).sum(axis=1)
    scored = v[n >= 1]
    n1 = n[n >= 1]
    means = np.nansum(scored, axis=1) / n1 if n1.size else np.zeros(0)
    multi = n1 >= 2
    s2 = np.nansum((scored[multi] - means[multi, None]) ** 2, axis=1) / (n1[multi] - 1)
    sigma2_w = float(s2.mean()) if s2.size else math.nan
    noise = float((s2 / n1[multi]).mean()) if s2.size else math.nan
    var_means = float(means.var(ddof=1)) if means.size >= 2 else math.nan
    sigma2_b = max(0.0, var_means - noise) if not (math.isnan(var_means) or math.isnan(noise)) else math.nan
    total = sigma2_b + sigma2_w
    icc = sigma2_b / total if total > 0 else math.nan
    k_bar = float(n1.mean()) if n1.size else math.nan
    design = 1 + (k_bar - 1) * icc if not math.isnan(icc) else math.nan
    n_roll = int(n1.sum())
    return VarianceDecomposition(
        sigma2_within=sigma2_w,
        sigma2_between=sigma2_b,
        var_task_means=var_means,
        icc=icc,
        mean_rollouts_per_task=k_bar,
        design_effect=design,
        n_rollouts=n_roll,
        n_effective=n_roll / design if design and not math.isnan(design) else math.nan,
        n_tasks=int(n1.size),
        n_tasks_within=int(s2.size),
        se_conditional=math.sqrt(noise / s2.size) if s2.size else math.nan,
    )


MAX_REPEATS = 1e15  # exact as a float and well inside a 64-bit JSON integer


@dataclass
class RepeatsNeeded:
    target_width: float
    level: float
    typical: int | None  # from the pooled within-task variance
    worst_case_binary: int | None  # p = 0.5


def repeats_for_width(sigma2_within: float, width: float, level: float = 0.95) -> RepeatsNeeded:
    """Rollouts per task so a per-task normal interval of the mean is at most `width` wide.

    `typical` uses the pooled within-task variance; `worst_case_binary` uses p = 0.5 (variance 0.25).
    """
    z = norm_ppf(0.5 + level / 2)

    def need(var: float) -> int | None:
        if math.isnan(var) or var <= 0 or width <= 0:
            return None  # no within-task variance observed: no basis for a number
        half_widths = 2 * z * math.sqrt(var) / width  # inf for a tiny width: no overflow in the square
        if not half_widths < math.sqrt(MAX_REPEATS):  # beyond any run (and beyond a JSON integer): no number
            return None
        return max(1, math.ceil(half_widths**2))

    return RepeatsNeeded(width, level, need(sigma2_within), need(0.25))
