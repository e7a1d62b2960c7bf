"""Every NeMo Gym 0.7.0 golden case, through the CLI: outputs, printed summary and exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
from profile_compare import compare_outputs, load

PAIR = ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl")
SUCCESS = [
    ("case_complete", "strict", []),
    ("case_masked", "strict", []),
    ("case_fan_out", "strict", []),
    ("case_partial/partial_run", "partial", ["--allow-partial"]),
    ("case_missing_task/partial_run", "partial", ["++allow_partial_rollouts=True"]),
    ("case_no_rollouts/partial_run", "partial", ["--allow-partial"]),  # Gym writes empty files, exit 0
]


def _copy_case(golden: Path, case: str, dest: Path) -> Path:
    for name in PAIR:
        shutil.copy(golden / case / name, dest / name)
    return dest


def _profile(run_ngrp, cwd: Path, *extra: str):
    return run_ngrp("profile", "--inputs", PAIR[0], "--rollouts", PAIR[1], *extra, cwd=cwd)


@pytest.mark.parametrize(("case", "mode", "flags"), SUCCESS)
def test_success_cases_match_gym(golden, tmp_path, run_ngrp, case, mode, flags):
    _copy_case(golden, case, tmp_path)
    proc = _profile(run_ngrp, tmp_path, "--gym-only", *flags)
    assert proc.returncode == int((golden / case / f"{mode}.exitcode.txt").read_text()), proc.stderr
    assert compare_outputs(tmp_path / "rollouts.jsonl", golden / case / "rollouts.jsonl") == []
    # --gym-only: not a key more than Gym wrote
    for row in load(tmp_path / "rollouts_reward_profiling.jsonl"):
        assert not [k for k in row if k.startswith("ngrp/")]
    gym_stdout = (golden / case / f"{mode}.stdout.txt").read_text().splitlines()
    assert proc.stdout.splitlines()[: len(gym_stdout)] == gym_stdout


@pytest.mark.parametrize(("case", "mode", "flags"), SUCCESS)
def test_extras_follow_gym_keys(golden, tmp_path, run_ngrp, case, mode, flags):
    _copy_case(golden, case, tmp_path)
    proc = _profile(run_ngrp, tmp_path, *flags)
    assert proc.returncode == 0, proc.stderr
    assert (
        compare_outputs(tmp_path / "rollouts.jsonl", golden / case / "rollouts.jsonl", allow_extras=True)
        == []
    )
    gym_rows = load(golden / case / "rollouts_reward_profiling.jsonl")
    for ours, theirs in zip(load(tmp_path / "rollouts_reward_profiling.jsonl"), gym_rows, strict=False):
        keys = list(ours)
        assert keys[: len(theirs)] == list(theirs)  # extras come after every Gym key
        assert all(k.startswith("ngrp/") for k in keys[len(theirs) :])
        assert ours["ngrp/num_scored"] + ours["ngrp/num_null_reward"] == ours["num_rollouts"]
    summary = orjson.loads((tmp_path / "rollouts_profile_summary.json").read_bytes())
    assert summary["inputs"]["rollouts"]["sha256"]


GYM_ERRORS = {
    "case_partial": "Missing rollout results for 2 materialized input rows. "
    "Missing rollout keys: [(2, 1), (2, 3)]",
    "case_missing_task": "Missing rollout keys: [(2, 0), (2, 1), (2, 2), (2, 3)]",
    "case_duplicate": "Duplicate result row for rollout key (0, 0)",
    "case_extra": "Found 1 extra rollout rows. Extra rollout keys: [(99, 0)]",
    "case_missing_index": "`_ng_rollout_index` is missing",
}


@pytest.mark.parametrize("case", sorted(GYM_ERRORS))
def test_failure_cases_exit_like_gym_without_traceback(golden, tmp_path, run_ngrp, case):
    _copy_case(golden, case, tmp_path)
    mode = "partial" if case == "case_extra" else "strict"
    flags = ["--allow-partial"] if mode == "partial" else []
    proc = _profile(run_ngrp, tmp_path, *flags)
    assert proc.returncode == int((golden / case / f"{mode}.exitcode.txt").read_text()) == 1
    assert GYM_ERRORS[case] in proc.stderr
    assert "Traceback" not in proc.stderr
    if case in ("case_partial", "case_missing_task"):
        assert "--allow-partial" in proc.stderr
    if case == "case_duplicate":  # and where the repeat is, which Gym does not say
        rows = [orjson.loads(line) for line in (tmp_path / PAIR[1]).read_bytes().splitlines()]
        at = [i for i, r in enumerate(rows, 1) if (r["_ng_task_index"], r["_ng_rollout_index"]) == (0, 0)]
        repeat = at[1]
        assert f"repeated at {PAIR[1]}:{repeat}" in proc.stderr
    assert not (tmp_path / "rollouts_reward_profiling.jsonl").exists()


def test_doc_bug_wrong_key_is_a_usage_error_like_gym(golden, tmp_path, run_ngrp):
    _copy_case(golden, "case_doc_bug", tmp_path)
    proc = run_ngrp(
        "profile", f"+input_jsonl_fpath={PAIR[0]}", f"+rollouts_jsonl_fpath={PAIR[1]}", cwd=tmp_path
    )
    assert proc.returncode == int((golden / "case_doc_bug" / "wrong_key.exitcode.txt").read_text()) == 2
    assert "+input_jsonl_fpath" in proc.stderr and "Traceback" not in proc.stderr


def test_gym_hydra_keys_are_accepted(golden, tmp_path, run_ngrp):
    _copy_case(golden, "case_complete", tmp_path)
    proc = run_ngrp(
        "profile",
        f"+materialized_inputs_jsonl_fpath={PAIR[0]}",
        f"+rollouts_jsonl_fpath={PAIR[1]}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        compare_outputs(
            tmp_path / "rollouts.jsonl", golden / "case_complete" / "rollouts.jsonl", allow_extras=True
        )
        == []
    )


def test_blank_line_is_skipped_with_a_warning(golden, tmp_path, run_ngrp):
    """Deliberate deviation: Gym exits 1 on a trailing blank line; we skip it, say so, and profile."""
    _copy_case(golden, "case_blank_line", tmp_path)
    assert (golden / "case_blank_line" / "strict.exitcode.txt").read_text().strip() == "1"
    proc = _profile(run_ngrp, tmp_path, "--gym-only")
    assert proc.returncode == 0, proc.stderr
    assert "blank line" in proc.stderr and "line 13" in proc.stderr
    assert compare_outputs(tmp_path / "rollouts.jsonl", golden / "case_complete" / "rollouts.jsonl") == []


def test_the_byte_check_sets_aside_only_ci_numbers_when_scipy_differs(golden, tmp_path):
    """Where the installed scipy's t quantiles are not Gym's, only the ci_* numbers may differ: a 2e-11 move
    of a ci value passes, the same move of a mean or a reformatted file still fails."""
    from profile_compare import same_bytes

    gym = golden / "case_complete" / "rollouts_agent_metrics.json"
    text = gym.read_text()
    data = json.loads(text)
    ci_key = next(k for k in data[0] if k.startswith("ci_"))
    mean_key = next(k for k in data[0] if k.startswith("mean/"))

    def moved(key: str) -> Path:
        value = data[0][key]
        out = tmp_path / f"{key.replace('/', '_')}.json"
        token = f'"{key}":{json.dumps(value)}'  # Gym writes compact JSON
        assert text.count(token) == 1
        out.write_text(text.replace(token, f'"{key}":{json.dumps(value * (1 + 2e-11))}'))
        assert out.read_text() != text
        return out

    assert same_bytes(gym, gym, exact_t=True) and same_bytes(gym, gym, exact_t=False)
    assert same_bytes(moved(ci_key), gym, exact_t=False) and not same_bytes(moved(ci_key), gym, exact_t=True)
    assert not same_bytes(moved(mean_key), gym, exact_t=False)
    reformatted = tmp_path / "indent.json"
    reformatted.write_text(json.dumps(data, indent=4))
    assert not same_bytes(reformatted, gym, exact_t=False)
