"""`artifacts.task_lines`: each task's source lines, recorded compactly in the run manifest and read back."""

from __future__ import annotations

import json
import random

from ngrp_lib.artifacts import task_lines
from ngrp_lib.collect.materialize import read_task_lines, task_source_lines


def test_a_plain_file_is_one_range_and_identical_lines_are_listed():
    record = task_lines.encode({0: [1], 1: [2, 5], 2: [3], 3: [4], 4: [7]})  # line 6 blank
    assert record == {"ranges": [[0, 1, 4], [4, 7, 1]], "more": {"1": [2, 5]}}
    lines = task_lines.decode(json.loads(json.dumps(record)))  # as read back from the manifest
    assert lines is not None
    assert [lines.of(t) for t in range(6)] == [[1], [2, 5], [3], [4], [7], None]


def test_encode_then_decode_gives_every_mapping_back():
    rng = random.Random(34)
    for _ in range(300):
        tasks = rng.sample(range(60), rng.randint(1, 30))  # stamped indices: any order, gaps
        free = iter(rng.sample(range(1, 400), 200))
        mapping = {t: sorted(next(free) for _ in range(rng.choice([1, 1, 1, 2, 3]))) for t in tasks}
        lines = task_lines.decode(task_lines.encode(mapping))
        assert lines is not None
        assert {t: lines.of(t) for t in range(61)} == {t: mapping.get(t) for t in range(61)}


def test_gyms_numbering_gives_the_lines(tmp_path):
    a, b = '{"responses_create_params": {"input": "a"}}', '{"responses_create_params": {"input": "b"}}'
    path = tmp_path / "tasks.jsonl"
    path.write_text(f"{a}\n\n{b}\n{a}\n" + b[:-1] + ', "_ng_task_index": 9}\n')
    assert task_source_lines(read_task_lines(path), path) == {0: [1, 4], 1: [3], 9: [5]}


def test_what_is_not_a_record_reads_as_unknown(tmp_path):
    assert task_lines.decode(None) is None
    assert task_lines.decode({"ranges": [[0, 1]], "more": {}}) is None
    assert task_lines.for_rollouts(tmp_path / "rollouts.jsonl") is None  # no manifest beside it
    (tmp_path / "rollouts_run_manifest.json").write_text('{"input": {"path": "t.jsonl"}}')  # an older one
    assert task_lines.for_rollouts(tmp_path / "rollouts.jsonl") is None
    assert task_lines.lines_text(None) == "" and task_lines.lines_text([3]) == "line 3"
    assert task_lines.lines_text(list(range(1, 8))) == "lines 1, 2, 3, 4, 5 and 2 more"
