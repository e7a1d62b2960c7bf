"""Where a run's metric comes from: a JSON summary (key path), a reward profile, or a log (regex)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import read_json
from ..artifacts.opening import read_document
from ..errors import InputError, UsageError
from ..stats.uncertainty import t_interval
from .keypaths import miss_hint

_VALUE_KEYS = ("value", "mean", "estimate", "point")
_LOW_KEYS = ("ci_low", "low", "lower", "ci_lower")
_HIGH_KEYS = ("ci_high", "high", "upper", "ci_upper")
_NON_FINITE = ("nan", "-nan", "inf", "-inf", "+inf", "infinity", "-infinity")


class MetricNotFound(InputError):
    """The metric source holds no such key, or the log no match: a run that made no metric."""


class NonFiniteMetric(InputError):
    """The metric was found but is nan or infinite."""


@dataclass(frozen=True)
class Reading:
    value: float
    ci_low: float | None
    ci_high: float | None
    n_tasks: int | None
    source: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _step(node: Any, part: str) -> tuple[bool, Any]:
    if isinstance(node, dict) and part in node:
        return True, node[part]
    if isinstance(node, list) and re.fullmatch(r"-?\d+", part) and -len(node) <= int(part) < len(node):
        return True, node[int(part)]
    if isinstance(node, list) and "=" in part:  # select a list item by a field: pass_at_k.k=4
        name, _, wanted = part.partition("=")
        for item in node:
            if isinstance(item, dict) and name in item and _same(item[name], wanted):
                return True, item
    return False, None


def _same(value: Any, text: str) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(text) == value
        except ValueError:
            return False
    return str(value) == text


def lookup(data: Any, key: str) -> tuple[bool, Any]:
    """Follow a key path: `a.b.0.c` (a key that itself holds dots is matched whole first; `k=4`
    picks the list item whose `k` is 4), or a JSON pointer `/a/b~1c`. Returns (found, value)."""
    if key.startswith("/"):
        node = data
        for part in key[1:].split("/"):
            found, node = _step(node, part.replace("~1", "/").replace("~0", "~"))
            if not found:
                return False, None
        return True, node
    return _dotted(data, key.split("."))


def _dotted(node: Any, parts: list[str]) -> tuple[bool, Any]:
    if not parts:
        return True, node
    for cut in range(len(parts), 0, -1):  # longest key first: "pass@1.0" beats "pass@1" then "0"
        found, child = _step(node, ".".join(parts[:cut]))
        if found:
            found, value = _dotted(child, parts[cut:])
            if found:
                return True, value
    return False, None


def _pair(value: Any) -> tuple[float | None, float | None]:
    if isinstance(value, list) and len(value) == 2:
        return _number(value[0]), _number(value[1])
    if isinstance(value, dict):
        return _first(value, _LOW_KEYS), _first(value, _HIGH_KEYS)
    return None, None


def _first(node: dict, keys: tuple[str, ...]) -> float | None:
    return next((_number(node[k]) for k in keys if k in node and _number(node[k]) is not None), None)


def _sibling_ci(data: Any, key: str) -> tuple[float | None, float | None]:
    """A CI stored next to the value: `<leaf>_ci` / `<leaf>_ci_low`+`_ci_high`, or Gym's
    `ci_low_95_across_repeats/...` beside `mean_across_repeats/...`."""
    head, _, leaf = key.rpartition(".")
    found, parent = lookup(data, head) if head else (True, data)
    if not found or not isinstance(parent, dict):
        return None, None
    if f"{leaf}_ci" in parent:
        return _pair(parent[f"{leaf}_ci"])
    low, high = _number(parent.get(f"{leaf}_ci_low")), _number(parent.get(f"{leaf}_ci_high"))
    if low is None and leaf.startswith("mean_across_repeats/"):
        rest = leaf.removeprefix("mean_across_repeats/")
        low = _number(parent.get(f"ci_low_95_across_repeats/{rest}"))
        high = _number(parent.get(f"ci_high_95_across_repeats/{rest}"))
    return low, high


def from_json(path: Path, key: str, *, ci_key: str | None = None, n_tasks_key: str | None = None) -> Reading:
    """Read the metric (and its interval) from a stats or profile summary JSON."""
    data = read_json(path)
    found, node = lookup(data, key)
    if not found:
        raise MetricNotFound(f"key {key!r} not found", path=path, hint=miss_hint(data, key))
    low = high = None
    n_tasks = None
    if isinstance(node, dict):
        value = _first(node, _VALUE_KEYS)
        low, high = _pair(node.get("ci")) if "ci" in node else _pair(node)
        n_tasks = _int(node.get("n_tasks"))
    else:
        value = _number(node)
        low, high = _sibling_ci(data, key) if not key.startswith("/") else (None, None)
    if value is None:
        undefined = node is None or isinstance(node, float) or str(node).strip().lower() in _NON_FINITE
        raise (NonFiniteMetric if undefined else InputError)(
            f"key {key!r} holds {type(node).__name__} {str(node)[:60]!r}, not a finite number", path=path
        )
    if ci_key is not None:
        found, ci_node = lookup(data, ci_key)
        low, high = _pair(ci_node) if found else (None, None)
        if low is None or high is None:
            raise InputError(
                f"--ci-key {ci_key!r} is not a [low, high] pair or a {{low, high}} object",
                path=path,
                hint=None if found else miss_hint(data, ci_key),
            )
    if n_tasks_key is not None:
        found, n_node = lookup(data, n_tasks_key)
        n_tasks = _int(n_node) if found else None
        if n_tasks is None:
            raise InputError(
                f"--n-tasks-key {n_tasks_key!r} is not a non-negative integer",
                path=path,
                hint=None if found else miss_hint(data, n_tasks_key),
            )
    return Reading(value, low, high, n_tasks, f"{path}:{key}")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def from_profile(path: Path, metric: str = "reward") -> Reading:
    """Task-weighted mean of per-task means, with a 95% t interval over tasks."""
    means = task_means(path, metric)
    interval = t_interval(means)
    low, high = (interval.ci_low, interval.ci_high) if interval.n >= 2 else (None, None)
    return Reading(interval.value, low, high, len(means), f"{path}:{metric}")


def task_means(path: Path, metric: str = "reward") -> list[float]:
    """Per-task (per task+agent) mean of `rollout_infos[*].<metric>`, read by the stats loader."""
    from ..stats.estimators import row_means
    from ..stats.load import load_profile

    data = load_profile(path, (metric,))
    if not data.n_tasks:
        raise InputError("profile has no tasks", path=path)
    # a task whose rollouts all have a null reward has no mean: left out, as `ngrp stats` leaves it out
    means = [float(m) for m in row_means(data.values[metric]) if not math.isnan(m)]
    if not means:
        raise InputError(
            f"no task has a numeric rollout_infos[*].{metric}",
            path=path,
            hint="pass a *_reward_profiling.jsonl written by `gym eval profile` or `ngrp profile`",
        )
    return means


def from_log(path: Path, pattern: str) -> Reading:
    """The last match of `pattern` in a log: named group `value` (or group 1, or the whole match);
    optional named groups `ci_low` / `ci_high`."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--metric-regex is not a valid regular expression: {exc}") from None
    text = read_document(path, what="log").decode("utf-8", errors="replace")
    match = None
    for match in regex.finditer(text):  # noqa: B007 - the last match is the final metric
        pass
    if match is None:
        raise MetricNotFound(
            f"--metric-regex {pattern!r} matches nothing in the log",
            path=path,
            hint=f"read the end of the log (tail -n 50 {path}); if the run produced no metric, "
            "record it with --status crash",
        )
    groups = match.groupdict()
    raw = groups.get("value") or (match.group(1) if regex.groups else match.group(0))
    value = _parse_float(raw, path, pattern)
    low = _parse_float(groups["ci_low"], path, pattern) if groups.get("ci_low") else None
    high = _parse_float(groups["ci_high"], path, pattern) if groups.get("ci_high") else None
    return Reading(value, low, high, None, f"{path}:/{pattern}/")


def _parse_float(raw: str | None, path: Path, pattern: str) -> float:
    try:
        value = float(raw or "")
    except ValueError:
        raise InputError(
            f"--metric-regex {pattern!r} matched {raw!r}, which is not a finite number",
            path=path,
            hint="capture only the number, e.g. 'accuracy=(?P<value>[0-9.]+)'",
        ) from None
    if not math.isfinite(value):
        raise NonFiniteMetric(
            f"--metric-regex {pattern!r} matched {raw!r}, which is not a finite number", path=path
        )
    return value
