"""Reading JSONL and JSON: streaming reads with line numbers, problems kept as values.

Reading policy (used by every command):
- a blank line (empty or whitespace only) is skipped and counted, never parsed;
- a last line with no newline that does not parse is a *torn tail* (an interrupted write), reported as such;
- a last line with no newline that does parse is a complete row;
- invalid UTF-8, `NaN`/`Infinity` literals, invalid JSON and rows that are not objects are problems with
  the line number, kept as values so a validator can report them all and a loader can stop at the first;
- a line longer than `opening.max_line_bytes()` (64 MiB) is a problem too (`line_too_long`): its bytes are
  skipped, never held, so a file without newlines cannot exhaust memory;
- a lone UTF-16 surrogate escape in a string (`"\ud800"` without its pair; Python's json, so NeMo Gym,
  reads and writes it) is not a character: the row is read with U+FFFD in its place, the one rule of every
  reader (rows, model and verifier replies: `loads`), so every writer, page and report shows U+FFFD, and
  `Row.surrogates` counts them (`validate` names the line: kind `lone_surrogate`).
Files are opened through `opening.open_input` (regular files only) and read in blocks of 1 MiB.
`dumps` writes the one line format every writer uses.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ..errors import InputError
from .opening import line_too_long, max_line_bytes, open_input, read_document

# Problem kinds, stable strings used in --json output.
BLANK = "blank_line"
TORN = "torn_tail"
INVALID_UTF8 = "invalid_utf8"
NON_FINITE = "non_finite_literal"
INVALID_JSON = "invalid_json"
NOT_OBJECT = "not_an_object"
TOO_LONG = "line_too_long"
LONE_SURROGATE = "lone_surrogate"  # a validate finding: the row was read with U+FFFD in their place
REPLACEMENT = "\ufffd"
BLOCK = 1 << 20  # bytes read at a time


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    data: dict[str, Any]
    raw: bytes
    surrogates: int = 0  # lone surrogate escapes read as U+FFFD


@dataclass(frozen=True, slots=True)
class Problem:
    line: int
    kind: str
    message: str


_NON_FINITE = re.compile(rb"-?Infinity|NaN")


def _non_finite_literal(raw: bytes) -> str | None:
    """The NaN/Infinity literal that alone makes the line invalid, or None.

    orjson rejects these with a generic message; naming the literal tells the user what to fix. The line
    counts as non-finite only if it parses once the literals are nulled, so a "NaN" inside a string on an
    otherwise broken line is still reported as invalid JSON.
    """
    found = _NON_FINITE.search(raw)
    if found is None:
        return None
    nulled = _NON_FINITE.sub(b"null", raw)
    try:
        orjson.loads(nulled)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc) or _with_lone_surrogates(nulled) is None:
            return None
    return found.group().decode()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _replaced_surrogates(value: Any, count: list[int]) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced by U+FFFD, counted in count[0]."""
    if isinstance(value, str):
        replaced, n = _LONE_SURROGATE.subn(REPLACEMENT, value)
        count[0] += n
        return replaced
    if isinstance(value, list):
        return [_replaced_surrogates(v, count) for v in value]
    if isinstance(value, dict):
        out = {_replaced_surrogates(k, count): _replaced_surrogates(v, count) for k, v in value.items()}
        if len(out) < len(value):  # keys that differ only in lone surrogates: one value would be lost
            raise ValueError("two keys differ only in lone surrogates")
        return out
    return value


def _with_lone_surrogates(raw: bytes | str) -> tuple[Any, int] | None:
    """A document orjson refuses for a lone-surrogate escape, read as Python's json reads it, then each
    lone surrogate replaced by U+FFFD: (value, how many). None when it is not valid JSON either."""
    import json

    try:  # numbers as orjson reads them: no NaN or infinity, an integer past 64 bits a float
        value = json.loads(raw, parse_constant=_refuse, parse_float=_finite, parse_int=_orjson_int)
    except (ValueError, RecursionError):  # too deep for Python's json: refused as a row too deep is
        return None
    count = [0]
    try:
        return _replaced_surrogates(value, count), count[0]
    except (ValueError, RecursionError):
        return None


def _refuse(literal: str) -> Any:
    raise ValueError(f"{literal} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is infinity when read as a double")
    return value


def _orjson_int(text: str) -> int | float:
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 64 else float(text)


