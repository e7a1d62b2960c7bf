"""Run a command on this machine in its own process group, its output teed to a log.

At the timeout (or when ngrp is asked to stop) the whole group gets SIGTERM, then, after the grace
period, SIGKILL, and so does every process of the run that left the group (setsid): while the run
goes, ngrp is a child subreaper (Linux), so the run's orphans become its children and stay in view.
When the command itself ends, what it left running is stopped the same way: a run is over when its
command returns, and nothing of it is left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from ..artifacts.opening import open_append
from ..artifacts.scrub import StreamMask, environment_secrets
from .outcome import ESCAPED, Outcome, StopRequest, Watch
from .procwatch import GpuProbe, Proc, scan, start_ticks, tree, tree_rss

SAMPLE_S = 0.5  # memory sampling interval
GPU_SAMPLE_S = 5.0
LEFTOVER_GRACE_S = 5.0  # for processes still running after the command returned
DRAIN_S = 2.0  # how long to wait for the output pipe's end once the tree is gone
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37
RUN_TOKEN = "NGRP_LEDGER_RUN_TOKEN"


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """Adopt the run's orphans for the run's lifetime (a no-op where prctl is not available)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


class _Tree:
    """The run's live processes, and the SIGTERM-then-SIGKILL sequence for all of them."""

    def __init__(self, leader: int, grace_s: float, token: str) -> None:
        self.leader = leader
        self.leader_start = start_ticks(leader)
        self.grace_s = grace_s
        self.token = token.encode()  # in the environment of every process the run started
        self.known: set[int] = {leader}
        self.members: list[Proc] = []
        self.term_at: float | None = None
        self.killed = False

    def refresh(self) -> list[Proc]:
        procs = scan()
        me = os.getpid()
        adopted = [
            p.pid for p in procs.values() if p.ppid == me and p.pid != self.leader and self._ours(p.pid)
        ]
        dead = [p.pid for p in procs.values() if p.ppid == me and p.pid != self.leader and self._dead_own(p)]
        found = {p.pid: p for p in tree(procs, self.leader, self.leader)}
        for root in [*adopted, *self.known]:
            if root in procs and root not in found:
                found.update((p.pid, p) for p in tree(procs, root, procs[root].pgid))
        self.members = [found[pid] for pid in sorted(found)]
        self.known = set(found)  # a dead pid is forgotten at once, so a reused one is never signalled
        for pid in dead:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # an adopted orphan of the run that died: reap it
        return self.members

    def _dead_own(self, proc: Proc) -> bool:
        return proc.state in ("Z", "X") and (proc.pgid == self.leader or proc.pid in self.known)

    def _ours(self, pid: int) -> bool:
        """An orphan ngrp adopted (as the subreaper) belongs to the run when it carries the run's token in
        its environment, or when it started after the run's first process: nothing but the run hands ngrp
        orphans, and ngrp's own children (a caller's servers) are older. A process that cleared its
        environment (`setsid env -i ...`, a double fork with an empty one) is caught by the second rule."""
        try:
            if self.token in Path(f"/proc/{pid}/environ").read_bytes():
                return True
        except OSError:
            pass
        started = start_ticks(pid)
        return started is not None and self.leader_start is not None and started >= self.leader_start

    def escapees(self) -> list[tuple[int, str]]:
        """Live processes that carry the run's token but are not in its tree (they were handed to another
        parent than ngrp: a service manager, a nested subreaper that exited): (pid, name)."""
        found = []
        for proc in scan().values():
            if proc.pid in self.known or proc.state in ("Z", "X"):
                continue
            try:
                if self.token not in Path(f"/proc/{proc.pid}/environ").read_bytes():
                    continue
                name = Path(f"/proc/{proc.pid}/comm").read_text().strip()
            except OSError:
                continue
            found.append((proc.pid, name))
        return found

    def stop_escapees(self) -> str | None:
        """SIGKILL every escapee; the note naming them (None when there is none)."""
        named = []
        for pid, name in self.escapees():
            try:
                os.kill(pid, signal.SIGKILL)
                named.append(f"pid {pid} ({name}), stopped")
            except (ProcessLookupError, PermissionError) as exc:
                named.append(f"pid {pid} ({name}), still running: {exc.strerror or exc}")
        return f"{ESCAPED} {'; '.join(named)}" if named else None

    def terminate(self, now: float, grace_s: float | None = None) -> None:
        if self.term_at is None:
            self.term_at = now
            self.grace_s = self.grace_s if grace_s is None else grace_s
            self._send(signal.SIGTERM)

    def tick(self, now: float) -> None:
        if self.term_at is not None and not self.killed and now - self.term_at >= self.grace_s:
            self.killed = True
            self._send(signal.SIGKILL)
        elif self.term_at is not None and self.killed:
            self._send(signal.SIGKILL)  # late arrivals (forked while dying)

    def _send(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.leader, signum)
        for proc in self.members:
            if proc.pgid != self.leader:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signum)


