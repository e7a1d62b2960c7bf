"""A file of the wrong kind is refused with words that say what it is and what to pass (exit 3), by every
command that reads it: the sniff in `artifacts/kinds.py`, through the CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from ngrp_lib.artifacts import schemas
from ngrp_lib.artifacts.kinds import SNIFF_ROWS, sniff

SWAPPED = "are --inputs and --rollouts swapped?"
# Collect refuses its input before it talks to a server: this one is never reached.
DEAD_SERVER = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--verifier", "math")


@pytest.fixture
def run(tmp_path: Path, golden: Path) -> Path:
    """A complete Gym run (3 tasks x 4 repeats) with its profile, in tmp_path/a, and the raw tasks."""
    target = tmp_path / "a"
    shutil.copytree(golden / "case_complete", target)
    shutil.copy(golden / "raw_inputs.jsonl", tmp_path / "tasks.jsonl")
    return target


def _one_error_line(result, path: Path, words: str) -> None:
    assert result.returncode == 3, result.stdout + result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: "), result.stderr
    assert words in first, result.stderr


def _elsewhere(command: str, run: Path) -> list[str]:
    """Profile outputs away from the run's own (the golden run has them): the refusal is the point."""
    return ["--output-dir", str(run.parent / "out")] if command == "profile" else []


def test_the_module_is_the_worktrees() -> None:
    import ngrp_lib

    assert Path(ngrp_lib.__file__).resolve().parents[2] == Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", ["check", "profile", "health"])
def test_swapped_inputs_and_rollouts_are_refused(run_ngrp, run: Path, command: str) -> None:
    rollouts, inputs = run / "rollouts.jsonl", run / "rollouts_materialized_inputs.jsonl"
    result = run_ngrp(command, "--inputs", rollouts, "--rollouts", inputs, *_elsewhere(command, run))
    _one_error_line(result, rollouts, f"looks like a rollouts file, not materialized inputs: {SWAPPED}")
    assert not (run.parent / "out").exists()
    assert not list(run.glob("*rollouts_materialized_inputs_*"))  # nothing written beside the swapped file


@pytest.mark.parametrize("command", ["check", "profile", "health"])
def test_materialized_inputs_as_rollouts_are_refused(run_ngrp, run: Path, command: str) -> None:
    inputs = run / "rollouts_materialized_inputs.jsonl"
    result = run_ngrp(command, "--inputs", inputs, "--rollouts", inputs, *_elsewhere(command, run))
    _one_error_line(result, inputs, f"looks like a materialized inputs file, not rollouts: {SWAPPED}")


def test_reverify_and_inspect_refuse_the_swap(run_ngrp, run: Path) -> None:
    rollouts, inputs = run / "rollouts.jsonl", run / "rollouts_materialized_inputs.jsonl"
    out = run.parent / "judged.jsonl"
    result = run_ngrp(
        "reverify", "--rollouts", inputs, "--inputs", rollouts, "--output", out, "--verifier", "math"
    )
    _one_error_line(result, rollouts, f"looks like a rollouts file, not materialized inputs: {SWAPPED}")
    result = run_ngrp("reverify", "--rollouts", inputs, "--output", out, "--verifier", "math")
    _one_error_line(result, inputs, "this is a materialized inputs file: pass the rollouts file")
    assert not out.exists()
    result = run_ngrp("inspect", rollouts, "--inputs", rollouts)
    _one_error_line(result, rollouts, "looks like a rollouts file, not materialized inputs")
    result = run_ngrp("inspect", inputs)
    _one_error_line(result, inputs, "this is a materialized inputs file: pass the rollouts file")
    result = run_ngrp("inspect", inputs, "--inputs", inputs)
    _one_error_line(
        result,
        inputs,
        "looks like a materialized inputs file, not rollouts: are --inputs and ROLLOUTS swapped?",
    )


@pytest.mark.parametrize("command", ["stats", "compare", "report", "curriculum"])
def test_a_rollouts_file_given_as_a_profile_says_run_profile_first(run_ngrp, run: Path, command: str) -> None:
    rollouts, profile = run / "rollouts.jsonl", run / "rollouts_reward_profiling.jsonl"
    args = {
        "stats": ["stats", rollouts],
        "compare": ["compare", profile, rollouts],
        "report": ["report", rollouts, "--output", run.parent / "r.html"],
        "curriculum": [
            "curriculum",
            rollouts,
            "--tasks",
            run.parent / "tasks.jsonl",
            "--output",
            "c.jsonl",
            "--min",
            "0.1",
        ],
    }[command]
    result = run_ngrp(*args)
    _one_error_line(
        result, rollouts, "this is a rollouts file: run `ngrp profile` first and pass its *_reward_profiling"
    )


