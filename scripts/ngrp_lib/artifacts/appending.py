"""Appending to a JSONL file that a crash may have torn: its tail state, its repair, a flushed appender."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .atomic import named_errors
from .opening import max_line_bytes, open_append, open_input, open_rewrite
from .reading import Row, dumps, parse_line


def tail_state(path: Path | str) -> str:
    """'empty', 'clean' (ends in a newline), 'unterminated' (last row complete, no newline) or 'torn'.

    A last line longer than the line limit counts as torn: no reader would accept it as a row."""
    path = Path(path)
    with open_input(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return "empty"
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return "clean"
        start = _last_line_start(handle, size)
        if size - start > max_line_bytes():
            return "torn"
        handle.seek(start)
        last = handle.read(size - start)
    return "unterminated" if isinstance(parse_line(last, 0), Row) else "torn"


def rows_past(path: Path | str, offset: int) -> Iterator[dict[str, Any]]:
    """The rows of an append-only file that start at or after byte `offset` (an offset past the end
    gives none; a missing file none): what a writer that started at that size wrote. Lines that are not
    a row (a torn tail, invalid JSON) are skipped, as every reader counts them."""
    path = Path(path)
    if not path.exists():
        return
    with open_input(path) as handle:
        handle.seek(min(offset, os.fstat(handle.fileno()).st_size))
        for raw in handle:
            raw = raw.rstrip(b"\r\n")
            if raw.strip():
                parsed = parse_line(raw, 0)
                if isinstance(parsed, Row):
                    yield parsed.data


def _last_line_start(handle: IO[bytes], size: int) -> int:
    """The offset just after the file's last newline (0 when it has none), found reading backwards."""
    block = 1 << 16
    end = size
    while end > 0:
        start = max(0, end - block)
        handle.seek(start)
        cut = handle.read(end - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def repair_tail(path: Path | str) -> str:
    """Make an append-only JSONL file safe to append to again; return what was done.

    A torn last line is truncated away (it never held a complete row); a complete last row that lacks
    its newline gets one. Returns 'clean', 'terminated' or 'truncated <n> bytes'.
    """
    path = Path(path)
    if not path.exists():
        return "clean"
    state = tail_state(path)
    if state in ("clean", "empty"):
        return "clean"
    with open_rewrite(path) as handle, open_input(path) as reader:  # the output itself: never a link
        size = os.fstat(reader.fileno()).st_size
        if state == "unterminated":
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
            return "terminated"
        cut = _last_line_start(reader, size)
        handle.truncate(cut)
    return f"truncated {size - cut} bytes"


class LineTooLong(ValueError):
    """A row that would be a line longer than the readers' limit (so it is not written)."""


class Appender:
    """Append rows to a JSONL file, flushing each so a crash loses at most the row being written.

    With a `redact` (artifacts.redact.Redactor), known secrets are masked in every row written. A row
    longer than the line limit is refused (`LineTooLong`) before a byte is written: no reader would take it.
    """

    def __init__(self, path: Path | str, *, fsync: bool = False, redact: Any = None) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._redact = redact
        self._limit = max_line_bytes()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open_append(self.path)  # a FIFO or device is refused, never waited on

    def write(self, row: Any) -> None:
        line = self._redact.line(row, dumps) if self._redact else dumps(row)
        if len(line) > self._limit + 1:
            raise LineTooLong(f"the row is {len(line)} bytes, more than the line limit ({self._limit})")
        with named_errors(self.path):
            self._handle.write(line)
            self._handle.flush()
            if self._fsync:
                os.fsync(self._handle.fileno())

    def write_many(self, rows: list[Any]) -> None:
        """Append several rows in one write (a kill leaves all, none or a torn last line, never a row
        cut in the middle of the file)."""
        lines = [self._redact.line(row, dumps) if self._redact else dumps(row) for row in rows]
        too_long = max((len(line) for line in lines), default=0)
        if too_long > self._limit + 1:
            raise LineTooLong(f"a row is {too_long} bytes, more than the line limit ({self._limit})")
        with named_errors(self.path):
            self._handle.write(b"".join(lines))
            self._handle.flush()
            if self._fsync:
                os.fsync(self._handle.fileno())

    def close(self) -> None:
        with named_errors(self.path):  # closing flushes what a failed write left: a full disk fails it again
            self._handle.close()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
