"""The measured, matched rollouts in key order: Gym's DataFrame, without pandas, and without a matrix. Its
columns are gathered from the store's arrays on demand, for a slice of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .dataset import NONE, Dataset, keys_increasing, numbers, offsets, plan_ids
from .records import FLOAT, LAST_MASKED_ID, ZERO, ResultStore, run_labels


@dataclass
class Table:
    tasks: Any  # int64 array, one per matched measured rollout, sorted by (task, rollout)
    rollouts: Any
    labels: Any  # int64 label code per row: index into label_names (sorted); -1 for no label
    label_names: list[str]  # Gym's agent_name column values, sorted
    results: Any  # int64 position of each row's rollout in the store
    columns: list[str]  # numeric fields, in order of first appearance
    column_firsts: list[tuple[int, int]]  # per column: the row it first appears in, its rank in that row
    per_agent: bool  # fan-out: some task ran under more than one label
    group_ids: Any  # sorted ids of the measured input groups (see group_id) and, aligned, their sizes
    group_sizes: Any
    run_key_of_label: list[int]  # label code -> run key code (labels are unique per run key)
    store: ResultStore
    plans: Any  # int64 plan id per row
    sources: dict[int, dict[int, tuple[str, int]]]  # plan id -> column -> where its value is
    complete_plans: set[int]  # plans that have every column
    offsets: tuple[Any, Any]  # per store position: where its floats and ints start
    unique_tasks: Any  # sorted tasks of the measured inputs (group ids rank tasks by it)
    agent_by_key: dict[str, str | None]  # run key -> agent_ref.name of its first measured row, in order

    def __len__(self) -> int:
        return len(self.tasks)

    def group_id(self, tasks: Any, labels: Any) -> Any:
        """One int64 per (task, label) (per task when not fanned out), ordered like the keys."""
        return _group_id(self._task_ranks(tasks), labels, len(self.label_names), self.per_agent)

    def _task_ranks(self, tasks: Any) -> Any:
        import numpy as np

        return np.searchsorted(self.unique_tasks, tasks)

    def column(self, j: int, rows: Any = None) -> Any:
        """Column `j` as float64 for `rows` (table positions; all when None), NaN where a row lacks it."""
        import numpy as np

        res = self.results if rows is None else self.results[rows]
        plans = self.plans if rows is None else self.plans[rows]
        present = self.plans_in(plans)
        out = np.empty(len(res)) if len(present) == 1 else np.full(len(res), np.nan)
        for plan in present:
            where = self.sources[plan].get(j)
            pick = None if len(present) == 1 else np.nonzero(plans == plan)[0]
            if where is None:
                if pick is None:
                    out.fill(np.nan)
                continue
            kind, k = where
            if kind == ZERO:
                out[slice(None) if pick is None else pick] = 0.0
                continue
            source = (
                numbers(self.store, "floats", "float64") if kind == FLOAT else numbers(self.store, "ints")
            )
            at = self.offsets[0 if kind == FLOAT else 1][res if pick is None else res[pick]]
            at += k  # a fresh array: add in place
            if pick is None and kind == FLOAT:
                np.take(source, at, out=out)
            else:  # int64 -> float64 rounds as float(int) does
                out[slice(None) if pick is None else pick] = source[at]
        return out

    def column_blocks(self, j: int, block: int = 65536) -> Iterator[Any]:
        """Column `j` a block of rows at a time (for a scan that needs no whole column)."""
        import numpy as np

        for lo in range(0, len(self), block):
            yield self.column(j, np.arange(lo, min(lo + block, len(self))))

    def matrix(self, rows: Any) -> Any:
        import numpy as np

        out = np.empty((len(rows), len(self.columns)))
        for j in range(len(self.columns)):
            out[:, j] = self.column(j, rows)
        return out

    def complete(self, rows: Any = None) -> bool:
        """No row of `rows` lacks a column (so no NaN: JSON has no NaN and orjson refuses infinities)."""
        plans = self.plans if rows is None else self.plans[rows]
        return all(plan in self.complete_plans for plan in self.plans_in(plans))

    def plans_in(self, plans: Any) -> list[int]:
        import numpy as np

        if len(plans) == 0:
            return []
        low, high = int(plans.min()), int(plans.max())
        return [low] if low == high else np.unique(plans).tolist()


def _group_id(task_ranks: Any, labels: Any, n_labels: int, per_agent: bool) -> Any:
    return task_ranks * (n_labels + 1) + (labels + 1) if per_agent else task_ranks


def build_table(data: Dataset) -> Table:
    """The table of `data`. In the usual run (every input measured and matched, in key order) its key
    arrays are views of the inputs' arrays; temporaries are dropped as soon as they are used."""
    import numpy as np

    inputs, store = data.inputs, data.results
    plans_of_store = plan_ids(store)
    linked = numbers(inputs, "result")
    masked = masked_inputs(linked, plans_of_store)
    measured = np.nonzero(~masked)[0] if masked.any() else None  # None: every input is measured
    del masked

    def pick(values: Any) -> Any:
        return values if measured is None else values[measured]

    run_keys = pick(numbers(inputs, "run_key", "int32"))
    agent_by_key = agent_by_run_key(data, run_keys, pick(numbers(inputs, "agent", "int32")))
    label_names, label_of_key, run_key_of_label = _labels(data, agent_by_key)
    labels = label_of_key[run_keys + 1]  # run key NONE -> no label
    del run_keys
    tasks = pick(numbers(inputs, "task"))
    per_agent = _fan_out(tasks, labels)
    unique_tasks = np.unique(tasks)
    group_ids, group_sizes = np.unique(
        _group_id(np.searchsorted(unique_tasks, tasks), labels, len(label_names), per_agent),
        return_counts=True,
    )
    found = pick(linked) >= 0
    if measured is None and found.all():
        rows = None  # every input is a row
    else:
        rows = np.nonzero(found)[0] if measured is None else measured[found]
        labels = labels[found]
    del found, tasks
    rows, labels, tasks, rollouts = _in_key_order(inputs, rows, labels)
    results = linked if rows is None else linked[rows]
    plans = plans_of_store[results]
    columns, firsts, sources = _columns(store, plans)
    return Table(
        tasks=tasks,
        rollouts=rollouts,
        labels=labels,
        label_names=label_names,
        results=results,
        columns=columns,
        column_firsts=firsts,
        per_agent=per_agent,
        group_ids=group_ids,
        group_sizes=group_sizes,
        run_key_of_label=run_key_of_label,
        store=store,
        plans=plans,
        sources=sources,
        complete_plans={p for p, cols in sources.items() if len(cols) == len(columns)},
        offsets=offsets(store),
        unique_tasks=unique_tasks,
        agent_by_key=agent_by_key,
    )


