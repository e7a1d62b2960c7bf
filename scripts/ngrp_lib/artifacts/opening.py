"""The one way ngrp opens a file it reads, with the limits every reader shares.

- Only regular files are read. A FIFO, a device (`/dev/zero`), a socket or a folder is refused before a
  byte is read ("not a regular file", exit 3), so a reader never hangs on a pipe or grows without bound.
  The file is opened non-blocking (opening a FIFO with no writer would wait forever) and checked with
  `fstat` on the open descriptor, so a symlink swapped in between a check and the open cannot slip by.
- A symlink loop, a missing file or a permission problem is an `InputError` naming the file (exit 3).
- Lines are at most `max_line_bytes()` long (64 MiB unless `NGRP_MAX_LINE_BYTES` says otherwise) and a
  whole document (`read_document`) at most `MAX_DOCUMENT_BYTES` (256 MiB): past that a reader stops with an
  error naming the file and the line, instead of holding the rest in memory.

Also here: `real_path` and `same_file`, which never raise on a symlink loop (`Path.resolve` does, on
Python 3.11), and `open_lock_file`, which opens lock files without following symlinks.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Literal

from ..errors import InputError, OutputError, UsageError

MAX_LINE_BYTES = 64 * 2**20  # the default limit of one JSONL line
MAX_DOCUMENT_BYTES = 256 * 2**20  # a whole JSON document, a ledger, a log searched with a regex
LINE_LIMIT_ENV = "NGRP_MAX_LINE_BYTES"


def max_line_bytes() -> int:
    """The longest line a reader accepts: `NGRP_MAX_LINE_BYTES` if set (bytes), else 64 MiB."""
    raw = os.environ.get(LINE_LIMIT_ENV)
    if raw is None or raw.strip() == "":
        return MAX_LINE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"{LINE_LIMIT_ENV}={raw!r} is not a positive number of bytes")
    return value


def _describe(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_error(exc: OSError, path: Path) -> InputError:
    if exc.errno == errno.ELOOP:
        return InputError(
            "cannot read: a symlink loop (too many levels of symbolic links)",
            path=path,
            hint="point the path at a real file",
        )
    return InputError(f"cannot read: {exc.strerror or exc}", path=path)


def not_regular(path: Path | str, mode: int) -> InputError:
    kind = _describe(mode)
    detail = "not a regular file" if kind == "not a regular file" else f"not a regular file: {kind}"
    return InputError(detail, path=path, hint="give the path of a regular file")


def open_input(path: Path | str, *, buffering: int = -1) -> BinaryIO:
    """Open a regular file for reading (binary). Everything else is an InputError (exit 3)."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _open_error(exc, path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        _blocking(fd)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def _blocking(fd: int) -> None:
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)


def require_regular(path: Path | str) -> None:
    """Raise the reader's InputError unless `path` can be opened as a regular file (nothing is read)."""
    open_input(path).close()


