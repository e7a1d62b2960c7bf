"""`ngrp materialize` reproduces NeMo Gym 0.7.0's materialized files byte for byte."""

from __future__ import annotations

import json

import orjson
import pytest
from cli_helpers import validated

from ngrp_lib.artifacts import jsonl
from ngrp_lib.collect.materialize import (
    MaterializeOptions,
    expand,
    materialize,
    read_task_lines,
    task_source_lines,
)
from ngrp_lib.errors import InputError, UsageError

STACK = "gym-stack"


@pytest.mark.parametrize(
    ("raw", "golden_file", "args"),
    [
        ("raw_inputs.jsonl", "case_complete", ["--num-repeats", "4", "--agent", "math_simple_agent"]),
        ("raw_inputs.jsonl", "case_partial", ["--num-repeats", "4", "--agent", "math_simple_agent"]),
        (
            "raw_inputs.jsonl",
            "seed_interleave_demo",
            ["--num-repeats", "2", "--agent", "math_simple_agent", "--seed-per-repeat", "--interleave"],
        ),
        (
            "raw_inputs_with_duplicate_line.jsonl",
            "dedup_demo",
            ["--num-repeats", "2", "--agent", "math_simple_agent"],
        ),
        (
            "raw_inputs.jsonl",
            "case_fan_out",
            ["--num-repeats", "2", "--fan-out", "math_source=agent_a,agent_b"],
        ),
    ],
)
def test_cli_matches_gym_bytes(run_ngrp, golden, tmp_path, raw, golden_file, args):
    out = tmp_path / "out.jsonl"
    source = golden / raw
    if golden_file == "case_fan_out":  # Gym fans out by the rows' own agent_ref.name: give them one
        rows = [orjson.loads(line) for line in source.read_bytes().splitlines()]
        source = tmp_path / "routed.jsonl"
        routed = [{**r, "agent_ref": {"name": "math_source"}} for r in rows]
        source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in routed))
    proc = run_ngrp("materialize", "--input", source, "--output", out, *args)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == (golden / golden_file / "rollouts_materialized_inputs.jsonl").read_bytes()


def test_gym_stack_materialized_file(golden, tmp_path):
    stack = golden.parent / STACK
    out = tmp_path / "m.jsonl"
    opts = MaterializeOptions(num_repeats=4, agent="string_match_simple_agent")
    result = materialize(stack / "tasks.jsonl", out, opts)
    assert out.read_bytes() == (stack / "rollouts_materialized_inputs.jsonl").read_bytes()
    assert (result.input_rows, result.tasks, result.rows) == (24, 24, 96)


def _rows(tmp_path, lines: list[str], **opts):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return expand(read_task_lines(path, opts.pop("limit", None)), MaterializeOptions(**opts), path)


def test_existing_task_index_kept_and_not_deduped(tmp_path):
    line = '{"responses_create_params": {"input": []}, "agent_ref": {"name": "a", "type": "x"}'
    rows = _rows(tmp_path, [line + ', "_ng_task_index": 42}', line + ', "_ng_task_index": 99}', line + "}"],
                 num_repeats=2)  # fmt: skip
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]
    assert keys == [(42, 0), (42, 1), (99, 0), (99, 1), (0, 0), (0, 1)]
    assert rows[0]["agent_ref"] == {"name": "a", "type": "x"}  # kept byte for byte without --agent


def test_unterminated_last_line_is_a_new_task_as_in_gym(tmp_path):
    # Gym keys on the line as read in text mode: the last line without its newline is not identical.
    line = b'{"responses_create_params": {"input": "a"}}'
    path = tmp_path / "t.jsonl"
    path.write_bytes(line + b"\n" + line + b"\n" + line)
    rows = expand(read_task_lines(path), MaterializeOptions(agent="a"), path)
    assert [r["_ng_task_index"] for r in rows] == [0, 0, 1]
    assert [r["_ng_rollout_index"] for r in rows] == [0, 1, 0]


