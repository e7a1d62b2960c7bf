"""`ngrp assign-keys`: rollouts without identity keys or inputs (many of NeMo Gym's own example files) get
keys by the stated rule and the materialized inputs beside them, so check, health and profile read them
(issue 36, wrong turn 5)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_rows import agent_row


def _keyless(task: int, rollout: int, **extra) -> dict:
    row = agent_row(task, rollout, turns=2)
    del row["_ng_task_index"], row["_ng_rollout_index"]
    return row | extra


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rows_without_keys_are_numbered_by_the_rule_and_every_command_reads_them(tmp_path, run_ngrp):
    # three prompts, their repeats interleaved in the file as a collector writes them
    order = [(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)]
    source = _write(tmp_path / "example_rollouts.jsonl", [_keyless(t, r) for t, r in order])
    proc = run_ngrp("assign-keys", source, "--output", "run/rollouts.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["rows"], result["tasks"], result["max_repeats"]) == (6, 3, 3)
    rows = [json.loads(x) for x in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    # tasks by first appearance, repeats in file order; the rows otherwise unchanged, in file order
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows] == order
    originals = [json.loads(x) for x in source.read_text().splitlines()]
    assert [{k: v for k, v in r.items() if not k.startswith("_ng_")} for r in rows] == originals
    inputs = tmp_path / "run" / "rollouts_materialized_inputs.jsonl"
    keys = [
        (m["_ng_task_index"], m["_ng_rollout_index"])
        for m in map(json.loads, inputs.read_text().splitlines())
    ]
    assert keys == sorted(order)  # Gym's order: a task's repeats together
    check = run_ngrp("check", "--inputs", inputs, "--rollouts", "run/rollouts.jsonl")
    assert check.returncode == 0 and "result: complete and consistent" in check.stdout, check.stdout
    assert run_ngrp("validate", inputs).returncode == 0
    profile = run_ngrp("profile", "--inputs", inputs, "--rollouts", "run/rollouts.jsonl", "--output-dir", "p")
    assert profile.returncode == 0, profile.stderr
    before = json.loads(run_ngrp("check", "--inputs", inputs, "--rollouts", source, "--json").stdout)
    keyless = next(f for f in before["findings"] if f["code"] == "rollouts_rows_without_key")
    assert keyless["fix"].startswith(f"ngrp assign-keys {source} --output")  # check names the way in
    health = run_ngrp("health", "--inputs", inputs, "--rollouts", "run/rollouts.jsonl", "--no-write")
    assert health.returncode in (0, 1) and "ngrp/record_without_identity" not in health.stdout


def test_an_empty_prompt_needs_the_task_field_and_then_uses_it(tmp_path, run_ngrp):
    """An environment that gives the task itself (aviary: `input: []`, the task in `task_idx`)."""
    rows = [_keyless(0, r, task_idx=t) for r, t in enumerate([3, 1, 3, 1, 0])]
    for row in rows:
        row["responses_create_params"]["input"] = []
    source = _write(tmp_path / "aviary.jsonl", rows)
    refused = run_ngrp("assign-keys", source, "--output", "r.jsonl")
    assert refused.returncode == 3 and "aviary.jsonl:1" in refused.stderr and "--task-field" in refused.stderr
    assert not (tmp_path / "r.jsonl").exists()
    proc = run_ngrp("assign-keys", source, "--output", "r.jsonl", "--task-field", "task_idx")
    assert proc.returncode == 0, proc.stderr
    keyed = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in keyed] == [
        (0, 0),
        (1, 0),
        (0, 1),
        (1, 1),
        (2, 0),
    ]
    inputs = [json.loads(x) for x in (tmp_path / "r_materialized_inputs.jsonl").read_text().splitlines()]
    assert [m["task_idx"] for m in inputs] == [3, 3, 1, 1, 0]  # the field travels with the task


def test_a_file_mixing_keyed_and_keyless_rows_is_refused_naming_the_line(tmp_path, run_ngrp):
    rows = [_keyless(0, 0), agent_row(0, 1, turns=2), _keyless(1, 0)]
    source = _write(tmp_path / "mixed.jsonl", rows)
    proc = run_ngrp("assign-keys", source, "--output", "r.jsonl")
    assert proc.returncode == 3 and "mixed.jsonl:2" in proc.stderr and "_ng_task_index" in proc.stderr
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "r_materialized_inputs.jsonl").exists()
    again = run_ngrp(
        "assign-keys", _write(tmp_path / "ok.jsonl", [_keyless(0, 0)]), "--output", "ok_keyed.jsonl"
    )
    assert again.returncode == 0
    assert (
        run_ngrp("assign-keys", tmp_path / "ok.jsonl", "--output", "ok_keyed.jsonl").returncode == 2
    )  # exists


@pytest.mark.gym
def test_gyms_own_keyless_example_files_get_a_way_in(tmp_path, run_ngrp):
    venv = os.environ.get("NGRP_GYM_VENV")
    roots = sorted(Path(venv).glob("lib/python3*/site-packages/resources_servers")) if venv else []
    if not roots:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    for server, extra in (
        ("calendar", ()),
        ("aviary", ("--task-field", "task_idx")),
        ("example_tool_call_multireward", ()),  # keyed rows without inputs: keys kept
    ):
        source = roots[0] / server / "data" / "example_rollouts.jsonl"
        out = tmp_path / server / "rollouts.jsonl"
        proc = run_ngrp("assign-keys", source, "--output", out, *extra)
        assert proc.returncode == 0, proc.stderr
        check = run_ngrp(
            "check", "--inputs", out.with_name("rollouts_materialized_inputs.jsonl"), "--rollouts", out
        )
        assert check.returncode == 0, check.stdout


def test_rows_that_all_have_keys_keep_them_and_get_their_inputs(tmp_path, run_ngrp):
    """Gym's keyed example rows without their inputs file (example_tool_call_multireward): the keys are
    kept, the inputs written in Gym's order, and profile reads the pair."""
    order = [(1, 0), (0, 0), (1, 1), (0, 1), (2, 0)]
    source = _write(tmp_path / "multireward.jsonl", [agent_row(t, r, turns=2) for t, r in order])
    proc = run_ngrp("assign-keys", source, "--output", "run/rollouts.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["rows"], result["tasks"], result["max_repeats"], result["kept_keys"]) == (5, 3, 2, True)
    assert (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines() == [
        json.dumps(json.loads(x), separators=(",", ":")) for x in source.read_text().splitlines()
    ]
    inputs = tmp_path / "run" / "rollouts_materialized_inputs.jsonl"
    keys = [
        (m["_ng_task_index"], m["_ng_rollout_index"])
        for m in map(json.loads, inputs.read_text().splitlines())
    ]
    assert keys == sorted(order)
    check = run_ngrp("check", "--inputs", inputs, "--rollouts", "run/rollouts.jsonl")
    assert check.returncode == 0 and "result: complete and consistent" in check.stdout, check.stdout
    text = run_ngrp("assign-keys", source, "--output", "again.jsonl").stdout
    assert "5 rows with their own keys, kept" in text
    twice = _write(tmp_path / "twice.jsonl", [agent_row(0, 0, turns=2), agent_row(0, 0, turns=2)])
    refused = run_ngrp("assign-keys", twice, "--output", "t.jsonl")
    assert refused.returncode == 3 and "twice.jsonl:2" in refused.stderr and "line 1 too" in refused.stderr


def test_a_keyed_file_with_one_keyless_row_is_described_as_it_is(tmp_path, run_ngrp):
    source = _write(
        tmp_path / "m.jsonl", [agent_row(0, 0, turns=2), agent_row(0, 1, turns=2), _keyless(1, 0)]
    )
    proc = run_ngrp("assign-keys", source, "--output", "r.jsonl")
    assert proc.returncode == 3 and "m.jsonl:3" in proc.stderr, proc.stderr
    assert (
        "this row has no _ng_task_index/_ng_rollout_index, but the 2 row(s) before it have them"
        in proc.stderr
    )


@pytest.mark.parametrize("command", ["health", "check", "profile"])
def test_missing_inputs_names_assign_keys_or_the_file_beside(tmp_path, run_ngrp, command):
    """Rows alone: the error names `assign-keys` on those rows (wrong turn W4); once the inputs file is
    beside them, it names that file instead."""
    source = _write(tmp_path / "rows.jsonl", [_keyless(0, 0), _keyless(1, 0)])
    proc = run_ngrp(command, "--rollouts", source)
    assert proc.returncode == 2, proc.stderr
    assert "--inputs is required" in proc.stderr
    assert f"ngrp assign-keys {source} --output run/rollouts.jsonl" in proc.stderr
    assert run_ngrp("assign-keys", source, "--output", "run/rollouts.jsonl").returncode == 0
    keyed = run_ngrp(command, "--rollouts", "run/rollouts.jsonl")
    assert keyed.returncode == 2 and "--inputs run/rollouts_materialized_inputs.jsonl" in keyed.stderr
