"""Gym's `rollout_infos`, written back from the store's numbers when the profile rows are written: per plan,
each argument of its template is one column, serialized by one `orjson.dumps` of the column's values (the
same numbers as in the rollout, so the same bytes), then spliced per rollout."""

from __future__ import annotations

from typing import Any

import orjson

from .dataset import numbers, plan_ids
from .records import BOOL, FLOAT, ResultStore

_BOOLS = (b"false", b"true")


def rollout_infos(store: ResultStore, offsets: tuple[Any, Any], positions: Any) -> list[bytes]:
    """The rollout_info bytes of the store's rollouts at `positions` (an index array), in that order.
    `offsets`: `dataset.offsets(store)`."""
    import numpy as np

    plans = plan_ids(store)[positions]
    present = np.unique(plans).tolist() if len(plans) else []
    if len(present) == 1:
        return _render(store, offsets, present[0], positions)
    out: list[bytes] = [b""] * len(positions)
    for plan in present:
        pick = np.nonzero(plans == plan)[0]
        for at, info in zip(pick.tolist(), _render(store, offsets, plan, positions[pick]), strict=True):
            out[at] = info
    return out


def _render(store: ResultStore, offsets: tuple[Any, Any], plan_id: int, positions: Any) -> list[bytes]:
    plan = store.plans[plan_id]
    if plan.info_template is None:
        odd = store.odd_infos
        return [odd[at] for at in positions.tolist()]
    floats, ints = numbers(store, "floats", "float64"), numbers(store, "ints")
    start_f, start_i = offsets[0][positions], offsets[1][positions]
    columns = []
    for kind, k in plan.info_args:
        values = floats[start_f + k].tolist() if kind == FLOAT else ints[start_i + k].tolist()
        if kind == BOOL:
            columns.append([_BOOLS[v] for v in values])
        else:
            columns.append(orjson.dumps(values)[1:-1].split(b","))  # FLOAT or INT: the number's JSON
    task_list, rollout_list = (
        numbers(store, "task")[positions].tolist(),
        numbers(store, "rollout")[positions].tolist(),
    )
    if not task_list:
        return []
    rows = zip(task_list, rollout_list, task_list, rollout_list, *columns, strict=True)
    return list(map(plan.info_template.__mod__, rows))
