"""Give rollouts without identity keys their keys, and the materialized inputs they were run from.

Many of NeMo Gym's own `example_rollouts.jsonl` files (aviary's, and others written before the collector
stamped keys) carry no `_ng_task_index` / `_ng_rollout_index` and come without a materialized inputs
file, so `check`, `health`, `profile` and `stats` cannot join them. The rule, stated once:

- a task is a prompt: rows whose `responses_create_params.input` is the same (compared as JSON, key
  order and spacing aside) are repeats of one task; or, with `task_field` (`--task-field task_idx`),
  rows whose value of that top-level field is the same. An environment that gives the task itself
  sends an empty prompt (aviary's rows: `input: []`, the task in `task_idx`): such a row is refused
  without `task_field`, since every row would read as one task;
- tasks are numbered 0, 1, 2... in the order their first row appears; a task's repeats 0, 1, 2... in
  file order;
- every row must have no key and a `responses_create_params.input`; or every row both keys (Gym's
  keyed example rows that came without their inputs): the keys are kept as they are (a key twice is
  refused) and only the materialized inputs are new. A file where some rows have keys and others not is
  refused, naming the first row that breaks the first row's way: numbering around keys could collide.

It writes the rows with their keys (unchanged otherwise, in file order) and, beside them, the
materialized inputs Gym's naming expects (`<stem>_materialized_inputs.jsonl`): one row per key, a task's
repeats together, with the row's `responses_create_params`, its `agent_ref` and `expected_answer` when it
has them, and the keys (held in memory until the end to be written in that order).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import InputError, UsageError
from .atomic import atomic_outputs, refuse_existing
from .jsonl import iter_rows
from .names import RCP, ROLLOUT_KEY, TASK_KEY, materialized_path_for

KEPT = ("agent_ref", "expected_answer")  # task fields copied into the materialized row when present


@dataclass
class AssignedKeys:
    rollouts: str
    output: str
    materialized: str
    rows: int
    tasks: int
    max_repeats: int
    kept_keys: bool = False  # every row had its keys: kept, only the materialized inputs are new

    def to_json(self) -> dict[str, Any]:
        return {
            "rollouts": self.rollouts,
            "output": self.output,
            "materialized": self.materialized,
            "rows": self.rows,
            "tasks": self.tasks,
            "max_repeats": self.max_repeats,
            "kept_keys": self.kept_keys,
            "rule": "the rows' own keys, kept"
            if self.kept_keys
            else "a task is a prompt (responses_create_params.input); tasks numbered by first appearance, "
            "repeats in file order",
        }


def assign_keys(
    rollouts: Path | str, output: Path | str, *, task_field: str | None = None, overwrite: bool = False
) -> AssignedKeys:
    """Write `output` (the rows with keys) and its materialized inputs beside it; see the module's rule."""
    rollouts, output = Path(rollouts), Path(output)
    materialized = materialized_path_for(output)
    refuse_existing([output, materialized], overwrite, inputs=(rollouts,))
    tasks: dict[bytes, int] = {}
    repeats: list[int] = []
    inputs: dict[Any, list[bytes]] = {}  # task -> its materialized rows (written in task order at the end)
    rows = 0
    keyed: bool | None = None  # decided by the first row: every row has both keys, or none has either
    seen: dict[tuple[Any, Any], int] = {}  # keyed rows: key -> line (a key twice is refused)
    with atomic_outputs({"rows": output, "inputs": materialized}, overwrite=overwrite) as out:
        for row in iter_rows(rollouts, allow_blank=False):
            data = row.data
            has = (TASK_KEY in data, ROLLOUT_KEY in data)
            keyed = all(has) if keyed is None else keyed
            if has != (keyed, keyed):
                raise _mixed(rollouts, row.line, has, keyed, rows)
            params = data.get(RCP)
            if keyed:
                if task_field is not None:
                    raise UsageError("--task-field numbers rows without keys; these rows have their keys")
                key = (data[TASK_KEY], data[ROLLOUT_KEY])
                if not isinstance(params, dict):
                    raise InputError(f"no {RCP}: the materialized row would have no prompt",
                                     path=rollouts, line=row.line, pointer=f"/{RCP}")  # fmt: skip
                if key in seen:
                    raise InputError(
                        f"key ({TASK_KEY} {key[0]!r}, {ROLLOUT_KEY} {key[1]!r}) is on line {seen[key]} too",
                        path=rollouts,
                        line=row.line,
                    )
                seen[key] = row.line
                task, keys = key[0], {TASK_KEY: key[0], ROLLOUT_KEY: key[1]}
            else:
                canonical = _task_of(data, params, task_field, rollouts, row.line)
                task = tasks.setdefault(canonical, len(tasks))
                if task == len(repeats):
                    repeats.append(0)
                keys = {TASK_KEY: task, ROLLOUT_KEY: repeats[task]}
                repeats[task] += 1
            out["rows"].write(orjson.dumps({**data, **keys}) + b"\n")
            kept = {name: data[name] for name in (*KEPT, task_field) if name is not None and name in data}
            inputs.setdefault(task, []).append(orjson.dumps({RCP: params, **kept, **keys}) + b"\n")
            rows += 1
        if not rows:
            raise UsageError(f"{rollouts} holds no rows: nothing to number")
        if keyed:  # the rows' own keys: tasks in order, a task's repeats together in order
            order = sorted(inputs, key=_key_order)
            for task in order:
                inputs[task].sort(key=lambda line: _key_order(orjson.loads(line)[ROLLOUT_KEY]))
            repeats = [len(inputs[t]) for t in order]
        else:
            order = list(range(len(tasks)))
        for task in order:  # Gym's order: a task's repeats together, tasks in order
            out["inputs"].writelines(inputs[task])
    return AssignedKeys(
        str(rollouts), str(output), str(materialized), rows, len(inputs), max(repeats), bool(keyed)
    )


