"""Run a command as a Slurm batch job with `sbatch --wait`, and say how it ended from the job's state.

The job's output goes to the run's log (`--output`), which ngrp follows while it waits. The per-run
timeout counts from when the job starts running (time in the queue is not the run's): at the timeout
ngrp cancels the job, and Slurm stops it (SIGTERM, then SIGKILL after the cluster's KillWait). The
job also gets `--time` rounded up to whole minutes, so Slurm stops it even if ngrp is gone.
The end state is read with `scontrol show job` (it needs no accounting); memory only where `sacct`
works (job accounting on).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import selectors
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from .outcome import Outcome, StopRequest, Watch

POLL_S = 2.0  # how often the job's state is asked while it waits
_FIELD = re.compile(r"(\w+)=(\S*)")


def sbatch_command(
    argv: Sequence[str], log: Path, *, job_name: str, timeout_s: float | None, extra: Sequence[str]
) -> list[str]:
    command = ["sbatch", "--wait", "--parsable", f"--job-name={job_name}", f"--output={log.resolve()}"]
    if timeout_s is not None:
        command.append(f"--time={max(1, math.ceil(timeout_s / 60.0))}")
    return [*command, *extra, f"--wrap={shlex.join(argv)}"]


def parse_job(text: str) -> dict[str, str]:
    """`scontrol show job -o ID` -> its fields (JobState, ExitCode, RunTime, Reason...)."""
    return dict(_FIELD.findall(text))


def parse_exit(text: str) -> tuple[int | None, int | None]:
    """Slurm's ExitCode `N:S` -> (exit status, terminating signal or None)."""
    status, _, sig = text.partition(":")
    try:
        code, signum = int(status), int(sig or 0)
    except ValueError:
        return None, None
    return (None, signum) if signum else (code, None)


def parse_duration_s(text: str) -> float | None:
    """`[D-]HH:MM:SS` or `MM:SS` -> seconds."""
    days, _, clock = text.rpartition("-") if "-" in text else ("", "", text)
    try:
        parts = [int(p) for p in clock.split(":")]
        seconds = sum(value * 60**i for i, value in enumerate(reversed(parts)))
        return seconds + (int(days) * 86400 if days else 0)
    except ValueError:
        return None


def parse_rss_bytes(text: str) -> int | None:
    """The largest `MaxRSS` of `sacct -n -P -o MaxRSS` lines (1234K, 5.5M, 2G)."""
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    values = []
    for line in text.split():
        match = re.fullmatch(r"([0-9.]+)([KMGT]?)", line.strip())
        if match:
            values.append(int(float(match.group(1)) * units[match.group(2)]))
    return max(values) if values else None


def _ask(*command: str) -> str | None:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def job_state(job_id: str) -> dict[str, str]:
    return parse_job(_ask("scontrol", "show", "job", "-o", job_id) or "")


class _Follow:
    """Copies what the job appends to its log to the echo stream."""

    def __init__(self, log: Path, echo: BinaryIO | None) -> None:
        self.log = log
        self.echo = echo
        self.offset = 0

    def pump(self) -> None:
        if self.echo is None or not self.log.is_file():
            return
        with open(self.log, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        try:
            self.echo.write(data)
            self.echo.flush()
        except (OSError, ValueError):
            self.echo = None


class _Job:
    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)
        self.submitted = b""
        self.job_id: str | None = None
        self.running_since: float | None = None
        self.cancelled = False
        self.next_poll = 0.0

    def read_id(self) -> None:
        if self.job_id is not None or self.proc.stdout is None:
            return
        for _key, _mask in self.selector.select(timeout=0.2):
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            self.submitted += chunk
            if not chunk or b"\n" in self.submitted:
                self.selector.unregister(self.proc.stdout)
                match = re.search(rb"(\d+)", self.submitted)
                self.job_id = match.group(1).decode() if match else None
                return

    def poll_state(self, now: float) -> None:
        if self.job_id is None or self.running_since is not None or now < self.next_poll:
            return
        self.next_poll = now + POLL_S
        if job_state(self.job_id).get("JobState") not in (None, "PENDING", "CONFIGURING"):
            self.running_since = now

    def cancel(self) -> None:
        if self.job_id is not None and not self.cancelled:
            self.cancelled = True
            _ask("scancel", self.job_id)


def run_slurm(
    argv: Sequence[str], log_path: Path, watch: Watch, *, job_name: str, sbatch_args: Sequence[str] = ()
) -> Outcome:
    """Submit, wait, classify the job's end. `watch.grace_s` is Slurm's KillWait here (noted, not applied).
    `watch.on_start` is told the job id once sbatch prints it."""
    timeout_s, on_start = watch.timeout_s, watch.on_start
    command = sbatch_command(argv, log_path, job_name=job_name, timeout_s=timeout_s, extra=sbatch_args)
    out = Outcome("slurm", None)
    with contextlib.ExitStack() as stack:
        stop = watch.stop or stack.enter_context(StopRequest())
        start = time.monotonic()
        pipe = subprocess.PIPE
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, env=watch.env)
        job, follow = _Job(proc), _Follow(log_path, watch.echo)
        while proc.poll() is None:
            if job.job_id is None:
                job.read_id()
                if job.job_id is not None and on_start is not None:
                    on_start({"job_id": job.job_id})
            now = time.monotonic()
            job.poll_state(now)
            follow.pump()
            if stop.signal_name and not job.cancelled:
                out.stopped_by = stop.signal_name
                job.cancel()
            late = timeout_s is not None and job.running_since is not None
            if late and now - job.running_since >= timeout_s and not job.cancelled:  # type: ignore[operator]
                out.timed_out = True
                job.cancel()
            time.sleep(0.2 if job.job_id else 0.0)
        follow.pump()
        job.read_id()
    stderr = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
    return _finish(out, job, proc.returncode, stderr, time.monotonic() - start, watch.grace_s)


def _finish(
    out: Outcome, job: _Job, sbatch_code: int, stderr: str, waited_s: float, grace_s: float
) -> Outcome:
    out.job_id = job.job_id
    if job.job_id is None:
        raise_submit_error(sbatch_code, stderr)
    fields = job_state(job.job_id)  # type: ignore[arg-type]
    out.state = fields.get("JobState")
    code, signum = parse_exit(fields.get("ExitCode", ""))
    if out.state is None:
        out.notes.append("the job's state was not available (scontrol): classified from sbatch's exit code")
        code, signum = sbatch_code, None
    out.returncode, out.signal = code, signum
    run_s = parse_duration_s(fields.get("RunTime", ""))
    out.elapsed_s = run_s if run_s is not None else waited_s
    out.peak_rss_bytes = parse_rss_bytes(_ask("sacct", "-n", "-P", "-j", job.job_id, "-o", "MaxRSS") or "")  # type: ignore[arg-type]
    if out.peak_rss_bytes is None:
        out.notes.append("memory not measured: Slurm job accounting (sacct) is not available")
    if out.timed_out or out.stopped_by:
        out.notes.append(f"cancelled with scancel: Slurm's KillWait, not --grace {grace_s:g}s, is the grace")
    return out


def raise_submit_error(code: int, stderr: str) -> None:
    from ..errors import UsageError

    raise UsageError(
        f"sbatch did not submit the job (exit {code}): {stderr.splitlines()[-1] if stderr else 'no message'}",
        hint="check the partition, account and time limit (--sbatch-arg passes options to sbatch)",
    )
