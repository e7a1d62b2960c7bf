"""Result records to JSON values: the one place where an undefined number (NaN, +-inf) becomes null.

`jsonable` walks dataclasses (in field order), dicts, lists and tuples; numpy scalars become Python
numbers. A dataclass field with `metadata={"inline": True}` holding a dataclass has its fields written
into the parent's object in place (an estimate at k is `{"k": 4, "value": ..., ...}`, not nested).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

INLINE = {"inline": True}


def finite(value: Any) -> float | None:
    """A number as a float, or None when it is None, NaN or infinite."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of `value`: NaN and infinities are null, dataclasses are objects."""
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _record(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # a numpy scalar
        return jsonable(value.item())
    return value


def _record(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if f.metadata.get("inline") and item is not None:
            out.update(_record(item))
        else:
            out[f.name] = jsonable(item)
    return out


def shown(value: Any, *, quote: bool = False) -> str:
    """A value in a line for people: a string as it is (JSON-quoted with `quote`), anything else as
    compact JSON (`null`, `[1, 2]`, `{"name": "m"}`), never a Python repr (`None`, `(1, 2)`,
    `{'name': 'm'}`)."""
    import json

    if isinstance(value, str) and not quote:
        return value
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(", ", ": "), default=str)
