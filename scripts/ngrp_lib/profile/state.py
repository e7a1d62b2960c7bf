"""The profile state a shard writes (`--save-state`) for a later `--merge`: JSON lines in three sections.

1. A header: options, sources, and the shard's facts a merge adds up (accounting, coverage, missing keys,
   run keys and their agents, columns with where each first appears, the shard's tasks), and how many lines
   of each kind follow. A reader checks what it streams against all of these, so a state cut short (at a
   line boundary too), with a group dropped, added or moved, or edited counts is refused, naming the line.
2. The exact section, for shards that do not split the run by task: every plan (`p`), input (`i`), rollout
   as its plan's numbers (`r`) and sample (`s`); a merge rebuilds the union's arrays from them.
3. The group section, for shards split by task (each shard's task rows final): per profile row a `g` line
   (task, label, null count, scored rewards, rollout indices, values per column) and then the row itself
   without its ngrp/* keys; a merge streams these and keeps only the numbers the agent-level and
   repeat-level statistics need.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ..artifacts.jsonl import BLOCK, LineReader
from ..artifacts.names import TASK_KEY
from ..artifacts.opening import open_input
from ..errors import InputError
from .dataset import Dataset
from .group_rows import GroupRow
from .records import LAST_MASKED_ID, MASKED_ID, UNHEALTHY_ID, compact_dumps, run_labels
from .summary import Facts
from .table import Table

VERSION = 4  # 3: the header declares its line counts (`lines`); 4: reward components kept
_NULLABLE = (str, type(None))
# each line after the header: its kind and the JSON types of its fields
_SHAPES: dict[str, tuple[Any, ...]] = {
    "p": (int, list, list, list, bool),
    "i": (int, int, _NULLABLE, _NULLABLE),
    "r": (int, int, int, list, list),
    "s": (int, _NULLABLE, int, dict),
    "g": (int, _NULLABLE, int, list, list, list),
}
_SECTION = {"p": 1, "i": 1, "r": 1, "s": 1, "g": 2}
_WHAT = {"p": "plan", "i": "input row", "r": "rollout row", "s": "sample", "g": "task group"}
_EXTRA = {"r": 2, "g": 1}
_EXTRA_TYPE: dict[str, type | tuple[type, ...]] = {"r": (dict, type(None)), "g": str}
_HINT = "profile that shard again with --save-state"
STREAM_BLOCK = 1 << 16  # a merge reads every shard at once: 64 KB each, not the shared reader's 1 MB


@dataclass
class ShardHeader:
    path: Path
    null_reward: str
    sources: dict[str, Any]
    facts: Facts
    coverage: list[list[Any]]  # [agent, 4 coverage counts, first task, first rollout]
    agent_by_key: dict[str, str | None]
    per_agent: bool
    columns: list[tuple[str, int, int, int]]  # name, then the key and rank where it first appears
    tasks: Any  # int64 array, sorted
    uniform: int | None  # the size of every group when all are equal and complete (see group_rows)
    negative_zero: bool  # some value is -0.0
    lines: dict[str, int]  # how many lines of each kind follow the header
    task_runs: list[list[int]]  # `tasks` as [first, step, count] runs (see `progressions`)


def write_header(
    handle: IO[bytes],
    table: Table,
    facts: Facts,
    extra: dict[str, Any],
    options: Any,
    sources: dict[str, Any],
) -> None:
    firsts = [
        [name, int(table.tasks[row]), int(table.rollouts[row]), rank]
        for name, (row, rank) in zip(table.columns, table.column_firsts, strict=True)
    ]
    header = {
        "ngrp_profile_state": VERSION,
        "null_reward": options.null_reward,
        "sources": sources,
        "facts": facts.to_json(),
        "per_agent": table.per_agent,
        "columns": firsts,
        **extra,
    }
    handle.write(orjson.dumps(header) + b"\n")


def progressions(values: Any) -> list[list[int]]:
    """A sorted int64 array as [first, step, count] runs: the tasks of a `--shard i/N` file are one run
    (`i, N, count`), so the header stays small whatever the shard's size."""
    out: list[list[int]] = []
    items = values.tolist()
    at = 0
    while at < len(items):
        if at + 1 == len(items):
            out.append([items[at], 1, 1])
            break
        step, end = items[at + 1] - items[at], at + 1
        while end + 1 < len(items) and items[end + 1] - items[end] == step:
            end += 1
        out.append([items[at], step, end - at + 1])
        at = end + 1
    return out


