"""Issue 29, class "`ledger run` loses daemons that clear their environment": a run whose processes leave
its session and clear their environment (`setsid env -i ...`, a Python double fork with an empty
environment) still has every descendant stopped when it ends, because ngrp, their subreaper, adopts them;
a process that carries the run's token but left its tree is stopped and named in the row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ledger_helpers import make_repo

from ngrp_lib.ledger import read_ledger

DOUBLE_FORK = (
    "import os, sys\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        os.execve('/bin/sleep', ['sleep', sys.argv[1]], {})\n"
    "    os._exit(0)\n"
    "print('score=0.5')\n"
)
PATTERNS = {
    "setsid_env_i": ["bash", "-c", "setsid env -i sleep {s} & sleep 0.3; echo score=0.5"],
    "nohup_env_i": [
        "bash",
        "-c",
        "nohup env -i setsid sleep {s} >/dev/null 2>&1 & sleep 0.3; echo score=0.5",
    ],
    "subshell_env_i": ["bash", "-c", "(env -i bash -c 'sleep {s} &' &); sleep 0.3; echo score=0.5"],
    "python_double_fork": [sys.executable, "-c", DOUBLE_FORK, "{s}"],
}


def _left(marker: str) -> list[str]:
    for _ in range(30):
        ps = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True).stdout
        left = [line for line in ps.splitlines() if line.split(None, 1)[-1] == f"sleep {marker}"]
        if not left:
            return []
        time.sleep(0.1)
    return left


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_ledger_run_stops_daemons_that_clear_their_environment(tmp_path, run_ngrp, pattern):
    repo = make_repo(tmp_path / "repo")
    init = ["ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max"]
    assert run_ngrp(*init, cwd=repo).returncode == 0
    marker = str(3000 + sorted(PATTERNS).index(pattern) + (hash(str(tmp_path)) % 997))
    command = [part.replace("{s}", marker) for part in PATTERNS[pattern]]
    try:
        ran = run_ngrp("ledger", "run", "--campaign", "c1", "--metric-regex", r"score=(?P<value>[0-9.]+)",
                       "--grace", "2", "--", *command, cwd=repo)  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert _left(marker) == [], f"{pattern} left a survivor"
    finally:
        for line in _left(marker):  # a survivor of a failed run: stopped by its pid
            os.kill(int(line.split()[0]), signal.SIGKILL)
    rows = read_ledger(Path(repo) / "reports" / "auto_research" / "c1" / "results.tsv")
    assert len(rows) == 1


SUPERVISOR = (
    "import json, subprocess, sys\n"
    "with open(sys.argv[1]) as fifo:\n"
    "    env = json.loads(fifo.readline())\n"
    "subprocess.Popen(['sleep', sys.argv[2]], env=env).wait()\n"
)
HAND_OFF = (
    "import json, os, sys, time\n"
    "with open(sys.argv[1], 'w') as fifo:\n"
    "    fifo.write(json.dumps(dict(os.environ)) + '\\n')\n"
    "time.sleep(1.0)\n"
    "print('score=0.5')\n"
)


def test_ledger_run_names_and_stops_a_process_that_escaped_its_tree(tmp_path, run_ngrp):
    """A run hands its environment to a supervisor outside it (as to a service manager), which starts a
    process for it: that process is no descendant of ngrp, but it carries the run's token."""
    repo = make_repo(tmp_path / "repo")
    init = ["ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max"]
    assert run_ngrp(*init, cwd=repo).returncode == 0
    fifo = tmp_path / "handoff"
    os.mkfifo(fifo)
    marker = str(4000 + hash(str(tmp_path)) % 997)
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(fifo), marker])
    try:
        ran = run_ngrp("ledger", "run", "--campaign", "c1", "--metric-regex", r"score=(?P<value>[0-9.]+)",
                       "--", sys.executable, "-c", HAND_OFF, str(fifo), cwd=repo)  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert _left(marker) == []
        supervisor.wait(timeout=30)
        (row,) = read_ledger(Path(repo) / "reports" / "auto_research" / "c1" / "results.tsv")
        description = row.fields["description"]
        assert "escaped the run's process tree" in description and "(sleep), stopped" in description
    finally:
        for line in _left(marker):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        supervisor.kill()
        supervisor.wait()
