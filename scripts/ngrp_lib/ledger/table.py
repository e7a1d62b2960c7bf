"""The ledger TSV: columns, escaping, strict parsing with line numbers, and locked atomic appends.

One header line, then one row per attempted experiment. Fields are escaped (backslash, tab, newline,
carriage return) so every row is exactly one physical line. Appends take an exclusive `flock` on a
sibling lock file around read-validate-rewrite, and the rewrite is a temp file renamed into place, so
concurrent writers never interleave and readers never see a half-written file.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..artifacts.jsonl import atomic_output
from ..artifacts.opening import open_lock_file, read_document
from ..errors import InputError

# The nemo-rl-auto-research columns, in order, then ours.
BASE_COLUMNS = (
    "index", "branch", "parent_commit", "commit", "recipe", "metric_name", "metric_value", "memory_gb",
    "elapsed_min", "launcher", "job_id", "command", "log_path", "status", "description",
)  # fmt: skip
EXTRA_COLUMNS = ("ci_low", "ci_high", "n_tasks", "profile_path", "compared_to")
COLUMNS = BASE_COLUMNS + EXTRA_COLUMNS
STATUSES = ("keep", "discard", "crash")
FLOAT_COLUMNS = ("metric_value", "memory_gb", "elapsed_min", "ci_low", "ci_high")
INT_COLUMNS = ("n_tasks",)

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def escape(value: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def unescape(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt not in _UNESCAPES:
                raise ValueError(f"bad escape '\\{nxt}'")
            out.append(_UNESCAPES[nxt])
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class LedgerRow:
    """One parsed row: string fields as written, with typed accessors for what decisions use."""

    line: int
    fields: dict[str, str]

    @property
    def index(self) -> int:
        return int(self.fields["index"])

    @property
    def status(self) -> str:
        return self.fields["status"]

    def number(self, column: str) -> float | None:
        text = self.fields[column]
        return None if text == "" else float(text)

    def to_json(self) -> dict:
        out: dict = {"line": self.line}
        for column in COLUMNS:
            if column == "index":
                out[column] = self.index
            elif column in FLOAT_COLUMNS:
                out[column] = self.number(column)
            elif column in INT_COLUMNS:
                out[column] = None if self.fields[column] == "" else int(self.fields[column])
            else:
                out[column] = self.fields[column]
        return out


def header_line() -> str:
    return "\t".join(COLUMNS) + "\n"


def format_row(fields: dict[str, str]) -> str:
    return "\t".join(escape(fields.get(column, "")) for column in COLUMNS) + "\n"


def read_ledger(path: Path) -> list[LedgerRow]:
    """Parse and validate the whole ledger; raise InputError (exit 3) naming the first bad line."""
    if not os.path.lexists(path):
        raise InputError(
            "no ledger here", path=path, hint="create one with `ngrp ledger init`, or pass the right --dir"
        )
    data = read_document(path, what="ledger")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", path=path) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        raise InputError("last line has no newline (an interrupted write?)", path=path, line=len(lines))
    if not lines or lines[0].split("\t") != list(COLUMNS):
        raise InputError(
            "header does not match the ledger columns",
            path=path,
            line=1,
            hint="expected: " + " ".join(COLUMNS),
        )
    rows = [_parse_line(path, number, line) for number, line in enumerate(lines[1:], start=2)]
    _check_indices(path, rows)
    return rows


def _parse_line(path: Path, number: int, line: str) -> LedgerRow:
    index = line.split("\t", 1)[0]
    row = f"row {index!r}" if index.isdigit() else "this row"

    def bad(message: str) -> InputError:
        return InputError(
            f"{row}: {message}",
            path=path,
            line=number,
            hint=f"edit line {number} of {path.name} by hand: put a finite number (or nothing) in a numeric "
            "field, one of keep/discard/crash in status; or delete the line (the other rows stay valid)",
        )

    cells = line.split("\t")
    if len(cells) != len(COLUMNS):
        raise bad(f"expected {len(COLUMNS)} tab-separated fields, found {len(cells)}")
    try:
        fields = {column: unescape(cell) for column, cell in zip(COLUMNS, cells, strict=True)}
    except ValueError as exc:
        raise bad(str(exc)) from None
    _check_fields(fields, bad)
    return LedgerRow(number, fields)


def _check_fields(fields: dict[str, str], bad: Callable[[str], InputError]) -> None:
    if not fields["index"].isdigit() or int(fields["index"]) < 1:
        raise bad(f"index {fields['index']!r} is not a positive integer")
    if fields["status"] not in STATUSES:
        raise bad(f"status {fields['status']!r} is not one of {', '.join(STATUSES)}")
    for column in FLOAT_COLUMNS:
        if fields[column] != "" and not _is_finite(fields[column]):
            raise bad(f"{column} {fields[column]!r} is not a finite number")
    for column in INT_COLUMNS:
        if fields[column] != "" and not fields[column].isdigit():
            raise bad(f"{column} {fields[column]!r} is not a non-negative integer")


def _is_finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _check_indices(path: Path, rows: list[LedgerRow]) -> None:
    seen: dict[int, int] = {}
    for row in rows:
        if row.index in seen:
            raise InputError(
                f"index {row.index} is already used on line {seen[row.index]}",
                path=path,
                line=row.line,
                hint="indices must be unique; renumber or remove the duplicate by hand",
            )
        seen[row.index] = row.line


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock for the ledger (a sibling `.lock` file, never deleted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(lock_path(path))  # never through a symlink, never a file ngrp did not make
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def create(path: Path) -> None:
    """Write an empty ledger (header only); refuses an existing file."""
    with atomic_output(path) as handle:
        handle.write(header_line().encode())


def rewrite_with(path: Path, new_fields: dict[str, str]) -> None:
    """Append one row by rewriting the file atomically (the caller holds the lock)."""
    old = read_document(path, what="ledger")
    with atomic_output(path, overwrite=True) as handle:
        handle.write(old)
        handle.write(format_row(new_fields).encode())