def expand(runs: list[list[int]]) -> Any:
    import numpy as np

    parts = [first + step * np.arange(count, dtype=np.int64) for first, step, count in runs]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def write_exact(handle: IO[bytes], data: Dataset, table: Table) -> None:
    """Section 2: every plan, input, rollout (as numbers) and sample."""
    store = data.results
    for plan in store.plans[LAST_MASKED_ID + 1 :]:
        handle.write(orjson.dumps(["p", plan.id, *plan.descriptor]) + b"\n")
    inputs = data.inputs
    run_key, agent = inputs.run_keys.value, inputs.agents.value
    for task, rollout, key, name in zip(
        inputs.task.tolist(),
        inputs.rollout.tolist(),
        inputs.run_key.tolist(),
        inputs.agent.tolist(),
        strict=True,
    ):
        handle.write(orjson.dumps(["i", task, rollout, run_key(key), agent(name)]) + b"\n")
    for start in range(0, len(store), _CHUNK):
        _write_results(handle, store, table.offsets, start, min(start + _CHUNK, len(store)))
    for (task, key), (rollout, raw) in data.samples.items():
        handle.write(orjson.dumps(["s", task, run_key(key), rollout])[:-1] + b"," + raw + b"]\n")


_CHUNK = 65536


def _write_results(handle: IO[bytes], store: Any, offsets: tuple[Any, Any], lo: int, hi: int) -> None:
    """The `r` lines of rollouts lo:hi, their numbers converted to Python a chunk at a time."""
    f0, i0 = int(offsets[0][lo]), int(offsets[1][lo])
    plans = store.plans
    last = store.plans[store.plan[hi - 1]]
    floats = store.floats[f0 : int(offsets[0][hi - 1]) + last.n_floats].tolist()
    ints = store.ints[i0 : int(offsets[1][hi - 1]) + last.n_ints].tolist()
    odd, kept = store.odd_infos, store.components
    rows = zip(
        range(lo, hi),
        store.task[lo:hi],
        store.rollout[lo:hi],
        store.plan[lo:hi],
        (offsets[0][lo:hi] - f0).tolist(),
        (offsets[1][lo:hi] - i0).tolist(),
        strict=True,
    )
    for at, task, rollout, plan_id, f, i in rows:
        plan = plans[plan_id]
        line = orjson.dumps(
            ["r", task, rollout, plan_id, floats[f : f + plan.n_floats], ints[i : i + plan.n_ints]]
        )
        if at in kept:  # then the info, or null, and the components
            handle.write(line[:-1] + b"," + odd.get(at, b"null") + b"," + orjson.dumps(kept[at]) + b"]\n")
        else:
            handle.write(line[:-1] + b"," + odd[at] + b"]\n" if at in odd else line + b"\n")


def write_group(handle: IO[bytes], row: GroupRow) -> None:
    """Section 3: one profile row and the numbers a merge needs of it."""
    meta = ["g", row.task, row.label, row.null, row.rewards, row.rollouts.tolist(), row.values.T.tolist()]
    if row.components:
        meta.append(row.components.decode())
    handle.write(orjson.dumps(meta) + b"\n" + row.gym + b"}\n")


