"""Issue 38, class 3: a nesting bound for every reader. A row nested past `MAX_DEPTH` (100 levels; orjson
reads 1,024 but writes 254, and recursive readers fail sooner) is refused where it is read, named, before a
page or report is built from it; in the live viewer any unreadable appended row (a NUL byte on a line) is
refused the same way. Before: 500 on every viewer page, a RecursionError traceback from `report`."""

from __future__ import annotations

import json
import sys

import orjson
import pytest
from health_data import clean_run
from view_helpers import Viewer

from ngrp_lib.artifacts.reading import MAX_DEPTH, TOO_DEEP, Problem, deeper_than, loads, parse_line


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def _row(task: int, extra: bytes | None = None, nul: bool = False) -> bytes:
    row = orjson.loads(clean_run(1).lines[0])
    row["_ng_task_index"] = task
    raw = orjson.dumps(row)
    if extra is not None:
        raw = raw[:-1] + b',"tool_args":' + extra + b"}"
    return raw.replace(b"Adding", b"Add\x00ing") if nul else raw


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 2000])
def test_nesting_bound_the_reader_refuses_a_row_too_deep(depth):
    raw = _row(0, _nested(depth))
    got = parse_line(raw, 7)
    assert isinstance(got, Problem) and got.kind == TOO_DEEP and got.line == 7
    with pytest.raises(orjson.JSONDecodeError):
        loads(raw)


def test_nesting_bound_depth_is_counted_without_recursion():
    value: list = []
    for _ in range(sys.getrecursionlimit() * 20):
        value = [value]
    assert deeper_than(value) and not deeper_than([[1]], 2) and deeper_than([[[1]]], 2)
    at_limit = orjson.loads(_nested(MAX_DEPTH - 1))
    assert not deeper_than({"row": at_limit})


def _run(tmp_path, rows: list[bytes]):
    run = clean_run(3)
    run.lines = [*run.lines, *(r + b"\n" for r in rows)]
    inputs, rollouts, _ = run.write(tmp_path / "run")
    return inputs, rollouts


def test_nesting_bound_the_live_viewer_refuses_appended_rows_and_serves_the_rest(tmp_path):
    _, rollouts = _run(tmp_path, [])
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        assert viewer.get("/")[0] == 200
        with open(rollouts, "ab") as handle:
            handle.write(b"\n".join([_row(7, _nested(2000)), _row(8, _nested(500)), _row(9, nul=True),
                                     _row(10)]) + b"\n")  # fmt: skip
        for path in ("/", "/tasks.json", "/task/0", "/task/0.json", "/task/10", "/task/10.json"):
            status, _, body = viewer.get(path)
            assert status == 200, (path, body[:300])
        notes = json.loads(viewer.get("/tasks.json")[2])["run"]["notes"]
        refused = next(n for n in notes if "refused" in n)
        assert "3 row(s) refused" in refused
        for line in (13, 14, 15):
            assert f"line {line}:" in refused
        assert "nests more than 100 levels" in refused and "control character" in refused
        assert viewer.get("/task/8")[0] == 404  # refused, not shown half-read
        code, err = viewer.stop()
    assert "Traceback" not in err


def test_nesting_bound_the_viewer_starts_on_a_file_holding_deep_rows(tmp_path):
    _, rollouts = _run(tmp_path, [_row(7, _nested(2000)), _row(8, _nested(500)), _row(10)])
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        for path in ("/", "/task/0", "/task/10", "/task/10.json"):
            assert viewer.get(path)[0] == 200, path
        notes = json.loads(viewer.get("/tasks.json")[2])["run"]["notes"]
        assert any("2 row(s) refused" in n and "line 13:" in n and "line 14:" in n for n in notes), notes


def test_nesting_bound_report_refuses_a_deep_agent_row_and_builds_the_rest(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path, [])
    assert run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts).returncode == 0
    lines = rollouts.read_bytes().splitlines()
    lines[1] = lines[1][:-1] + b',"tool_args":' + _nested(500) + b"}"  # written after the profile
    rollouts.write_bytes(b"\n".join(lines) + b"\n")
    profile = rollouts.with_name("rollouts_reward_profiling.jsonl")
    out = tmp_path / "report.html"
    got = run_ngrp("report", profile, "--rollouts", rollouts, "-o", out)
    assert got.returncode == 0, got.stderr
    assert "Traceback" not in got.stderr
    page = out.read_text()
    assert "nest more than 100 levels deep: refused, skipped (line 2)" in page
    stats = run_ngrp("stats", profile, "--rollouts", rollouts, "--json")
    assert stats.returncode == 0, stats.stderr
    read = json.loads(stats.stdout)["inputs"]["rollouts"]
    assert read["refused_lines"] == [2] and read["profile_rollouts_not_in_file"] == 1
