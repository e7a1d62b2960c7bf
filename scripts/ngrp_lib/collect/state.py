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
    (`opening.open_lock_file`), so a planted symlink or a stray file is refused, never truncated."""

    def __init__(self, output: Path) -> None:
        self.path = names.lock_path_for(output)
        self._fd: int | None = None

    def acquire(self) -> CollectorLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_lock_file(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise UsageError(
                f"another collector (pid {holder}) is writing {self.path.with_suffix('')}",
                hint="wait for it to finish, or stop it; two writers would duplicate rollouts",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        # The file stays: unlinking it while another process waits on the same inode would let a
        # third process lock a new file, and two collectors would write one output.
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> CollectorLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


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
