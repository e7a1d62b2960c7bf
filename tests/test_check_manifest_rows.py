"""`ngrp check`'s note `manifest_rows_differ`: the rows the run manifest says its invocations wrote
(`totals.rollouts`, a dead running entry's rows past its start) against the rows the rollouts file holds.

The no-server tests build a run by hand; the vLLM ones make the honest flows (a kill -9, check before and
after the resume: no note) and O5 of the 2026-12-05 replay for real: a collector stopped mid-run, its
folder deleted and made again by a second collect, then let go on; it appends its entry to the new
manifest, counting rows the new file does not hold."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from cli_helpers import ngrp_process as ngrp

from ngrp_lib.artifacts.names import manifest_path_for
from ngrp_lib.audit.check import check_run

CODE = "manifest_rows_differ"


def _row(task: int, rollout: int) -> dict:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 1.0}


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _entry(rollouts: int, status: str = "finished", **extra) -> dict:
    return {"id": f"id{rollouts}", "status": status, "started_at": "2026-12-05T09:00:00Z", "pid": 4242,
            "cost": {"requests": rollouts, "rollouts": rollouts}, **extra}  # fmt: skip


def _run(tmp_path: Path, rows: list[dict], runs: list[dict], totals: dict | str | None = "sum") -> Path:
    """A run of 2 tasks x 2 repeats: materialized inputs, the given rollout rows and a manifest."""
    (tmp_path / "r_materialized_inputs.jsonl").write_text(
        _lines([{"_ng_task_index": t, "_ng_rollout_index": r} for t in range(2) for r in range(2)])
    )
    out = tmp_path / "r.jsonl"
    out.write_text(_lines(rows))
    manifest: dict = {"runs": runs}
    if totals == "sum":
        costs = [r["cost"]["rollouts"] for r in runs if isinstance(r.get("cost"), dict)]
        manifest["totals"] = {"invocations": len(runs), "rollouts": sum(costs) if costs else None}
    elif totals is not None:
        manifest["totals"] = totals
    manifest_path_for(out).write_text(json.dumps(manifest))
    return out


def _note(out: Path):
    result = check_run(out.with_name("r_materialized_inputs.jsonl"), out)
    found = [f for f in result.findings if f.code == CODE]
    return result, (found[0] if found else None)


ALL = [_row(t, r) for t in range(2) for r in range(2)]


def test_rows_removed_by_hand_are_a_note_with_both_numbers_and_exit_0(tmp_path):
    """A collector wrote a key twice (5 rows); the user deleted the repeat by hand: every key is there
    once, the run is complete (exit 0), and the note says 5 written, 4 held."""
    out = _run(tmp_path, ALL, [_entry(3), _entry(2, status="killed")])
    result, note = _note(out)
    assert note is not None and note.severity == "note" and note.count == 1
    assert "counts 5 rollouts written by its 2 invocations" in note.message
    assert f"{out} holds 4 rows (1 fewer than it counts)" in note.message
    assert "[0] finished (pid 4242, started 2026-12-05T09:00:00Z): 3 rows" in note.message
    assert "[1] killed" in note.message and "removed or rewritten by hand" in note.message
    assert "started_at and pid" in note.fix and "--overwrite" in note.fix
    assert result.exit_code == 0
    cli = ngrp("check", "--inputs", out.with_name("r_materialized_inputs.jsonl"), "--rollouts", out)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "note: the run manifest" in cli.stdout and "result: complete and consistent" in cli.stdout
    data = json.loads(ngrp("check", "--inputs", out.with_name("r_materialized_inputs.jsonl"), "--rollouts",
                           out, "--json").stdout)  # fmt: skip
    assert [f["code"] for f in data["findings"]] == [CODE] and data["exit_code"] == 0


def test_rows_added_by_hand_say_more(tmp_path):
    out = _run(tmp_path, ALL, [_entry(3)])
    _, note = _note(out)
    assert note is not None and "holds 4 rows (1 more than it counts)" in note.message


def test_an_entry_appended_without_its_start_is_named(tmp_path):
    """O5's shape: another process's finished entry, appended with no started_at (its start is in the
    manifest of a folder since deleted)."""
    orphan = {"id": "x", "status": "finished", "pid": 777, "cost": {"requests": 4, "rollouts": 4}}
    out = _run(tmp_path, ALL, [_entry(4), orphan])
    _, note = _note(out)
    assert note is not None and "counts 8 rollouts" in note.message and "holds 4 rows" in note.message
    assert "[1] finished (pid 777, no started_at" in note.message


@pytest.mark.parametrize(
    "runs, totals",
    [
        ([_entry(4)], "sum"),  # agree
        ([{"cost": {"rollouts": 9}}], {"rollouts": 9}),  # older: no status (a kill then left no entry)
        ([_entry(9)], None),  # no totals
        ([_entry(9)], {"rollouts": None}),  # counts null
        ([_entry(9)], {"rollouts": "9"}),  # not a count
    ],
)
def test_nothing_is_said_when_they_agree_or_the_manifest_cannot_count(tmp_path, runs, totals):
    out = _run(tmp_path, ALL, runs, totals)
    assert _note(out)[1] is None


def test_a_dead_running_entry_counts_the_rows_past_its_start(tmp_path):
    """A kill -9 not resumed yet: the finished entry's 2 rows, and the running one's past its start
    size (a torn tail is no row); the next start would close it with those rows."""
    out = _run(tmp_path, ALL[:2], [_entry(2)])
    start = out.stat().st_size
    with out.open("a") as fh:
        fh.write(_lines(ALL[2:]) + '{"_ng_task_index": 1, "_ng_rol')
    manifest = json.loads(manifest_path_for(out).read_text())
    manifest["runs"].append({"id": "d", "status": "running", "started_at": "2026-12-05T09:01:00Z", "pid": 5,
                             "start": {"rollouts_bytes": start}, "cost": None})  # fmt: skip
    manifest_path_for(out).write_text(json.dumps(manifest))
    assert _note(out)[1] is None
    manifest["runs"][0]["cost"]["rollouts"], manifest["totals"]["rollouts"] = 3, 3  # one row more counted
    manifest_path_for(out).write_text(json.dumps(manifest))
    _, note = _note(out)
    assert note is not None and "counts 5 rollouts" in note.message and "holds 4 rows" in note.message
    assert "[1] running (pid 5, started 2026-12-05T09:01:00Z): 2 rows past its start" in note.message
    del manifest["runs"][1]["start"]  # a running entry without its start: nothing to count with
    manifest_path_for(out).write_text(json.dumps(manifest))
    assert _note(out)[1] is None


# --- real vLLM -----------------------------------------------------------------------------------------


def _tasks(path: Path, n: int, max_tokens: int) -> Path:
    rows = [{"responses_create_params": {"input": [{"role": "user", "content": f"Count from 1 to {i + 20}."}],
                                         "max_output_tokens": max_tokens, "temperature": 1.0},
             "expected_answer": str(i)} for i in range(n)]  # fmt: skip
    path.write_text(_lines(rows))
    return path


def _collect(tasks: Path, out: Path, url: str, *extra: str) -> list[str]:
    return ["collect", "--input", str(tasks), "--output", str(out), "--base-url", url, "--model", "tiny",
            "--verifier", "math", "--api", "chat", *extra]  # fmt: skip


def _rows(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _check(out: Path) -> dict:
    inputs = out.with_name(out.stem + "_materialized_inputs.jsonl")
    done = ngrp("check", "--inputs", inputs, "--rollouts", out, "--json")
    return json.loads(done.stdout)


def _codes(report: dict) -> list[str]:
    return [f["code"] for f in report["findings"]]


@pytest.mark.vllm
def test_kill_9_then_check_then_resume_gives_no_note(vllm_server, tmp_path):
    """The honest flow: check between a kill and its resume (a dead running entry, maybe a torn tail)
    and after it: the manifest's count and the file's rows agree both times."""
    tasks = _tasks(tmp_path / "tasks.jsonl", 12, 24)
    out = tmp_path / "run" / "rollouts.jsonl"
    base = _collect(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "2")
    proc = subprocess.Popen([*ENTRY, *base], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _rows(out) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 5 <= _rows(out) < 48, "the kill should land mid-run"
    between = _check(out)
    assert CODE not in _codes(between), between["findings"]
    assert between["counts"]["missing"] > 0
    done = ngrp(*base, "--resume", "--json")
    assert done.returncode == 0, done.stderr
    after = _check(out)
    assert CODE not in _codes(after) and after["exit_code"] == 0, after["findings"]
    totals = json.loads(manifest_path_for(out).read_text())["totals"]
    assert totals["killed"] == 1 and totals["rollouts"] == 48 == after["files"]["rollouts"]["rows"]


@pytest.mark.vllm
def test_a_collector_left_running_after_its_folder_was_remade_is_a_note_naming_both_counts(
    vllm_server, tmp_path
):
    """Replay 2026-12-05 O5, for real: collector A is paused (SIGSTOP) mid-run, its folder deleted and
    made again by collector B's fresh run; let go on, A finishes into the deleted file and appends its
    entry to B's manifest. check then counts B's rows plus A's, against the B rows the file holds."""
    tasks = _tasks(tmp_path / "tasks.jsonl", 8, 24)
    run = tmp_path / "runs" / "B"
    out = run / "rollouts.jsonl"
    first = _collect(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "1")
    orphan = subprocess.Popen([*ENTRY, *first], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _rows(out) < 2 and orphan.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(orphan.pid, signal.SIGSTOP)
        assert orphan.poll() is None and _rows(out) >= 2, "A should be mid-run"
        shutil.rmtree(run)  # what `rm -rf runs/B` did while A still ran
        second = ngrp(*_collect(tasks, out, vllm_server.base_url, "--num-repeats", "2", "--limit", "2"))
        assert second.returncode == 0, second.stderr
        held = _rows(out)
        assert held == 4
        assert CODE not in _codes(_check(out))  # B alone: they agree
    finally:
        os.kill(orphan.pid, signal.SIGCONT)
    _, err = orphan.communicate(timeout=600)
    assert orphan.returncode == 0, err
    manifest = json.loads(manifest_path_for(out).read_text())
    entries = manifest["runs"]
    assert len(entries) == 2 and entries[1]["pid"] == orphan.pid and "started_at" not in entries[1]
    written = manifest["totals"]["rollouts"]
    assert written == 4 + 32 and _rows(out) == held  # A's rows went to the deleted file
    report = _check(out)
    (note,) = [f for f in report["findings"] if f["code"] == CODE]
    assert report["exit_code"] == 0 and note["severity"] == "note" and note["count"] == 32
    assert f"counts {written} rollouts written by its 2 invocations" in note["message"]
    assert f"holds {held} rows (32 fewer than it counts)" in note["message"]
    assert f"[1] finished (pid {orphan.pid}, no started_at" in note["message"]
    assert "a collector left running after its folder was deleted" in note["message"]
    text = ngrp("check", "--inputs", run / "rollouts_materialized_inputs.jsonl", "--rollouts", out).stdout
    assert "note: the run manifest" in text and "result: complete and consistent" in text
