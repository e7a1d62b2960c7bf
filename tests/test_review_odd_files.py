"""Odd but parseable files a run folder can hold: every command answers with a finding or a named error,
never a traceback (found by the adversarial review of the session's changes)."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import write_run


def _no_traceback(result) -> None:
    assert "Traceback" not in result.stderr and result.returncode in (0, 1, 2, 3), result.stderr


def test_check_reads_odd_shapes_in_the_runs_other_files(tmp_path: Path, run_ngrp):
    rollouts, inputs = write_run(tmp_path / "results")
    profile = tmp_path / "x_reward_profiling.jsonl"  # rollout_infos not a list
    profile.write_text('{"_ng_task_index": 0, "expected_num_rollouts": 4, "rollout_infos": 5}\n')
    summary = tmp_path / "odd_quality_summary.json"  # a task id int() refuses though str.isdigit() takes it
    summary.write_text('{"tasks": {"\\u00b2": {"repeats": 3}, "0": {"repeats": 4}}}')
    for other in (profile, summary):
        result = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, other)
        _no_traceback(result)
        assert f"{other}" in result.stdout


def test_health_does_not_blame_the_run_for_zeros_no_check_explains(tmp_path: Path, run_ngrp):
    rollouts, inputs = write_run(tmp_path / "results")
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert "of which 0 unhealthy (0.0%)" in text
    assert "may not be the policy's fault" not in text
    assert "no check found a cause outside the policy for them" in text


def test_ledger_amend_warns_of_a_deadline_already_past_as_init_does(tmp_path: Path, run_ngrp):
    ledger = tmp_path / "L"
    init = run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "m", "--direction", "max",
                    "--max-experiments", "3", "--dir", ledger)  # fmt: skip
    assert init.returncode == 0, init.stderr
    past = run_ngrp("ledger", "amend", "--dir", ledger, "--deadline", "2000-01-01", "--reason", "user: stop")
    assert past.returncode == 0, past.stderr
    assert "has already passed: `ngrp ledger status` will say STOP at once" in past.stderr
    later = run_ngrp("ledger", "amend", "--dir", ledger, "--deadline", "3h", "--reason", "user: 3 more hours")
    assert later.returncode == 0 and "already passed" not in later.stderr


def test_stats_group_size_above_the_repeats_says_the_tasks_were_not_judged(tmp_path: Path, run_ngrp):
    """At G=9 with 8 repeats per task the text said only "0 of 12 tasks give no learning signal"."""
    rollouts, inputs = write_run(tmp_path / "r", repeats=8)
    assert run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts).returncode == 0
    profile = rollouts.with_name("rollouts_reward_profiling.jsonl")
    text = run_ngrp("stats", profile, "--group-size", "9").stdout
    assert "12 of 12 tasks have fewer than 9 scored rollouts: no P(informative) at G=9" in text
    assert "fewer than 8 scored" not in run_ngrp("stats", profile, "--group-size", "8").stdout


def test_stats_counts_the_task_groups_the_profile_dropped(tmp_path: Path, run_ngrp):
    """A task with no completed rollout has no profile row: stats said 35 of 36 (97.2%) for a run of 35
    of 40; the profile summary beside it holds the true denominators."""
    drop = ((0, 0), (0, 1), (0, 2), (0, 3), (1, 1))
    rollouts, inputs = write_run(tmp_path / "r", tasks=10, repeats=4, drop=drop)
    assert run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts, "--allow-partial").returncode == 0
    profile = rollouts.with_name("rollouts_reward_profiling.jsonl")
    denominators = json.loads(run_ngrp("stats", profile, "--json").stdout)["denominators"]
    assert denominators["expected_rollouts"] == 40 and denominators["missing_rollouts"] == 5
    assert denominators["completion_pct"] == 87.5 and denominators["tasks_without_rows"] == 1
    assert "35 of 40 expected rollouts completed (87.5%)" in run_ngrp("stats", profile).stdout
    compared = json.loads(run_ngrp("compare", profile, profile, "--json").stdout)["denominators"]
    assert compared["a"]["expected_rollouts"] == 40
    # a profile without its summary says what its rows say, and that it cannot know more
    rollouts.with_name("rollouts_profile_summary.json").unlink()
    alone = json.loads(run_ngrp("stats", profile, "--json").stdout)["denominators"]
    assert alone["expected_rollouts"] == 36 and alone["tasks_without_rows"] is None


def test_inspect_finding_of_a_real_check_that_flagged_nothing_is_an_empty_selection(tmp_path: Path, run_ngrp):
    """--help says exit 0 also when nothing matched; a real check id with no finding in this run was
    refused as if it were a typo (exit 2)."""
    rollouts, inputs = write_run(tmp_path / "r")
    run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts)
    none = run_ngrp("inspect", rollouts, "--finding", "ngrp/tool_call_loop")
    assert none.returncode == 0, none.stderr
    assert "0 rollout(s) shown of 0 selected" in none.stdout + none.stderr
    typo = run_ngrp("inspect", rollouts, "--finding", "ngrp/tool_cal_loop")
    assert typo.returncode == 2 and "has the finding ngrp/tool_cal_loop" in typo.stderr


def test_ledger_amend_scrubs_secrets_from_the_stored_reason(tmp_path: Path, run_ngrp):
    """Every other ledger text is scrubbed; amend's --reason went into campaign.json as typed."""
    ledger = tmp_path / "L"
    init = run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "m", "--direction", "max",
                    "--max-experiments", "3", "--dir", ledger)  # fmt: skip
    assert init.returncode == 0, init.stderr
    key = "sk-proj-ABCDEFGH12345678xyz"
    done = run_ngrp("ledger", "amend", "--dir", ledger, "--max-experiments", "5", "--reason", f"ok {key}")
    assert done.returncode == 0, done.stderr
    assert key not in (ledger / "campaign.json").read_text() and key not in done.stdout
    assert "ok ***" in (ledger / "campaign.json").read_text()


def test_health_lists_unhealthy_tasks_in_numeric_order(tmp_path: Path, run_ngrp):
    """The line read "task 0, 1, 10, 11, 2, 3" (Gym's string order of task keys)."""
    rollouts, inputs = write_run(tmp_path / "r", tasks=12, truncate_every=1)  # every rollout truncated
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert "tasks where every repeat is unhealthy: 12 (task 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)" in text


def test_inspect_puts_an_answer_that_opens_with_blank_lines_beside_its_label(tmp_path: Path, run_ngrp):
    """Gym's agent rows (tests/golden/agent) end with a message that opens "\\n\\n": the answer line was
    empty and the text two lines below it."""
    golden = Path(__file__).parent / "golden" / "agent" / "example_tool_call_multireward.jsonl"
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(golden.read_bytes())
    text = run_ngrp("inspect", rollouts, "--task", "0").stdout
    assert "     answer     The weather in San Francisco is currently sunny." in text
