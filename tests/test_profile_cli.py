"""`ngrp profile` wiring: options, refusals, exit codes, --json, --merge, extras with hand-worked values,
and schema validity of every output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import orjson
import pytest
from cli_helpers import ENTRY
from profile_compare import compare_outputs, load

REPO = Path(__file__).resolve().parents[1]
PAIR = ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl")


def _case(golden: Path, case: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in PAIR:
        shutil.copy(golden / case / name, dest / name)
    return dest


def _profile(run_ngrp, cwd: Path, *extra: str):
    return run_ngrp("profile", "--inputs", PAIR[0], "--rollouts", PAIR[1], *extra, cwd=cwd)


def _schema(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((REPO / "schemas" / f"{name}.schema.json").read_text()))


def test_refuses_to_overwrite_before_doing_work(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)
    (tmp_path / "rollouts_profile_summary.json").write_text("{}")
    proc = _profile(run_ngrp, tmp_path)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert not (tmp_path / "rollouts_reward_profiling.jsonl").exists()
    assert (tmp_path / "rollouts_profile_summary.json").read_text() == "{}"
    assert _profile(run_ngrp, tmp_path, "--overwrite").returncode == 0


def test_output_dir_json_and_schemas(golden, tmp_path, run_ngrp):
    _case(golden, "case_masked", tmp_path)
    proc = _profile(run_ngrp, tmp_path, "--output-dir", "out", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    _schema("profile_result").validate(result)
    assert result["counts"] == {
        "expected": 12, "completed": 12, "missing": 0, "extra": 0,
        "masked": 1, "measured": 11, "null_reward": 1, "non_numeric_reward": 0, "unhealthy_excluded": 0,
    }  # fmt: skip
    assert "null or absent reward" in proc.stderr  # the loud warning Gym never gives
    out = tmp_path / "out"
    for row in load(out / "rollouts_reward_profiling.jsonl"):
        _schema("reward_profile").validate(row)
    _schema("agent_metrics").validate(load(out / "rollouts_agent_metrics.json"))
    _schema("repeat_level_metrics").validate(load(out / "rollouts_repeat_level_metrics.json"))
    summary = load(out / "rollouts_profile_summary.json")
    _schema("profile_summary").validate(summary)
    assert (
        summary["agents"][0]["counts"]["masked"] == 1 and summary["agents"][0]["counts"]["null_reward"] == 1
    )
    assert not (tmp_path / "rollouts_reward_profiling.jsonl").exists()


def test_extras_hand_computed(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)
    assert _profile(run_ngrp, tmp_path).returncode == 0
    rows = load(tmp_path / "rollouts_reward_profiling.jsonl")
    # task 0 rewards [1, 0, 1, 1]: c=3 of n=4; pass@2 = 1 - C(1,2)/C(4,2) = 1
    assert (
        rows[0]["ngrp/pass_rate"] == 0.75 and rows[0]["ngrp/pass@1"] == 0.75 and rows[0]["ngrp/pass@2"] == 1.0
    )
    # task 1 rewards [.25, .5, .75, 1] at threshold 1.0: c=1; pass@2 = 1 - C(3,2)/C(4,2) = 0.5
    assert rows[1]["ngrp/num_passed"] == 1 and rows[1]["ngrp/pass@2"] == pytest.approx(0.5, rel=1e-12)
    # task 2 rewards [0, 0, 1, 0]: pass@4 = 1
    assert rows[2]["ngrp/pass@4"] == 1.0 and list(k for k in rows[2] if "pass@" in k) == [
        "ngrp/pass@1", "ngrp/pass@2", "ngrp/pass@4"
    ]  # fmt: skip
    other = tmp_path / "t"
    _case(golden, "case_complete", other)
    assert _profile(run_ngrp, other, "--pass-threshold", "0.5").returncode == 0
    rows = load(other / "rollouts_reward_profiling.jsonl")
    assert rows[1]["ngrp/num_passed"] == 3 and rows[1]["ngrp/pass_threshold"] == 0.5


def test_null_reward_policies(golden, tmp_path, run_ngrp):
    _case(golden, "case_masked", tmp_path / "e")
    proc = _profile(run_ngrp, tmp_path / "e", "--null-reward", "error")
    assert proc.returncode == 1 and "(1, 1)" in proc.stderr
    _case(golden, "case_masked", tmp_path / "z")
    assert _profile(run_ngrp, tmp_path / "z", "--null-reward", "zero").returncode == 0
    task1 = load(tmp_path / "z" / "rollouts_reward_profiling.jsonl")[1]
    assert task1["mean/reward"] == (0.25 + 0.0 + 0.75 + 1.0) / 4  # Gym's exclude gives 2/3
    assert task1["rollout_infos"][1]["reward"] is None  # the rollout as written is not rewritten


def test_task_weighted_mean_on_partial_data(golden, tmp_path, run_ngrp):
    _case(golden, "case_partial", tmp_path)
    proc = _profile(run_ngrp, tmp_path, "+allow_partial_rollouts=true")
    assert proc.returncode == 0, proc.stderr
    assert "rollout" in proc.stderr and "task_weighted" in proc.stderr
    agent = load(tmp_path / "rollouts_profile_summary.json")["agents"][0]
    assert agent["mean_reward_rollout_weighted"] == pytest.approx(6.5 / 10)  # (3 + 2.5 + 1) / 10 rollouts
    assert agent["mean_reward_task_weighted"] == pytest.approx((0.75 + 0.625 + 0.5) / 3)
    assert agent["tasks"] == {"total": 3, "complete": 2, "partial": 1, "dropped": 0}


def test_usage_errors(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)
    assert _profile(run_ngrp, tmp_path, "stray.jsonl").returncode == 2
    assert run_ngrp("profile", "--rollouts", PAIR[1], cwd=tmp_path).returncode == 2
    assert _profile(run_ngrp, tmp_path, "++allow_partial_rollouts=maybe").returncode == 2
    missing = run_ngrp("profile", "--inputs", "nope.jsonl", "--rollouts", PAIR[1], cwd=tmp_path)
    assert missing.returncode == 3 and "nope.jsonl" in missing.stderr


def test_malformed_line_is_exit_3_with_location(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)
    with open(tmp_path / PAIR[1], "ab") as handle:
        handle.write(b'{"broken": \n')
    proc = _profile(run_ngrp, tmp_path)
    assert proc.returncode == 3 and "rollouts.jsonl:13" in proc.stderr and "Traceback" not in proc.stderr


def _shard(golden: Path, case: str, tasks: set[int], folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in PAIR:
        lines = (golden / case / name).read_bytes().splitlines(keepends=True)
        keep = [line for line in lines if orjson.loads(line)["_ng_task_index"] in tasks]
        (folder / name).write_bytes(b"".join(keep))


def test_merge_cli_equals_gym_single_pass(golden, tmp_path, run_ngrp):
    for name, tasks in (("s0", {0, 1}), ("s1", {2})):
        _shard(golden, "case_masked", tasks, tmp_path / name)
        assert _profile(run_ngrp, tmp_path / name, "--save-state").returncode == 0
    proc = run_ngrp(
        "profile", "--merge", "--rollouts", "all/rollouts.jsonl",
        "s0/rollouts_reward_profiling.jsonl", "s1/rollouts_profile_state.jsonl", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        compare_outputs(
            tmp_path / "all" / "rollouts.jsonl", golden / "case_masked" / "rollouts.jsonl", allow_extras=True
        )
        == []
    )
    assert (
        proc.stdout.splitlines()[:4]
        == (golden / "case_masked" / "strict.stdout.txt").read_text().splitlines()[:4]
    )


def test_merge_is_strict_about_the_union(golden, tmp_path, run_ngrp):
    for name, tasks in (("s0", {0, 1}), ("s1", {2})):
        _shard(golden, "case_partial", tasks, tmp_path / name)
        _profile(run_ngrp, tmp_path / name, "--save-state", "--allow-partial")
    shards = ["s0/rollouts_reward_profiling.jsonl", "s1/rollouts_reward_profiling.jsonl"]
    strict = run_ngrp("profile", "--merge", "--rollouts", "m/rollouts.jsonl", *shards, cwd=tmp_path)
    assert strict.returncode == 1 and "(2, 1), (2, 3)" in strict.stderr
    ok = run_ngrp(
        "profile", "--merge", "--allow-partial", "--rollouts", "m/rollouts.jsonl", *shards, cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    gym = golden / "case_partial" / "partial_run" / "rollouts.jsonl"
    assert compare_outputs(tmp_path / "m" / "rollouts.jsonl", gym, allow_extras=True) == []
    dup = run_ngrp(
        "profile", "--merge", "--allow-partial", "--rollouts", "d/r.jsonl", shards[0], shards[0], cwd=tmp_path
    )
    assert (
        dup.returncode == 2 and f"{shards[0]} and {shards[0]} overlap" in dup.stderr
    )  # the same shard twice


def test_a_mistyped_option_is_named_as_one(golden, tmp_path, run_ngrp):
    """Gym's tokens pass through as arguments, so click cannot reject a typo itself; we must."""
    _case(golden, "case_complete", tmp_path)
    proc = _profile(run_ngrp, tmp_path, "--allow-partial-rollouts")
    assert proc.returncode == 2
    assert "no such option: --allow-partial-rollouts" in proc.stderr and "--merge" not in proc.stderr
    assert not list(tmp_path.glob("*_reward_profiling.jsonl"))


