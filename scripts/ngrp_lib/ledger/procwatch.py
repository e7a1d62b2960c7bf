"""Watch a run's process tree through /proc: who belongs to it, its resident memory, its GPU memory.

A run's tree is every descendant of the command's first process plus every process still in its
process group (an orphan reparented to init keeps its group). Memory is sampled, not traced: a spike
shorter than the sampling interval can be missed, and the figures say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    rss_bytes: int


def parse_stat(text: str) -> Proc | None:
    """One /proc/<pid>/stat line (the command name may hold spaces and parentheses)."""
    head, sep, rest = text.rpartition(")")
    if not sep:
        return None
    fields = rest.split()
    try:
        pid = int(head.split("(", 1)[0])
        return Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[21]) * PAGE)
    except (ValueError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat); None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[19]) if len(fields) > 19 else None


def scan(proc_root: Path = Path("/proc")) -> dict[int, Proc]:
    """Every process visible now. A process that exits mid-scan is simply not listed."""
    out: dict[int, Proc] = {}
    try:
        names = os.listdir(proc_root)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            text = (proc_root / name / "stat").read_text()
        except OSError:
            continue
        proc = parse_stat(text)
        if proc is not None:
            out[proc.pid] = proc
    return out


def tree(procs: dict[int, Proc], root: int, pgid: int) -> list[Proc]:
    """The live (not zombie) processes of a run: `root`, its group's members, and their descendants
    (a child that called setsid has left the group but is still the run's)."""
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    stack = [root, *(p.pid for p in procs.values() if p.pgid == pgid)]
    members: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in members or pid not in procs:
            continue
        members.add(pid)
        stack.extend(children.get(pid, []))
    return [procs[pid] for pid in sorted(members) if pid in procs and procs[pid].state not in ("Z", "X")]


def tree_rss(members: list[Proc]) -> int:
    return sum(p.rss_bytes for p in members)


def parse_nvidia_smi(text: str, pids: set[int]) -> float | None:
    """MiB used by `pids` in `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`
    output; None when none of them holds GPU memory."""
    total = 0.0
    seen = False
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        try:
            used = float(parts[1])
        except ValueError:
            continue  # "[N/A]" (no permission to see it)
        if int(parts[0]) in pids:
            total += used
            seen = True
    return total if seen else None


class GpuProbe:
    """Asks nvidia-smi, when it is installed, how much GPU memory the run's processes hold."""

    def __init__(self) -> None:
        self.command = shutil.which("nvidia-smi")

    @property
    def available(self) -> bool:
        return self.command is not None

    def used_mib(self, pids: set[int]) -> float | None:
        if self.command is None or not pids:
            return None
        query = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
        try:
            done = subprocess.run([self.command, *query], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return parse_nvidia_smi(done.stdout, pids) if done.returncode == 0 else None