class _LocalRun:
    def __init__(
        self, proc: subprocess.Popen, log: BinaryIO, echo: BinaryIO | None, tree_: _Tree, mask: StreamMask
    ) -> None:
        self.proc = proc
        self.log = log
        self.mask = mask  # the launched environment's secret values, masked before a byte is kept
        self.echo = echo
        self.tree = tree_
        self.selector = selectors.DefaultSelector()
        assert proc.stdout is not None
        self.pipe = proc.stdout
        self.selector.register(self.pipe, selectors.EVENT_READ)
        self.pipe_open = True
        self.start = time.monotonic()
        self.ended_at: float | None = None
        self.gone_at: float | None = None
        self.peak_rss = 0
        self.next_sample = self.next_gpu = self.start
        self.gpu = GpuProbe()
        self.out = Outcome("local", None, pgid=proc.pid)

    def pump(self) -> None:
        """Copy what the command wrote to the log (and the echo stream)."""
        if not self.pipe_open:
            time.sleep(0.05)
            return
        for _key, _mask in self.selector.select(timeout=0.2):
            data = os.read(self.pipe.fileno(), 65536)
            if not data:
                self.selector.unregister(self.pipe)
                self.pipe_open = False
                data = self.mask.flush()
            else:
                data = self.mask.feed(data)
            self.log.write(data)
            self.log.flush()
            if self.echo is not None:
                try:
                    self.echo.write(data)
                    self.echo.flush()
                except (OSError, ValueError):
                    self.echo = None  # a closed terminal must not stop the run

    def reap(self, now: float) -> None:
        if self.ended_at is not None:
            return
        done, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if done:
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.ended_at = now
            self.peak_rss = max(self.peak_rss, usage.ru_maxrss * 1024)  # the command's own peak

    def sample(self, now: float) -> None:
        if now < self.next_sample and self.ended_at is None:
            return
        members = self.tree.refresh()
        self.peak_rss = max(self.peak_rss, tree_rss(members))
        self.next_sample = now + SAMPLE_S
        if self.gpu.available and members and now >= self.next_gpu:
            used = self.gpu.used_mib({p.pid for p in members})
            if used is not None:
                self.out.peak_gpu_mib = max(self.out.peak_gpu_mib or 0.0, used)
            self.next_gpu = now + GPU_SAMPLE_S

    def control(self, now: float, timeout_s: float | None, stop: StopRequest, grace_s: float) -> None:
        if stop.signal_name and self.tree.term_at is None:
            self.out.stopped_by = stop.signal_name
            self.tree.terminate(now)
        running = self.ended_at is None and self.tree.term_at is None
        if running and timeout_s is not None and now - self.start >= timeout_s:
            self.out.timed_out = True
            self.tree.terminate(now)
        if self.ended_at is not None and self.tree.members and self.tree.term_at is None:
            self.out.notes.append(
                f"{len(self.tree.members)} process(es) of the run were still running when the command "
                "returned: stopped (SIGTERM, then SIGKILL)"
            )
            self.tree.terminate(now, min(grace_s, LEFTOVER_GRACE_S))
        self.tree.tick(now)

    def finished(self, now: float) -> bool:
        if self.ended_at is None or self.tree.members:
            return False
        self.gone_at = self.gone_at or now
        return not self.pipe_open or now - self.gone_at >= DRAIN_S

    def outcome(self) -> Outcome:
        code = self.proc.returncode
        out = self.out
        out.returncode = code if code is not None and code >= 0 else None
        out.signal = -code if code is not None and code < 0 else None
        out.elapsed_s = (self.ended_at or time.monotonic()) - self.start
        out.peak_rss_bytes = self.peak_rss or None
        if out.peak_rss_bytes and out.elapsed_s < 2 * SAMPLE_S:
            out.notes.append("the run was shorter than two memory samples: its peak memory is a lower bound")
        return out


def run_local(argv: Sequence[str], log_path: Path, watch: Watch, *, cwd: Path | None = None) -> Outcome:
    """Run `argv` to its end (or its timeout) and say how it ended. The log gets stdout and stderr.
    `watch.on_start` is told the command's process group once it runs."""
    timeout_s, grace_s, env = watch.timeout_s, watch.grace_s, watch.env
    with contextlib.ExitStack() as stack:
        stop = watch.stop or stack.enter_context(StopRequest())
        stack.enter_context(_subreaper())
        log = stack.enter_context(open_append(log_path))  # a FIFO planted there is refused, not waited on
        token = f"{os.getpid()}-{time.time_ns()}"
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session and process group: pgid == pid
            env={**(os.environ if env is None else env), RUN_TOKEN: token},
            cwd=cwd,
        )
        secrets = environment_secrets(os.environ if env is None else env)
        run = _LocalRun(proc, log, watch.echo, _Tree(proc.pid, grace_s, token), StreamMask(secrets))
        if watch.on_start is not None:
            watch.on_start({"pgid": proc.pid})
        try:
            while True:
                run.pump()
                now = time.monotonic()
                run.reap(now)
                run.sample(now)
                run.control(now, timeout_s, stop, grace_s)
                if run.finished(now):
                    break
        finally:
            run.selector.close()
            run.pipe.close()
            run.log.write(run.mask.flush())  # the held tail when the pipe was closed before its end
            run.log.flush()
        escaped = run.tree.stop_escapees()
    outcome = run.outcome()
    if escaped:
        outcome.notes.append(escaped)
    return outcome
