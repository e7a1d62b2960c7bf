"""The agent's main requests, end to end through the CLI, following the commands SKILL.md and `check`
give (issue 17): each is a straight path, with no hand-written code and no edit of the user's data."""

from __future__ import annotations

import hashlib
import shlex
import shutil
from pathlib import Path

import orjson

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _crashed_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run whose collector died mid-write: the last rollout line is cut off."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        shutil.copy(GOLDEN / "case_complete" / name, run / name)
    rollouts = run / "rollouts.jsonl"
    data = rollouts.read_bytes()
    rollouts.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])
    return run / "rollouts_materialized_inputs.jsonl", rollouts


def test_crashed_run_to_partial_profile_by_the_fix_check_gives(run_ngrp, tmp_path):
    inputs, rollouts = _crashed_run(tmp_path)
    before = _sha(rollouts)
    checked = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert checked.returncode == 1
    torn = next(f for f in orjson.loads(checked.stdout)["findings"] if f["code"] == "rollouts_torn_tail")
    first_fix = torn["fix"].split(" (")[0]  # the first fix given: a command, then why in parentheses
    args = shlex.split(first_fix)
    assert args[:2] == ["ngrp", "profile"] and "--allow-partial" in args
    profiled = run_ngrp(*args[1:])
    assert profiled.returncode == 0, profiled.stderr
    assert "torn last line" in profiled.stderr and "not changed" in profiled.stderr
    summary = orjson.loads((rollouts.parent / "rollouts_profile_summary.json").read_bytes())
    assert summary["inputs"]["rollouts"]["torn_tail_line"] == 12
    assert summary["counts"]["completed"] == 11 and summary["counts"]["missing"] == 1
    assert _sha(rollouts) == before  # the user's raw data is never edited


def test_a_torn_tail_still_stops_a_strict_profile_with_the_partial_route_in_the_hint(run_ngrp, tmp_path):
    inputs, rollouts = _crashed_run(tmp_path)
    strict = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    assert strict.returncode == 3
    assert "--allow-partial" in strict.stderr and "delete" not in strict.stderr
    assert not (rollouts.parent / "rollouts_reward_profiling.jsonl").exists()


def test_grpo_filter_from_the_materialized_inputs_alone(run_ngrp, tmp_path):
    """Only the run's materialized inputs at hand: curriculum takes them as the tasks file."""
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "case_complete", run)
    profile = run / "rollouts_reward_profiling.jsonl"
    inputs = run / "rollouts_materialized_inputs.jsonl"
    out = tmp_path / "learnable.jsonl"
    res = run_ngrp(
        "curriculum",
        profile,
        "--tasks",
        inputs,
        "-o",
        out,
        "--min",
        "0.01",
        "--max",
        "0.99",
        "--json",
        "--pass-threshold",
        "0.5",
    )
    assert res.returncode == 0, res.stderr
    result = orjson.loads(res.stdout)
    assert result["tasks_kind"] == "materialized"
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    rates = {r["_ng_task_index"]: r["pass_rate"] for r in written}
    materialized = [orjson.loads(line) for line in inputs.read_bytes().splitlines()]
    rewards: dict[int, list[float]] = {}
    for row in (orjson.loads(line) for line in (run / "rollouts.jsonl").read_bytes().splitlines()):
        rewards.setdefault(row["_ng_task_index"], []).append(row["reward"])
    passes = {t: sum(x >= 0.5 for x in r) for t, r in rewards.items()}
    expected = {t: passes[t] / len(r) for t, r in rewards.items() if 0 < passes[t] < len(r)}
    assert rates == expected  # exactly the mixed tasks, each once, with its own pass rate
    assert len(written) == len(expected) and all("_ng_rollout_index" not in r for r in written)
    first = {
        r["_ng_task_index"]: r
        for r in materialized
        if r["_ng_rollout_index"]
        == min(x["_ng_rollout_index"] for x in materialized if x["_ng_task_index"] == r["_ng_task_index"])
    }
    for row in written:
        original = {k: v for k, v in first[row["_ng_task_index"]].items() if k != "_ng_rollout_index"}
        assert {k: v for k, v in row.items() if k not in ("pass_rate", "pass_rate_n")} == original
    text = run_ngrp(
        "curriculum",
        profile,
        "--tasks",
        inputs,
        "-o",
        tmp_path / "b.jsonl",
        "--pass-threshold",
        "0.5",
        "--min",
        "0",
    )
    assert "materialized inputs file" in text.stdout


def _profile_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two profiles of the same 20 tasks x 8 where B is clearly better than A."""
    from stats_helpers import write_profile

    a = [[int((t + j) % 4 == 0) for j in range(8)] for t in range(20)]
    b = [[int((t + j) % 4 != 3) for j in range(8)] for t in range(20)]
    return write_profile(tmp_path / "base.jsonl", a), write_profile(tmp_path / "tuned.jsonl", b)


def test_report_compare_says_which_run_is_which_as_compare_does(run_ngrp, tmp_path):
    base, tuned = _profile_pair(tmp_path)
    page = tmp_path / "r.html"
    res = run_ngrp("report", tuned, "--compare", base, "-o", page, "--bootstrap", "100")
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    assert "B - A, with A = baseline base.jsonl and B = this profile tuned.jsonl" in html
    assert f"ngrp compare {base} {tuned}" in html
    diff = orjson.loads(run_ngrp("compare", base, tuned, "--json", "--bootstrap", "100").stdout)["mean_diff"]
    assert diff > 0
    assert f"<td>mean difference B - A</td><td>{diff:.4f}</td>" in html  # the same number, the same sign
    assert "A (other)" not in html and "B (this): per-task" not in html


def test_report_of_a_gym_collected_run_says_the_sidecar_is_absent(run_ngrp, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "case_complete", run)  # Gym wrote these: no sidecar, no ngrp manifest
    res = run_ngrp(
        "report",
        run / "rollouts_reward_profiling.jsonl",
        "--rollouts",
        run / "rollouts.jsonl",
        "-o",
        tmp_path / "r.html",
        "--bootstrap",
        "100",
        "--pass-threshold",
        "0.5",
    )
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "r.html").read_text()
    assert "is absent" in html and "failed attempts are not known" in html
    assert "no failed attempts were recorded" not in html


def test_report_of_an_ngrp_collected_run_without_a_sidecar_says_nothing_failed(run_ngrp, tmp_path):
    """ngrp's collector writes every failed attempt to the sidecar: its manifest beside the rollouts and
    no sidecar means no attempt failed, which the report says instead of "not known"."""
    from ngrp_lib.artifacts.names import manifest_path_for

    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "case_complete", run)
    manifest_path_for(run / "rollouts.jsonl").write_text('{"tool": "ngrp"}\n')
    res = run_ngrp(
        "report", run / "rollouts_reward_profiling.jsonl", "--rollouts", run / "rollouts.jsonl",
        "-o", tmp_path / "r.html", "--bootstrap", "100", "--pass-threshold", "0.5",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "r.html").read_text()
    assert "No failed attempts: ngrp's collector wrote no rollouts_failures.jsonl." in html
    assert "failed attempts are not known" not in html