def read_header(path: Path) -> ShardHeader:
    first = next(_lines(path, header=True), (1, b""))[1]
    if not first.strip():
        raise InputError("empty profile state file", path=path)
    try:
        raw = orjson.loads(first)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path, line=1) from exc
    if not isinstance(raw, dict) or "ngrp_profile_state" not in raw:
        raise InputError("not an ngrp profile state file (bad header)", path=path, line=1)
    if raw["ngrp_profile_state"] != VERSION:
        raise InputError(
            f"profile state version {raw['ngrp_profile_state']!r}, not {VERSION} (written by another ngrp)",
            path=path,
            line=1,
            hint=_HINT,
        )
    try:
        header = ShardHeader(
            path,
            raw["null_reward"],
            raw["sources"],
            Facts.from_json(raw["facts"]),
            raw["coverage"],
            dict(raw["agent_by_key"]),
            raw["per_agent"],
            [tuple(c) for c in raw["columns"]],
            expand(raw["tasks"]),
            raw["uniform"],
            raw["negative_zero"],
            dict(raw["lines"]),
            raw["tasks"],
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(f"not a profile state header ({exc})", path=path, line=1, hint=_HINT) from exc
    _check_header(header)
    return header


def _check_header(header: ShardHeader) -> None:
    """The header's counts: of the right types, and adding up where two of them count the same rows."""
    lines, facts = header.lines, header.facts
    counts = [lines.get(kind) for kind in _SHAPES]
    values = [
        *counts,
        facts.table_rows,
        facts.labelled_rows,
        facts.accounting.inputs,
        facts.accounting.results,
    ]
    runs = header.task_runs
    if (
        sorted(lines) != sorted(_SHAPES)
        or not all(type(n) is int and n >= 0 for n in values)
        or not all(type(n) is int for run in runs for n in run)
        or not all(len(run) == 3 and run[1] > 0 and run[2] > 0 for run in runs)
        or any(a[0] + a[1] * (a[2] - 1) >= b[0] for a, b in zip(runs, runs[1:], strict=False))
    ):
        raise InputError(
            "not a profile state header (bad counts; edited?)", path=header.path, line=1, hint=_HINT
        )
    if lines["i"] != facts.accounting.inputs or lines["r"] != facts.accounting.results:
        raise InputError(
            f"the profile state header does not add up: {lines['i']} input and {lines['r']} rollout lines"
            f" declared, its accounting counts {facts.accounting.inputs} and {facts.accounting.results}"
            " (edited?)",
            path=header.path,
            line=1,
            hint=_HINT,
        )


def _lines(path: Path, header: bool = False, block: int = BLOCK) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) after the header (or just the header), through the shared
    reader: a regular file only, lines no longer than the limit, `block` bytes read at a time."""
    number = 0
    with open_input(path, buffering=0) as handle:
        for batch in LineReader(handle, path, block=block):
            for line in batch:
                number += 1
                if line.endswith(b"\n"):  # the reader keeps each newline; state lines are used without it
                    line = line[:-1]
                if header:
                    yield number, line
                    return
                if number > 1:
                    yield number, line


def _parse(path: Path, number: int, line: bytes) -> list[Any]:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path, line=number, hint=_HINT) from exc
    shape = _SHAPES.get(row[0]) if isinstance(row, list) and row and isinstance(row[0], str) else None
    # an `r` line may end with its rollout_info (or null) and its reward_components; a `g` line with the
    # profile row's ngrp/component_* keys
    extra = _EXTRA.get(row[0], 0) if shape is not None else 0
    if (
        shape is None
        or not len(shape) + 1 <= len(row) <= len(shape) + 1 + extra
        or not all(map(isinstance, row[1:], shape))
        or any(type(v) is bool for v, kind in zip(row[1:], shape, strict=False) if kind is int)
        or (len(row) > len(shape) + 1 and not isinstance(row[len(shape) + 1], _EXTRA_TYPE[row[0]]))
    ):
        raise _bad_line(path, number)
    return row


def _bad_line(
    path: Path, number: int, what: str = "not a profile state line (edited or from another tool?)"
) -> InputError:
    return InputError(what, path=path, line=number, hint=_HINT)


def _kind(line: bytes) -> str | None:
    """A line's kind from its first bytes, without parsing it (`["g",...` -> "g")."""
    return chr(line[2]) if line[:2] == b'["' and line[3:5] == b'",' else None


