"""`ngrp check ... OTHER_FILES` recognises each other file by its content, as `ngrp validate` does (issue
36, wrong turn 10: a profile renamed `*_2rows.jsonl` exited 3, "not a file check can hold")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ngrp_lib.audit.crossfiles import kind_from_content

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0" / "case_complete"
RENAMED = {
    "rollouts_reward_profiling.jsonl": ("profile_2rows.jsonl", "profile"),
    "rollouts_repeat_level_metrics.json": ("repeats.json", "repeats"),
    "rollouts_agent_metrics.json": ("agents.json", "agent_metrics"),
}


@pytest.mark.parametrize("name", sorted(RENAMED))
def test_gyms_files_renamed_are_told_by_their_content(tmp_path, name):
    new, kind = RENAMED[name]
    shutil.copy(GOLDEN / name, tmp_path / new)
    assert kind_from_content(tmp_path / new) == kind


def test_check_holds_renamed_files_against_the_inputs(tmp_path, run_ngrp):
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl", *RENAMED):
        shutil.copy(GOLDEN / name, tmp_path / RENAMED.get(name, (name,))[0])
    health = run_ngrp("health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts",
                      "rollouts.jsonl", "--json")  # fmt: skip
    assert health.returncode in (0, 1), health.stderr
    (tmp_path / "quality_summary.json").rename(tmp_path / "qs.json")
    (tmp_path / "rollout_verdicts.jsonl").rename(tmp_path / "v.jsonl")
    others = ["profile_2rows.jsonl", "repeats.json", "agents.json", "qs.json", "v.jsonl"]
    proc = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    *others, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = [f["message"] for f in json.loads(proc.stdout)["findings"] if f["code"] == "files_disagree"]
    for other, what in zip(others, ("reward profile", "repeat-level metrics", "agent metrics",
                                    "quality summary", "rollout verdicts"), strict=True):  # fmt: skip
        assert any(m.startswith(f"{other} ({what})") or m.startswith(f"{other}: agent") for m in said), said


def test_a_renamed_profile_from_another_run_is_still_caught(tmp_path, run_ngrp):
    """Recognised, then held against the inputs: a profile of more tasks than the inputs is an error."""
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    rows = (GOLDEN / "rollouts_reward_profiling.jsonl").read_text().splitlines()
    extra = json.loads(rows[0]) | {"_ng_task_index": 999}
    (tmp_path / "p_2rows.jsonl").write_text("\n".join([*rows, json.dumps(extra)]) + "\n")
    proc = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    "p_2rows.jsonl")  # fmt: skip
    assert proc.returncode == 1 and "task(s) the inputs do not hold" in proc.stdout, proc.stdout


def test_a_file_neither_content_nor_name_tells_is_refused_naming_it(tmp_path, run_ngrp):
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    (tmp_path / "notes.json").write_text('{"a": 1}\n')
    proc = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    "notes.json")  # fmt: skip
    assert proc.returncode == 3 and "notes.json" in proc.stderr


def test_a_quality_summary_of_more_rows_than_the_rollouts_is_not_called_agreeing(tmp_path, run_ngrp):
    """Issue 36, wrong turn 11: `check` called a quality summary of 96 records "agrees" beside a rollouts
    file of 2 rows (same inputs, another rollouts file). Health files are held against the rollouts too."""
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    judged = run_ngrp(
        "health", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl"
    )
    assert judged.returncode in (0, 1), judged.stderr
    rows = (tmp_path / "rollouts.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "two.jsonl").write_text("".join(rows[:2]))
    others = ("quality_summary.json", "rollout_verdicts.jsonl")
    proc = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "two.jsonl",
                    *others, "--json")  # fmt: skip
    found = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "files_disagree"]
    for other in others:
        said = [f for f in found if f["message"].startswith(f"{other} (")]
        assert any(f["severity"] == "error" and f"made from {len(rows)} rollout rows; two.jsonl holds 2" in
                   f["message"] for f in said), said  # fmt: skip
        assert not any("agrees" in f["message"] for f in said)
    # the same files beside the rollouts they were made from agree
    same = run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    *others, "--json")  # fmt: skip
    said = [f["message"] for f in json.loads(same.stdout)["findings"] if f["code"] == "files_disagree"]
    assert len(said) == 2 and all("agrees with" in m for m in said), said
