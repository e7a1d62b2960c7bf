"""The one JSONL layer: streaming reads with line numbers, atomic writes, flushed appends.

Reading policy (used by every command):
- a blank line (empty or whitespace only) is skipped and counted, never parsed;
- a last line with no newline that does not parse is a *torn tail* (an interrupted write), reported as such;
- a last line with no newline that does parse is a complete row;
- invalid UTF-8, `NaN`/`Infinity` literals, invalid JSON and rows that are not objects are problems with
  the line number, kept as values so a validator can report them all and a loader can stop at the first;
- a line longer than `opening.max_line_bytes()` (64 MiB) is a problem too (`line_too_long`): its bytes are
  skipped, never held, so a file without newlines cannot exhaust memory.
Files are opened through `opening.open_input` (regular files only) and read in blocks of 1 MiB.

Writing policy: outputs are written through temp files (`.<name>.ngrp-<host>-<pid>-XXXXXXXX.tmp`) and moved
into place under an exclusive lock on their folder, so two writers of one set of files never leave a mix;
a temp file left by a killed run is removed by the next run that writes the same file. A write error (a
full disk) names the file.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import orjson

from ..errors import InputError, OutputExistsError, UsageError
from .opening import (
    check_output_path,
    line_too_long,
    max_line_bytes,
    open_append,
    open_input,
    read_document,
    same_file,
)

# Problem kinds, stable strings used in --json output.
BLANK = "blank_line"
TORN = "torn_tail"
INVALID_UTF8 = "invalid_utf8"
NON_FINITE = "non_finite_literal"
INVALID_JSON = "invalid_json"
NOT_OBJECT = "not_an_object"
TOO_LONG = "line_too_long"
BLOCK = 1 << 20  # bytes read at a time


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
                    yield line, data
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
    path: Path | str, *, allow_blank: bool = True, on_block: Callable[[bytes], Any] | None = None
) -> Iterator[Row]:
    """Yield rows; raise InputError (exit 3) at the first problem. Blank lines are skipped when allowed.
    `on_block` as in `iter_records`."""
    for record in iter_records(path, on_block=on_block):
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
        TOO_LONG: "is this a JSONL file? set NGRP_MAX_LINE_BYTES=<bytes> to read longer lines",
    }.get(kind)


def dumps(row: Any) -> bytes:
    """One JSONL line (with newline). NaN becomes null, as orjson does."""
    return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)


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
    with open_input(path) as reader, open(path, "r+b") as handle:
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
        with _named(self.path):
            self._handle.write(line)
            self._handle.flush()
            if self._fsync:
                os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_existing(paths: list[Path], overwrite: bool, *, inputs: Iterable[Path | str | None] = ()) -> None:
    """Fail before doing any work when an output exists and overwriting was not asked for, when an
    output path is a folder or another file that is not a regular one (exit 3, overwrite or not), or when
    an output is one of the command's `inputs` (exit 2: --overwrite would replace what is being read)."""
    sources = [Path(p) for p in inputs if p is not None]
    for path in paths:
        check_output_path(path)
        for source in sources:
            if same_file(source, path):
                raise UsageError(f"{path} is both an input and an output", hint="write to another path")
        if not overwrite and os.path.lexists(path):
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
    (disk full, a file size limit) leaves none of the new files and every old one untouched.

    The moves happen under an exclusive lock on the outputs' folder(s), so two runs writing the same set
    (two `profile --overwrite`) each commit their whole set in turn and never leave one run's file beside
    the other's. A temp file of an earlier run of this host that was killed (its pid is gone) is removed."""
    paths = {name: Path(path) for name, path in paths.items()}
    refuse_existing(list(paths.values()), overwrite)
    for path in paths.values():
        check_output_path(path)
    handles: dict[str, _NamedWriter] = {}
    temps: dict[str, Path] = {}
    try:
        for name, path in paths.items():
            mode = path.stat().st_mode & 0o777 if overwrite and path.exists() else _new_file_mode()
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(path)
            fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
            temps[name] = Path(tmp_name)
            os.fchmod(fd, mode)  # mkstemp makes 0600: give what open() would (or the replaced file's mode)
            handles[name] = _NamedWriter(os.fdopen(fd, "wb"), path)
        yield cast("dict[str, IO[bytes]]", handles)
        for handle in handles.values():
            handle.finish()
        with _folders_locked({path.parent for path in paths.values()}):
            _commit(paths, temps, overwrite)
    except BaseException:
        for handle in handles.values():
            with contextlib.suppress(OSError):  # closing flushes: the same full disk would fail again
                handle.close()
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        raise


def _commit(paths: dict[str, Path], temps: dict[str, Path], overwrite: bool) -> None:
    if overwrite:
        for name, path in paths.items():
            os.replace(temps[name], path)
        return
    for path in paths.values():  # under the lock: another ngrp writer cannot add one meanwhile
        if os.path.lexists(path):
            raise OutputExistsError(path)
    linked: list[Path] = []
    try:
        for name, path in paths.items():
            try:
                os.link(temps[name], path)  # fails if path appeared meanwhile (a writer that is not ngrp)
            except FileExistsError:
                raise OutputExistsError(path) from None
            linked.append(path)
    except BaseException:
        for path in linked:  # files this call created: none of the set is left behind
            path.unlink(missing_ok=True)
        raise
    for tmp in temps.values():
        tmp.unlink()


class _NamedWriter:
    """A binary file handle whose write errors (a full disk, a file size limit) name the file."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self._handle, self.path = handle, path

    def write(self, data: bytes) -> int:
        with _named(self.path):
            return self._handle.write(data)

    def finish(self) -> None:
        """Flush, sync and close (before the move into place)."""
        with _named(self.path):
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    def close(self) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@contextlib.contextmanager
def _named(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if not exc.filename:
            exc.filename = str(path)
        raise


_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40] or "host"
_TEMP = re.compile(r"\.ngrp-(?P<host>.+)-(?P<pid>\d+)-[^.]+\.tmp$")


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.ngrp-{_HOST}-{os.getpid()}-"


def remove_stale_temps(path: Path | str) -> list[Path]:
    """Remove the temp files of `path` that a killed ngrp run of this host left (its pid is gone)."""
    path = Path(path)
    head = f".{path.name}.ngrp-"
    removed: list[Path] = []
    try:
        entries = [e.name for e in os.scandir(path.parent) if e.name.startswith(head)]
    except OSError:
        return removed
    for name in entries:
        match = _TEMP.fullmatch(name, len(head) - len(".ngrp-"))
        if match is None or match.group("host") != _HOST or _alive(int(match.group("pid"))):
            continue
        with contextlib.suppress(OSError):
            (path.parent / name).unlink()
            removed.append(path.parent / name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextlib.contextmanager
def _folders_locked(folders: set[Path]) -> Iterator[None]:
    """An exclusive `flock` on each folder (in a fixed order, so two writers cannot deadlock)."""
    import fcntl

    fds: list[int] = []
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        for folder in sorted(folders, key=str):
            # A folder that cannot be opened or locked (some NFS mounts have no flock on folders): each
            # move is still atomic, only the set is not; nothing else changes.
            with contextlib.suppress(OSError):
                fd = os.open(folder, flags)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)


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
    """Read a whole JSON document (a regular file of at most 256 MiB), mapping errors to InputError."""
    path = Path(path)
    data = read_document(path, what="JSON document")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", path=path) from exc