def _profile_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name not in PAIR}


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_write_error_leaves_all_old_outputs_or_none(golden, tmp_path, overwrite):
    """The four outputs are committed together: a file size limit hit while writing them (disk full
    behaves alike) leaves no new file, no temp file and, with --overwrite, the old set untouched."""
    import resource
    import subprocess

    _case(golden, "case_complete", tmp_path)
    if overwrite:
        for name in ("reward_profiling.jsonl", "agent_metrics.json", "repeat_level_metrics.json"):
            (tmp_path / f"rollouts_{name}").write_text("old\n")
    before = _profile_files(tmp_path)
    cmd = [*ENTRY, "profile", "--inputs", PAIR[0]]
    cmd += ["--rollouts", PAIR[1], *(["--overwrite"] if overwrite else [])]
    limit = 3000  # bytes: smaller than the profile rows file, larger than the inputs read
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )
    assert proc.returncode == 3, proc.stderr
    assert "File too large" in proc.stderr and "Traceback" not in proc.stderr
    assert _profile_files(tmp_path) == before  # nothing new, nothing half-written, no temp file


def test_bad_output_dir_and_threshold_are_usage_errors(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)
    (tmp_path / "afile").write_text("")
    proc = _profile(run_ngrp, tmp_path, "--output-dir", "afile")
    assert proc.returncode == 3 and "is a file, not a folder" in proc.stderr  # an unwritable output
    for value in ("nan", "inf"):
        proc = _profile(run_ngrp, tmp_path, "--pass-threshold", value)
        assert proc.returncode == 2 and "finite" in proc.stderr
    assert not list(tmp_path.glob("*_reward_profiling.jsonl"))


