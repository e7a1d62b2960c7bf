"""Paired comparison of two reward profiles, for the keep/discard suggestion (via `ngrp compare`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..artifacts import TASK_KEY
from ..compare import compare_profiles
from ..errors import InputError
from ..jsonl import iter_rows


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


def compare(a: Path, b: Path, metric: str = "reward") -> Paired:
    """B − A with a 95% paired t interval over the tasks both profiles hold."""
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
