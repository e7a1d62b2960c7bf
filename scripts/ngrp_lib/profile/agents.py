"""Agent-level (`<stem>_agent_metrics.json`) and repeat-level (`<stem>_repeat_level_metrics.json`) metrics,
as Gym 0.7.0 computes them: pooled per-agent stats, per-(agent, repeat) stats over tasks, across-repeat
aggregates of the primary metrics with a Student-t interval, and per-agent masking coverage."""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from typing import Any

from ..artifacts.names import ROLLOUT_KEY
from .kernels import STATS, describe_groups, gym_confidence_interval, sem_of, series_stats
from .records import Dataset
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


def _labelled(table: Table) -> tuple[list[str], Any, Any]:
    """Sorted agent labels, per-row label codes (-1 for no label), rows that have a label."""
    import numpy as np

    names = sorted(label for label in set(table.labels) if label is not None)
    code: dict[str | None, int] = {name: i for i, name in enumerate(names)}
    n = len(table.labels)
    codes = np.fromiter(map(code.get, table.labels, repeat(-1, n)), dtype=np.int64, count=n)
    return names, codes, np.nonzero(codes >= 0)[0]


def agent_level(table: Table) -> list[dict[str, Any]]:
    import numpy as np

    names, codes, rows = _labelled(table)
    if not len(rows):
        return []
    perm = rows[np.argsort(codes[rows], kind="stable")]
    sorted_codes = codes[perm]
    starts = np.nonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])[0]
    stats = {name: arr.tolist() for name, arr in describe_groups(table.matrix[perm], starts).items()}
    out = []
    for g, start in enumerate(starts.tolist()):
        entry: dict[str, Any] = {}
        for stat in STATS:
            for col, value in zip(table.columns, stats[stat][g], strict=False):
                if value == value:
                    entry[f"{stat}/{col}"] = value
        entry["agent_ref"] = {"name": names[int(sorted_codes[start])]}
        out.append(entry)
    return out


def repeat_level(table: Table) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Gym's `_compute_repeat_level_metrics`; returns (entries, the incomplete ones for the warning)."""
    import numpy as np

    names, codes, rows = _labelled(table)
    multi = [c for c in range(len(names)) if len(np.unique(table.rollouts[rows][codes[rows] == c])) > 1]
    if not multi:
        return [], []
    rows = rows[np.isin(codes[rows], multi)]
    total_tasks = {c: len(np.unique(table.tasks[rows][codes[rows] == c])) for c in multi}
    perm = rows[np.lexsort((table.rollouts[rows], codes[rows]))]  # stable: task order kept in a group
    pairs = np.stack([codes[perm], table.rollouts[perm]], axis=1)
    starts = np.nonzero(np.r_[True, (pairs[1:] != pairs[:-1]).any(axis=1)])[0].tolist()
    columns = sorted(table.columns)
    col_pos = [table.columns.index(c) for c in columns]
    matrix = table.matrix[perm]
    entries = []
    for lo, hi in zip(starts, [*starts[1:], len(perm)], strict=False):
        code, rollout = int(pairs[lo, 0]), int(pairs[lo, 1])
        present = len(np.unique(table.tasks[perm[lo:hi]]))
        entry: dict[str, Any] = {
            "agent_ref": {"name": names[code]},
            ROLLOUT_KEY: rollout,
            "sample_count": present,
            "missing_count": total_tasks[code] - present,
        }
        for col, pos in zip(columns, col_pos, strict=False):
            s = series_stats(matrix[lo:hi, pos])
            if s is None:
                continue
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
        entries.append(entry)
    return entries, [e for e in entries if e["missing_count"] > 0]


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


def coverage_by_agent(data: Dataset) -> dict[str, dict[str, int]]:
    """Gym's `coverage_by_agent`: per agent_ref.name, only for agents with a masked rollout."""
    if not any(map(attrgetter("masked"), data.results.values())):
        return {}
    agent_of_key = {(r.task, r.rollout): r.agent for r in data.inputs if r.agent is not None}
    per_agent: dict[str, list[tuple[int, bool]]] = {}
    for key in sorted(data.results):
        name = agent_of_key.get(key)
        if name is not None:
            per_agent.setdefault(name, []).append((key[0], data.results[key].masked))
    coverage: dict[str, dict[str, int]] = {}
    for name, records in per_agent.items():
        masked = sum(1 for _, m in records if m)
        if not masked:
            continue
        measured_tasks = {t for t, m in records if not m}
        coverage[name] = {
            "coverage/measured_rollouts": len(records) - masked,
            "coverage/masked_rollouts": masked,
            "coverage/measured_tasks": len(measured_tasks),
            "coverage/fully_masked_tasks": len({t for t, _ in records} - measured_tasks),
        }
    return coverage


def agent_metrics(data: Dataset, table: Table, repeat_entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    entries = agent_level(table)
    aggregates = across_repeats(repeat_entries)
    for entry in entries:
        entry.update(aggregates.get(entry["agent_ref"]["name"], {}))
    coverage = coverage_by_agent(data)
    for entry in entries:
        name = entry["agent_ref"]["name"]
        if name in coverage:
            entry.update(coverage.pop(name))
    for name, cov in coverage.items():
        entries.append({"agent_ref": {"name": name}, **cov})
    return entries
