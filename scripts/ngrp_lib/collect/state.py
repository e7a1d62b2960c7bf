"""What is on disk for one collection: lock, manifest, completed keys and failed attempts."""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..artifacts import jsonl, names
from ..artifacts.opening import open_lock_file
from ..errors import InputError, UsageError


class CollectorLock:
    """An exclusive `fcntl.flock` on `<output>.lock`, holding our pid, for the life of the run. The lock
    file is opened without following a symlink and only rewritten when it holds what ngrp writes there
    (`opening.open_lock_file`), so a planted symlink or a stray file is refused, never truncated.

    A run that ends in an error (a refused pre-flight check, a malformed row) removes what it created
    for the lock: the lock file, if it did not exist before, and the folders of `--output` it made, if
    they are still empty. The lock file is unlinked while still locked, which is safe because a locker
    checks, once it holds the flock, that the path still names the file it locked (else it locks anew):
    one that opened the old file before the unlink cannot then write beside a newer lock holder."""

    def __init__(self, output: Path) -> None:
        self.path = names.lock_path_for(output)
        self._fd: int | None = None
        self._created = False
        self._made_dirs: list[Path] = []

    def acquire(self) -> CollectorLock:
        self._made_dirs = _missing_dirs(self.path.parent)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(100):  # a new file each time only when refused runs keep removing theirs
            existed = os.path.lexists(self.path)
            fd = self._lock(open_lock_file(self.path))
            if _names(self.path, fd):
                break
            os.close(fd)  # a refused run unlinked the file we locked: lock the one the path names now
        else:
            raise UsageError(f"cannot lock {self.path}: it is replaced again and again", hint="retry")
        self._created = not existed
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def _lock(self, fd: int) -> int:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise UsageError(
                f"another collector (pid {holder}) is writing {self.path.with_suffix('')}",
                hint="wait for it to finish, or stop it; two writers would duplicate rollouts",
            ) from None
        return fd

    def release(self) -> None:
        # After a run, the file stays (harmless; the next run locks the same file).
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def discard(self) -> None:
        """Remove what `acquire` created (a refused run): the lock file, then the folders, if empty."""
        if self._fd is not None and self._created and _names(self.path, self._fd):
            self.path.unlink(missing_ok=True)  # still locked: see the class docstring
        self.release()
        for folder in reversed(self._made_dirs):  # deepest first; stop at one holding anything
            try:
                folder.rmdir()
            except OSError:
                break

    def __enter__(self) -> CollectorLock:
        return self.acquire()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            self.discard()
        self.release()


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders `mkdir(parents=True)` would create for `folder`, outermost first."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _names(path: Path, fd: int) -> bool:
    """`path` (not followed) is the open file `fd`."""
    try:
        on_disk = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def build_manifest(
    identity: dict[str, Any], files: dict[str, Any], runtime: dict[str, Any]
) -> dict[str, Any]:
    """The run manifest: `identity` is what --resume must find unchanged; `runtime` may change."""
    return {
        "tool": {"name": "ngrp", "version": __version__},
        "created_at": now_iso(),
        **files,
        "options": {**{k: v for k, v in identity.items() if not k.endswith("sha256")}, **runtime["options"]},
        "identity": identity,
        "model": identity["model"],
        "servers": runtime["servers"],
        "backend": identity["api"],
    }


def check_manifest(path: Path, identity: dict[str, Any]) -> None:
    """Refuse to resume when anything that shapes the results changed since the manifest was written."""
    if not path.exists():
        raise UsageError(
            f"cannot resume: {path} is missing, so the earlier run's configuration is unknown",
            hint="start over with --overwrite (earlier rollouts are discarded)",
        )
    manifest = jsonl.read_json(path)
    old = manifest.get("identity") if isinstance(manifest, dict) else None
    if not isinstance(old, dict):
        raise InputError("manifest has no 'identity' block; not written by this ngrp collect", path=path)
    changes = changed_fields(old, identity)
    if changes:
        raise UsageError(
            "refusing to resume: the configuration changed since this run started\n  " + "\n  ".join(changes),
            hint="rerun with the original options, or start over with --overwrite (or a new --output)",
        )


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """`num_repeats: was 4, now 8`, one line per field that differs; a block of options (`materialize`)
    is compared field by field, its fields named as their options are. Values as JSON, not Python."""
    from ..jsonvalues import shown

    lines = []
    for key in sorted(set(old) | set(new)):
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            lines += changed_fields(was, now)
        else:
            lines.append(f"{key}: was {shown(was, quote=True)}, now {shown(now, quote=True)}")
    return lines


@dataclass
class DiskState:
    """Completed keys (from the rollouts file) and failed attempts per key (from the sidecar)."""

    completed: set[tuple[int, int]] = field(default_factory=set)
    duplicates: int = 0
    attempts: Counter = field(default_factory=Counter)
    repaired: dict[str, str] = field(default_factory=dict)


def nothing_written(output: Path, failures: Path) -> bool:
    """No row and no failure was ever written (a run killed while starting, or none at all): resuming it
    is a fresh start, as in Gym."""
    return all(not p.exists() or p.stat().st_size == 0 for p in (output, failures))


def scan_outputs(output: Path, failures: Path) -> DiskState:
    state = DiskState()
    for path in (output, failures):
        action = jsonl.repair_tail(path)
        if action != "clean":
            state.repaired[str(path)] = action
    if output.exists():
        for row in jsonl.iter_rows(output):
            key = names.rollout_key(row.data)
            if key is None:
                raise InputError("rollout row has no identity keys", path=output, line=row.line)
            if key in state.completed:
                state.duplicates += 1
            state.completed.add(key)
    if failures.exists():
        for row in jsonl.iter_rows(failures):
            key = names.rollout_key(row.data)
            if key is not None:
                state.attempts[key] += 1
    return state