def test_one_line_per_task_samples_identical_lines_once_and_refuses_two_tasks_on_one_index(tmp_path):
    # --adaptive's expansion: a task index is one task; Gym's numbering is kept (the copy is task 0)
    a, b = '{"responses_create_params": {"input": "a"}}', '{"responses_create_params": {"input": "b"}}'
    rows = _rows(tmp_path, [a, b, a], num_repeats=2, agent="x", one_line_per_task=True)
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    gym = _rows(tmp_path, [a, b, a], num_repeats=2, agent="x")  # Gym's: the copy adds rollouts 2, 3
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in gym][-2:] == [(0, 2), (0, 3)]
    path = tmp_path / "t.jsonl"
    assert task_source_lines(read_task_lines(path), path) == {0: [1, 3], 1: [2]}
    stamped = ['{"responses_create_params": {"input": "' + x + '"}, "_ng_task_index": 5}' for x in "ab"]
    with pytest.raises(InputError, match="lines 1 and 2 are different tasks with the same _ng_task_index 5"):
        _rows(tmp_path, stamped, agent="x", one_line_per_task=True)
    assert len(_rows(tmp_path, [stamped[0], stamped[0]], agent="x", one_line_per_task=True)) == 1


def test_agent_overrides_and_overrides_merge_shallow(tmp_path):
    line = '{"responses_create_params": {"input": "hi", "temperature": 0.5}, "agent_ref": {"name": "a"}}'
    rows = _rows(tmp_path, [line], agent="b", overrides={"temperature": 1.0, "top_p": 0.9})
    assert rows[0]["agent_ref"] == {"name": "b"}
    assert rows[0]["responses_create_params"] == {"input": "hi", "temperature": 1.0, "top_p": 0.9}


def test_seed_merges_into_existing_extra_body(tmp_path):
    line = '{"responses_create_params": {"input": "x", "metadata": {"extra_body": "{\\"top_k\\": 5}"}}}'
    rows = _rows(tmp_path, [line], num_repeats=2, agent="a", seed_per_repeat=True)
    bodies = [json.loads(r["responses_create_params"]["metadata"]["extra_body"]) for r in rows]
    assert bodies == [{"top_k": 5, "seed": 0}, {"top_k": 5, "seed": 1}]


def test_limit_counts_physical_lines(tmp_path):
    rows = _rows(tmp_path, ['{"responses_create_params": {"input": "a"}}', "",
                            '{"responses_create_params": {"input": "b"}}'], agent="a", limit=2)  # fmt: skip
    assert [r["responses_create_params"]["input"] for r in rows] == ["a"]


def test_no_agent_is_a_usage_error_naming_lines(tmp_path):
    with pytest.raises(UsageError, match="lines 1, 2"):
        _rows(tmp_path, ['{"responses_create_params": {"input": "a"}}'] * 2)
    rows = _rows(tmp_path, ['{"responses_create_params": {"input": "a"}}'], default_agent="m")
    assert rows[0]["agent_ref"] == {"name": "m"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"responses_create_params": {"input": "a"}', "malformed task row"),
        ('{"expected_answer": "4"}', "responses_create_params is missing"),
        ('{"responses_create_params": "hi"}', "responses_create_params is a JSON str"),
        ('{"responses_create_params": {}, "_ng_task_index": -1}', "_ng_task_index must be"),
    ],
)
def test_malformed_rows_name_file_and_line(run_ngrp, tmp_path, line, message):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"responses_create_params": {"input": "ok"}}\n' + line + "\n")
    proc = run_ngrp("materialize", "--input", path, "--output", tmp_path / "o.jsonl", "--agent", "a")
    assert proc.returncode == 3
    assert f"{path}:2:" in proc.stderr and message in proc.stderr
    assert not (tmp_path / "o.jsonl").exists()
    with pytest.raises(InputError):
        materialize(path, tmp_path / "o2.jsonl", MaterializeOptions(agent="a"))