def load_exact(header: ShardHeader, data: Dataset) -> None:
    """Section 2 of a shard into `data` (the union), checking every line of the file's shape and the
    number of lines of each kind against the header."""
    path = header.path
    plans: dict[int, Any] = {i: data.results.plans[i] for i in (MASKED_ID, UNHEALTHY_ID)}
    samples = data.samples
    tally = _Tally(header)
    row_line = False
    section = 1
    number = 1
    for number, line in _lines(path):
        if row_line:  # the profile row after a `g` line
            _check_row(path, number, line, None)
            row_line = False
            continue
        kind = _kind(line)
        if kind == "g":
            section, row_line = 2, True
            _parse(path, number, line)
            tally.add("g", number)
            continue
        row = _parse(path, number, line)
        if _SECTION[row[0]] < section:
            raise _bad_line(path, number, "profile state line out of place (edited?)")
        tally.add(row[0], number)
        _load_line(path, number, row, data, plans, samples)
    if row_line:
        raise _bad_line(path, number, "profile state ends inside a group")
    tally.finish(number)


class _Tally:
    """The lines of each kind read so far, against the numbers the header declares."""

    def __init__(self, header: ShardHeader) -> None:
        self.header = header
        self.seen = dict.fromkeys(_SHAPES, 0)

    def add(self, kind: str, number: int) -> None:
        self.seen[kind] += 1
        declared = self.header.lines[kind]
        if self.seen[kind] > declared:
            raise _bad_line(
                self.header.path,
                number,
                f"one {_WHAT[kind]} more than the {declared} its header (line 1) declares"
                " (edited, or two states joined?)",
            )

    def finish(self, number: int) -> None:
        for kind, seen in self.seen.items():
            declared = self.header.lines[kind]
            if seen < declared:
                raise _bad_line(
                    self.header.path,
                    number,
                    f"profile state cut short: it ends at line {number} with {seen} of the {declared}"
                    f" {_WHAT[kind]}s its header (line 1) declares",
                )


def _load_line(path: Path, number: int, row: list[Any], data: Dataset, plans: dict, samples: dict) -> None:
    kind = row[0]
    if kind == "p":
        try:
            plans[row[1]] = data.results.plan_from(row[2:])
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad_line(path, number) from exc
    elif kind == "i":
        data.inputs.add(row[1], row[2], -1, row[3], row[4])
    elif kind == "r":
        plan = plans.get(row[3])
        if plan is None or len(row[4]) != plan.n_floats or len(row[5]) != plan.n_ints:
            raise _bad_line(path, number)
        info = row[6] if len(row) > 6 else None
        if (plan.info_template is None and not plan.masked) != (info is not None):
            raise _bad_line(path, number)
        try:
            data.results.add_numbers(
                row[1], row[2], plan, row[4], row[5], compact_dumps(info) if info is not None else None
            )
        except (TypeError, OverflowError) as exc:
            raise _bad_line(path, number) from exc
        if len(row) > 7:
            data.results.components[len(data.results) - 1] = row[7]
    else:
        group = (row[1], data.inputs.run_keys.code(row[2]))
        best = samples.get(group)
        if best is None or row[3] < best[0]:
            samples[group] = (row[3], compact_dumps(row[4]))


def _check_row(path: Path, number: int, line: bytes, task: int | None) -> None:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path, line=number, hint=_HINT) from exc
    if not isinstance(row, dict) or (task is not None and row.get(TASK_KEY) != task):
        raise _bad_line(path, number, "not the profile row its `g` line announces (edited?)")


@dataclass
class StateGroup:
    """One `g` line and its profile row, as read back."""

    task: int
    label: str | None
    null: int
    rewards: list[float]
    rollouts: list[int]
    values: list[list[float | None]]  # per shard column, per rollout (null: missing)
    gym: bytes
    components: bytes = b""  # the row's ngrp/component_* keys


