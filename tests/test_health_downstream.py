"""--exclude-unhealthy in profile, stats, report and curriculum: the counts, and the statistics it changes,
each against a value computed here from the rollout rows; the note stats and report give without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
from health_data import CAP, clean_run

from ngrp_lib.artifacts import schemas

UNHEALTHY = [(0, 1), (3, 0), (3, 2), (7, 3)]  # stopped at the cap: ngrp/truncated_at_token_cap


@pytest.fixture
def run_dir(tmp_path, run_ngrp) -> Path:
    run = clean_run(10)
    rows = [orjson.loads(line) for line in run.lines]
    for row in rows:
        if (row["_ng_task_index"], row["_ng_rollout_index"]) in UNHEALTHY:
            row["response"]["usage"]["output_tokens"] = CAP
    run.lines = [orjson.dumps(r) + b"\n" for r in rows]
    inputs, rollouts, _ = run.write(tmp_path)
    tasks = [{k: v for k, v in r.items() if not k.startswith("_ng_")} for r in run.inputs[::4]]
    (tmp_path / "tasks.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    health = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts)
    assert health.returncode == 1, health.stderr
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    return tmp_path


def _rewards(folder: Path, exclude: bool) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for row in json.loads((folder / "rows.json").read_text()):
        key = (row["_ng_task_index"], row["_ng_rollout_index"])
        if not (exclude and key in UNHEALTHY):
            out.setdefault(key[0], []).append(row["reward"])
    return out


def _profile(run_ngrp, folder: Path, *extra):
    proc = run_ngrp(
        "profile",
        "--inputs",
        folder / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        folder / "rollouts.jsonl",
        "--overwrite",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_profile_excludes_unhealthy_as_masked_and_counts_them(run_dir, run_ngrp):
    proc = _profile(run_ngrp, run_dir, "--exclude-unhealthy", run_dir / "rollout_verdicts.jsonl", "--json")
    result = json.loads(proc.stdout)
    assert result["counts"]["unhealthy_excluded"] == len(UNHEALTHY)
    assert result["counts"]["masked"] == 0
    assert result["counts"]["measured"] == 40 - len(UNHEALTHY)
    assert (
        f"Unhealthy rollouts left out (--exclude-unhealthy): {len(UNHEALTHY)}"
        in _profile(run_ngrp, run_dir, "--exclude-unhealthy", run_dir / "rollout_verdicts.jsonl").stdout
    )
    summary = json.loads((run_dir / "rollouts_profile_summary.json").read_text())
    assert schemas.validator("profile_summary").is_valid(summary)
    assert summary["options"]["exclude_unhealthy"].endswith("rollout_verdicts.jsonl")
    healthy = _rewards(run_dir, exclude=True)
    for line in (run_dir / "rollouts_reward_profiling.jsonl").read_text().splitlines():
        row = json.loads(line)
        expected = healthy[row["_ng_task_index"]]
        assert row["mean/reward"] == pytest.approx(sum(expected) / len(expected))
        assert len(row["rollout_infos"]) == len(expected)
    agents = json.loads((run_dir / "rollouts_agent_metrics.json").read_text())
    pooled = [r for rs in healthy.values() for r in rs]
    assert agents[0]["mean/reward"] == pytest.approx(sum(pooled) / len(pooled))


def test_profile_without_the_option_or_with_an_all_healthy_file_is_unchanged(run_dir, run_ngrp, tmp_path):
    _profile(run_ngrp, run_dir)
    gym_files = ("_reward_profiling.jsonl", "_agent_metrics.json", "_repeat_level_metrics.json")
    plain = {name: (run_dir / f"rollouts{name}").read_bytes() for name in gym_files}
    healthy = tmp_path / "all_healthy_verdicts.jsonl"
    rows = [json.loads(x) for x in (run_dir / "rollout_verdicts.jsonl").read_text().splitlines()]
    healthy.write_text("".join(json.dumps({**r, "verdict": "healthy", "findings": []}) + "\n" for r in rows))
    _profile(run_ngrp, run_dir, "--exclude-unhealthy", healthy)
    assert {name: (run_dir / f"rollouts{name}").read_bytes() for name in gym_files} == plain


def test_stats_with_and_without_exclusion(run_dir, run_ngrp):
    _profile(run_ngrp, run_dir)
    profile = run_dir / "rollouts_reward_profiling.jsonl"
    verdicts = run_dir / "rollout_verdicts.jsonl"
    found = json.loads(run_ngrp("stats", profile, "--json", "--bootstrap", "0").stdout)
    assert found["inputs"]["health"] == {
        "verdicts": str(verdicts),
        "applied": False,
        "unhealthy_in_file": 4,
        "unhealthy_in_profile": 4,
        "excluded": 0,
    }
    assert any("4 of these 40 rollouts are unhealthy" in n for n in found["notes"])
    text = run_ngrp("stats", profile, "--bootstrap", "0").stdout
    assert "--exclude-unhealthy" in text
    proc = run_ngrp("stats", profile, "--json", "--bootstrap", "0", "--exclude-unhealthy", verdicts)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert schemas.validator("stats_result").is_valid(stats)
    healthy = _rewards(run_dir, exclude=True)
    pooled = [r for rs in healthy.values() for r in rs]
    mean = stats["overall"]["mean_reward"]
    assert mean["rollout_weighted"]["value"] == pytest.approx(sum(pooled) / len(pooled))
    assert mean["rollout_weighted"]["n_rollouts"] == 36
    task_means = [sum(rs) / len(rs) for rs in healthy.values()]
    assert mean["task_weighted"]["value"] == pytest.approx(sum(task_means) / len(task_means))
    assert stats["inputs"]["health"]["excluded"] == 4 and stats["inputs"]["profile_rollouts"] == 36
    # the same numbers as stats on a profile made with the option
    _profile(run_ngrp, run_dir, "--exclude-unhealthy", verdicts)
    again = json.loads(run_ngrp("stats", profile, "--json", "--bootstrap", "0").stdout)
    assert again["overall"]["mean_reward"] == stats["overall"]["mean_reward"]
    assert again["inputs"]["health"]["unhealthy_in_profile"] == 0  # already left out: nothing to say


def test_stats_names_an_unreadable_verdicts_file_without_failing(run_dir, run_ngrp):
    _profile(run_ngrp, run_dir)
    (run_dir / "rollout_verdicts.jsonl").write_text('{"verdict": "maybe"}\n')
    proc = run_ngrp("stats", run_dir / "rollouts_reward_profiling.jsonl", "--json", "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    assert "cannot be read" in json.loads(proc.stdout)["inputs"]["health"]["problem"]
    bad = run_ngrp(
        "stats",
        run_dir / "rollouts_reward_profiling.jsonl",
        "--exclude-unhealthy",
        run_dir / "rollout_verdicts.jsonl",
    )
    assert bad.returncode == 3 and "rollout_verdicts.jsonl:1" in bad.stderr


def test_report_says_what_was_left_out(run_dir, run_ngrp):
    pytest.importorskip("matplotlib")
    _profile(run_ngrp, run_dir)
    profile, verdicts = run_dir / "rollouts_reward_profiling.jsonl", run_dir / "rollout_verdicts.jsonl"
    proc = run_ngrp("report", profile, "-o", run_dir / "r.html", "--json", "--exclude-unhealthy", verdicts)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert schemas.validator("report_result").is_valid(result)
    assert result["health"]["excluded"] == 4 and result["n_rollouts"] == 36
    # the report says it once, in the statistics' notes under the headline
    assert "4 unhealthy rollout(s) left out of every statistic" in (run_dir / "r.html").read_text()
    plain = run_ngrp("report", profile, "-o", run_dir / "p.html", "--json")
    assert json.loads(plain.stdout)["health"]["unhealthy_in_profile"] == 4
    page = (run_dir / "p.html").read_text()
    assert "4 of these 40 rollouts are unhealthy by" in page and page.count("are unhealthy by") == 1


def test_curriculum_pass_rates_stand_on_healthy_rollouts(run_dir, run_ngrp):
    _profile(run_ngrp, run_dir)
    out = run_dir / "band.jsonl"
    proc = run_ngrp(
        "curriculum",
        run_dir / "rollouts_reward_profiling.jsonl",
        "--tasks",
        run_dir / "tasks.jsonl",
        "-o",
        out,
        "--min",
        "0",
        "--max",
        "1",
        "--json",
        "--exclude-unhealthy",
        run_dir / "rollout_verdicts.jsonl",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert schemas.validator("curriculum_result").is_valid(result)
    assert result["n_unhealthy_excluded"] == 4
    healthy = _rewards(run_dir, exclude=True)
    for task, line in enumerate(out.read_text().splitlines()):
        row = json.loads(line)
        assert row["pass_rate_n"] == len(healthy[task])
        assert row["pass_rate"] == pytest.approx(sum(healthy[task]) / len(healthy[task]))


def test_gym_verdicts_file_is_accepted(run_dir, run_ngrp, golden):
    """A verdicts file written by `gym eval health-check` (all unobserved) excludes nothing."""
    _profile(run_ngrp, run_dir)
    gym = run_dir / "gym_verdicts.jsonl"
    shutil.copy(golden.parent / "gym-stack" / "rollout_verdicts_2rows.jsonl", gym)
    proc = run_ngrp(
        "stats",
        run_dir / "rollouts_reward_profiling.jsonl",
        "--json",
        "--exclude-unhealthy",
        gym,
        "--bootstrap",
        "0",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["inputs"]["health"]["excluded"] == 0


def test_a_folder_where_the_sidecar_belongs_is_refused_by_health_and_check_alike(tmp_path, run_ngrp):
    """Both readers take the sibling failures file when anything stands there, so a folder in its place is
    exit 3 in each (health used to pass over it silently while check refused it)."""
    golden = Path(__file__).resolve().parent / "golden" / "gym-0.7.0" / "case_complete"
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(golden / name, tmp_path / name)
    (tmp_path / "rollouts_failures.jsonl").mkdir()
    args = [
        "--inputs",
        tmp_path / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        tmp_path / "rollouts.jsonl",
    ]
    for command in ("health", "check"):
        done = run_ngrp(command, *args)
        assert done.returncode == 3 and "rollouts_failures.jsonl" in done.stderr, (command, done.stderr)
