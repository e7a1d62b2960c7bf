"""Paired comparison of two reward profiles, for the keep/discard suggestion (via `ngrp compare`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..jsonvalues import finite
from ..stats.compare import CompareOptions, compare_profiles
from ..stats.methods import T


@dataclass(frozen=True)
class Paired:
    n_tasks: int
    n_dropped: int
    mean_a: float
    mean_b: float
    mean_diff: float  # B − A
    ci_low: float | None
    ci_high: float | None
    method: str
    identical: str | None = None  # a degenerate comparison: "same_rewards_per_key" or "zero_differences"


def compare(a: Path, b: Path, metric: str = "reward") -> Paired:
    """B − A with compare's 95% paired interval over the tasks both profiles hold: the paired t interval,
    or the constant-difference bound when every task's difference is the same (t has no width then)."""
    # Only the paired t interval is used here; the bootstrap would cost time for nothing.
    result = compare_profiles(a, b, CompareOptions(intersect=True, metric=metric, n_bootstrap=0))
    return Paired(
        result.n_tasks,
        result.n_dropped,
        result.mean_a,
        result.mean_b,
        result.mean_diff,
        finite(result.ci_low),
        finite(result.ci_high),
        "paired-t (ngrp compare)" if result.ci_method == T else "constant-difference bound (ngrp compare)",
        result.identical,
    )
