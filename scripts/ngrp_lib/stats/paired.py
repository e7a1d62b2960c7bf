"""Paired-comparison pieces beside the mean difference: pass@k and pass^k paired by task, the A/B
per-task correlation, the minimum detectable effect (z and t), the tasks needed for a given effect, and
the check for a degenerate comparison (identical outcomes)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .differences import paired_task_difference
from .distributions import norm_ppf, t_ppf, t_two_sided_p
from .estimators import counts, p_informative, pass_at_k, pass_hat_k
from .methods import T
from .uncertainty import t_interval

POWER = 0.8
MAX_TASKS_NEEDED = 10_000_000
IDENTICAL = "identical outcomes: the same rollouts or seed?"


@dataclass
class PairedAtK:
    """B - A of a per-task estimator at k over the tasks with at least k scored rollouts in both runs."""

    k: int
    n_tasks: int
    mean_a: float
    mean_b: float
    mean_diff: float
    se_diff: float
    ci_low: float
    ci_high: float
    p_value_t: float
    # the paired interval of B - A: MOVER from each run's bounded interval of the per-task rates, the
    # constant-difference bound when every task's difference is the same (stats.differences); t's own SE
    # and p-value beside it. None when undefined.
    ci_method: str | None = T
    # the sides ("A", "B") whose per-task values are an adaptive run's decisions (P(informative at N))
    from_decisions: list[str] = field(default_factory=list)


@dataclass
class Power:
    """What the comparison can detect: the MDE at 80% power (z and t), from the per-task differences or,
    when they carry no spread (a degenerate comparison), from the within-task variance of both runs."""

    mde_80: float  # (z_{1-alpha/2} + z_{0.8}) * SE
    mde_80_t: float  # (t_{1-alpha/2, T-1} + t_{0.8, T-1}) * SE
    se: float
    basis: str  # "paired differences", "within-task variance" or "none"
    effect: float | None  # the effect --effect asks about
    tasks_needed: int | None  # smallest T whose t-based MDE is at most `effect`, at this per-task spread


@dataclass
class Correlation:
    """Pearson correlation of A's and B's per-task means: why pairing helps (Var(d) = Va + Vb - 2 Cov)."""

    value: float
    n_tasks: int


def paired_at_k(sa: Any, sb: Any, ks: list[int], hat: bool) -> list[PairedAtK]:
    """Per task pass@k (or pass^k) in A and in B, differenced, with a paired t interval, for each k."""
    return _paired_estimator(sa, sb, ks, pass_hat_k if hat else pass_at_k)


def paired_informative(
    sa: Any, sb: Any, sizes: list[int], decided: dict[str, tuple[int, Any]] | None = None
) -> list[PairedAtK]:
    """B - A of the share of GRPO-informative groups: per task the unbiased P(a group of G of its rollouts
    holds both a pass and a fail) in A and in B (`estimators.p_informative`, needs n >= G in both),
    differenced, with a paired t interval over tasks (`k` holds G). The tasks are the sample: the interval
    is for the mean over tasks drawn like these, each task's own sampling noise included. `decided`: per
    side ("A", "B") an adaptive run's (N, per-task P(informative at N) from its decisions), which stand for
    that side's values at G = N (`adaptive_run.decided_informative`)."""
    return _paired_estimator(sa, sb, sizes, p_informative, decided or {})


def _paired_estimator(
    sa: Any, sb: Any, ks: list[int], estimator: Any, decided: dict[str, tuple[int, Any]] | None = None
) -> list[PairedAtK]:
    import numpy as np

    na, ca = counts(sa)
    nb, cb = counts(sb)
    out = []
    for k in ks:
        fa = estimator(na, ca, k)
        fb = estimator(nb, cb, k)
        sides = [side for side, (n, _) in (decided or {}).items() if n == k]
        fa = decided["A"][1] if "A" in sides and decided else fa
        fb = decided["B"][1] if "B" in sides and decided else fb
        both = ~np.isnan(fa) & ~np.isnan(fb)
        if not both.any():
            continue
        iv = t_interval(fb[both] - fa[both])
        t = iv.value / iv.se if iv.se and iv.se > 0 else math.nan
        a_mean, b_mean = float(fa[both].mean()), float(fb[both].mean())
        # per-task rates in [0, 1]: MOVER from each run's bounded interval (t collapses on them)
        bounded = paired_task_difference(fa[both], fb[both], na[both], nb[both])
        low, high, method = (iv.ci_low, iv.ci_high, iv.ci_method) if bounded is None else (
            bounded.low, bounded.high, bounded.method)  # fmt: skip
        out.append(
            PairedAtK(
                k, iv.n, a_mean, b_mean, iv.value, iv.se, low, high, _p(t, iv.n), method, sorted(sides),
            )
        )  # fmt: skip
    return out