def test_refuses_existing_output(run_ngrp, golden, tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text("keep\n")
    proc = run_ngrp("materialize", "--input", golden / "raw_inputs.jsonl", "--output", out, "--agent", "a")
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert out.read_text() == "keep\n"
    proc = run_ngrp("materialize", "--input", golden / "raw_inputs.jsonl", "--output", out, "--agent", "a",
                    "--overwrite", "--json")  # fmt: skip
    assert proc.returncode == 0 and json.loads(proc.stdout)["rows"] == 3
    validated(json.loads(proc.stdout), "materialize_result")
    assert len(list(jsonl.iter_rows(out))) == 3


def test_fan_out_by_task_source_keeps_counting_rollouts(tmp_path):
    lines = [
        '{"responses_create_params": {"input": "q"}, "task_source": "math"}',
        '{"responses_create_params": {"input": "r"}, "agent_ref": {"name": "solo"}}',
    ]
    rows = _rows(tmp_path, lines, num_repeats=2, fan_out={"math": ("a", "b", "c")})
    got = [(r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]) for r in rows]
    assert got == [
        (0, 0, "a"), (0, 1, "a"), (0, 2, "b"), (0, 3, "b"), (0, 4, "c"), (0, 5, "c"),
        (1, 0, "solo"), (1, 1, "solo"),
    ]  # fmt: skip
    # agent_ref comes before the identity stamps, as in Gym's rows
    assert list(rows[0]) == ["responses_create_params", "task_source", "agent_ref", "_ng_task_index",
                             "_ng_rollout_index"]  # fmt: skip


@pytest.mark.parametrize("spec", ["nokey", "=a,b", "k=", "k=,,", "k=a k=b"])
def test_fan_out_spec_errors_are_usage_errors(run_ngrp, golden, tmp_path, spec):
    args = [arg for part in spec.split(" ") for arg in ("--fan-out", part)]
    proc = run_ngrp("materialize", "--input", golden / "raw_inputs.jsonl", "--output", tmp_path / "o.jsonl",
                    "--agent", "k", *args)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--fan-out" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_limit_counts_input_lines(run_ngrp, golden, tmp_path):
    out = tmp_path / "out.jsonl"
    raw = golden / "raw_inputs.jsonl"
    proc = run_ngrp("materialize", "--input", raw, "--output", out, "--num-repeats", "2",
                    "--agent", "a", "--limit", "2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    firsts = [json.loads(line) for line in raw.read_text().splitlines()[:2]]
    assert [r["_ng_task_index"] for r in rows] == [0, 0, 1, 1]
    assert [r["responses_create_params"] for r in rows[::2]] == [f["responses_create_params"] for f in firsts]
    proc = run_ngrp("materialize", "--input", raw, "--output", tmp_path / "o2.jsonl", "--limit", "0")
    assert proc.returncode == 2 and "--limit must be at least 1" in proc.stderr


def test_fan_out_keys_on_the_name_as_written_not_on_agent(tmp_path):
    """Gym 0.7.0 (rollout_collection: `basis` is the row's agent_ref.name, else its task_source, taken before
    agent_map): --agent does not create a fan-out key, and the copy for the row's own agent keeps its ref."""
    plain = '{"responses_create_params": {"input": "q"}}'
    rows = _rows(tmp_path, [plain], num_repeats=1, agent="src", fan_out={"src": ("s1", "s2")})
    assert [r["agent_ref"] for r in rows] == [{"name": "src"}]  # nothing to fan out: the row names no agent
    typed = '{"responses_create_params": {"input": "q"}, "agent_ref": {"name": "a", "type": "t"}}'
    rows = _rows(tmp_path, [typed], num_repeats=1, fan_out={"a": ("a", "b")})
    assert [r["agent_ref"] for r in rows] == [{"name": "a", "type": "t"}, {"name": "b"}]


def test_floats_in_exponent_form_are_written_as_gym_writes_them(tmp_path):
    """Gym's venv writes 1e+16 (orjson >= 3.11.7, like Python's json); older orjson wrote 1e16."""
    line = '{"responses_create_params": {"input": "q", "temperature": 1e16}, "tiny": 1e-7, "huge": 1.5e300}'
    (row,) = _rows(tmp_path, [line], num_repeats=1, agent="a")
    assert orjson.dumps(row).startswith(
        b'{"responses_create_params":{"input":"q","temperature":1e+16},"tiny":1e-7,"huge":1.5e+300'
    )
