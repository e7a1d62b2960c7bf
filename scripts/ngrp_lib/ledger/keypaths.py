"""When a `--metric-key` path misses, name the real full paths nearest to it.

Every place a metric can be read from is listed as a full key path in `metric.lookup`'s syntax: a
number, or an object holding one (`value`, `mean`...). List items are named by a field that tells them
apart (`pass_at_k.k=1`) when every item has one, else by position (`groups.0.mean`). The paths are then
ranked: those that end with the asked path (the usual miss: `pass_at_k.k=1` for
`overall.pass_at_k.k=1`), then those whose last part matches, then close spellings.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Iterator
from typing import Any

_VALUE_KEYS = ("value", "mean", "estimate", "point")
_ITEM_FIELDS = ("k", "name", "id", "key", "metric", "task", "_ng_task_index", "agent", "group", "scope")
MAX_PATHS = 5000  # a summary with more leaves than this is searched only this far


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _item_field(items: list) -> str | None:
    """A scalar field whose value differs between every item of a list of objects."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    for name in _ITEM_FIELDS:
        values = [item.get(name) for item in items]
        if all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values) and len(
            set(map(str, values))
        ) == len(values):
            return name
    return None


def metric_paths(data: Any, prefix: str = "", skip: str | None = None) -> Iterator[str]:
    """Every key path that `metric.from_json` could read a number from, depth first."""
    if _is_number(data):
        yield prefix
        return
    if isinstance(data, dict):
        if prefix and any(_is_number(data.get(k)) for k in _VALUE_KEYS):
            yield prefix  # a metric object: its se, interval and n are not listed one by one
            return
        for key, value in data.items():
            if key != skip:
                yield from metric_paths(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        field = _item_field(data)
        for position, item in enumerate(data):
            part = f"{field}={_text(item[field])}" if field else str(position)
            yield from metric_paths(item, f"{prefix}.{part}" if prefix else part, skip=field)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def nearest_paths(data: Any, key: str, limit: int = 5) -> list[str]:
    """The `limit` existing metric paths nearest to the missed `key`, best first."""
    paths: list[str] = []
    for path in metric_paths(data):
        paths.append(path)
        if len(paths) >= MAX_PATHS:
            break
    wanted = key[1:].replace("/", ".") if key.startswith("/") else key
    parts = wanted.split(".")
    holding = [p for p in paths if _contains(p.split("."), parts)]
    holding.sort(key=lambda p: (_positional(p), not p.endswith("." + wanted), len(p)))
    last = [p for p in paths if p.split(".")[-1] == parts[-1] and p not in holding]
    last.sort(key=lambda p: (_positional(p), _distance(p, wanted)))
    close = difflib.get_close_matches(wanted, paths, n=limit * 4, cutoff=0.5)
    out: list[str] = []
    shapes: set[str] = set()
    for path in holding + last + close:
        shape = ".".join("N" if _row_step(part) else part for part in path.split("."))
        if path not in out and shape not in shapes:  # one of per_task.0.x, per_task.1.x, ...
            out.append(path)
            shapes.add(shape)
    return out[:limit]


def _contains(path: list[str], parts: list[str]) -> bool:
    n = len(parts)
    return any(path[i : i + n] == parts for i in range(len(path) - n + 1))


def _row_step(part: str) -> bool:
    """A step to one row of a list (`0`, `task=3`); `k=4` picks an estimator, not a row."""
    field, sep, _ = part.partition("=")
    return part.isdigit() or (bool(sep) and field != "k")


def _positional(path: str) -> int:
    """Paths through one row of a list (one task's) are rarely the campaign metric: rank them last."""
    return sum(_row_step(part) for part in path.split("."))


def _distance(path: str, wanted: str) -> float:
    return 1.0 - difflib.SequenceMatcher(None, path, wanted).ratio()


def miss_hint(data: Any, key: str) -> str:
    """The hint of a key-path miss: the nearest real paths, else some real paths, else what the file is."""
    near = nearest_paths(data, key)
    if near:
        return "nearest key paths: " + ", ".join(near)
    some = [p for p in itertools.islice(metric_paths(data), 200) if not _positional(p)][:8]
    if some:
        return "no key path like it; key paths here include: " + ", ".join(some)
    if isinstance(data, dict):
        return "no number in this document; top-level keys: " + ", ".join(map(str, list(data)[:12]))
    if isinstance(data, list):
        return f"the document is a list of {len(data)} with no number in it"
    return "the document is not an object"