def read_document(path: Path | str, *, limit: int = MAX_DOCUMENT_BYTES, what: str = "file") -> bytes:
    """A whole (small) file as bytes; refuses what is not a regular file and what is larger than `limit`."""
    path = Path(path)
    with open_input(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        # read(n) allocates n bytes before it reads: ask for the size (+1 to see growth), not the limit
        data = handle.read(size + 1) if size <= limit else b""
        if len(data) > size:  # the file grew since fstat: the rest, up to the limit
            data += handle.read(limit + 1 - len(data))
    if size > limit or len(data) > limit:
        raise InputError(
            f"the {what} is larger than {_mib(limit)}; ngrp does not read it whole",
            path=path,
            hint="is this the right file? a document this large is not one ngrp writes",
        )
    return data


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def line_too_long(path: Path | str, line: int, limit: int) -> InputError:
    return InputError(
        f"line is longer than {_mib(limit)} (the limit of one line)",
        path=path,
        line=line,
        hint=f"is this a JSONL file? set {LINE_LIMIT_ENV}=<bytes> to read longer lines",
    )


# ---------------------------------------------------------------- outputs


def check_output_path(path: Path | str) -> None:
    """Refuse an output path that is a folder or an existing file that is not a regular one (exit 3)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError("cannot write: a symlink loop", path=path) from None
        return  # a permission problem shows when the file is written, with its own message
    if stat.S_ISDIR(mode):
        raise OutputError("is a folder, not a file", path=path, hint="choose a file path for the output")
    if not stat.S_ISREG(mode):
        raise OutputError(f"cannot write: {_describe(mode)}, not a regular file", path=path)


NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def open_append(path: Path | str) -> BinaryIO:
    """Open (create) a regular file for appending, without blocking on a FIFO and never through a symlink
    (a link planted where the output goes would have rows appended to its target); anything else is
    refused."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | NO_FOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ELOOP):
            check_output_path(path)
        if exc.errno == errno.ELOOP:
            raise symlink_output(path) from None
        raise
    return _regular_for_writing(fd, path, "ab")


def symlink_output(path: Path) -> OutputError:
    return OutputError(
        "is a symlink; ngrp does not write through it", path=path, hint="give the path of a regular file"
    )


def open_rewrite(path: Path | str) -> BinaryIO:
    """Open an existing regular file for reading and writing in place (repairing a torn tail), never
    through a symlink."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | NO_FOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_output(path) from None
        raise
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise OutputError(f"cannot write: {_describe(st_mode)}, not a regular file", path=path)
        _blocking(fd)
        return os.fdopen(fd, "r+b")
    except BaseException:
        os.close(fd)
        raise


def open_log(path: Path | str) -> BinaryIO:
    """Create (or empty) a log file ngrp writes, never through a symlink and never a FIFO or device: a
    symlink planted in a log folder would otherwise have its target truncated (exit 3 instead)."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                "the log file is a symlink; ngrp does not write through it", path=path
            ) from None
        raise
    return _regular_for_writing(fd, path, "wb")


def _regular_for_writing(fd: int, path: Path, mode: Literal["ab", "wb"]) -> BinaryIO:
    """The opened descriptor as a blocking file object if it is a regular file (emptied first for "wb");
    closed and refused otherwise (a FIFO or device opened with O_NONBLOCK)."""
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise OutputError(f"cannot write: {_describe(st_mode)}, not a regular file", path=path)
        if mode == "wb":
            os.ftruncate(fd, 0)
        _blocking(fd)
        return os.fdopen(fd, mode)  # binary modes: a BinaryIO
    except BaseException:
        os.close(fd)
        raise


# ---------------------------------------------------------------- paths


def real_path(path: Path | str) -> Path:
    """The absolute path with symlinks resolved as far as they go; never raises on a loop."""
    return Path(os.path.realpath(path))


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name one file (the same inode, or the same real path when one does not exist)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return real_path(a) == real_path(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


# ---------------------------------------------------------------- lock files

_LOCK_CONTENT = re.compile(rb"\s*(\d+\s*)?")  # what ngrp writes into a lock file: its pid, or nothing
MAX_LOCK_BYTES = 64


def open_lock_file(path: Path | str) -> int:
    """Open (or create) a lock file without following a symlink; return its descriptor.

    The file must hold what ngrp writes there (nothing, or a pid), so rewriting it loses nothing. A symlink,
    a file with other hard links, something that is not a regular file, or a file holding other data is
    refused (exit 3): it is not a lock file ngrp made, and writing to it would clobber it.
    """
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                "the lock file is a symlink; ngrp does not follow it",
                path=path,
                hint="remove the symlink (ngrp creates its own lock file)",
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError(f"the lock file is {_describe(info.st_mode)}, not a regular file", path=path)
        if info.st_nlink > 1:
            raise OutputError(
                "the lock file has other hard links; ngrp does not write to it",
                path=path,
                hint="remove it (ngrp creates its own lock file)",
            )
        content = os.pread(fd, MAX_LOCK_BYTES + 1, 0)
        if len(content) > MAX_LOCK_BYTES or not _LOCK_CONTENT.fullmatch(content):
            raise OutputError(
                "this file does not look like an ngrp lock file (it holds other data); not touching it",
                path=path,
                hint="move it away: ngrp keeps its lock in this path",
            )
        _blocking(fd)
        return fd
    except BaseException:
        os.close(fd)
        raise