def _key_order(value: Any) -> tuple:
    """Integer keys in numeric order, any other key after them as text."""
    return (0, value, "") if type(value) is int else (1, 0, str(value))


def _mixed(path: Path, line: int, has: tuple[bool, bool], keyed: bool, before: int) -> InputError:
    """The row that breaks the file's rule (all rows keyed, or none), described as it is."""
    if has[0] != has[1]:
        present, absent = (TASK_KEY, ROLLOUT_KEY) if has[0] else (ROLLOUT_KEY, TASK_KEY)
        what = f"this row has {present} but no {absent}"
    elif keyed:
        what = f"this row has no {TASK_KEY}/{ROLLOUT_KEY}, but the {before} row(s) before it have them"
    else:
        what = f"this row has {TASK_KEY}/{ROLLOUT_KEY}, but the {before} row(s) before it have none"
    return InputError(
        f"{what}: numbering rows around keyed ones could collide",
        path=path,
        line=line,
        hint="use a file whose rows all lack keys (they are numbered) or all have both (they are kept)",
    )


def _task_of(data: dict, params: Any, task_field: str | None, path: Path, line: int) -> bytes:
    """What tells the row's task, as canonical JSON bytes (the rule in the module's docstring)."""
    if task_field is not None:
        if task_field not in data:
            raise InputError(
                f"no field {task_field!r} (--task-field)", path=path, line=line, pointer=f"/{task_field}"
            )
        return orjson.dumps(data[task_field], option=orjson.OPT_SORT_KEYS)
    prompt = params.get("input") if isinstance(params, dict) else None
    if prompt is None:
        raise InputError(
            f"no {RCP}.input: the prompt is what tells the row's task",
            path=path,
            line=line,
            pointer=f"/{RCP}/input",
            hint="name the field that tells the task with --task-field FIELD",
        )
    if prompt in ([], ""):
        raise InputError(
            f"{RCP}.input is empty (the environment gives the task itself): all rows would be one task",
            path=path,
            line=line,
            pointer=f"/{RCP}/input",
            hint="name the field that tells the task: --task-field FIELD (aviary's rows: task_idx)",
        )
    return orjson.dumps(prompt, option=orjson.OPT_SORT_KEYS)
