"""Gym tier: NeMo Gym 0.7.0's own `gym eval health-check` and `ngrp health` on the same runs. Every check Gym
evaluates gives the same findings on the same rollouts (and the same coverage and counts); a rollout Gym
calls unhealthy ngrp calls unhealthy too. Needs NGRP_GYM_VENV (.ci/install_gym.sh); skipped otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from health_data import planted_run
from profile_data import make_run, write_run

pytestmark = pytest.mark.gym


@pytest.fixture(scope="module")
def gym_bin() -> Path:
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    gym = Path(venv) / "bin" / "gym"
    if not gym.exists():
        pytest.skip(f"NGRP_GYM_VENV={venv} has no bin/gym: rerun .ci/install_gym.sh")
    return gym


def _load(folder: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((folder / "quality_summary.json").read_text())
    rows = [json.loads(x) for x in (folder / "rollout_verdicts.jsonl").read_text().splitlines()]
    return summary, rows


def _both(gym_bin: Path, run_ngrp, folder: Path, *ignore: str) -> tuple[tuple, tuple]:
    gym_dir, ours_dir = folder / "gym", folder / "ours"
    shutil.copytree(folder / "run", gym_dir)
    shutil.copytree(folder / "run", ours_dir)
    extra = ["--ignore-checks", ",".join(ignore)] if ignore else []
    gym = subprocess.run(
        [str(gym_bin), "eval", "health-check", ".", *extra],
        cwd=gym_dir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert gym.returncode == 0, gym.stderr[-2000:]
    args = ["--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl", *extra]
    ours = run_ngrp("health", *args, cwd=ours_dir)
    assert ours.returncode in (0, 1), ours.stderr
    return _load(gym_dir), _load(ours_dir)


def assert_agreement(gym: tuple, ours: tuple) -> None:
    (g_summary, g_rows), (o_summary, o_rows) = gym, ours
    g_run, o_run = g_summary["run"], o_summary["run"]
    evaluated = [c for c, cov in g_run["artifacts"]["coverage"].items() if cov["evaluated"]]
    assert evaluated, "Gym evaluated no check: nothing to compare"
    assert g_run["ignored_checks"] == o_run["ignored_checks"]
    assert g_run["artifacts"]["records"] == o_run["artifacts"]["records"]
    # keys seen only in the failures sidecar (Gym does not read it) are not records: unobserved for these
    failure_only = o_summary["ngrp"]["keys"]["failure_only"]
    for check in evaluated:
        g_cov = g_run["artifacts"]["coverage"][check]
        assert o_run["artifacts"]["coverage"][check] == {
            **g_cov,
            "unobserved": g_cov["unobserved"] + failure_only,
        }
        assert o_run["issues"][check] == g_run["issues"][check], check
    for check, cov in g_run["artifacts"]["coverage"].items():
        if cov["ignored"] and check in o_run["artifacts"]["coverage"]:
            assert o_run["artifacts"]["coverage"][check]["ignored"] == cov["ignored"], check
    assert {k: o_run["stats"]["tokens"][k] for k in ("prompt", "completion")} == {
        k: g_run["stats"]["tokens"][k] for k in ("prompt", "completion")
    }
    # ngrp adds rows for keys seen only in the failures sidecar (Gym does not read it)
    from_rollouts = [
        r for r in o_rows if not any(f["detail"].get("source") == "failures" for f in r["findings"])
    ]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"], r["rollout_id"]) for r in from_rollouts] == [
        (r["_ng_task_index"], r["_ng_rollout_index"], r["rollout_id"]) for r in g_rows
    ]
    for g, o in zip(g_rows, from_rollouts, strict=True):
        assert [f for f in o["findings"] if f["check"] in evaluated] == [
            f for f in g["findings"] if f["check"] in evaluated
        ], (g, o)
        if g["verdict"] == "unhealthy":
            assert o["verdict"] == "unhealthy", (g, o)
    sidecar_only = Counter(str(r["_ng_task_index"]) for r in o_rows if r not in from_rollouts)
    for task, entry in g_summary["tasks"].items():
        assert o_summary["tasks"][task]["repeats"] == entry["repeats"] + sidecar_only[task], task


def _broken_lines(rollouts: Path) -> None:
    """An invalid line, a JSON array, a blank line, a duplicated row and a torn last line."""
    lines = rollouts.read_bytes().splitlines(keepends=True)
    lines[2:2] = [b'{"broken": \n', b"[1, 2]\n", b"\n"]
    lines.append(lines[0])
    lines.append(b'{"_ng_task_index": 1, "_ng')
    rollouts.write_bytes(b"".join(lines))


@pytest.mark.parametrize(("seed", "shape"), [(1, "plain"), (3, "env_servers")])
def test_same_verdicts_as_gym_on_generated_runs(gym_bin, tmp_path, run_ngrp, seed, shape):
    run = make_run(seed, shape, 5, 3, p_missing=0.1)
    _inputs, rollouts = write_run(run, tmp_path / "run")
    _broken_lines(rollouts)
    assert_agreement(*_both(gym_bin, run_ngrp, tmp_path))


def test_same_verdicts_as_gym_on_the_planted_run(gym_bin, tmp_path, run_ngrp):
    planted_run(identityless=False).write(tmp_path / "run")
    gym, ours = _both(gym_bin, run_ngrp, tmp_path)
    assert_agreement(gym, ours)
    # ngrp judges the rows themselves: it finds what Gym leaves unobserved
    assert ours[0]["run"]["verdicts"]["unhealthy"] > gym[0]["run"]["verdicts"]["unhealthy"]


def test_same_verdicts_as_gym_with_ignored_checks(gym_bin, tmp_path, run_ngrp):
    run = make_run(5, "plain", 4, 3)
    _inputs, rollouts = write_run(run, tmp_path / "run")
    _broken_lines(rollouts)
    gym, ours = _both(
        gym_bin, run_ngrp, tmp_path, "rollout_duplicate_identity", "task_consistently_unhealthy"
    )
    assert_agreement(gym, ours)
    assert ours[0]["run"]["issues"]["rollout_duplicate_identity"] == 0


def test_same_verdicts_as_gym_on_real_gym_rows(gym_bin, tmp_path, run_ngrp, golden):
    stack = golden.parent / "gym-stack"
    (tmp_path / "run").mkdir()
    shutil.copy(stack / "rollouts_2rows.jsonl", tmp_path / "run" / "rollouts.jsonl")
    shutil.copy(stack / "rollouts_materialized_inputs.jsonl", tmp_path / "run")
    assert_agreement(*_both(gym_bin, run_ngrp, tmp_path))


def test_same_verdicts_as_gym_on_agent_rows(gym_bin, tmp_path, run_ngrp):
    """Gym-shaped agent rows with every planted agent defect: where Gym evaluates a check both agree, and
    ngrp's agent checks find the defects Gym leaves unobserved without its trajectory capture."""
    from agent_rows import write_run as write_agent_run

    defects = {(0, 1): "bad_args", (1, 2): "tool_error", (2, 3): "loop", (3, 0): "cut"}
    rollouts = write_agent_run(tmp_path / "run", tasks=5, repeats=4, turns=10, defects=defects)
    _broken_lines(rollouts)
    gym, ours = _both(gym_bin, run_ngrp, tmp_path)
    assert_agreement(gym, ours)
    issues = ours[0]["run"]["issues"]
    assert [issues[c] for c in ("ngrp/tool_arguments_invalid", "ngrp/tool_output_error")] == [1, 1]
    assert [issues[c] for c in ("ngrp/tool_call_loop", "ngrp/ended_on_tool_call")] == [1, 1]
