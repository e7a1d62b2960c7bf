"""While a collector holds its lock, `check` and `health` say the run is in progress (who holds the lock,
since when, how far it is) and advise no resume (issue 36, wrong turn 1: `check` said "256 missing, fix:
--resume" and `health` "240 never attempted" of a run still being written)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ngrp_lib.artifacts.live import live_run

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0" / "case_partial"
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
HOLD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from ngrp_lib.collect.state import CollectorLock
with CollectorLock(Path(sys.argv[2])):
    print("locked", flush=True)
    sys.stdin.read()  # until the test closes it
"""
# 6 rows written in 60 s by the live invocation: 0.1/s, and the 2 missing take 20 s
PACE = r"10 of 12 rollouts written so far, 0\.(1|09\d) rollouts/s, ETA (19|2\d)s"


@pytest.fixture
def run(tmp_path):
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    (tmp_path / "rollouts_failures.jsonl").write_text("")
    return tmp_path


@pytest.fixture
def collector(run):
    """Another process holding the run's lock with collect's own CollectorLock, as a live collector does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(SCRIPTS), str(run / "rollouts.jsonl")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def _check(run_ngrp):
    proc = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    data = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    "--json")  # fmt: skip
    return proc, json.loads(data.stdout)


def test_check_says_the_run_is_in_progress_and_advises_no_resume(run, collector, run_ngrp):
    proc, data = _check(run_ngrp)
    assert proc.returncode == 1 and data["exit_code"] == 1
    live = data["in_progress"]
    assert live["pid"] == str(collector.pid) and live["lock"].endswith("rollouts.jsonl.lock")
    assert abs(time.time() - _epoch(live["since"])) < 60 and 0 <= live["running_s"] < 60
    first = data["findings"][0]  # a status (text `status:`), not an error; exit 1 all the same
    assert first["code"] == "run_in_progress" and first["severity"] == "note"
    assert not any(f["severity"] == "error" for f in data["findings"])
    assert f"status: the run is in progress: a collector (pid {collector.pid})" in proc.stdout
    assert "error:" not in proc.stdout
    assert live["rate_per_s"] is None and live["eta_s"] is None  # no manifest beside the rollouts
    assert f"pid {collector.pid}" in first["message"]
    assert "10 of 12 rollouts written so far" in first["message"]
    missing = next(f for f in data["findings"] if f["code"] == "missing_rollouts")
    assert missing["severity"] == "note" and "not written yet" in missing["message"]
    assert "--resume" not in proc.stdout and "--resume" not in json.dumps(data["findings"])
    assert f"wait for pid {collector.pid}" in proc.stdout
    assert "result: in progress, not complete yet (exit 1)" in proc.stdout


def test_check_gives_the_rate_and_eta_of_the_live_invocation_from_its_manifest_entry(
    run, collector, run_ngrp
):
    """Replay 2026-12-04, W2: how far is it? Rows this invocation wrote (past the file's size when it
    started) over the seconds since its started_at: 6 rows in 60 s is 0.1/s, and the 2 missing take 20 s."""
    from ngrp_lib.artifacts.names import manifest_path_for

    rollouts = run / "rollouts.jsonl"
    start = len(b"".join(rollouts.read_bytes().splitlines(keepends=True)[:4]))  # 4 rows there before it
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    entry = {"id": "a", "status": "running", "started_at": started, "pid": collector.pid, "resumed": True,
             "start": {"rollouts_bytes": start, "failures_bytes": 0}, "cost": None}  # fmt: skip
    manifest_path_for(rollouts).write_text(json.dumps({"runs": [entry]}))
    proc, data = _check(run_ngrp)
    assert proc.returncode == 1 and data["exit_code"] == 1
    live = data["in_progress"]
    assert 0.09 < live["rate_per_s"] < 0.105 and 19 <= live["eta_s"] <= 22, live
    status = next(line for line in proc.stdout.splitlines() if line.startswith("status: "))
    assert re.search(PACE + "$", status), status
    # health gives the same pace, in its keys line and its JSON (the replay's leftover: only check had it)
    argv = ("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    health = run_ngrp(*argv)
    keys = next(line for line in health.stdout.splitlines() if line.startswith("  keys: "))
    assert re.search(PACE + "; ask again when it has finished\\)", keys), keys
    in_progress = json.loads(run_ngrp(*argv, "--json").stdout)["in_progress"]
    assert in_progress["pid"] == str(collector.pid), in_progress
    assert 0.09 < in_progress["rate_per_s"] < 0.105 and 19 <= in_progress["eta_s"] <= 22, in_progress


def test_check_on_a_live_run_with_a_fifo_for_its_manifest_answers_and_does_not_block(run, collector):
    """The live run's pace reads the manifest through the shared reader, which refuses what is not a regular
    file: a FIFO in the manifest's place (nobody writing it) would block a plain read forever."""
    from cli_helpers import ENTRY

    from ngrp_lib.artifacts.names import manifest_path_for

    manifest = manifest_path_for(run / "rollouts.jsonl")
    manifest.unlink(missing_ok=True)
    os.mkfifo(manifest)
    done = subprocess.run(
        [*ENTRY, "check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
         "--json"], cwd=run, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    live = json.loads(done.stdout)["in_progress"]
    assert live["pid"] and live["rate_per_s"] is None and live["eta_s"] is None


def test_health_says_the_run_is_in_progress_not_never_attempted(run, collector, run_ngrp):
    proc = run_ngrp("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts",
                    "rollouts.jsonl", "--no-write")  # fmt: skip
    assert "never attempted" not in proc.stdout, proc.stdout
    assert f"not written yet (the run is in progress: a collector (pid {collector.pid})" in proc.stdout
    assert "10 of 12 rollouts written so far; ask again when it has finished)" in proc.stdout
    answer = next(line for line in proc.stdout.splitlines() if line.startswith("answer: "))
    assert "2 not written yet: the run is in progress" in answer and "resume" not in answer
    data = json.loads(run_ngrp("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts",
                               "rollouts.jsonl", "--no-write", "--json").stdout)  # fmt: skip
    unscored = data["causes"]["unscored"]
    assert unscored["not_judged_attempted"] == "in_progress"
    assert unscored["in_progress"]["pid"] == str(collector.pid)
    assert data["in_progress"]["pid"] == str(collector.pid)  # no manifest beside these rows: no pace
    assert data["in_progress"]["rate_per_s"] is None and data["in_progress"]["eta_s"] is None


def test_health_on_a_live_run_writes_nothing_and_says_so_then_writes_when_it_ends(run, collector, run_ngrp):
    """Replay 2026-12-04, W1: health asked while a collector ran wrote its files, and every later ask (and
    check's `fix: ngrp health ...`) was refused, exit 2, even after the run finished."""
    argv = ("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    proc = run_ngrp(*argv)
    assert proc.returncode == 0, proc.stderr  # its 10 rows are healthy; the 2 not written yet are not judged
    assert f"nothing written: the run is in progress (a collector, pid {collector.pid}" in proc.stdout
    assert not (run / "quality_summary.json").exists() and not (run / "rollout_verdicts.jsonl").exists()
    assert json.loads(run_ngrp(*argv, "--json").stdout)["outputs"] is None
    assert collector.stdin is not None
    collector.stdin.close()
    collector.wait(timeout=30)
    done = run_ngrp(*argv)
    assert done.returncode == 0 and "wrote " in done.stdout, done.stderr
    assert "nothing written" not in done.stdout
    assert (run / "quality_summary.json").exists() and (run / "rollout_verdicts.jsonl").exists()


def test_health_replaces_its_files_of_an_earlier_shorter_state_of_the_same_run(run, run_ngrp):
    """Files judged from fewer rows of the same run (killed, then resumed; or written during a live run by
    an earlier version) are stale, not a different judgement: replaced. Other options are still refused."""
    argv = ("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    full = (run / "rollouts.jsonl").read_bytes()
    (run / "rollouts.jsonl").write_bytes(b"".join(full.splitlines(keepends=True)[:5]))
    assert run_ngrp(*argv).returncode == 0
    (run / "rollouts.jsonl").write_bytes(full)
    grown = run_ngrp(*argv)
    assert grown.returncode == 0 and "wrote " in grown.stdout, grown.stderr
    summary = json.loads((run / "quality_summary.json").read_bytes())
    assert summary["ngrp"]["sources"]["rollouts"]["rows"] == 10
    # as an earlier version wrote it during a live run
    summary["ngrp"]["causes"]["unscored"]["in_progress"] = {"lock": "x.lock", "pid": "1", "since": "2026"}
    (run / "quality_summary.json").write_text(json.dumps(summary))
    assert run_ngrp(*argv).returncode == 0
    replaced = json.loads((run / "quality_summary.json").read_bytes())
    assert replaced["ngrp"]["causes"]["unscored"]["in_progress"] is None
    other = run_ngrp(*argv, "--loop-min-repeats", "11")  # a different judgement of the same rows: kept
    assert other.returncode == 2 and "refusing to overwrite" in other.stderr
    (run / "rollouts.jsonl").write_bytes(b"".join(full.splitlines(keepends=True)[:5]))
    fewer = run_ngrp(*argv)  # fewer rows than the files were judged from: not an earlier state, refused
    assert fewer.returncode == 2 and "refusing to overwrite" in fewer.stderr


def test_health_asked_again_on_a_live_run_that_did_not_change_answers_the_same(run, collector, run_ngrp):
    """No clock in what health answers: asked twice, seconds apart, on a run whose files did not change,
    the second answer is the first (and nothing is written or refused)."""
    argv = ("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    first = run_ngrp(*argv)
    time.sleep(1.1)
    again = run_ngrp(*argv)
    assert again.returncode == first.returncode, again.stderr
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]


def test_after_the_collector_ends_the_same_run_is_missing_keys_again(run, collector, run_ngrp):
    """The lock released (the collector exited): the usual findings and their resume fix come back."""
    assert collector.stdin is not None
    collector.stdin.close()
    collector.wait(timeout=30)
    assert live_run(run / "rollouts.jsonl") is None
    proc, data = _check(run_ngrp)
    assert data["in_progress"] is None and "run_in_progress" not in {f["code"] for f in data["findings"]}
    missing = next(f for f in data["findings"] if f["code"] == "missing_rollouts")
    assert missing["severity"] == "error" and "resume" in missing["fix"]


def test_no_lock_a_symlinked_lock_or_a_stray_one_is_no_live_run(tmp_path):
    rollouts = tmp_path / "r.jsonl"
    assert live_run(rollouts) is None  # no lock file: nothing created either
    assert not (tmp_path / "r.jsonl.lock").exists()
    (tmp_path / "r.jsonl.lock").write_text(f"{os.getpid()}\n")  # left by a finished run: nobody holds it
    assert live_run(rollouts) is None
    (tmp_path / "r.jsonl.lock").unlink()
    (tmp_path / "elsewhere").write_text("1\n")
    (tmp_path / "r.jsonl.lock").symlink_to(tmp_path / "elsewhere")
    assert live_run(rollouts) is None


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_an_adaptive_live_runs_count_and_eta_are_of_the_rollouts_assigned_so_far(run, collector, run_ngrp):
    """An adaptive run's materialized inputs grow round by round: '10 of 12 written, ETA 20s' read as a
    run nearly done while later rounds could assign up to N a task (hostile pass 6: a run of 16 tasks at
    N=16 said '14 of 38 written, ETA 11s' and went on to 68). Both commands say the count and the ETA are
    of those assigned so far, and name N; --json gives it as in_progress.adaptive_up_to."""
    from ngrp_lib.artifacts.names import manifest_path_for

    rollouts = run / "rollouts.jsonl"
    start = len(b"".join(rollouts.read_bytes().splitlines(keepends=True)[:4]))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    entry = {"id": "a", "status": "running", "started_at": started, "pid": collector.pid, "resumed": True,
             "start": {"rollouts_bytes": start, "failures_bytes": 0}, "cost": None}  # fmt: skip
    identity = {"adaptive": {"rule": "learnable", "first_round": 2}, "materialize": {"num_repeats": 16}}
    manifest_path_for(rollouts).write_text(json.dumps({"identity": identity, "runs": [entry]}))
    proc, data = _check(run_ngrp)
    assert data["in_progress"]["adaptive_up_to"] == 16 and proc.returncode == 1
    words = "10 of the 12 rollouts assigned so far written (an adaptive run: later rounds may assign more"
    status = next(line for line in proc.stdout.splitlines() if line.startswith("status: "))
    assert words in status and re.search(r"ETA (19|2\d)s for those$", status), status
    assert "2 of the 12 rollouts assigned so far are not written yet" in proc.stdout
    argv = ("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
    assert words in run_ngrp(*argv).stdout
    assert json.loads(run_ngrp(*argv, "--json").stdout)["in_progress"]["adaptive_up_to"] == 16
    manifest_path_for(rollouts).write_text(json.dumps({"runs": [entry]}))  # a fixed-N run: as before
    proc, data = _check(run_ngrp)
    assert data["in_progress"]["adaptive_up_to"] is None and "assigned so far" not in proc.stdout
