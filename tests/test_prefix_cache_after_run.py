"""Replay 2026-12-04, W11: the prefix-cache hit rate and why it is 0 were printed only by `collect` at run
time (and kept only in the manifest's `runs[].cost`). `check` and `stats` now show them after the run, one
line, from the run manifest beside the rollouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0" / "case_complete"
NOTE = "every prompt (at most 47 tokens) is shorter than one KV-cache block (128 tokens)"


def _run(tmp_path: Path, runs: list) -> Path:
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    (tmp_path / "rollouts_run_manifest.json").write_text(json.dumps({"runs": runs}))
    return tmp_path


def _cost(rate, note):
    return {
        "status": "finished",
        "cost": {"requests": 3, "prefix_cache_hit_rate": rate, "prefix_cache_note": note},
    }


def _check(run_ngrp, *extra):
    return run_ngrp("check", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl",
                    *extra)  # fmt: skip


def test_check_prints_the_hit_rate_and_its_reason_from_the_manifest(tmp_path, run_ngrp):
    _run(tmp_path, [_cost(0.0, NOTE)])
    proc = _check(run_ngrp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"prefix cache: hit rate 0.0% ({NOTE})" in proc.stdout.splitlines()
    data = json.loads(_check(run_ngrp, "--json").stdout)
    assert data["prefix_cache"] == [
        {"invocation": 1, "status": "finished", "recorded": True, "hit_rate": 0.0, "note": NOTE}
    ]


def test_a_resumed_run_says_which_invocation_each_figure_is_of(tmp_path, run_ngrp):
    """Replay 2026-12-05 W7: after a kill and a resume, the only recorded figure and its reason are the
    resume's (it sent only the unfinished tasks' prompts): the line says so, never as the run's."""
    resumed = _cost(0.0, NOTE.replace("every prompt", "every prompt this invocation sent"))
    _run(tmp_path, [{"status": "killed", "cost": {"requests": 1}}, resumed])
    proc = _check(run_ngrp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "prefix cache: hit rate by invocation (2): 1 none (killed), 2 0.0%; invocation 2: every prompt this"
        " invocation sent (at most 47 tokens) is shorter than one KV-cache block (128 tokens)"
    ) in proc.stdout.splitlines()
    data = json.loads(_check(run_ngrp, "--json").stdout)
    assert [(e["invocation"], e["status"], e["recorded"], e["hit_rate"]) for e in data["prefix_cache"]] == [
        (1, "killed", False, None),
        (2, "finished", True, 0.0),
    ]


def test_check_gives_one_rate_per_invocation_and_says_not_reported(tmp_path, run_ngrp):
    _run(tmp_path, [_cost(None, "no server's /metrics was readable"), _cost(0.625, None)])
    line = next(x for x in _check(run_ngrp).stdout.splitlines() if x.startswith("prefix cache:"))
    assert line == (
        "prefix cache: hit rate by invocation (2): 1 not reported, 2 62.5%; invocation 1: no server's"
        " /metrics was readable"
    )


def test_no_manifest_or_no_cost_recorded_prints_no_line(tmp_path, run_ngrp):
    _run(tmp_path, [{"status": "running", "cost": None}])
    assert "prefix cache" not in _check(run_ngrp).stdout
    (tmp_path / "rollouts_run_manifest.json").unlink()
    proc = _check(run_ngrp, "--json")
    assert json.loads(proc.stdout)["prefix_cache"] == [] and "prefix cache" not in _check(run_ngrp).stdout


def test_stats_prints_it_among_its_cost_lines(tmp_path, run_ngrp):
    _run(tmp_path, [_cost(0.0, NOTE)])
    made = run_ngrp(
        "profile", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl"
    )
    assert made.returncode == 0, made.stderr
    for extra in ((), ("--rollouts", "rollouts.jsonl")):  # beside the profile's rollouts, or the named ones
        proc = run_ngrp("stats", "rollouts_reward_profiling.jsonl", "--bootstrap", "0", *extra)
        assert proc.returncode == 0, proc.stderr
        assert f"prefix cache: hit rate 0.0% ({NOTE})" in proc.stdout.splitlines(), proc.stdout
    data = json.loads(
        run_ngrp("stats", "rollouts_reward_profiling.jsonl", "--bootstrap", "0", "--json").stdout
    )
    assert data["cost"]["prefix_cache"] == [
        {"invocation": 1, "status": "finished", "recorded": True, "hit_rate": 0.0, "note": NOTE}
    ]
