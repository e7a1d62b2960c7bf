"""Atomic writes: outputs go through temp files and move into place under a lock on their folder.

Outputs are written through temp files (`.<name>.ngrp-<host>-<pid>-XXXXXXXX.tmp`) and moved into place under
an exclusive lock on their folder, so two writers of one set of files never leave a mix; a temp file left by
a killed run is removed by the next run that writes the same file. A write error (a full disk) names the file.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, cast

import orjson

from ..errors import OutputExistsError, UsageError
from .opening import check_output_path, same_file
from .reading import dumps


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
            mode = _new_file_mode()  # a replaced file's mode, never opened wider than the umask gives
            if overwrite and path.exists():
                mode &= path.stat().st_mode
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(path)
            fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
            temps[name] = Path(tmp_name)
            os.fchmod(fd, mode)  # mkstemp makes 0600: give what open() would (or the replaced file's mode)
            handles[name] = _NamedWriter(os.fdopen(fd, "wb", buffering=WRITE_BUFFER), path)
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


# Bytes buffered per output before a write(2): a profile writes ~30 MB per 80,000 rollouts, one line per task
WRITE_BUFFER = 1 << 18


class _NamedWriter:
    """A binary file handle whose write errors (a full disk, a file size limit) name the file."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self._handle, self.path = handle, path

    def write(self, data: bytes) -> int:
        try:  # named_errors(self.path), written out: a profile writes one line per task here
            return self._handle.write(data)
        except OSError as exc:
            if not exc.filename:
                exc.filename = str(self.path)
            raise

    def finish(self) -> None:
        """Flush, sync and close (before the move into place)."""
        with named_errors(self.path):
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    def close(self) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@contextlib.contextmanager
def named_errors(path: Path) -> Iterator[None]:
    """An OSError raised inside names `path` when it names no file itself."""
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
