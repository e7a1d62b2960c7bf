"""A disk that fills while rows are in flight (the real vLLM on CPU answering): collect stops with one line
naming the file and the cause, exit 3, and every row already written stays (a torn tail is repaired by
--resume). A real ENOSPC from a small tmpfs mounted in a private mount namespace (`unshare -m`, root), else
a file size limit (EFBIG, which fails a write the same way)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from test_collect_vllm import collect_args, write_tasks

pytestmark = pytest.mark.vllm

REPO = Path(__file__).resolve().parents[1]
SIZE_KB = 128  # room for the materialized rows and some rollouts, not for all


def _private_tmpfs() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.getuid() != 0:
        return False
    probe = subprocess.run([unshare, "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True)  # fmt: skip
    return probe.returncode == 0


def _collect_on_a_small_disk(argv: list, folder: Path, saved: Path) -> subprocess.CompletedProcess:
    """`ngrp ARGV` writing into `folder`, a tmpfs of SIZE_KB; what it wrote is copied to `saved`."""
    command = " ".join(f"'{a}'" for a in [*ENTRY, *argv])
    script = (
        f"mount -t tmpfs -o size={SIZE_KB}k tmpfs '{folder}' && {{ {command}; code=$?; "
        f"cp -a '{folder}/.' '{saved}/'; exit $code; }}"
    )
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=600)


def _collect_under_a_size_limit(argv: list) -> subprocess.CompletedProcess:
    import resource
    import signal

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE_KB * 1024, SIZE_KB * 1024))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    command = [*ENTRY, *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, preexec_fn=limit)


def test_a_disk_that_fills_while_rows_are_in_flight_names_the_file_and_loses_nothing(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 60, max_tokens=16)
    folder, saved = tmp_path / "disk", tmp_path / "saved"
    folder.mkdir()
    saved.mkdir()
    out = folder / "r.jsonl"
    argv = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "16")
    argv[argv.index("--model") + 1] = vllm_server.model
    if _private_tmpfs():
        done, cause = _collect_on_a_small_disk(argv, folder, saved), "No space left on device"
        shutil.copytree(saved, folder, dirs_exist_ok=True)  # what the full disk held, back in place
    else:
        done, cause = _collect_under_a_size_limit(argv), "File too large"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Session is closed" not in done.stderr, done.stderr
    error = [line for line in lines if line.startswith("error:")]
    assert error == [f"error: {out}: {cause}"], done.stderr
    failures = folder / "r_failures.jsonl"
    assert "Session is closed" not in (failures.read_text() if failures.exists() else "")
    rows = out.read_bytes().split(b"\n")
    kept = [json.loads(line) for line in rows[:-1]]  # every complete line is a row; the last may be torn
    assert kept
    command = [*ENTRY, *map(str, argv), "--resume"]
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    after = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(after) == 240 and after[: len(kept)] == kept  # nothing written before the disk filled is lost
