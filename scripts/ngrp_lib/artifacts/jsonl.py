"""The one JSONL layer: streaming reads with line numbers, atomic writes, flushed appends.

Reading policy (used by every command):
- a blank line (empty or whitespace only) is skipped and counted, never parsed;
- a last line with no newline that does not parse is a *torn tail* (an interrupted write), reported as such;
- a last line with no newline that does parse is a complete row;
- invalid UTF-8, `NaN`/`Infinity` literals, invalid JSON and rows that are not objects are problems with
  the line number, kept as values so a validator can report them all and a loader can stop at the first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ..errors import InputError, OutputExistsError, UsageError

# Problem kinds, stable strings used in --json output.
BLANK = "blank_line"
TORN = "torn_tail"
INVALID_UTF8 = "invalid_utf8"
NON_FINITE = "non_finite_literal"
INVALID_JSON = "invalid_json"
NOT_OBJECT = "not_an_object"


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    data: dict[str, Any]
    raw: bytes


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
    try:
        orjson.loads(_NON_FINITE.sub(b"null", raw))
    except orjson.JSONDecodeError:
        return None
    return found.group().decode()


def parse_line(raw: bytes, line: int, *, last_unterminated: bool = False) -> Row | Problem:
    """Parse one physical line (without its newline)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
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
        return Problem(line, INVALID_JSON, f"invalid JSON: {exc}")
    if not isinstance(data, dict):
        return Problem(line, NOT_OBJECT, f"row is a JSON {type(data).__name__}, not an object")
    return Row(line, data, raw)


def iter_records(path: Path | str) -> Iterator[Row | Problem]:
    """Yield every non-blank line of a JSONL file as a Row or a Problem; blank lines as Problem(BLANK)."""
    path = Path(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below; open errors mapped first
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path=path) from exc
    with handle:
        line_no = 0
        pending: bytes | None = None
        for chunk in handle:
            if pending is not None:
                yield _record(pending, line_no, terminated=True)
            line_no += 1
            pending = chunk
        if pending is not None:
            yield _record(pending, line_no, terminated=pending.endswith(b"\n"))


def _record(chunk: bytes, line: int, *, terminated: bool) -> Row | Problem:
    raw = chunk.rstrip(b"\r\n") if terminated else chunk
    if not raw.strip():
        return Problem(line, BLANK, "blank line")
    return parse_line(raw, line, last_unterminated=not terminated)


def iter_parsed(path: Path | str) -> Iterator[tuple[int, dict[str, Any] | Problem]]:
    """(line, row) or (line, Problem) for every line, with `iter_records`' policy (blank lines are
    Problem(BLANK)) but no Row objects: one orjson call per good line, the slow path only for a bad one.
    For whole-file scans that judge every row (`ngrp health`)."""
    path = Path(path)
    try:
        handle = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path=path) from exc
    loads, line = orjson.loads, 0
    with handle:
        for chunk in handle:
            line += 1
            try:
                data = loads(chunk)
            except orjson.JSONDecodeError:
                record = _record(chunk, line, terminated=chunk.endswith(b"\n"))  # names the problem
                yield line, record.data if isinstance(record, Row) else record
                continue
            if type(data) is dict:
                yield line, data
            else:
                yield line, Problem(line, NOT_OBJECT, f"row is a JSON {type(data).__name__}, not an object")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """For a reader that keeps something per row (a digest, a record): the cyclic GC would rescan all of
    them again and again while they accumulate. Nothing kept per row forms a cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def iter_rows(path: Path | str, *, allow_blank: bool = True) -> Iterator[Row]:
    """Yield rows; raise InputError (exit 3) at the first problem. Blank lines are skipped when allowed."""
    for record in iter_records(path):
        if isinstance(record, Row):
            yield record
        elif record.kind == BLANK and allow_blank:
            continue
        else:
            raise InputError(record.message, path=path, line=record.line, hint=hint_for(record.kind))


def hint_for(kind: str) -> str | None:
    return {
        TORN: "the writer was interrupted: `ngrp profile --allow-partial` skips that line without changing "
        "the file; `ngrp collect --resume` completes a run ngrp collected",
        INVALID_UTF8: "re-encode the file as UTF-8",
        NON_FINITE: "JSON has no NaN or Infinity; write null instead",
        BLANK: "remove the blank line",
    }.get(kind)


def dumps(row: Any) -> bytes:
    """One JSONL line (with newline). NaN becomes null, as orjson does."""
    return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)


def tail_state(path: Path | str) -> str:
    """'empty', 'clean' (ends in a newline), 'unterminated' (last row complete, no newline) or 'torn'."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return "empty"
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return "clean"
        last = _last_line(handle, size)
    return "unterminated" if isinstance(parse_line(last, 0), Row) else "torn"


