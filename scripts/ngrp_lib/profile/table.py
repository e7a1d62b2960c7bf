"""The measured, matched rollouts as one numeric table in key order: Gym's DataFrame, without pandas."""

from __future__ import annotations

from dataclasses import dataclass
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
    masked = {key for key, rec in data.results.items() if rec.masked}
    if not masked:
        return data.inputs
    return [rec for rec in data.inputs if (rec.task, rec.rollout) not in masked]


def build_table(data: Dataset) -> Table:
    import numpy as np

    measured = measured_inputs(data)
    labels = run_labels(measured)

    def label_of(rec: InputRec) -> str | None:
        return None if rec.run_key is None else labels.get(rec.run_key)

    per_agent = len({(rec.task, label_of(rec)) for rec in measured}) > len({rec.task for rec in measured})
    expected: dict[Any, int] = {}
    for rec in measured:
        group = (rec.task, label_of(rec)) if per_agent else rec.task
        expected[group] = expected.get(group, 0) + 1
    matched = sorted(
        (rec for rec in measured if (rec.task, rec.rollout) in data.results), key=lambda r: (r.task, r.rollout)
    )
    results = [data.results[(rec.task, rec.rollout)] for rec in matched]
    columns, matrix = _dense(results)
    return Table(
        tasks=np.array([rec.task for rec in matched], dtype=np.int64),
        rollouts=np.array([rec.rollout for rec in matched], dtype=np.int64),
        labels=[label_of(rec) for rec in matched],
        columns=columns,
        matrix=matrix,
        infos=[res.info for res in results],
        reward_states=[res.reward_state for res in results],
        per_agent=per_agent,
        expected=expected,
        group_label={label: key for key, label in labels.items()},
    )


def _dense(results: list) -> tuple[list[str], Any]:
    """Columns in first-appearance order; rows sharing a field layout are filled in one numpy assignment."""
    import numpy as np

    col_index: dict[str, int] = {}
    rows_by_names: dict[tuple[str, ...], list[int]] = {}
    for pos, res in enumerate(results):
        group = rows_by_names.get(res.names)
        if group is None:
            group = rows_by_names[res.names] = []
            for name in res.names:
                col_index.setdefault(name, len(col_index))
        group.append(pos)
    matrix = np.full((len(results), len(col_index)), np.nan)
    for names, positions in rows_by_names.items():
        if not names:
            continue
        cols = [col_index[name] for name in names]
        values = np.array([results[pos].values for pos in positions], dtype=np.float64)
        matrix[np.ix_(positions, cols)] = values
    return list(col_index), matrix