def iter_groups(header: ShardHeader) -> Iterator[StateGroup]:
    """Section 3 of a shard, in the shard's row order. Section 2 is skipped unread (the exact path reads
    it) but its lines are counted; every line from the first `g` line on is checked, and so is what the
    groups add up to against the header: how many there are, their order, tasks, labels and sizes, and
    the rollouts they hold."""
    path, n_columns = header.path, len(header.columns)
    tally = _Tally(header)
    check = _GroupCheck(header)
    meta: list[Any] | None = None
    in_groups = False
    number = 1
    for number, line in _lines(path, block=STREAM_BLOCK):
        if meta is not None:
            _check_row(path, number, line, meta[1])
            if len(meta[6]) != n_columns or any(len(col) != len(meta[5]) for col in meta[6]):
                raise _bad_line(path, number - 1, "a `g` line's values do not fit its columns (edited?)")
            extra = meta[7].encode() if len(meta) > 7 else b""
            yield StateGroup(meta[1], meta[2], meta[3], meta[4], meta[5], meta[6], line[:-1], extra)
            meta = None
            continue
        kind = _kind(line)
        if not in_groups and kind is not None and _SECTION.get(kind) == 1:
            tally.add(kind, number)
            continue
        row = _parse(path, number, line)
        if row[0] != "g":
            raise _bad_line(path, number, "profile state line out of place (edited?)")
        tally.add("g", number)
        check.group(row, number)
        in_groups, meta = True, row
    if meta is not None:
        raise _bad_line(path, number, "profile state ends inside a group")
    tally.finish(number)
    check.finish(number)


class _GroupCheck:
    """The `g` lines of one shard against its header: in row order, for the shard's tasks and labels, of
    the one size the header names (if it does), holding the rollouts its facts count."""

    def __init__(self, header: ShardHeader) -> None:
        self.header = header
        self.labels = set(run_labels(header.agent_by_key).values())
        self.last: tuple[Any, ...] | None = None
        self.run = 0  # the run of `header.task_runs` the tasks have reached
        self.rows = 0
        self.labelled = 0

    def group(self, row: list[Any], number: int) -> None:
        header = self.header
        task, label, size = row[1], row[2], len(row[5])
        if (label is None and header.per_agent) or (label is not None and label not in self.labels):
            raise self._bad(
                number, f"a task group labelled {label!r}, not one of the shard's agents (edited?)"
            )
        key = (task, label or "") if header.per_agent else (task,)
        if self.last is not None and key <= self.last:
            raise self._bad(
                number, f"task group for task {task} out of order (edited, or two states joined?)"
            )
        self.last = key
        if not self._has_task(task):
            raise self._bad(
                number, f"task group for task {task}, not one of the tasks its header lists (edited?)"
            )
        if header.uniform is not None and size != header.uniform:
            raise self._bad(
                number, f"task group of {size} rollouts; its header says each has {header.uniform} (edited?)"
            )
        self.rows += size
        self.labelled += size if label is not None else 0

    def _has_task(self, task: int) -> bool:
        """Whether `task` is one of the header's tasks; tasks come in order, so the runs are walked once."""
        runs = self.header.task_runs
        while self.run < len(runs) and task > runs[self.run][0] + runs[self.run][1] * (runs[self.run][2] - 1):
            self.run += 1
        if self.run == len(runs):
            return False
        first, step, _ = runs[self.run]
        return task >= first and (task - first) % step == 0

    def finish(self, number: int) -> None:
        facts = self.header.facts
        expected = facts.labelled_rows if self.header.per_agent else facts.table_rows  # see group_order
        for what, held, declared in (("rollouts", self.rows, expected), ("labelled rollouts", self.labelled,
                                     facts.labelled_rows)):  # fmt: skip
            if held != declared:
                raise self._bad(
                    number, f"its task groups hold {held} {what}; its header counts {declared} (edited?)"
                )

    def _bad(self, number: int, what: str) -> InputError:
        return _bad_line(self.header.path, number, what)
