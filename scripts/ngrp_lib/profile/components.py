"""Per-task reward component means for the profile rows: `ngrp/` keys after Gym's (Gym's keys unchanged).

A multi-reward resources server writes `reward_components: {name: number}` beside `reward`; Gym's profiler
only profiles top-level numbers, so the components are read here. Per task (or task and agent) and per
component, over its unmasked rollouts that carry `reward_components`:
- `ngrp/component_mean/<name>`: the mean over the rollouts holding the component as a number;
- `ngrp/component_n/<name>`: how many rollouts that is;
- `ngrp/component_missing/<name>`: rollouts whose `reward_components` lack it or hold a non-number for it
  (only when there are any). A missing component is counted here, never averaged in as 0.
"""

from __future__ import annotations

from typing import Any

import orjson

PREFIX = "ngrp/"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and value not in (float("inf"), float("-inf")):
        return float(value)
    return None


def component_keys(found: list[Any]) -> dict[str, Any]:
    """The ngrp/component_* keys of one task from its rollouts' reward_components (objects or other)."""
    names: dict[str, None] = {}
    rows = [c for c in found if isinstance(c, dict)]
    for c in rows:
        names.update(dict.fromkeys(map(str, c)))
    out: dict[str, Any] = {}
    for name in names:
        values = [_number(c.get(name)) for c in rows]
        numbers = [v for v in values if v is not None]
        out[f"{PREFIX}component_mean/{name}"] = sum(numbers) / len(numbers) if numbers else None
        out[f"{PREFIX}component_n/{name}"] = len(numbers)
        if len(numbers) < len(rows):
            out[f"{PREFIX}component_missing/{name}"] = len(rows) - len(numbers)
    return out


def component_bytes(kept: dict[int, Any], positions: list[int]) -> bytes:
    """`,"ngrp/component_mean/a":...` for a group whose rollouts sit at `positions` in the store."""
    found = [kept[p] for p in positions if p in kept]
    if not found:
        return b""
    keys = component_keys(found)
    return b"," + orjson.dumps(keys)[1:-1] if keys else b""
