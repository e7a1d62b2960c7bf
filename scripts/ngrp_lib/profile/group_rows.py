"""`<stem>_reward_profiling.jsonl` rows: Gym's per-task (or per task and agent) statistics, byte-compatible,
plus our `ngrp/*` extras after Gym's keys."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import orjson

from ..artifacts.names import TASK_KEY
from .extras import task_extras
from .kernels import STATS, describe_groups
from .records import Dataset
from .table import Table


def group_order(table: Table) -> tuple[Any, Any, list[Any]]:
    """Permutation of table rows into groups (sorted like pandas groupby), group starts, group keys."""
    import numpy as np

    n = len(table.tasks)
    if table.per_agent:
        keep = np.array([label is not None for label in table.labels], dtype=bool)  # groupby drops None
        names = sorted({label for label in table.labels if label is not None})
        code: dict[str | None, int] = {name: i for i, name in enumerate(names)}
        codes = np.array([code.get(label, -1) for label in table.labels], dtype=np.int64)
        idx = np.nonzero(keep)[0]
        perm = idx[np.lexsort((codes[idx], table.tasks[idx]))]  # stable: rollout order kept inside a group
        pairs = np.stack([table.tasks[perm], codes[perm]], axis=1) if len(perm) else np.zeros((0, 2), int)
        change = np.ones(len(perm), dtype=bool)
        change[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
        starts = np.nonzero(change)[0]
        keys = [(int(pairs[s, 0]), names[pairs[s, 1]]) for s in starts]
        return perm, starts, keys
    perm = np.arange(n)
    change = np.ones(n, dtype=bool)
    change[1:] = table.tasks[1:] != table.tasks[:-1]
    starts = np.nonzero(change)[0]
    return perm, starts, [int(table.tasks[s]) for s in starts]


def _samples_by_group(data: Dataset, table: Table) -> dict[Any, bytes]:
    best: dict[Any, tuple[int, bytes]] = {}
    label_of_key: dict[Any, Any] = {key: label for label, key in table.group_label.items()}
    for (task, run_key), (rollout, raw) in data.samples.items():
        group = (task, label_of_key.get(run_key)) if table.per_agent else task
        if group not in best or rollout < best[group][0]:
            best[group] = (rollout, raw)
    return {group: raw for group, (_, raw) in best.items()}


@functools.lru_cache(maxsize=65536)
def _extras_bytes(n: int, passed: int, num_null: int, threshold: float) -> bytes:
    """The `ngrp/*` keys depend only on these counts: most tasks share them, so serialize once."""
    return b"," + orjson.dumps(task_extras(n, passed, num_null, threshold))[1:-1]


def profile_lines(
    data: Dataset, table: Table, *, extras: bool, pass_threshold: float
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Yield (JSONL line, small record for the summary) per group, in Gym's row order. Everything that can
    be is computed for all groups at once; the loop only slices lists and serializes."""
    import numpy as np

    if len(table.tasks) == 0:
        return
    perm, starts, keys = group_order(table)
    if len(perm) == 0:  # fan-out where no row has a label: pandas' groupby drops them all
        return
    matrix = table.matrix[perm]
    described = describe_groups(matrix, starts)
    stat_keys = [f"{stat}/{col}" for stat in STATS for col in table.columns]
    stats = np.concatenate([described[stat] for stat in STATS], axis=1)
    has_nan = np.isnan(stats).any(axis=1).tolist()
    stat_rows = stats.tolist()
    samples = _samples_by_group(data, table)
    bounds = [*starts.tolist(), len(perm)]
    order = perm.tolist()
    infos = [table.infos[i] for i in order]
    states = table.reward_states
    null_flags = np.fromiter((states[i] != "ok" for i in order), dtype=np.int64, count=len(order))
    nulls = np.add.reduceat(null_flags, starts).tolist()
    first_labels = [table.labels[i] for i in perm[starts].tolist()]
    reward_col = table.columns.index("reward") if "reward" in table.columns else None
    reward_values = matrix[:, reward_col].tolist() if reward_col is not None else None
    per_agent = table.per_agent
    for g, key in enumerate(keys):
        head: dict[str, Any] = {TASK_KEY: key[0] if per_agent else key}
        if has_nan[g]:
            for name, value in zip(stat_keys, stat_rows[g], strict=True):
                if value == value:  # not NaN: pandas drops NaN stats from the row
                    head[name] = value
        else:
            head.update(zip(stat_keys, stat_rows[g], strict=True))
        if per_agent:
            head["agent_ref"] = {"name": key[1]}
        lo, hi = bounds[g], bounds[g + 1]
        num = hi - lo
        expected = table.expected[key]
        tail = {
            "num_rollouts": num,
            "expected_num_rollouts": expected,
            "missing_num_rollouts": expected - num,
            "reward_profile_completion_pct": 100.0 if expected == 0 else 100.0 * num / expected,
        }
        parts = [
            orjson.dumps(head)[:-1],
            b',"sample":',
            samples[key],
            b",",
            orjson.dumps(tail)[1:-1],
            b',"rollout_infos":[',
            b",".join(infos[lo:hi]),
            b"]",
        ]
        rewards = [] if reward_values is None else [r for r in reward_values[lo:hi] if r == r]
        num_null = nulls[g]
        record = {
            "group": key,
            "label": key[1] if per_agent else first_labels[g],
            "num_rollouts": num,
            "expected": expected,
            "rewards": rewards,
            "null": num_null,
        }
        if extras:
            passed = sum(1 for r in rewards if r >= pass_threshold)
            parts.append(_extras_bytes(len(rewards), passed, num_null, pass_threshold))
        parts.append(b"}\n")
        yield b"".join(parts), record