def test_inspect_refuses_a_profile_for_rollouts(run_ngrp, run: Path) -> None:
    profile = run / "rollouts_reward_profiling.jsonl"
    result = run_ngrp("inspect", profile, "--task", "1")
    _one_error_line(result, profile, "this is a profile (*_reward_profiling.jsonl): pass the rollouts file")
    result = run_ngrp("inspect", run / "rollouts.jsonl", "--profile", run / "rollouts.jsonl")
    _one_error_line(result, run / "rollouts.jsonl", "this is a rollouts file: run `ngrp profile` first")


@pytest.mark.parametrize("command", ["check", "profile", "health"])
def test_raw_tasks_as_inputs_say_materialize(run_ngrp, run: Path, command: str) -> None:
    tasks = run.parent / "tasks.jsonl"
    result = run_ngrp(
        command, "--inputs", tasks, "--rollouts", run / "rollouts.jsonl", *_elsewhere(command, run)
    )
    _one_error_line(
        result,
        tasks,
        "this is a raw tasks file: pass the run's *_materialized_inputs.jsonl "
        "(or make one with ngrp materialize)",
    )
    assert "ngrp validate" not in result.stderr


def test_materialize_refuses_materialized_input(run_ngrp, run: Path) -> None:
    inputs = run / "rollouts_materialized_inputs.jsonl"
    out = run.parent / "mm" / "x_materialized_inputs.jsonl"
    result = run_ngrp("materialize", "--input", inputs, "--output", out, "--num-repeats", "4")
    _one_error_line(result, inputs, "this is already materialized (its rows carry _ng_rollout_index)")
    assert "ngrp collect --materialized" in result.stderr
    assert not out.exists()
    for name in ("rollouts.jsonl", "rollouts_reward_profiling.jsonl"):
        result = run_ngrp("materialize", "--input", run / name, "--output", out)
        assert result.returncode == 3, result.stderr
        assert not out.exists()


