"""Agent-level (`<stem>_agent_metrics.json`) and repeat-level (`<stem>_repeat_level_metrics.json`) metrics,
as Gym 0.7.0 computes them: pooled per-agent stats, per-(agent, repeat) stats over tasks, across-repeat
aggregates of the primary metrics with a Student-t interval, and per-agent masking coverage."""

from __future__ import annotations

from typing import Any, Protocol

from ..artifacts.names import ROLLOUT_KEY
from .dataset import NONE, Dataset, numbers, plan_ids
from .kernels import STATS, describe_groups, gym_confidence_interval, gym_std_rule, sem_of, series_stats
from .records import LAST_MASKED_ID
from .table import Table

ATTEMPT_KEY = "_ng_attempt_index"
_EXCLUDED_PREFIXES = tuple(
    f"{s}/"
    for s in (
        "max",
        "min",
        "median",
        "std",
        "sem",
        "se",
        "p25",
        "p75",
        "ci_low_95",
        "ci_high_95",
        "histogram",
    )
)
_EXCLUDED_SUFFIXES = (
    "/max", "/min", "/median", "/p5", "/p25", "/p75", "/p95", "/ci_low_95", "/ci_high_95", "/ci_lower",
    "/ci_upper", "_ci_lower", "_ci_upper", "_ci95_lower", "_ci95_upper", f"/{ATTEMPT_KEY}",
    "/std_dev_across_runs", "/std_err_across_runs", "/avg_sample_std_dev",
)  # fmt: skip
_EXCLUDED_NAMES = (
    "_ng_task_index", ROLLOUT_KEY, ATTEMPT_KEY, "sample_count", "missing_count", "num_repeats",
    "token_usage_version",
)  # fmt: skip
ACROSS = "_across_repeats/"


def is_primary_metric(name: str) -> bool:
    """Gym's `metrics_config.is_primary_metric`: which repeat-level columns are aggregated across repeats."""
    return (
        name not in _EXCLUDED_NAMES
        and not name.startswith(_EXCLUDED_PREFIXES)
        and not name.endswith(_EXCLUDED_SUFFIXES)
        and ACROSS not in name
    )


class LabelRows(Protocol):
    """The labelled measured rollouts, per label (Gym's agent_name), each label's rows in key order."""

    columns: list[str]

    @property
    def labels(self) -> list[str]: ...  # sorted; each has at least one row

    def size(self, label: int) -> int: ...
    def rollouts(self, label: int) -> Any: ...  # int64 rollout index per row
    def task_count(self, label: int) -> int: ...  # distinct tasks
    def column(self, label: int, j: int) -> Any: ...  # float64 values per row, NaN when missing
    def complete(self) -> bool: ...  # no row of any label lacks a column


class TableLabels:
    """`LabelRows` over a one-pass `Table`."""

    def __init__(self, table: Table) -> None:
        import numpy as np

        self.table = table
        self.columns = table.columns
        rows = np.nonzero(table.labels >= 0)[0]
        order = rows[np.argsort(table.labels[rows], kind="stable")]
        codes = table.labels[order]
        bounds = np.nonzero(np.r_[True, codes[1:] != codes[:-1]])[0].tolist() if len(order) else []
        ends = [*bounds[1:], len(order)] if bounds else []
        self._rows: list[Any] = [order[lo:hi] for lo, hi in zip(bounds, ends, strict=True)]
        if len(self._rows) == 1 and len(order) == len(table):  # one label for all rows: no index needed
            self._rows = [None]
        self.labels = [table.label_names[int(codes[lo])] for lo in bounds]

    def size(self, label: int) -> int:
        rows = self._rows[label]
        return len(self.table) if rows is None else len(rows)

    def rollouts(self, label: int) -> Any:
        rows = self._rows[label]
        return self.table.rollouts if rows is None else self.table.rollouts[rows]

    def task_count(self, label: int) -> int:
        import numpy as np

        rows = self._rows[label]
        return len(np.unique(self.table.tasks if rows is None else self.table.tasks[rows]))

    def column(self, label: int, j: int) -> Any:
        return self.table.column(j, self._rows[label])

    def complete(self) -> bool:
        return all(self.table.complete(rows) for rows in self._rows)


def agent_level(source: LabelRows) -> list[dict[str, Any]]:
    """Gym's pooled per-agent stats: one group per label, a column at a time."""
    import numpy as np

    n_labels = len(source.labels)
    if not n_labels:
        return []
    sizes = np.array([source.size(label) for label in range(n_labels)])
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    uniform = bool((sizes == sizes[0]).all()) and source.complete()
    parts: dict[str, list[Any]] = {stat: [] for stat in (*STATS, "count")}
    for j in range(len(source.columns)):
        column = np.concatenate([source.column(label, j) for label in range(n_labels)])
        described = describe_groups(column[:, None], starts, uniform=uniform, std_rule=False)
        for stat, values in described.items():
            parts[stat].append(values)
    if not source.columns:
        return [{"agent_ref": {"name": name}} for name in source.labels]
    stats = {stat: np.concatenate(values, axis=1) for stat, values in parts.items()}
    gym_std_rule(stats["std"], stats["count"], sizes)
    rows = {stat: stats[stat].tolist() for stat in STATS}
    out = []
    for g, name in enumerate(source.labels):
        entry: dict[str, Any] = {}
        for stat in STATS:
            for col, value in zip(source.columns, rows[stat][g], strict=True):
                if value == value:
                    entry[f"{stat}/{col}"] = value
        entry["agent_ref"] = {"name": name}
        out.append(entry)
    return out


