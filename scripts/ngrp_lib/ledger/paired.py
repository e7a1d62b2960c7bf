"""Paired comparison of two reward profiles, for the keep/discard suggestion.

Uses the `stats` toolkit's `compare_profiles` when it is present; otherwise a small paired t interval
over per-task means computed here (same definition: per-task mean of `rollout_infos[*].<metric>`,
difference B − A on the tasks both profiles hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..artifacts import TASK_KEY
from ..errors import InputError
from ..jsonl import iter_rows
from .tdist import mean_t_interval


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


def task_means(path: Path, metric: str = "reward") -> dict[int, float]:
    """Per-task mean of `rollout_infos[*].<metric>` from a `*_reward_profiling.jsonl` file."""
    means: dict[int, float] = {}
    for row in iter_rows(path):
        task = row.data.get(TASK_KEY)
        if not isinstance(task, int) or isinstance(task, bool):
            raise InputError(f"row has no integer {TASK_KEY}", path=path, line=row.line)
        if task in means:
            raise InputError(f"task {task} appears twice", path=path, line=row.line)
        values = [info.get(metric) for info in row.data.get("rollout_infos") or [] if isinstance(info, dict)]
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not numbers:
            raise InputError(
                f"task {task} has no numeric rollout_infos[*].{metric}",
                path=path,
                line=row.line,
                hint="pass a *_reward_profiling.jsonl written by `gym eval profile` or `ngrp profile`",
            )
        means[task] = math.fsum(numbers) / len(numbers)
    if not means:
        raise InputError("profile has no tasks", path=path)
    return means


def paired_t(a: Path, b: Path, metric: str = "reward") -> Paired:
    """Paired t interval of B − A over the tasks present in both profiles."""
    means_a, means_b = task_means(a, metric), task_means(b, metric)
    shared = sorted(means_a.keys() & means_b.keys())
    if not shared:
        raise InputError(f"{a} and {b} share no task ({TASK_KEY}); they cannot be paired")
    dropped = len(means_a.keys() | means_b.keys()) - len(shared)
    diffs = [means_b[t] - means_a[t] for t in shared]
    mean_diff, low, high = mean_t_interval(diffs)
    mean_a = math.fsum(means_a[t] for t in shared) / len(shared)
    mean_b = math.fsum(means_b[t] for t in shared) / len(shared)
    return Paired(len(shared), dropped, mean_a, mean_b, mean_diff, low, high, "paired-t (ledger)")


def compare(a: Path, b: Path, metric: str = "reward") -> Paired:
    """B − A with a 95% paired interval, from the stats toolkit if available."""
    try:
        from ..compare import compare_profiles  # provided by the stats work; optional here
    except ImportError:
        return paired_t(a, b, metric)
    # Only the paired t interval is used here; the bootstrap would cost time for nothing.
    result = compare_profiles(a, b, intersect=True, metric=metric, n_bootstrap=0)
    return Paired(
        result.n_tasks,
        result.n_dropped,
        result.mean_a,
        result.mean_b,
        result.mean_diff,
        _finite(result.ci_low),
        _finite(result.ci_high),
        "paired-t (ngrp compare)",
    )


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