def test_materialize_refuses_a_materialized_row_past_the_sniff(run_ngrp, tmp_path: Path) -> None:
    task = {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": "a"}}
    rows = [dict(task, n=i) for i in range(SNIFF_ROWS + 4)]
    rows.append(dict(task, _ng_task_index=0, _ng_rollout_index=0))
    tasks = tmp_path / "mixed.jsonl"
    tasks.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert sniff(tasks) == "tasks"
    result = run_ngrp("materialize", "--input", tasks, "--output", tmp_path / "m.jsonl")
    assert result.returncode == 3
    assert result.stderr.startswith(
        f"error: {tasks}:{len(rows)}: /_ng_rollout_index: this row already carries"
    )


def test_collect_input_refuses_materialized_rows(run_ngrp, run: Path) -> None:
    inputs = run / "rollouts_materialized_inputs.jsonl"
    out = run.parent / "c" / "rollouts.jsonl"
    result = run_ngrp("collect", "--input", inputs, "--output", out, *DEAD_SERVER)
    _one_error_line(result, inputs, "this is already materialized")
    assert not out.exists()
    assert not (out.parent / "rollouts_materialized_inputs.jsonl").exists()


def test_collect_materialized_refuses_rollouts_and_tasks(run_ngrp, run: Path) -> None:
    out = run.parent / "c" / "rollouts.jsonl"
    for given, words in (
        (run / "rollouts.jsonl", "this is a rollouts file: pass the run's *_materialized_inputs.jsonl"),
        (run.parent / "tasks.jsonl", "this is a raw tasks file: pass it with --input instead"),
    ):
        result = run_ngrp("collect", "--materialized", given, "--output", out, *DEAD_SERVER)
        _one_error_line(result, given, words)
        assert not out.exists()


@pytest.mark.parametrize(
    ("repeats", "fan_out", "line"),
    [
        ("4", None, "materialized 3 input rows (3 tasks) x 4 repeats = 12 rows"),
        (
            "2",
            "a=a,b",
            "materialized 3 input rows (3 tasks) -> 6 task-agent rows (--fan-out) x 2 repeats = 12 rows",
        ),
    ],
)
def test_materialize_count_line_adds_up(run_ngrp, tmp_path: Path, repeats, fan_out, line) -> None:
    task = {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": "a"}}
    rows = [task, dict(task, n=1), dict(task, n=2)]
    tasks = tmp_path / "t.jsonl"
    tasks.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    extra = ["--fan-out", fan_out] if fan_out else []
    result = run_ngrp(
        "materialize", "--input", tasks, "--output", "m.jsonl", "--num-repeats", repeats, *extra
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(line), result.stdout


def test_materialize_count_line_with_lines_sharing_a_task(run_ngrp, tmp_path: Path) -> None:
    """Byte-identical lines are one task whose rollout counter keeps going: 4 rows in, 3 tasks, 8 rows out."""
    task = {"responses_create_params": {"input": "hi"}, "agent_ref": {"name": "a"}}
    rows = [task, task, dict(task, n=1), dict(task, n=2)]
    tasks = tmp_path / "t.jsonl"
    tasks.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    result = run_ngrp("materialize", "--input", tasks, "--output", "m.jsonl", "--num-repeats", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("materialized 4 input rows (3 tasks) x 2 repeats = 8 rows"), result.stdout


def test_merge_refuses_a_shard_holding_materialized_inputs(run_ngrp, run: Path) -> None:
    shard = run.parent / "rollouts-shard-0-of-1.jsonl"
    shutil.copy(run / "rollouts_materialized_inputs.jsonl", shard)
    result = run_ngrp("merge", shard, "--output", run.parent / "merged.jsonl")
    _one_error_line(result, shard, "this is a materialized inputs file: pass the rollouts file")
    assert not (run.parent / "merged.jsonl").exists()


def test_curriculum_tasks_refuses_rollouts(run_ngrp, run: Path) -> None:
    rollouts = run / "rollouts.jsonl"
    result = run_ngrp(
        "curriculum",
        run / "rollouts_reward_profiling.jsonl",
        "--tasks",
        rollouts,
        "--output",
        "c.jsonl",
        "--min",
        "0.1",
    )
    _one_error_line(result, rollouts, "this is a rollouts file: pass the raw tasks file")


def test_stats_exclude_unhealthy_refuses_rollouts(run_ngrp, run: Path) -> None:
    rollouts = run / "rollouts.jsonl"
    result = run_ngrp("stats", run / "rollouts_reward_profiling.jsonl", "--exclude-unhealthy", rollouts)
    _one_error_line(result, rollouts, "this is a rollouts file: pass the *rollout_verdicts.jsonl")


def test_stats_rollouts_refuses_materialized(run_ngrp, run: Path) -> None:
    inputs = run / "rollouts_materialized_inputs.jsonl"
    result = run_ngrp("stats", run / "rollouts_reward_profiling.jsonl", "--rollouts", inputs)
    _one_error_line(result, inputs, "this is a materialized inputs file: pass the rollouts file")


def test_the_right_files_still_work(run_ngrp, run: Path) -> None:
    rollouts, inputs = run / "rollouts.jsonl", run / "rollouts_materialized_inputs.jsonl"
    assert run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts).returncode == 0
    assert run_ngrp("stats", run / "rollouts_reward_profiling.jsonl", "--rollouts", rollouts).returncode == 0
    assert run_ngrp("inspect", rollouts, "--task", "1").returncode == 0


def test_sniff_reads_only_the_first_rows(tmp_path: Path) -> None:
    """A rollouts file whose rows past the sniff are broken still sniffs as rollouts; no rows: unknown."""
    row = {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {"output": []}, "reward": 1.0}
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        b"".join(orjson.dumps(dict(row, _ng_rollout_index=i)) + b"\n" for i in range(SNIFF_ROWS))
    )
    with path.open("ab") as handle:
        handle.write(b"{not json\n" * 10)
    assert sniff(path) == "rollouts"
    failed_first = [dict(row, response=None, reward=None), {k: v for k, v in row.items() if k != "reward"}]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in failed_first))
    assert sniff(path) == "rollouts"
    (tmp_path / "e.jsonl").write_bytes(b"\n\n")
    assert sniff(tmp_path / "e.jsonl") is None
    assert sniff(tmp_path / "absent.jsonl") is None
    (tmp_path / "x.jsonl").write_bytes(b'{"a": 1}\n')
    assert sniff(tmp_path / "x.jsonl") is None  # no request, no keys: not a kind it can name


def test_validate_flags_rows_of_another_kind_than_the_name_or_kind_says(run_ngrp, run: Path) -> None:
    disguised = run / "x_materialized_inputs.jsonl"
    shutil.copy(run / "rollouts.jsonl", disguised)
    result = run_ngrp("validate", disguised, "--json")
    assert result.returncode == 1
    data = orjson.loads(result.stdout)
    schemas.validator("validate_output").validate(data)
    problems = data["files"][0]["problems"]
    assert [(p["kind"], p["line"]) for p in problems] == [("wrong_kind", None)]
    assert "look like a rollouts file, not materialized: pass --kind rollouts" in problems[0]["message"]
    result = run_ngrp("validate", run / "rollouts.jsonl", "--kind", "materialized")
    assert result.returncode == 1 and "look like a rollouts file" in result.stdout
    result = run_ngrp("validate", run / "rollouts.jsonl", run / "rollouts_materialized_inputs.jsonl")
    assert result.returncode == 0, result.stdout