def repeat_level(source: LabelRows) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Gym's `_compute_repeat_level_metrics`; returns (entries, the incomplete ones for the warning)."""
    import numpy as np

    columns = sorted(source.columns)
    col_pos = [source.columns.index(c) for c in columns]
    entries = []
    for label, name in enumerate(source.labels):
        rollouts = source.rollouts(label)
        if len(np.unique(rollouts)) < 2:
            continue
        total_tasks = source.task_count(label)
        order = np.argsort(rollouts, kind="stable")  # task order kept within a repeat
        ordered = rollouts[order]
        starts = np.nonzero(np.r_[True, ordered[1:] != ordered[:-1]])[0].tolist()
        bounds = list(zip(starts, [*starts[1:], len(order)], strict=True))
        label_entries = [
            {
                "agent_ref": {"name": name},
                ROLLOUT_KEY: int(ordered[lo]),
                "sample_count": hi - lo,  # keys are unique, so each row of a repeat is another task
                "missing_count": total_tasks - (hi - lo),
            }
            for lo, hi in bounds
        ]
        for col, pos in zip(columns, col_pos, strict=True):
            values = source.column(label, pos)[order]
            for entry, (lo, hi) in zip(label_entries, bounds, strict=True):
                _add_series(entry, col, values[lo:hi])
        entries.extend(label_entries)
    return entries, [e for e in entries if e["missing_count"] > 0]


def _add_series(entry: dict[str, Any], col: str, values: Any) -> None:
    s = series_stats(values)
    if s is None:
        return
    sem = sem_of(s["std"], s["n"])
    entry.update(
        {
            f"mean/{col}": s["mean"],
            f"median/{col}": s["median"],
            f"std/{col}": s["std"],
            f"sem/{col}": sem,
            f"min/{col}": s["min"],
            f"max/{col}": s["max"],
            f"p25/{col}": s["p25"],
            f"p75/{col}": s["p75"],
        }
    )
    ci = gym_confidence_interval(s["mean"], sem, s["n"])
    if ci:
        entry[f"ci_low_95/{col}"], entry[f"ci_high_95/{col}"] = ci


def across_repeats(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Gym's `_aggregate_repeat_level_metrics`: each repeat's primary metric is one observation."""
    import numpy as np

    columns: dict[str, None] = {}
    for entry in entries:
        for name, value in entry.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                columns.setdefault(name, None)
    primary = [c for c in columns if is_primary_metric(c)]
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_agent.setdefault(entry["agent_ref"]["name"], []).append(entry)
    out: dict[str, dict[str, Any]] = {}
    for agent in sorted(by_agent):
        agg: dict[str, Any] = {}
        for col in primary:
            values = np.array([e[col] for e in by_agent[agent] if col in e], dtype=np.float64)
            s = series_stats(values)
            if s is None:
                continue
            se = sem_of(s["std"], s["n"])
            for stat in ("mean", "median", "std", "min", "max"):
                agg[f"{stat}{ACROSS}{col}"] = s[stat]
            agg[f"se{ACROSS}{col}"] = se
            ci = gym_confidence_interval(s["mean"], se, s["n"])
            if ci:
                agg[f"ci_low_95{ACROSS}{col}"], agg[f"ci_high_95{ACROSS}{col}"] = ci
        out[agent] = agg
    return out


def coverage_counts(data: Dataset, always: bool = False) -> list[tuple[str, dict[str, int], tuple[int, int]]]:
    """The numbers of Gym's `coverage_by_agent` for every agent, with its first rollout key (a merge adds
    them up, in the order of those keys). Gym reports only agents with a masked rollout, so unless `always`
    (a shard, whose counts a merge will add up), none when nothing is masked."""
    import numpy as np

    plans = plan_ids(data.results)
    if not always and not (plans <= LAST_MASKED_ID).any():
        return []
    linked = numbers(data.inputs, "result")
    agents = numbers(data.inputs, "agent", "int32").astype(np.int64)
    rows = np.nonzero((linked >= 0) & (agents != NONE))[0]
    tasks, rollouts = numbers(data.inputs, "task")[rows], numbers(data.inputs, "rollout")[rows]
    order = np.lexsort((rollouts, tasks))
    rows, tasks, agents = rows[order], tasks[order], agents[rows][order]
    masked = plans[linked[rows]] <= LAST_MASKED_ID  # an unhealthy rollout counts as masked here
    rollouts = rollouts[order]
    codes, first = np.unique(agents, return_index=True)
    out = []
    for code, at in sorted(zip(codes.tolist(), first.tolist(), strict=True), key=lambda pair: pair[1]):
        mine = agents == code
        n_masked = int(masked[mine].sum())
        measured_tasks = np.unique(tasks[mine & ~masked])
        entry = {
            "coverage/measured_rollouts": int(mine.sum()) - n_masked,
            "coverage/masked_rollouts": n_masked,
            "coverage/measured_tasks": len(measured_tasks),
            "coverage/fully_masked_tasks": len(np.unique(tasks[mine])) - len(measured_tasks),
        }
        out.append((data.inputs.agents.values[code], entry, (int(tasks[at]), int(rollouts[at]))))
    return out


def agent_metrics(
    labels: LabelRows, repeat_entries: list[dict[str, Any]], coverage: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """Gym's agent metrics file: pooled stats, across-repeat aggregates, then masking coverage."""
    entries = agent_level(labels)
    aggregates = across_repeats(repeat_entries)
    for entry in entries:
        entry.update(aggregates.get(entry["agent_ref"]["name"], {}))
    coverage = dict(coverage)
    for entry in entries:
        name = entry["agent_ref"]["name"]
        if name in coverage:
            entry.update(coverage.pop(name))
    for name, cov in coverage.items():
        entries.append({"agent_ref": {"name": name}, **cov})
    return entries
