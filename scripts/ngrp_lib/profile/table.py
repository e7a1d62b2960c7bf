"""The measured, matched rollouts as one numeric table in key order: Gym's DataFrame, without pandas."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

from .records import Dataset, InputRec, run_labels


@dataclass
class Table:
    tasks: Any  # int64 array, one per matched measured rollout, sorted by (task, rollout)
    rollouts: Any
    labels: list[str | None]  # run label (Gym's agent_name column)
    columns: list[str]  # numeric fields, in order of first appearance
    matrix: Any  # float64 (rows x columns), NaN where a rollout lacks the field
    infos: list[bytes]
    reward_states: list[str]
    per_agent: bool  # fan-out: some task ran under more than one label
    expected: dict[Any, int]  # group key -> measured materialized rows
    group_label: dict[str, str]  # label -> run key (labels are unique per run key)


def measured_inputs(data: Dataset) -> list[InputRec]:
    if not any(map(attrgetter("masked"), data.results.values())):
        return data.inputs
    return [rec for rec in data.inputs if rec.result is None or not rec.result.masked]


def build_table(data: Dataset) -> Table:
    import numpy as np

    measured = measured_inputs(data)
    labels = run_labels(measured)
    # a None run key has no label (run_labels skips it), so one dict lookup gives each row's label
    row_labels = list(map(labels.get, map(attrgetter("run_key"), measured)))
    per_agent = False
    label_by_task: dict[int, str | None] = {}
    if len(set(row_labels)) > 1:  # with one label there can be no fan-out
        for task, label in zip(map(attrgetter("task"), measured), row_labels, strict=True):
            if label_by_task.setdefault(task, label) != label:  # fan-out: some task runs under two labels
                per_agent = True
                break
    if per_agent:
        groups: Any = zip(map(attrgetter("task"), measured), row_labels, strict=True)
    else:
        groups = map(attrgetter("task"), measured)
    expected: dict[Any, int] = dict(Counter(groups))
    if any(map(is_, map(attrgetter("result"), measured), repeat(None))):
        keep = [i for i, rec in enumerate(measured) if rec.result is not None]
        matched = [measured[i] for i in keep]
    else:  # complete run: every measured input has its result
        keep, matched = list(range(len(measured))), measured
    tasks = np.fromiter(map(attrgetter("task"), matched), dtype=np.int64, count=len(matched))
    rollouts = np.fromiter(map(attrgetter("rollout"), matched), dtype=np.int64, count=len(matched))
    order = None
    if len(matched) > 1:  # inputs usually come sorted by key already: sort only when they do not
        step_task, step_rollout = np.diff(tasks), np.diff(rollouts)
        if not ((step_task > 0) | ((step_task == 0) & (step_rollout > 0))).all():
            order = np.lexsort((rollouts, tasks))  # keys are unique, so the order is total
            tasks, rollouts = tasks[order], rollouts[order]
            pick = order.tolist()
            matched = [matched[i] for i in pick]
            keep = [keep[i] for i in pick]
    results = list(map(attrgetter("result"), matched))
    columns, matrix = _dense(results, data.numeric)
    return Table(
        tasks=tasks,
        rollouts=rollouts,
        labels=row_labels if matched is measured else [row_labels[i] for i in keep],
        columns=columns,
        matrix=matrix,
        infos=list(map(attrgetter("info"), results)),
        reward_states=list(map(attrgetter("reward_state"), results)),
        per_agent=per_agent,
        expected=expected,
        group_label={label: key for key, label in labels.items()},
    )


def _dense(results: list, numeric: Any) -> tuple[list[str], Any]:
    """Columns in first-appearance order; rows sharing a field layout are filled in one numpy assignment.

    Rows are grouped by the identity of their `names` tuple (rows of one extraction plan share it), which
    needs no per-row Python loop; equal tuples that are distinct objects just form separate groups. Values
    come from `numeric` (the reader's float64 copy) by offset, else from each record."""
    import numpy as np

    n = len(results)
    if n == 0:
        return [], np.full((0, 0), np.nan)
    names_of = list(map(attrgetter("names"), results))
    ids = np.fromiter(map(id, names_of), dtype=np.uint64, count=n)
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    col_index: dict[str, int] = {}
    for pos in np.sort(first).tolist():  # first appearance order
        for name in names_of[pos]:
            col_index.setdefault(name, len(col_index))
    offsets = np.fromiter(map(attrgetter("offset"), results), dtype=np.int64, count=n)
    flat = np.frombuffer(numeric, dtype=np.float64) if len(numeric) else np.zeros(0)
    matrix = np.full((n, len(col_index)), np.nan)
    for k, pos in enumerate(first.tolist()):
        names = names_of[pos]
        if not names:
            continue
        cols = [col_index[name] for name in names]
        rows = np.arange(n) if len(uniq) == 1 else np.nonzero(inverse == k)[0]
        starts = offsets[rows]
        if (starts >= 0).all():
            values = flat[starts[:, None] + np.arange(len(cols))]
        else:  # records that did not come from the reader (merged shards)
            chain = itertools.chain.from_iterable(results[i].values for i in rows.tolist())
            values = np.fromiter(chain, dtype=np.float64, count=len(rows) * len(cols))
            values = values.reshape(len(rows), len(cols))
        if len(uniq) == 1 and cols == list(range(len(col_index))):
            matrix = values  # one layout (the usual case): already the whole table
        else:
            matrix[np.ix_(rows, np.asarray(cols, dtype=np.int64))] = values
    del flat  # release the buffer export, so `numeric` could grow again
    return list(col_index), matrix
