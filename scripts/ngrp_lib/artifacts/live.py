"""Is a collector writing this run right now? Read from its lock (`collect.state.CollectorLock`), never by
taking it: the collector holds an exclusive `flock` on `<rollouts>.lock` for its whole life and writes its
pid there when it takes it, so the lock file's modification time is when that invocation started.

`live_run` asks for a shared lock without waiting and gives it straight back: refused means a collector
holds it. A missing lock file, a symlink or anything not a regular file means no live run (nothing is
created or followed). `check` and `health` then say the run is in progress (who, since when, how far)
instead of counting its unwritten keys as missing and advising a resume.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .names import lock_path_for


@dataclass(frozen=True)
class LiveRun:
    """A collector holding the run's lock: its pid (as it wrote it; "?" when unreadable) and since when."""

    lock: str
    pid: str
    since: str  # ISO 8601, UTC, whole seconds
    running_s: int  # seconds since then, when asked

    def to_json(self) -> dict[str, Any]:
        return {"lock": self.lock, "pid": self.pid, "since": self.since, "running_s": self.running_s}

    def words(self, written: int, expected: int, pace: Pace | None = None, up_to: int | None = None) -> str:
        """'the run is in progress: a collector (pid 4242) holds out/r.jsonl.lock since
        2026-12-04T16:00:00Z (3m12s); 16 of 256 rollouts written so far, 0.08 rollouts/s, ETA 50m00s'
        (`up_to`: an adaptive run's N, see `adaptive_up_to`)."""
        return progress_words(progress_block(self, pace, up_to), written, expected)

    def wait(self, again: str) -> str:
        """The fix while it runs: wait, then ask again (never resume beside a live writer)."""
        return f"wait for pid {self.pid} to finish (or stop it), then {again}; do not resume while it runs"


@dataclass(frozen=True)
class Pace:
    """How fast the live invocation writes: rows it wrote (past the rollouts file's size when it started,
    from its `running` entry in the run manifest) over the seconds since its `started_at`, and the seconds
    the rows still expected would take at that rate (None before its first row)."""

    rate_per_s: float
    eta_s: int | None


def adaptive_up_to(manifest: Any) -> int | None:
    """An adaptive run's N (the run manifest's identity.materialize.num_repeats beside identity.adaptive):
    its expected rollouts are only those assigned so far, and later rounds may assign more, up to N a task.
    None for a fixed-N run, or when the manifest does not say."""
    identity = manifest.get("identity") if isinstance(manifest, dict) else None
    if not isinstance(identity, dict) or not isinstance(identity.get("adaptive"), dict):
        return None
    materialize = identity.get("materialize")
    n = materialize.get("num_repeats") if isinstance(materialize, dict) else None
    return n if type(n) is int and n > 0 else None


def progress_block(live: LiveRun, speed: Pace | None, up_to: int | None = None) -> dict[str, Any]:
    """The `in_progress` object of `check --json` and `health --json`: who holds the lock, since when,
    this invocation's rate and ETA (null without its manifest entry), and an adaptive run's N (`up_to`)."""
    return {
        **live.to_json(),
        "rate_per_s": None if speed is None else round(speed.rate_per_s, 4),
        "eta_s": None if speed is None else speed.eta_s,
        "adaptive_up_to": up_to,
    }


def progress_words(block: dict[str, Any], written: int, expected: int) -> str:
    """`LiveRun.words` from a `progress_block`: one sentence for check's status and health's keys line.
    An adaptive run's rounds assign rollouts as they go: its count and ETA are of those assigned so far."""
    up_to = block.get("adaptive_up_to")
    so_far = (
        f"{written} of the {expected} rollouts assigned so far written (an adaptive run: later rounds may"
        f" assign more, up to {up_to} a task)"
        if up_to
        else f"{written} of {expected} rollouts written so far"
    )
    text = (
        f"the run is in progress: a collector (pid {block['pid']}) holds {block['lock']} since "
        f"{block['since']} ({_duration(block['running_s'])}); {so_far}"
    )
    rate = block.get("rate_per_s")
    if rate is None:
        return text
    text += f", {rate:.2g} rollouts/s" if rate else ", none yet by this invocation"
    eta = block.get("eta_s")
    return text + (f", ETA {_duration(eta)}{' for those' if up_to else ''}" if eta is not None else "")


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def pace(
    rollouts: Path | str, live: LiveRun, left: int, manifest: Any, now: float | None = None
) -> Pace | None:
    """The live invocation's rate and ETA for `left` rows, or None when `manifest` (the run manifest beside
    the rollouts, as `manifest_beside` read it) has no `running` entry of its pid with a start time and
    start size (another collector, or none)."""
    try:
        entry = next(
            r
            for r in manifest.get("runs") or []
            if isinstance(r, dict) and r.get("status") == "running" and str(r.get("pid")) == live.pid
        )
        started = dt.datetime.fromisoformat(str(entry["started_at"]).replace("Z", "+00:00")).timestamp()
        offset = int(entry["start"]["rollouts_bytes"])
        with open(rollouts, "rb") as fh:
            fh.seek(offset)
            rows = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return None
    elapsed = (time.time() if now is None else now) - started
    if elapsed <= 0:
        return None
    rate = rows / elapsed
    return Pace(rate, round(left / rate) if rate > 0 else None)


def live_run(rollouts: Path | str, now: float | None = None) -> LiveRun | None:
    """The collector writing `rollouts` now, or None (no lock file, or nobody holds it)."""
    import fcntl

    path = lock_path_for(rollouts)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError:
        return None  # absent, a symlink, unreadable: no run we can see
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            started = info.st_mtime
            utc = dt.datetime.fromtimestamp(int(started), dt.timezone.utc)
            since = utc.isoformat().replace("+00:00", "Z")
            running = max(0, int((dt.datetime.now().timestamp() if now is None else now) - started))
            return LiveRun(str(path), pid if pid.isdigit() else "?", since, running)
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