def _last_line(handle: IO[bytes], size: int) -> bytes:
    block = 1 << 16
    end = size
    buffer = b""
    while end > 0:
        start = max(0, end - block)
        handle.seek(start)
        buffer = handle.read(end - start) + buffer
        cut = buffer.rfind(b"\n")
        if cut >= 0:
            return buffer[cut + 1 :]
        end = start
    return buffer


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
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        if state == "unterminated":
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
            return "terminated"
        cut = size - len(_last_line(handle, size))
        handle.truncate(cut)
    return f"truncated {size - cut} bytes"


class Appender:
    """Append rows to a JSONL file, flushing each so a crash loses at most the row being written."""

    def __init__(self, path: Path | str, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "ab")  # noqa: SIM115 - long-lived, closed in close()

    def write(self, row: Any) -> None:
        self._handle.write(dumps(row))
        self._handle.flush()
        if self._fsync:
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_existing(paths: list[Path], overwrite: bool) -> None:
    """Fail before doing any work when an output exists and overwriting was not asked for."""
    if overwrite:
        return
    for path in paths:
        if path.exists():
            raise OutputExistsError(path)


@contextlib.contextmanager
def atomic_output(path: Path | str, *, overwrite: bool = False) -> Iterator[IO[bytes]]:
    """Write a file through a temp file in the same folder, then move it into place.

    Without `overwrite`, an existing file is never replaced (checked before and at the final move),
    so a concurrent writer cannot be clobbered either. On any error the temp file is removed and
    the old file, if any, is untouched.
    """
    with atomic_outputs({"file": Path(path)}, overwrite=overwrite) as handles:
        yield handles["file"]


@contextlib.contextmanager
def atomic_outputs(paths: Mapping[str, Path], *, overwrite: bool = False) -> Iterator[dict[str, IO[bytes]]]:
    """Files that belong together (a profile's outputs), each written through its own temp file and moved
    into place only once every one of them is written and synced: an error while writing any of them
    (disk full, a file size limit) leaves none of the new files and every old one untouched."""
    paths = {name: Path(path) for name, path in paths.items()}
    refuse_existing(list(paths.values()), overwrite)
    for path in paths.values():
        if path.is_dir():
            raise UsageError(f"{path} is a folder, not a file", hint="choose another output path")
    handles: dict[str, IO[bytes]] = {}
    temps: dict[str, Path] = {}
    try:
        for name, path in paths.items():
            mode = path.stat().st_mode & 0o777 if overwrite and path.exists() else _new_file_mode()
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps[name] = Path(tmp_name)
            os.fchmod(fd, mode)  # mkstemp makes 0600: give what open() would (or the replaced file's mode)
            handles[name] = os.fdopen(fd, "wb")
        yield handles
        for handle in handles.values():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        for name, path in paths.items():
            if overwrite:
                os.replace(temps[name], path)
            else:
                try:
                    os.link(temps[name], path)  # fails if path appeared meanwhile
                except FileExistsError:
                    raise OutputExistsError(path) from None
                temps[name].unlink()
    except BaseException:
        for handle in handles.values():
            with contextlib.suppress(OSError):  # closing flushes: the same full disk would fail again
                handle.close()
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        raise


def _new_file_mode() -> int:
    """0666 minus the process umask: the mode `open()` gives a new file, so outputs on a shared run folder
    are as readable as the rollouts the collector appends to."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_jsonl(path: Path | str, rows: Any, *, overwrite: bool = False) -> int:
    """Atomically write an iterable of rows as JSONL; return the number of rows."""
    count = 0
    with atomic_output(path, overwrite=overwrite) as handle:
        for row in rows:
            handle.write(dumps(row))
            count += 1
    return count


def write_json(path: Path | str, value: Any, *, overwrite: bool = False, indent: bool = False) -> None:
    """Atomically write one JSON document."""
    option = orjson.OPT_INDENT_2 if indent else 0
    with atomic_output(path, overwrite=overwrite) as handle:
        handle.write(orjson.dumps(value, option=option))


def read_json(path: Path | str) -> Any:
    """Read a whole JSON document, mapping errors to InputError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path) from exc
