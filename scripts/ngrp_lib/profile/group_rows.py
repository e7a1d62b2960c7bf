"""`<stem>_reward_profiling.jsonl` rows: Gym's per-task (or per task and agent) statistics, byte-compatible,
plus our `ngrp/*` extras after Gym's keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from ..artifacts import TASK_KEY
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
        code = {name: i for i, name in enumerate(names)}
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
    label_of_key = {key: label for label, key in table.group_label.items()}
    for (task, run_key), (rollout, raw) in data.samples.items():
        group = (task, label_of_key.get(run_key)) if table.per_agent else task
        if group not in best or rollout < best[group][0]:
            best[group] = (rollout, raw)
    return {group: raw for group, (_, raw) in best.items()}


def profile_lines(
    data: Dataset, table: Table, *, extras: bool, pass_threshold: float
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Yield (JSONL line, small record for the summary) per group, in Gym's row order."""
    import numpy as np

    if len(table.tasks) == 0:
        return
    perm, starts, keys = group_order(table)
    matrix = table.matrix[perm]
    stats = {name: arr.tolist() for name, arr in describe_groups(matrix, starts).items()}
    samples = _samples_by_group(data, table)
    bounds = [*starts.tolist(), len(perm)]
    reward_col = table.columns.index("reward") if "reward" in table.columns else None
    for g, key in enumerate(keys):
        head: dict[str, Any] = {TASK_KEY: key[0] if table.per_agent else key}
        for stat in STATS:
            row = stats[stat][g]
            for col, value in zip(table.columns, row):
                if value == value:  # not NaN
                    head[f"{stat}/{col}"] = value
        if table.per_agent:
            head["agent_ref"] = {"name": key[1]}
        lo, hi = bounds[g], bounds[g + 1]
        members = perm[lo:hi].tolist()
        num = hi - lo
        expected = table.expected[key]
        tail = {
            "num_rollouts": num,
            "expected_num_rollouts": expected,
            "missing_num_rollouts": expected - num,
            "reward_profile_completion_pct": 100.0 if expected == 0 else 100.0 * num / expected,
        }
        line = (
            orjson.dumps(head)[:-1]
            + b',"sample":'
            + samples[key]
            + b","
            + orjson.dumps(tail)[1:-1]
            + b',"rollout_infos":['
            + b",".join(table.infos[i] for i in members)
            + b"]"
        )
        rewards: list[float] = []
        if reward_col is not None:
            col = matrix[lo:hi, reward_col]
            rewards = col[~np.isnan(col)].tolist()
        num_null = sum(1 for i in members if table.reward_states[i] != "ok")
        label = key[1] if table.per_agent else table.labels[members[0]]
        record = {"group": key, "label": label, "num_rollouts": num, "expected": expected, "rewards": rewards, "null": num_null}
        if extras:
            line += b"," + orjson.dumps(task_extras(rewards, num_null, pass_threshold))[1:-1]
        yield line + b"}\n", record