def loads(raw: bytes | str) -> Any:
    """One JSON document (a server's reply) by the reading rule: orjson, and a lone surrogate escape read
    as U+FFFD rather than refused. Raises orjson.JSONDecodeError when it is not JSON."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        found = _with_lone_surrogates(raw) if "surrogate" in str(exc) else None
        if found is None:
            raise
        value = found[0]
    if may_be_deep(raw) and deeper_than(value):
        raise orjson.JSONDecodeError(f"the document nests more than {MAX_DEPTH} levels deep", "", 0)
    return value


# How deep a value may nest (objects and arrays; a scalar is depth 0). orjson reads 1,024 levels but writes
# only 254, and the recursive readers after it (schema checks, pages, Python's json) fail sooner still: a
# row nested deeper is refused where it is read, as a problem naming its line (`too_deep`), before any page
# or report is built from it. Gym rows nest about 10 levels.
MAX_DEPTH = 100
TOO_DEEP = "too_deep"


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` nests objects and arrays more than `limit` levels deep. Iterative: no recursion
    however deep the value is."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth >= limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def may_be_deep(raw: bytes | str) -> bool:
    """Whether a line has enough brackets to nest past MAX_DEPTH: only those lines are walked by
    `deeper_than`. For bytes, one C-speed pass that keeps only the brackets (a third faster than counting
    `{` and `[` in two passes: the profiler checks every line it reads)."""
    if isinstance(raw, str):
        return raw.count("{") + raw.count("[") > MAX_DEPTH
    return len(raw.translate(None, NOT_OPENING)) > MAX_DEPTH


NOT_OPENING = bytes(byte for byte in range(256) if byte not in b"{[")  # every byte but `{` and `[`


def too_deep_problem(line: int) -> Problem:
    return Problem(line, TOO_DEEP, f"the row nests more than {MAX_DEPTH} levels deep: refused, not read")


def parse_line(raw: bytes, line: int, *, last_unterminated: bool = False) -> Row | Problem:
    """Parse one physical line (without its newline)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        found = _with_lone_surrogates(raw) if "surrogate" in str(exc) else None
        if found is not None and isinstance(found[0], dict):
            return Row(line, found[0], raw, found[1])
        if last_unterminated:
            return Problem(
                line, TORN, "last line is cut off (no newline and not valid JSON): an interrupted write"
            )
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as uexc:
            return Problem(line, INVALID_UTF8, f"invalid UTF-8 at byte {uexc.start}")
        literal = _non_finite_literal(raw)
        if literal is not None:
            return Problem(line, NON_FINITE, f"{literal} is not valid JSON; write null (or a number) instead")
        if "depth limit" in str(exc):
            return too_deep_problem(line)
        return Problem(line, INVALID_JSON, f"invalid JSON: {exc}")
    if not isinstance(data, dict):
        return Problem(line, NOT_OBJECT, f"row is a JSON {type(data).__name__}, not an object")
    if may_be_deep(raw) and deeper_than(data):
        return too_deep_problem(line)
    return Row(line, data, raw)


class LineReader:
    """The physical lines of an open binary file, each with its newline (the last one may lack it), in
    batches (one list per block read): iterating a list is cheaper than a generator step per line on the
    profiler's hot path. A line's length, for the limit, does not count its newline.

    Memory is bounded by `limit` (plus one block): a longer line is an InputError naming it (`strict`) or,
    otherwise, a `None` in its batch while its bytes are skipped. `on_block` sees every byte read (the
    profiler hashes the file with it). Once the last batch is handed out, `unterminated` says whether the
    file's last line had no newline; that line then comes alone in the last batch.
    """

    def __init__(
        self,
        handle: IO[bytes],
        path: Path | str,
        *,
        limit: int | None = None,
        strict: bool = True,
        on_block: Callable[[bytes], Any] | None = None,
        block: int = BLOCK,
    ) -> None:
        self.handle, self.path, self.block = handle, path, block
        self.limit = max_line_bytes() if limit is None else limit
        self.strict, self.on_block = strict, on_block
        self.unterminated = False
        self.lines = 0  # lines handed out so far

    def _too_long(self, line: int) -> None:
        if self.strict:
            raise line_too_long(self.path, line, self.limit)

    def __iter__(self) -> Iterator[list[Any]]:
        read, limit, on_block, block_size = self.handle.read, self.limit, self.on_block, self.block
        small_limit = limit < block_size
        pending: list[bytes] = []  # pieces of the line not yet ended by a newline
        size = 0  # their bytes
        skipping = False  # inside a line already known to be too long
        while True:
            block = read(block_size)
            if not block:
                break
            if on_block is not None:
                on_block(block)
            # C-level line splitting that keeps each newline (bytes.split is about twice as slow here)
            lines: list[Any] = list(io.BytesIO(block))
            tail = lines.pop() if not lines[-1].endswith(b"\n") else b""
            if lines:
                if skipping:
                    lines[0], skipping = None, False
                elif pending:
                    size += len(lines[0]) - 1
                    pending.append(lines[0])
                    lines[0] = b"".join(pending) if size <= limit else None
                    if lines[0] is None:
                        self._too_long(self.lines + 1)
                if small_limit:
                    for i, line in enumerate(lines):
                        if line is not None and len(line) - 1 > limit:
                            self._too_long(self.lines + i + 1)
                            lines[i] = None
                pending, size = ([tail], len(tail)) if tail else ([], 0)
                self.lines += len(lines)
                yield lines
                if size > limit:
                    self._too_long(self.lines + 1)
                    pending, size, skipping = [], 0, True
            elif not skipping:
                pending.append(tail)
                size += len(tail)
                if size > limit:
                    self._too_long(self.lines + 1)
                    pending, size, skipping = [], 0, True
        if skipping or pending:
            self.unterminated = True
            self.lines += 1
            yield [None] if skipping else [b"".join(pending)]


