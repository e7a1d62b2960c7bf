"""Key alignment with Gym's rules and messages: extra and duplicate keys always fail, missing keys fail
unless partial profiling was asked for. Runs on all rows before masking, as `gym eval profile` does, over
the key arrays (sorting them once each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import FindingsError
from .dataset import FIRST_KEYS, Dataset, Key, keys_increasing, numbers
from .reader import ReadStats

PARTIAL_HINT = "pass --allow-partial (Gym: ++allow_partial_rollouts=True) to profile the completed rollouts"


@dataclass(frozen=True)
class Alignment:
    missing_count: int
    missing: list[Key]  # the first FIRST, sorted


def check_alignment(data: Dataset, stats: ReadStats, allow_partial: bool) -> Alignment:
    import numpy as np

    inputs, results = data.inputs, data.results
    in_task, in_rollout = numbers(inputs, "task"), numbers(inputs, "rollout")
    repeat = _first_repeat(in_task, in_rollout)
    if repeat is not None:
        key = (int(in_task[repeat]), int(in_rollout[repeat]))
        raise FindingsError(
            f"Duplicate materialized input row for rollout key {key}{_where(stats, 'inputs', repeat)}",
            hint="each (_ng_task_index, _ng_rollout_index) may appear once in the materialized inputs",
        )
    r_task, r_rollout = numbers(results, "task"), numbers(results, "rollout")
    repeats = _repeats(r_task, r_rollout)
    if len(repeats):
        keys = np.lexsort((repeats, r_rollout[repeats], r_task[repeats]))
        first = repeats[keys[0]]  # the smallest repeated key, at its first repeat
        key = (int(r_task[first]), int(r_rollout[first]))
        raise FindingsError(
            f"Duplicate result row for rollout key {key} "
            f"({len(repeats)} duplicate rollout rows){_where(stats, 'rollouts', int(first))}",
            hint="deduplicate the rollouts first (for example with `ngrp merge`), keeping one row per key",
        )
    linked = numbers(inputs, "result")
    matched = np.zeros(len(r_task), dtype=bool)
    matched[linked[linked >= 0]] = True
    extra = np.nonzero(~matched)[0]
    if len(extra):
        raise FindingsError(
            "Rollout results contain rows with no matching materialized input rows. "
            f"Found {len(extra)} extra rollout rows. "
            f"Extra rollout keys: {sorted_keys(r_task, r_rollout, extra)}",
            hint="these rollouts came from other inputs; profile them with their own materialized file",
        )
    missing = np.nonzero(linked < 0)[0]
    first_missing = sorted_keys(in_task, in_rollout, missing)
    if len(missing) and not allow_partial:
        raise missing_error(len(missing), first_missing)
    return Alignment(len(missing), first_missing)


def missing_error(count: int, first: list[Key]) -> FindingsError:
    """Gym's message for materialized rows without a rollout (`first`: the smallest keys, sorted)."""
    return FindingsError(
        "Materialized input rows and rollout results do not have matching rollout keys. "
        f"Missing rollout results for {count} materialized input rows. "
        f"Missing rollout keys: {first}.",
        hint=PARTIAL_HINT,
    )


def sorted_keys(tasks: Any, rollouts: Any, rows: Any, first: int = FIRST_KEYS) -> list[Key]:
    """The `first` smallest (task, rollout) keys of `rows`, as Python tuples."""
    import numpy as np

    order = np.lexsort((rollouts[rows], tasks[rows]))[:first]
    return list(zip(tasks[rows][order].tolist(), rollouts[rows][order].tolist(), strict=True))


def _repeats(tasks: Any, rollouts: Any) -> Any:
    """Positions of the rows whose key appeared earlier (file order kept among equal keys)."""
    import numpy as np

    n = len(tasks)
    if n < 2 or keys_increasing(tasks, rollouts):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), rollouts, tasks))
    same = (tasks[order][1:] == tasks[order][:-1]) & (rollouts[order][1:] == rollouts[order][:-1])
    return np.sort(order[1:][same])


def _first_repeat(tasks: Any, rollouts: Any) -> int | None:
    repeats = _repeats(tasks, rollouts)
    return int(repeats[0]) if len(repeats) else None


def _where(stats: ReadStats, role: str, position: int) -> str:
    """Gym's message names only the key; say where the repeat is (in a single pass, the files are known)."""
    where = stats.where(role, position)
    return f"; repeated at {where}" if where else ""
