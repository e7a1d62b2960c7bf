"""The rows the run manifest says its invocations wrote, held against the rows the rollouts file holds.

Every collect invocation records in the manifest's `runs[]` the rows it wrote (`collect/invocations.py`):
a finished one its `cost.rollouts`, a killed one (closed by the next start) the rows past the file's size
when it started, and `totals.rollouts` adds them all up. A `running` entry whose collector is gone (no
one holds the lock: the caller asks only then) has not been closed yet: its rows are the ones past its
`start.rollouts_bytes`, as the next start will count them. In every flow of the collector itself (a
resume, a kill, a torn tail cut by the next start, a resume with more --max-attempts, adaptive rounds,
shards (a manifest per shard), --overwrite,
which writes a new manifest) that sum is the rows the file holds. When it is not, something outside the
collector changed one of the two: rows removed or rewritten by hand, another process writing into this
run's name (a collector left running after its folder was deleted and made again appends its finished
entry to the new manifest), or an entry copied from another run. A note (the rows may have been removed
on purpose: check's own adaptive fix says to delete rows past where the rule stops), never an error.

Nothing is said when the manifest cannot count: none, no `totals.rollouts` (older manifests, Gym's own
collector), or an entry without `status` (written before killed invocations got entries: a kill then left
no entry, so its rows are in the file and in no count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts import jsonl
from ..artifacts.names import manifest_path_for
from .check_result import NOTE, Finding

STATUSES = ("running", "finished", "killed")
LISTED = 6  # runs[] entries named in the message; more are counted


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _entry_rows(entry: dict[str, Any], rollouts: Path) -> int | None:
    """The rows one entry counts: its cost's, or a dead running one's past its starting size."""
    if entry.get("status") == "running":
        start = entry.get("start")
        offset = _count(start.get("rollouts_bytes")) if isinstance(start, dict) else None
        return None if offset is None else sum(1 for _ in jsonl.rows_past(rollouts, offset))
    cost = entry.get("cost")
    return _count(cost.get("rollouts")) if isinstance(cost, dict) else None


def manifest_rows_finding(manifest: Any, rollouts: Path, rows: int) -> Finding | None:
    """The note `manifest_rows_differ` when the rows the manifest's invocations wrote (`totals.rollouts`,
    plus a dead running entry's rows) are not the `rows` the rollouts file holds; None when they agree or
    the manifest cannot count them. Call it only when no collector holds the run's lock."""
    if not isinstance(manifest, dict):
        return None
    runs, totals = manifest.get("runs"), manifest.get("totals")
    if not isinstance(runs, list) or not runs or not isinstance(totals, dict):
        return None
    if not all(isinstance(r, dict) and r.get("status") in STATUSES for r in runs):
        return None
    counted = [_entry_rows(r, rollouts) for r in runs]
    if any(n is None for n in counted):
        return None
    recorded = _count(totals.get("rollouts"))
    if recorded is None:
        if any(isinstance(r.get("cost"), dict) for r in runs):
            return None
        recorded = 0  # only running entries: no cost recorded yet
    dead = sum(n or 0 for r, n in zip(runs, counted, strict=True) if r.get("status") == "running")
    written = recorded + dead
    if written == rows:
        return None
    return Finding(
        "manifest_rows_differ", NOTE, abs(written - rows), _message(runs, counted, written, rows, rollouts),
        _fix(manifest, rollouts),
    )  # fmt: skip


def _message(runs: list[dict[str, Any]], counted: list[Any], written: int, rows: int, rollouts: Path) -> str:
    manifest = manifest_path_for(rollouts)
    gap = f"{written - rows} fewer" if written > rows else f"{rows - written} more"
    pairs = list(zip(runs, counted, strict=True))[:LISTED]
    entries = "; ".join(_entry(i, r, n) for i, (r, n) in enumerate(pairs))
    if len(runs) > LISTED:
        entries += f"; and {len(runs) - LISTED} more"
    invocations = f"{len(runs)} invocation" + ("s" if len(runs) != 1 else "")
    return (
        f"the run manifest {manifest} counts {written} rollouts written by its {invocations}, "
        f"but {rollouts} holds {rows} rows ({gap} than it counts): runs[] {entries}. Likely: rows "
        "removed or rewritten by hand (e.g. rows deleted past where an adaptive rule stops); another "
        "process wrote into this run's name (e.g. a collector left running after its folder was deleted "
        "and made again: its entry counts rows of the deleted file); or an entry copied from another run's "
        "manifest"
    )


def _entry(index: int, entry: dict[str, Any], rows: int) -> str:
    pid = entry.get("pid")
    started = entry.get("started_at")
    when = (
        f"started {started}"
        if isinstance(started, str)
        else "no started_at: its start was recorded in no entry of this manifest"
    )
    who = f"pid {pid}, " if isinstance(pid, int) and not isinstance(pid, bool) else ""
    status = entry.get("status")
    written = f"{rows} rows past its start, not closed yet" if status == "running" else f"{rows} rows"
    return f"[{index}] {status} ({who}{when}): {written}"


def _fix(manifest: dict[str, Any], rollouts: Path) -> str:
    from ..artifacts.resume import resume_command

    again = resume_command(manifest, output=rollouts)
    over = (
        "ngrp collect ... --overwrite with the run's options"
        if again is None or not again.endswith(" --resume")
        else again[: -len(" --resume")] + " --overwrite"
    )
    return (
        f"if you did not remove rows on purpose, hold runs[]'s started_at and pid in "
        f"{manifest_path_for(rollouts)} against the collects you ran (`ps -p PID` shows one still "
        f"running: stop it first); if the file is not the run you want, start over in a fresh folder "
        f"(another --output) or in place: {over}"
    )
