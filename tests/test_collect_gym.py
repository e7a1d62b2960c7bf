"""`ngrp collect --gym-url` against a real NeMo Gym 0.7.0 stack, and profiles checked both ways:
our Gym-mode rows and our direct-mode rows profiled by Gym's own `gym eval profile` give the same numbers
as `ngrp profile`. Needs NGRP_GYM_VENV and NGRP_VLLM_VENV (see tests/gym_stack_fixture.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profile_compare import compare_outputs

pytestmark = [pytest.mark.gym, pytest.mark.vllm, pytest.mark.slow]

AGENT = "string_match_simple_agent"
# A verifier with spread-out rewards (the tiny model never solves string_match, so Gym's rewards are all 0).
SPREAD_VERIFIER = """
def reward(row, response):
    text = "".join(c.get("text", "") for item in response["output"] for c in item.get("content") or [])
    return {"reward": (len(text) % 4) / 3, "chars": len(text)}
"""


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def keyed(path: Path) -> dict:
    return {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows(path)}


def tasks_file(golden: Path, folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = (golden.parent / "gym-stack" / "tasks.jsonl").read_text().splitlines()[:n]
    (folder / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "tasks.jsonl"


def profile_both_ways(gym_stack, run_ngrp, rollouts: Path) -> None:
    """ngrp profile on the run, gym eval profile on a copy: the Gym files must agree."""
    copy = rollouts.parent / "gym-profile"
    copy.mkdir()
    for name in (rollouts.name, rollouts.stem + "_materialized_inputs.jsonl"):
        shutil.copy(rollouts.parent / name, copy / name)
    theirs = gym_stack.gym("eval", "profile", "--inputs", rollouts.stem + "_materialized_inputs.jsonl",
                           "--rollouts", rollouts.name, cwd=copy)  # fmt: skip
    assert theirs.returncode == 0, theirs.stdout[-2000:] + theirs.stderr[-2000:]
    inputs = rollouts.with_name(rollouts.stem + "_materialized_inputs.jsonl")
    ours = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    assert ours.returncode == 0, ours.stderr
    assert compare_outputs(rollouts, copy / rollouts.name, allow_extras=True) == []


def test_gym_mode_writes_what_gym_eval_run_writes(gym_stack, golden, tmp_path, run_ngrp):
    tasks = tasks_file(golden, tmp_path, 4)
    gym = gym_stack.gym("eval", "run", "--no-serve", "--agent", AGENT, "--input", str(tasks),
                        "--output", "gym/rollouts.jsonl", "--num-repeats", "2", "--concurrency", "4",
                        cwd=tmp_path)  # fmt: skip
    assert gym.returncode == 0, gym.stdout[-2000:] + gym.stderr[-2000:]
    ours = run_ngrp("collect", "--input", tasks, "--agent", AGENT, "--num-repeats", "2",
                    "--gym-url", gym_stack.head_url, "--output", tmp_path / "ours" / "rollouts.jsonl",
                    "--concurrency", "4", "--json")  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    summary = json.loads(ours.stdout)
    assert summary["completed"] == summary["expected"] == 8 and summary["failed"] == 0
    assert (tmp_path / "ours" / "rollouts_materialized_inputs.jsonl").read_bytes() == (
        tmp_path / "gym" / "rollouts_materialized_inputs.jsonl"
    ).read_bytes()
    gym_rows, our_rows = (
        keyed(tmp_path / "gym" / "rollouts.jsonl"),
        keyed(tmp_path / "ours" / "rollouts.jsonl"),
    )
    assert set(gym_rows) == set(our_rows) == {(t, r) for t in range(4) for r in range(2)}
    for key, theirs in gym_rows.items():
        mine = our_rows[key]
        assert list(mine) == list(theirs)  # same keys in the same order
        for stamp in (
            "_ng_task_index",
            "_ng_rollout_index",
            "agent_ref",
            "_ng_environment_server",
            "_ng_result_type",
        ):
            assert mine[stamp] == theirs[stamp]
        assert mine["expected_answer"] == theirs["expected_answer"] and isinstance(mine["reward"], float)
        assert mine["responses_create_params"] == theirs["responses_create_params"]
        assert mine["response"]["usage"]["output_tokens"] > 0
    assert (tmp_path / "ours" / "rollouts_failures.jsonl").read_bytes() == b""
    manifest = json.loads((tmp_path / "ours" / "rollouts_run_manifest.json").read_text())
    assert manifest["backend"] == "gym"
    profile_both_ways(gym_stack, run_ngrp, tmp_path / "ours" / "rollouts.jsonl")


def test_direct_mode_rows_profile_the_same_in_gym(gym_stack, golden, tmp_path, run_ngrp):
    tasks = tasks_file(golden, tmp_path, 6)
    (tmp_path / "spread_verifier.py").write_text(SPREAD_VERIFIER)
    ours = run_ngrp("collect", "--input", tasks, "--num-repeats", "3", "--base-url", gym_stack.vllm_base_url,
                    "--model", gym_stack.model, "--verifier-fn", "spread_verifier:reward",
                    "--output", tmp_path / "direct" / "rollouts.jsonl", "--json")  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    rewards = {r["reward"] for r in rows(tmp_path / "direct" / "rollouts.jsonl")}
    assert len(rewards) > 1  # the comparison below is not all zeros
    profile_both_ways(gym_stack, run_ngrp, tmp_path / "direct" / "rollouts.jsonl")


def test_gym_mode_failures_and_resume(gym_stack, golden, tmp_path, run_ngrp):
    source = golden.parent / "gym-stack" / "rollouts_materialized_inputs.jsonl"
    materialized = [json.loads(x) for x in source.read_text().splitlines()][:6]
    del materialized[4]["expected_answer"]  # the verifier needs it: Gym answers HTTP 500
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in materialized))
    out = tmp_path / "run" / "rollouts.jsonl"
    args = ["collect", "--materialized", path, "--gym-url", gym_stack.env_run_url, "--output", out, "--json"]
    first = run_ngrp(*args)
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert summary["completed"] == 5 and summary["failures_by_class"] == {"agent_run_error": 1}
    (failure,) = rows(out.with_name("rollouts_failures.jsonl"))
    bad_key = (materialized[4]["_ng_task_index"], materialized[4]["_ng_rollout_index"])
    assert (failure["_ng_task_index"], failure["_ng_rollout_index"]) == bad_key
    assert (
        failure["_ng_failure_http_status"] == 500
        and "expected_answer" in failure["_ng_failure_response_body"]
    )
    assert "reward" not in failure and "response" not in failure
    # A fixed URL says nothing about which server it is: no environment stamps.
    assert all("_ng_environment_server" not in r for r in rows(out))
    # Interrupt-shaped damage: drop two finished rows and tear the last line, then --resume.
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:3]) + lines[3][:25])
    again = run_ngrp(*args[:-1], "--resume", "--json")
    assert again.returncode == 1
    done = keyed(out)
    assert len(rows(out)) == len(done) == 5 and bad_key not in done  # every good key exactly once
    assert len(rows(out.with_name("rollouts_failures.jsonl"))) == 2  # the bad key's second attempt
    dead_args = ["collect", "--materialized", path, "--gym-url", "http://127.0.0.1:9/run", "--output",
                 tmp_path / "dead" / "rollouts.jsonl", "--max-retries", "0", "--json"]  # fmt: skip
    refused = run_ngrp(*dead_args)  # the pre-flight check: nothing sent, nothing written
    assert refused.returncode == 2 and not (tmp_path / "dead").exists()  # the folder it made is gone
    assert (
        "connection refused at http://127.0.0.1:9/: is the Gym stack running? `gym env status`"
        in refused.stderr
    )
    dead = run_ngrp(*dead_args, "--skip-preflight")
    assert dead.returncode == 1
    classes = {r["_ng_failure_class"] for r in rows(tmp_path / "dead" / "rollouts_failures.jsonl")}
    assert classes == {"agent_request_failed"}
