"""What a launcher reports about a finished run, and the Ctrl-C / SIGTERM handling both launchers share."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, BinaryIO

ESCAPED = "escaped the run's process tree (found by the run's token):"  # a note that reaches the row


@dataclass
class Outcome:
    launcher: str  # local or slurm
    returncode: int | None  # the command's exit status; None when a signal ended it or it is unknown
    signal: int | None = None  # the signal that ended the command
    timed_out: bool = False  # ngrp (or Slurm) stopped it at the per-run timeout
    stopped_by: str | None = None  # SIGINT / SIGTERM / SIGHUP: ngrp was asked to stop, and stopped the run
    elapsed_s: float = 0.0  # from start to the command's end (Slurm: the job's run time when known)
    peak_rss_bytes: int | None = None  # the process tree's resident memory, sampled
    peak_gpu_mib: float | None = None  # GPU memory of the tree's processes (nvidia-smi), sampled
    pgid: int | None = None  # the command's own process group (local)
    job_id: str | None = None  # Slurm job id
    state: str | None = None  # Slurm job state (COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY, CANCELLED...)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Watch:
    """How either launcher runs and watches a command: its time limit, the grace before a kill (Slurm's
    KillWait: noted, not applied), where its output is teed besides the log, its environment (None: ours),
    the stop request (None: one of its own), and who is told its process group or job id once it starts."""

    timeout_s: float | None
    grace_s: float = 30.0
    echo: BinaryIO | None = None
    env: dict[str, str] | None = None
    stop: StopRequest | None = None
    on_start: Callable[[dict[str, Any]], None] | None = None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopRequest:
    """While active, SIGINT, SIGTERM and SIGHUP do not kill ngrp: they ask it to stop the run, then
    record it. The previous handlers come back on exit. Outside the main thread it does nothing
    (signals are delivered to the main thread only)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = self.signal_name or signal.Signals(signum).name

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
