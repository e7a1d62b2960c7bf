"""A disk that fills while `reverify` has rows in flight to a /verify server: one line naming the file and
the cause, exit 3, nothing written after it (no row sent, none recorded as failed because the run's own
session closed under it), and every row already written kept for --resume. The /verify server is a canned
aiohttp peer (it answers slowly, so rows are in flight); a real ENOSPC from a tmpfs in a private mount
namespace when this runs as root, else a file size limit (EFBIG fails a write the same way)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from health_data import clean_run
from http_helpers import serve_app

REPO = Path(__file__).resolve().parents[1]
SIZE_KB = 96  # the output's room: some re-scored rows, not all


@pytest.fixture
def slow_verify():
    """/verify answers reward 1 after 50 ms and counts the requests it got."""
    from aiohttp import web

    state = {"posts": 0}

    async def verify(request):
        await request.read()
        state["posts"] += 1
        await asyncio.sleep(0.05)
        return web.json_response({"reward": 1.0})

    app = web.Application()
    app.router.add_post("/verify", verify)
    with serve_app(app) as url:
        state["url"] = url + "/verify"
        yield state


def _tmpfs_allowed() -> bool:
    if shutil.which("unshare") is None or os.getuid() != 0:
        return False
    probe = ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def _run_on_a_small_disk(argv: list, folder: Path, tmpfs: bool) -> subprocess.CompletedProcess:
    """`ngrp ARGV` with `folder` a tmpfs of SIZE_KB (what it wrote copied back to `folder` afterwards), or
    under a file size limit of SIZE_KB."""
    command = [*ENTRY, *map(str, argv)]
    if not tmpfs:
        import resource
        import signal

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE_KB * 1024, SIZE_KB * 1024))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        return subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    keep = folder.parent / (folder.name + "-kept")
    keep.mkdir()
    quoted = " ".join(f"'{a}'" for a in command)
    script = (f"mount -t tmpfs -o size={SIZE_KB}k tmpfs '{folder}' && {{ {quoted}; code=$?; "
              f"cp -a '{folder}/.' '{keep}/'; exit $code; }}")  # fmt: skip
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    shutil.copytree(keep, folder, dirs_exist_ok=True)
    return done


@pytest.mark.parametrize("disk", ["tmpfs", "size_limit"])
def test_a_full_disk_during_reverify_names_the_file_and_sends_nothing_after(tmp_path, slow_verify, disk):
    tmpfs = disk == "tmpfs"
    if tmpfs and not _tmpfs_allowed():
        pytest.skip("mounting a tmpfs in a private mount namespace needs root")
    _, rollouts, _ = clean_run(tasks=200).write(tmp_path / "run")
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "r.jsonl"
    argv = ["reverify", "--rollouts", rollouts, "--output", out, "--verify-url", slow_verify["url"],
            "--concurrency", "32", "--max-retries", "0"]  # fmt: skip
    done = _run_on_a_small_disk(argv, folder, tmpfs)
    cause = "No space left on device" if tmpfs else "File too large"
    assert done.returncode == 3, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {out}: {cause}"], done.stderr
    assert "Traceback" not in done.stderr and "Session is closed" not in done.stderr, done.stderr
    failures = folder / "r_failures.jsonl"
    recorded = failures.read_text() if failures.exists() else ""
    assert recorded == "", recorded  # no row failed because the run was ending ("Session is closed")
    lines = out.read_bytes().split(b"\n")
    kept = [json.loads(line) for line in lines[:-1]]  # every whole line is a row; the last may be torn
    assert kept
    posts = slow_verify["posts"]
    assert posts <= len(kept) + 1 + 32, (posts, len(kept))  # at most the rows in flight went unwritten
    resumed = subprocess.run([*ENTRY, *map(str, argv), "--resume"],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 800 and rows[: len(kept)] == kept  # the rows written before the disk filled stay
