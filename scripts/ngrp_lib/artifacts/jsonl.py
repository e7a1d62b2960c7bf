"""The one JSONL layer, imported as one: every reader and writer of rows goes through these names.

It is three modules by concern, gathered here so callers need one import:
- `reading`: streaming reads with line numbers and problems kept as values (the reading policy), `read_json`,
  and `dumps`, the one line format;
- `appending`: the tail state of an append-only file, its repair, and the flushed `Appender`;
- `atomic`: outputs written through temp files and moved into place under a folder lock.
"""

from __future__ import annotations

from .appending import Appender, LineTooLong, repair_tail, rows_past, tail_state
from .atomic import (
    atomic_output,
    atomic_outputs,
    named_errors,
    refuse_existing,
    remove_stale_temps,
    write_json,
    write_jsonl,
)
from .reading import (
    BLANK,
    BLOCK,
    INVALID_JSON,
    INVALID_UTF8,
    LONE_SURROGATE,
    MAX_DEPTH,
    NON_FINITE,
    NOT_OBJECT,
    NOT_OPENING,
    TOO_DEEP,
    TOO_LONG,
    TORN,
    LineReader,
    Problem,
    Row,
    deeper_than,
    dumps,
    gc_paused,
    hint_for,
    iter_parsed,
    iter_records,
    iter_rows,
    loads,
    may_be_deep,
    parse_line,
    read_json,
)

__all__ = [
    "BLANK",
    "BLOCK",
    "INVALID_JSON",
    "INVALID_UTF8",
    "LONE_SURROGATE",
    "MAX_DEPTH",
    "NON_FINITE",
    "NOT_OBJECT",
    "NOT_OPENING",
    "TOO_DEEP",
    "TOO_LONG",
    "TORN",
    "Appender",
    "LineReader",
    "LineTooLong",
    "Problem",
    "Row",
    "atomic_output",
    "atomic_outputs",
    "deeper_than",
    "dumps",
    "gc_paused",
    "hint_for",
    "iter_parsed",
    "iter_records",
    "iter_rows",
    "loads",
    "may_be_deep",
    "named_errors",
    "parse_line",
    "read_json",
    "refuse_existing",
    "remove_stale_temps",
    "repair_tail",
    "rows_past",
    "tail_state",
    "write_json",
    "write_jsonl",
]