def iter_records(
    path: Path | str, *, on_block: Callable[[bytes], Any] | None = None
) -> Iterator[Row | Problem]:
    """Yield every non-blank line of a JSONL file as a Row or a Problem; blank lines as Problem(BLANK).
    `on_block` sees every byte read (a caller hashes the file in the same pass)."""
    path = Path(path)
    with open_input(path, buffering=0) as handle:
        reader = LineReader(handle, path, strict=False, on_block=on_block)
        line_no = 0
        for batch in reader:
            terminated = not reader.unterminated  # the unterminated last line comes alone, last
            for raw in batch:
                line_no += 1
                if raw is None:
                    yield Problem(line_no, TOO_LONG, f"line is longer than {reader.limit} bytes (skipped)")
                else:
                    yield _record(raw, line_no, terminated=terminated)


def _record(raw: bytes, line: int, *, terminated: bool) -> Row | Problem:
    if terminated:
        raw = raw.rstrip(b"\r\n")
    if not raw.strip():
        return Problem(line, BLANK, "blank line")
    return parse_line(raw, line, last_unterminated=not terminated)


def iter_parsed(path: Path | str) -> Iterator[tuple[int, dict[str, Any] | Problem]]:
    """(line, row) or (line, Problem) for every line, with `iter_records`' policy (blank lines are
    Problem(BLANK), a line past the limit Problem(TOO_LONG)) but no Row objects: one orjson call per good
    line, the slow path only for a bad one. For whole-file scans that judge every row (`ngrp health`)."""
    path = Path(path)
    loads, line = orjson.loads, 0
    with open_input(path, buffering=0) as handle:
        reader = LineReader(handle, path, strict=False)
        for batch in reader:
            for raw in batch:
                line += 1
                if raw is None:
                    yield line, Problem(line, TOO_LONG, f"line is longer than {reader.limit} bytes (skipped)")
                    continue
                try:
                    data = loads(raw)
                except orjson.JSONDecodeError:
                    record = _record(raw, line, terminated=not reader.unterminated)  # names the problem
                    yield line, record.data if isinstance(record, Row) else record
                    continue
                if type(data) is dict:
                    yield line, too_deep_problem(line) if may_be_deep(raw) and deeper_than(data) else data
                else:
                    kind = type(data).__name__
                    yield line, Problem(line, NOT_OBJECT, f"row is a JSON {kind}, not an object")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """For a reader that keeps something per row (a digest, a record): the cyclic GC would rescan all of
    them again and again while they accumulate (in the profiler about a third of the run). Nothing kept
    per row forms a cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def iter_rows(
    path: Path | str,
    *,
    allow_blank: bool = True,
    on_block: Callable[[bytes], Any] | None = None,
    refused: list[int] | None = None,
) -> Iterator[Row]:
    """Yield rows; raise InputError (exit 3) at the first problem. Blank lines are skipped when allowed.
    `on_block` as in `iter_records`. With `refused`, a row nested past MAX_DEPTH is skipped and its line
    added there (a reader that can leave one row out and say so, such as the report's)."""
    for record in iter_records(path, on_block=on_block):
        if isinstance(record, Row):
            yield record
        elif record.kind == BLANK and allow_blank:
            continue
        elif record.kind == TOO_DEEP and refused is not None:
            refused.append(record.line)
        else:
            raise InputError(record.message, path=path, line=record.line, hint=hint_for(record.kind))


def hint_for(kind: str) -> str | None:
    return {
        TORN: "the writer was interrupted: `ngrp profile --allow-partial` skips that line without changing "
        "the file; `ngrp collect --resume` completes a run ngrp collected",
        INVALID_UTF8: "re-encode the file as UTF-8",
        NON_FINITE: "JSON has no NaN or Infinity; write null instead",
        BLANK: "remove the blank line",
        TOO_LONG: "is this a JSONL file? set NGRP_MAX_LINE_BYTES=<bytes> to read longer lines",
        TOO_DEEP: f"rows are read at most {MAX_DEPTH} levels deep (Gym's nest about 10): fix the writer",
    }.get(kind)


def dumps(row: Any) -> bytes:
    """One JSONL line (with newline). NaN becomes null, as orjson does."""
    return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)


def read_json(path: Path | str) -> Any:
    """Read a whole JSON document (a regular file of at most 256 MiB), mapping errors to InputError."""
    path = Path(path)
    data = read_document(path, what="JSON document")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path) from exc