def _p(t: float, n: int) -> float:
    return t_two_sided_p(t, n - 1) if not math.isnan(t) else math.nan


def compare_ks(na: Any, nb: Any) -> list[int]:
    """k = 1, 2, 4, ... up to the largest k every paired task supports in both runs, and that k."""
    import numpy as np

    both = np.minimum(na, nb)
    top = int(both[both > 0].min()) if (both > 0).any() else 0
    ks = [k for k in (2**i for i in range(12)) if k <= top]
    return ks + [top] if top and top not in ks else ks


def correlation(a: Any, b: Any) -> Correlation:
    import numpy as np

    n = int(a.size)
    if n < 3 or a.std() == 0 or b.std() == 0:
        return Correlation(math.nan, n)
    return Correlation(float(np.corrcoef(a, b)[0, 1]), n)


def within_se(va: Any, vb: Any) -> float:
    """SE of the mean per-task difference from rerun noise alone: sqrt(sum(s2_A/n_A + s2_B/n_B)) / T over
    the tasks with at least two scored rollouts in each run (the rest contribute nothing)."""
    import numpy as np

    def noise(v: Any) -> Any:
        # The sample variance by hand: np.nanvar warns on stderr for every task with one rollout.
        n = (~np.isnan(v)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nansum(v, axis=1) / n
            var = np.nansum((v - mean[:, None]) ** 2, axis=1) / (n - 1)
            return var / n, n

    qa, n_a = noise(va)
    qb, n_b = noise(vb)
    keep = (n_a >= 2) & (n_b >= 2)
    if not keep.any():
        return math.nan
    return math.sqrt(float((qa[keep] + qb[keep]).sum())) / int(keep.sum())


def power(se: float, sd: float, n_tasks: int, alpha: float, basis: str, effect: float | None) -> Power:
    """MDE at 80% power for this SE (z and t with n_tasks - 1 df) and the tasks needed for `effect`."""
    if not se or math.isnan(se) or n_tasks < 2:
        return Power(math.nan, math.nan, se, "none", effect, None)
    z = norm_ppf(1 - alpha / 2) + norm_ppf(POWER)
    t = t_ppf(1 - alpha / 2, n_tasks - 1) + t_ppf(POWER, n_tasks - 1)
    return Power(z * se, t * se, se, basis, effect, tasks_needed(sd, alpha, effect))


def tasks_needed(sd: float, alpha: float, effect: float | None) -> int | None:
    """Smallest T with (t_{1-alpha/2,T-1} + t_{0.8,T-1}) * sd / sqrt(T) <= effect (a paired t test at
    80% power); None when there is no effect to aim at, no spread, or more than 10^7 tasks."""
    if effect is None or not effect > 0 or not sd > 0 or math.isnan(sd):
        return None
    z = norm_ppf(1 - alpha / 2) + norm_ppf(POWER)
    lower = (z * sd / effect) ** 2 if sd / effect < 1e150 else math.inf  # the z answer bounds the t one
    if not lower <= MAX_TASKS_NEEDED:
        return None
    start = max(2, math.ceil(lower))

    def detects(n: int) -> bool:
        return (t_ppf(1 - alpha / 2, n - 1) + t_ppf(POWER, n - 1)) * sd / math.sqrt(n) <= effect

    lo, hi = start, start
    while not detects(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_TASKS_NEEDED:
            return None
    while lo < hi:  # bisect: detects is monotone in n
        mid = (lo + hi) // 2
        if detects(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def identical_kind(keys_a: Any, va: Any, keys_b: Any, vb: Any, diffs: Any) -> str | None:
    """'same_rewards_per_key' when every paired task holds the same reward under each rollout index in
    both runs, 'zero_differences' when only the per-task differences are all 0, else None."""
    if diffs.size == 0 or not (diffs == 0).all():
        return None
    for ka, ra, kb, rb in zip(keys_a, va, keys_b, vb, strict=True):
        a = {int(k): r for k, r in zip(ka, ra, strict=True) if k >= 0}
        b = {int(k): r for k, r in zip(kb, rb, strict=True) if k >= 0}
        if a.keys() != b.keys() or any(not _same(a[k], b[k]) for k in a):
            return "zero_differences"
    return "same_rewards_per_key"


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))
