"""How a run ended, in one word: ok, timeout, oom, nan, killed, exit:N or no_metric.

The order of the checks is the order of what is surest: ngrp's own timeout or stop, then Slurm's
state, then out-of-memory evidence (text in the log's tail, or SIGKILL / exit 137 with no timeout:
the kernel's OOM killer sends SIGKILL), then non-finite values in the log, then any other signal or
non-zero exit. A command that succeeded is `ok` when its metric was read, `nan` when the metric or a
loss in the log is not finite, and `no_metric` when extraction found nothing (then read the log).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from ..artifacts.opening import open_input
from ..artifacts.scrub import scrub
from ..errors import InputError
from .outcome import Outcome

CLASSES = ("ok", "timeout", "oom", "nan", "killed", "exit:N", "no_metric")
TAIL_BYTES = 8 * 1024 * 1024  # the part of the log read for evidence
OOM_TAIL_BYTES = 256 * 1024  # out-of-memory text counts only near the end

_OOM = re.compile(
    r"(?i)(out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED|\bMemoryError\b"
    r"|Cannot allocate memory|std::bad_alloc|oom[-_ ]kill)"
)
_NAN = re.compile(
    r"(?i)\b[\w./-]*(?:loss|grad_norm|gradnorm|reward|perplexity|ppl|accuracy|score|metric|kl)[\w./-]*"
    r"[\"']?\s*(?:[:=]|\bis\b|\bwas\b)?\s*(?:tensor\()?[\"']?[-+]?(?:nan|inf|infinity)\b"
)
SLURM_KILLED = ("CANCELLED", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "REVOKED", "SPECIAL_EXIT")


@dataclass(frozen=True)
class Verdict:
    run_class: str
    detail: str
    evidence: str = ""  # the log line behind it, scrubbed and shortened

    def text(self) -> str:
        line = f"{self.run_class}: {self.detail}"
        return f"{line}: {self.evidence!r}" if self.evidence else line


def read_tail(log: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with open_input(log) as handle:  # a FIFO or device is no log: nothing to classify
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read(limit).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return ""


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if pattern.search(line):
            return _short(line)
    return None


def _short(line: str) -> str:
    line = scrub(line.strip())
    return line if len(line) <= 300 else line[:297] + "..."


def _signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify_end(outcome: Outcome, tail: str, timeout_s: float | None) -> Verdict | None:
    """The verdict on a run that did not succeed; None when the command exited 0 on its own."""
    if outcome.timed_out:
        limit = "the timeout" if timeout_s is None else f"the {timeout_s:g}s timeout"
        return Verdict("timeout", f"stopped at {limit} (SIGTERM to its process group, then SIGKILL)")
    if outcome.stopped_by:
        how = " (Ctrl-C)" if outcome.stopped_by == "SIGINT" else ""
        return Verdict("killed", f"stopped by ngrp on {outcome.stopped_by}{how}")
    state = (outcome.state or "").split()[0] if outcome.state else ""
    if state in ("TIMEOUT", "DEADLINE"):
        return Verdict("timeout", f"Slurm job {outcome.job_id} ended {state}")
    if state == "OUT_OF_MEMORY":
        return Verdict("oom", f"Slurm job {outcome.job_id} ended OUT_OF_MEMORY")
    if state in SLURM_KILLED:
        return Verdict("killed", f"Slurm job {outcome.job_id} ended {state}")
    failed = outcome.signal is not None or (outcome.returncode or 0) != 0
    if not failed:
        return None
    oom_line = _last(_OOM, tail[-OOM_TAIL_BYTES:])
    if oom_line:
        return Verdict("oom", "out-of-memory text in the log's tail", oom_line)
    if outcome.signal == signal.SIGKILL or outcome.returncode == 128 + signal.SIGKILL:
        how = "SIGKILL" if outcome.signal else "exit 137 (SIGKILL)"
        return Verdict("oom", f"{how} with no timeout: most often the kernel's OOM killer")
    nan_line = _last(_NAN, tail)
    if nan_line:
        return Verdict("nan", "a non-finite loss or metric in the log", nan_line)
    last = _last(re.compile(r"\S"), tail[-OOM_TAIL_BYTES:]) or ""
    if outcome.signal is not None:
        return Verdict("killed", f"ended by {_signame(outcome.signal)}", last)
    return Verdict(f"exit:{outcome.returncode}", f"exited with status {outcome.returncode}", last)


def classify_success(tail: str, metric_problem: str | None, metric_nan: bool, log: Path) -> Verdict:
    """The verdict on a command that exited 0, given what reading its metric gave."""
    if metric_nan:
        return Verdict("nan", metric_problem or "the metric is not finite")
    nan_line = _last(_NAN, tail)
    if nan_line:
        return Verdict("nan", "a non-finite loss or metric in the log", nan_line)
    if metric_problem is not None:
        return Verdict(
            "no_metric",
            f"the command succeeded but no metric was found ({metric_problem}); read the log's end "
            f"(tail -n 50 {log}) and the recipe's logging path before deciding",
        )
    return Verdict("ok", "the command succeeded and its metric was read")


def tail_lines(tail: str, count: int = 20) -> list[str]:
    """The log's last lines, scrubbed and shortened: what `no_metric` asks the agent to read."""
    return [_short(line) for line in tail.splitlines()[-count:]]