def _in_key_order(inputs: Any, rows: Any, labels: Any) -> tuple[Any, Any, Any, Any]:
    """The table's input rows (None: all, in file order), labels, tasks and rollouts, sorted by key."""
    import numpy as np

    tasks, rollouts = numbers(inputs, "task"), numbers(inputs, "rollout")
    if rows is not None:
        tasks, rollouts = tasks[rows], rollouts[rows]
    if len(tasks) > 1 and not keys_increasing(tasks, rollouts):  # inputs usually come sorted by key already
        order = np.lexsort((rollouts, tasks))  # keys are unique, so the order is total
        rows = order if rows is None else rows[order]
        labels, tasks, rollouts = labels[order], tasks[order], rollouts[order]
    return rows, labels, tasks, rollouts


def masked_inputs(linked: Any, plans_of_store: Any) -> Any:
    """Per input: its rollout is masked (an input without a rollout is not)."""
    import numpy as np

    masked = np.zeros(len(linked), dtype=bool)
    found = linked >= 0
    masked[found] = plans_of_store[linked[found]] <= LAST_MASKED_ID
    return masked


def agent_by_run_key(data: Dataset, run_keys: Any, agents: Any) -> dict[str, str | None]:
    """Each run key's agent name, from its first row (of `run_keys`/`agents`), in order of appearance."""
    import numpy as np

    keys, first = np.unique(run_keys, return_index=True)
    out: dict[str, str | None] = {}
    for key, at in sorted(zip(keys.tolist(), first.tolist(), strict=True), key=lambda pair: pair[1]):
        if key != NONE:
            out[data.inputs.run_keys.values[key]] = data.inputs.agents.value(int(agents[at]))
    return out


def _labels(data: Dataset, agent_by_key: dict[str, str | None]) -> tuple[list[str], Any, list[int]]:
    """Sorted label names; label code by run key code + 1 (index 0: no run key); run key of each label."""
    import numpy as np

    codes = data.inputs.run_keys
    labels = run_labels(agent_by_key)
    names = sorted(set(labels.values()))
    code_of_name = {name: i for i, name in enumerate(names)}
    label_of_key = np.full(len(codes.values) + 1, -1, dtype=np.int32)
    run_key_of_label = [0] * len(names)
    for key, label in labels.items():
        label_of_key[codes.index[key] + 1] = code_of_name[label]
        run_key_of_label[code_of_name[label]] = codes.index[key]
    return names, label_of_key, run_key_of_label


def _fan_out(tasks: Any, labels: Any) -> bool:
    """Some task runs under two labels (no label counts as one)."""
    import numpy as np

    if len(tasks) == 0 or labels.min() == labels.max():  # with one label there can be no fan-out
        return False
    order = np.lexsort((labels, tasks))
    tasks, labels = tasks[order], labels[order]
    return bool(((tasks[1:] == tasks[:-1]) & (labels[1:] != labels[:-1])).any())


def _columns(store: ResultStore, plans: Any) -> tuple[list[str], list[tuple[int, int]], dict[int, dict]]:
    """Columns in first-appearance order over the table rows (with that row and the rank there), and where
    each plan keeps each column."""
    import numpy as np

    present, first = np.unique(plans, return_index=True)
    col_index: dict[str, int] = {}
    firsts: list[tuple[int, int]] = []
    for plan, row in sorted(zip(present.tolist(), first.tolist(), strict=True), key=lambda pair: pair[1]):
        for rank, (name, _, _) in enumerate(store.plans[plan].stats):
            if name not in col_index:
                col_index[name] = len(col_index)
                firsts.append((row, rank))
    sources = {
        plan: {col_index[name]: (kind, k) for name, kind, k in store.plans[plan].stats}
        for plan in present.tolist()
    }
    return list(col_index), firsts, sources