@pytest.mark.parametrize("line", [b'{"x":1}', b'["r", 5]', b'["i", 0, 0, "a"]', b'["s", 0, null, 0, 7]'])
def test_a_broken_state_line_is_named(golden, tmp_path, run_ngrp, line):
    _case(golden, "case_complete", tmp_path)
    assert _profile(run_ngrp, tmp_path, "--save-state").returncode == 0
    state = tmp_path / "rollouts_profile_state.jsonl"
    state.write_bytes(state.read_bytes() + line + b"\n")
    lines = state.read_bytes().count(b"\n")
    proc = run_ngrp("profile", "--merge", "--rollouts", "merged.jsonl", state.name, cwd=tmp_path)
    assert proc.returncode == 3 and f"{state.name}:{lines}" in proc.stderr and "Traceback" not in proc.stderr


def test_an_index_past_int64_is_refused_by_profile_check_and_validate(golden, tmp_path, run_ngrp):
    """Gym's pandas would hold it as uint64 by luck; numpy's int64 cannot: all three commands agree."""
    _case(golden, "case_complete", tmp_path)
    for name in PAIR:
        rows = [orjson.loads(line) for line in (tmp_path / name).read_bytes().splitlines()]
        for row in rows:
            if row["_ng_task_index"] == 1:
                row["_ng_task_index"] = 2**63
        (tmp_path / name).write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    proc = _profile(run_ngrp, tmp_path)
    assert proc.returncode == 1 and "rollouts.jsonl:" in proc.stderr and "2^63 or more" in proc.stderr
    check = run_ngrp("check", "--inputs", PAIR[0], "--rollouts", PAIR[1], cwd=tmp_path)
    assert check.returncode == 1 and "lack a valid" in check.stdout + check.stderr
    valid = run_ngrp("validate", PAIR[1], cwd=tmp_path)
    assert valid.returncode == 1 and "maximum of 9223372036854775807" in valid.stdout


def test_a_string_reward_is_not_zeroed_as_if_null(golden, tmp_path, run_ngrp):
    """ "1.0" (a verifier bug) is left out of the statistics as Gym does, under every --null-reward,
    counted and warned about on its own; --null-reward error refuses it too."""
    for policy in ("exclude", "zero", "error"):
        folder = _case(golden, "case_complete", tmp_path / policy)
        rows = [orjson.loads(line) for line in (folder / PAIR[1]).read_bytes().splitlines()]
        target = next(r for r in rows if (r["_ng_task_index"], r["_ng_rollout_index"]) == (1, 1))
        target["reward"] = "1.0"
        (folder / PAIR[1]).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        proc = _profile(run_ngrp, folder, "--null-reward", policy)
        if policy == "error":
            assert proc.returncode == 1 and "non-numeric" in proc.stderr and "(1, 1)" in proc.stderr
            continue
        assert proc.returncode == 0 and "not a number" in proc.stderr
        summary = load(folder / "rollouts_profile_summary.json")
        assert summary["counts"]["non_numeric_reward"] == 1 and summary["counts"]["null_reward"] == 0
        task1 = load(folder / "rollouts_reward_profiling.jsonl")[1]
        others = [r["reward"] for r in rows if r["_ng_task_index"] == 1 and r["_ng_rollout_index"] != 1]
        assert task1["mean/reward"] == pytest.approx(sum(others) / len(others))  # never 0-filled


def test_fractional_rewards_name_the_pass_threshold_the_extras_used(golden, tmp_path, run_ngrp):
    _case(golden, "case_complete", tmp_path)  # task 1 has rewards 0.25, 0.5, 0.75, 1
    proc = _profile(run_ngrp, tmp_path, "--pass-threshold", "0.5")
    assert proc.returncode == 0 and "not all 0/1" in proc.stderr and "reward >= 0.5" in proc.stderr
    assert any("not all 0/1" in w for w in load(tmp_path / "rollouts_profile_summary.json")["warnings"])
    gym_only = _profile(run_ngrp, tmp_path, "--gym-only", "--overwrite")  # no ngrp/* keys: nothing to warn of
    assert gym_only.returncode == 0 and "not all 0/1" not in gym_only.stderr
