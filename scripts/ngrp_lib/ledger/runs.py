"""The run folders: `logs/<index>/` holds a run's log and `run.json`, the record of the run itself.

A `ledger run` reserves its index when it starts, by creating its folder under the ledger lock, so
runs going at once never share an index, and a run still going is visible to `status`, `checkpoint`
and `handoff` ("open"). The index of a run whose `ngrp` process died (SIGKILL, a lost node) stays
used: its folder says what is known, and the ledger shows the gap.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..artifacts.jsonl import write_json
from ..artifacts.opening import read_document
from ..errors import InputError
from .campaign import LedgerPaths
from .table import LedgerRow

RUN_SCHEMA = "ngrp.ledger_run.v1"
RUN_FILE = "run.json"
LOG_FILE = "run.log"


@dataclass(frozen=True)
class RunSlot:
    index: int
    folder: Path

    @property
    def log(self) -> Path:
        return self.folder / LOG_FILE

    @property
    def record(self) -> Path:
        return self.folder / RUN_FILE


def reserved_indices(paths: LedgerPaths) -> list[int]:
    """Indices whose run folder exists (a started `ledger run`, recorded or not)."""
    if not paths.logs.is_dir():
        return []
    return [int(p.name) for p in paths.logs.iterdir() if p.name.isdigit() and p.is_dir()]


def next_index(paths: LedgerPaths, rows: list[LedgerRow]) -> int:
    """One past every index used by a row or reserved by a run folder (the caller holds the lock)."""
    used = [r.index for r in rows] + reserved_indices(paths)
    return max(used, default=0) + 1


def reserve(paths: LedgerPaths, rows: list[LedgerRow]) -> RunSlot:
    """Create the next run's folder (the caller holds the ledger lock)."""
    index = next_index(paths, rows)
    folder = paths.logs / str(index)
    folder.mkdir(parents=True)  # an existing folder means another writer: fail, never share it
    return RunSlot(index, folder)


def release(slot: RunSlot) -> None:
    """Give back a reservation whose command never started (sbatch refused it, exec failed): remove
    what ngrp wrote there, and the folder if nothing else is in it."""
    slot.record.unlink(missing_ok=True)
    if slot.log.is_file() and slot.log.stat().st_size == 0:
        slot.log.unlink()
    with contextlib.suppress(OSError):
        slot.folder.rmdir()


def write_record(slot: RunSlot, data: dict[str, Any]) -> None:
    write_json(slot.record, {"schema": RUN_SCHEMA, "index": slot.index, **data}, overwrite=True, indent=True)


def read_record(folder: Path) -> dict[str, Any] | None:
    """A run folder's `run.json`, or None when it is missing or unreadable (never an error: it is a note)."""
    path = folder / RUN_FILE
    try:
        data = orjson.loads(read_document(path)) if path.is_file() else None
    except (OSError, orjson.JSONDecodeError, InputError):
        return None
    return data if isinstance(data, dict) else None


def process_identity() -> dict[str, Any]:
    """Who is running: host, pid and the process start time (so a reused pid is not mistaken for us)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _start_ticks(os.getpid())}


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None


def alive(record: dict[str, Any]) -> bool | None:
    """Whether the `ngrp` process that owns an open run is still there; None when it ran on another host."""
    if record.get("host") != socket.gethostname():
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, 0)
        start = record.get("pid_start")
        return start is None or _start_ticks(pid) == start
    return False


@dataclass
class OpenRun:
    index: int
    started_at: str | None
    command: str
    log: str
    launcher: str
    job_id: str
    pgid: int | None  # the command's process group (local): `kill -TERM -- -<pgid>` stops a stale run
    owner_alive: bool | None  # False: the `ngrp` that started it is gone (stale); None: another host

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def open_runs(paths: LedgerPaths, rows: list[LedgerRow]) -> list[OpenRun]:
    """Run folders with no ledger row yet, oldest first."""
    recorded = {r.index for r in rows}
    out = []
    for index in sorted(set(reserved_indices(paths)) - recorded):
        folder = paths.logs / str(index)
        record = read_record(folder) or {}
        out.append(
            OpenRun(
                index=index,
                started_at=record.get("started_at"),
                command=str(record.get("command", "")),
                log=str(folder / LOG_FILE),
                launcher=str(record.get("launcher", "local")),
                job_id=str(record.get("job_id", "none")),
                pgid=record.get("pgid") if isinstance(record.get("pgid"), int) else None,
                owner_alive=alive(record) if record else False,
            )
        )
    return out


def live(runs: list[OpenRun]) -> list[OpenRun]:
    """Open runs that may still be going (owner alive, or on another host where we cannot tell)."""
    return [r for r in runs if r.owner_alive is not False]


def run_files(paths: LedgerPaths, index: int) -> list[str]:
    """The files in a run's folder, relative names, sorted (what the run left beside its log)."""
    folder = paths.logs / str(index)
    if not folder.is_dir():
        return []
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())[:200]
