"""Issue 27 item 4, watching a run while it collects: `ngrp view` on a rollouts file still being written
indexes the appended rows when a page is reloaded (only the appended bytes, from the last complete line),
shows "n of expected" from the materialized inputs, and skips a cut-off last line with a note, never an
error. Every other change to a file (rewritten to a larger size, inputs that grew) still answers 409."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from run_helpers import write_run
from view_helpers import Viewer

from ngrp_lib.inspect.facts import Facts
from ngrp_lib.inspect.join import RunPaths
from ngrp_lib.view.index import open_index

TASKS, REPEATS = 6, 4


@pytest.fixture
def run(tmp_path) -> tuple[Path, Path, list[bytes]]:
    """A run of 24 rollouts, of which the file holds the first 10 (the rest are still to come)."""
    rollouts, inputs = write_run(tmp_path / "run", tasks=TASKS, repeats=REPEATS, flipped_task=None,
                                 script_task=None)  # fmt: skip
    lines = rollouts.read_bytes().splitlines(keepends=True)
    rollouts.write_bytes(b"".join(lines[:10]))
    return rollouts, inputs, lines


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _counts(lines: list[bytes]) -> dict[int, int]:
    out: dict[int, int] = {}
    for line in lines:
        task = json.loads(line)["_ng_task_index"]
        out[task] = out.get(task, 0) + 1
    return out


def _tasks(viewer: Viewer) -> dict:
    status, _, body = viewer.get("/tasks.json?per_page=100")
    assert status == 200, body[:300]
    return json.loads(body)


def test_reloading_shows_the_rows_appended_while_the_viewer_runs(run, tmp_path):
    rollouts, _, lines = run
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        data = _tasks(viewer)
        assert data["run"]["n_rollouts"] == 10 and data["run"]["expected_rollouts"] == TASKS * REPEATS
        status, _, page = viewer.get("/")
        assert status == 200 and b"10 of 24 expected rollouts" in page

        half = lines[16][: len(lines[16]) // 2]
        _append(rollouts, b"".join(lines[10:16]) + half)  # six rows and a cut-off seventh
        data = _tasks(viewer)
        assert data["run"]["n_rollouts"] == 16
        notes = " ".join(data["run"]["notes"])
        assert "last line is cut off" in notes and "6 row(s) indexed since the viewer started" in notes
        want = _counts(lines[:16])
        assert {t["task"]: t["n_rollouts"] for t in data["tasks"]} == want
        assert all(t["expected"] == REPEATS for t in data["tasks"])
        status, _, page = viewer.get("/")
        assert status == 200 and b"16 of 24 expected rollouts" in page

        _append(rollouts, lines[16][len(half) :] + b"".join(lines[17:]))  # the cut-off row, completed
        data = _tasks(viewer)
        assert data["run"]["n_rollouts"] == TASKS * REPEATS
        assert "last line is cut off" not in " ".join(data["run"]["notes"])
        assert {t["task"]: t["n_rollouts"] for t in data["tasks"]} == {t: REPEATS for t in range(TASKS)}
        last = json.loads(lines[-1])
        status, _, body = viewer.get(f"/task/{last['_ng_task_index']}.json?a=policy_agent")
        shown = {r["rollout_id"] for r in json.loads(body)["rollouts"]}
        wanted = f"{last['_ng_task_index']}-{last['_ng_rollout_index']}"
        assert status == 200 and wanted in shown and len(shown) == REPEATS
        status, _, page = viewer.get("/")
        assert status == 200 and b"24 rollouts" in page and b"expected rollouts" not in page
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("change", ["rewritten_larger", "inputs_grew"])
def test_a_change_other_than_growth_still_answers_409(run, tmp_path, change):
    rollouts, inputs, lines = run
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        assert _tasks(viewer)["run"]["n_rollouts"] == 10
        if change == "rewritten_larger":  # same inode, new bytes before the old end, and longer
            rollouts.write_bytes(b"".join(reversed(lines[:10])) + b"".join(lines[10:14]))
        else:
            _append(inputs, inputs.read_bytes().splitlines(keepends=True)[0])
        status, _, body = viewer.get("/tasks.json")
        assert status == 409 and b"the file changed: reload" in body, body[:300]
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err, err


def _same(a: Facts, b: Facts) -> None:
    assert a.agents == b.agents
    for name in Facts.COLUMNS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_extending_the_index_equals_indexing_the_whole_file_and_reads_only_new_bytes(run, tmp_path):
    rollouts, inputs, lines = run
    paths = RunPaths(rollouts, inputs, None)
    index = open_index(paths, threshold=0.5, use_cache=False)
    blank_and_torn = b"\n" + lines[10][:40]
    _append(rollouts, blank_and_torn)
    assert index.extend() is None and index.scan.torn_tail and len(index.facts) == 10
    _append(rollouts, lines[10][40:] + b"".join(lines[11:20]) + lines[20].rstrip(b"\n"))  # unterminated
    assert index.extend() is None and not index.scan.torn_tail
    # an already-indexed row changed in place (same length) is not read again: only appended bytes are
    data = bytearray(rollouts.read_bytes())
    first = data.index(b'"_ng_task_index"')
    data[first : first + 16] = b'"_ng_task_indeX"'
    rollouts.write_bytes(bytes(data) + b"\n" + b"".join(lines[21:]))
    assert index.extend() is None
    data[first : first + 16] = b'"_ng_task_index"'
    rollouts.write_bytes(bytes(data) + b"\n" + b"".join(lines[21:]))  # as it was, for the fresh index
    whole = open_index(paths, threshold=0.5, use_cache=False)
    _same(index.facts, whole.facts)
    assert index.scan == whole.scan and index.previews == whole.previews and index.added == 14
    np.testing.assert_array_equal(index.table.expected, whole.table.expected)
    np.testing.assert_array_equal(index.table.n_scored, whole.table.n_scored)
    index.close()
    whole.close()


def test_compare_mode_pairs_the_rows_appended_to_the_run_being_collected(run, tmp_path):
    rollouts, _, lines = run
    other, _ = write_run(tmp_path / "other", tasks=TASKS, repeats=REPEATS, flipped_task=None,
                         script_task=None)  # fmt: skip
    with Viewer(rollouts, "--compare", other, cache=tmp_path / "cache", cwd=tmp_path) as viewer:

        def scored_b() -> int:
            status, _, body = viewer.get("/compare.json?per_page=100")
            assert status == 200, body[:300]
            return sum(p["b"]["n_scored"] for p in json.loads(body)["pairs"])  # B: the run being collected

        before = scored_b()
        _append(rollouts, b"".join(lines[10:]))
        assert scored_b() > before
        status, _, body = viewer.get("/compare.json?per_page=100")
        pairs = json.loads(body)["pairs"]
        rows = [json.loads(x) for x in lines]
        want = {t: sum(r["reward"] is not None for r in rows if r["_ng_task_index"] == t)
                for t in range(TASKS)}  # fmt: skip
        assert {p["task"]: p["b"]["n_scored"] for p in pairs} == want
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err, err


def test_an_index_opened_from_the_cache_extends_too(run, tmp_path):
    rollouts, inputs, lines = run
    paths = RunPaths(rollouts, inputs, None)
    _append(rollouts, lines[10][:25])  # indexed and cached with a cut-off last line
    open_index(paths, threshold=0.5, directory=tmp_path / "c").close()
    index = open_index(paths, threshold=0.5, directory=tmp_path / "c")
    assert index.cached and index.scan.torn_tail
    _append(rollouts, lines[10][25:] + b"".join(lines[11:]))
    assert index.extend() is None and len(index.facts) == TASKS * REPEATS and not index.scan.torn_tail
    whole = open_index(paths, threshold=0.5, use_cache=False)
    _same(index.facts, whole.facts)
    assert index.scan == whole.scan
    index.close()
    whole.close()
