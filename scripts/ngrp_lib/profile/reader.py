"""One streaming pass over each file: rollouts first (so the inputs pass knows which rows matched and can
keep only each group's sample row), then the materialized inputs. Identity problems are collected and
raised in Gym's order once both files are read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from ..artifacts import ROLLOUT_KEY, TASK_KEY, is_index
from ..errors import FindingsError, InputError
from ..jsonl import BLANK, Row, iter_records
from .records import Dataset, Key, input_record, result_record, run_key_of, sample_bytes


@dataclass
class ReadStats:
    blank_lines: dict[str, list[int]] = field(default_factory=dict)  # role -> line numbers
    duplicate_inputs: list[Key] = field(default_factory=list)  # in file order
    duplicate_results: list[Key] = field(default_factory=list)
    sha256: dict[str, Any] = field(default_factory=dict)  # role -> hashlib object, fed while reading
    rows: dict[str, int] = field(default_factory=dict)  # role -> non-blank lines


def _rows(path: Path, role: str, stats: ReadStats):
    """Rows of a JSONL file; blank lines are skipped and remembered (Gym fails on them; we warn)."""
    hasher = hashlib.sha256()
    stats.sha256[role] = hasher
    for record in iter_records(path, hasher=hasher):
        if isinstance(record, Row):
            stats.rows[role] = stats.rows.get(role, 0) + 1
            yield record
        elif record.kind == BLANK:
            stats.blank_lines.setdefault(role, []).append(record.line)
        else:
            raise InputError(record.message, path=path, line=record.line)


def _key(row: Row, path: Path, role: str) -> Key:
    task, rollout = row.data.get(TASK_KEY), row.data.get(ROLLOUT_KEY)
    for name, value in ((TASK_KEY, task), (ROLLOUT_KEY, rollout)):
        if not is_index(value):
            what = "has no" if value is None else f"has a non-integer {value!r} as"
            # Gym dies with a KeyError traceback here (exit 1); we name the row and keep exit 1.
            raise FindingsError(
                f"{path}:{row.line}: {role} row {what} `{name}`; every row needs integer "
                f"`{TASK_KEY}` and `{ROLLOUT_KEY}` keys to be matched",
                hint="rows are joined by (_ng_task_index, _ng_rollout_index); fix or drop this row",
            )
    return task, rollout


def read_dataset(inputs: Path, rollouts: Path, null_policy: str) -> tuple[Dataset, ReadStats]:
    data, stats = Dataset(), ReadStats()
    results = data.results
    for row in _rows(rollouts, "rollouts", stats):
        key = _key(row, rollouts, "rollout")
        if key in results:
            stats.duplicate_results.append(key)
            continue
        results[key] = result_record(row.data, key[0], key[1], null_policy)
    seen: set[Key] = set()
    samples = data.samples
    for row in _rows(inputs, "inputs", stats):
        key = _key(row, inputs, "materialized input")
        if key in seen:
            stats.duplicate_inputs.append(key)
            continue
        seen.add(key)
        rec = input_record(row.data, *key)
        data.inputs.append(rec)
        result = results.get(key)
        if result is not None and not result.masked:
            group = (key[0], run_key_of(row.data))
            best = samples.get(group)
            if best is None or key[1] < best[0]:
                samples[group] = (key[1], sample_bytes(row.data))
    return data, stats
