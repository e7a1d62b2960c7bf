"""`ngrp reverify` and `ngrp health` on a run collected from the real vLLM server: re-scored with a different
verifier (nothing sent to the model), profiled both ways and compared; health judges the real rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import ngrp_process as ngrp

pytestmark = pytest.mark.vllm

PARITY = """
def parity(row, response):
    text = "".join(p.get("text", "") for item in response["output"] for p in item.get("content") or [])
    return {"reward": float(len(text) % 2 == 0), "chars": len(text)}
"""


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
def collected(vllm_server, tmp_path) -> Path:
    tasks = [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": f"What is {i}+{i}? Box it."}],
                "max_output_tokens": 12,
                "temperature": 1.0,
            },
            "expected_answer": str(2 * i),
        }
        for i in range(6)
    ]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    proc = ngrp(
        "collect",
        "--input",
        "tasks.jsonl",
        "--output",
        "rollouts.jsonl",
        "--num-repeats",
        "4",
        "--base-url",
        vllm_server.base_url,
        "--model",
        vllm_server.model,
        "--verifier",
        "math",
        "--api",
        "chat",
        "--seed-per-repeat",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "verifiers.py").write_text(PARITY)
    return tmp_path


def _text(row: dict) -> str:
    return "".join(p.get("text", "") for item in row["response"]["output"] for p in item.get("content") or [])


def test_reverify_a_vllm_run_with_another_verifier_then_compare(collected):
    before = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows(collected / "rollouts.jsonl")}
    proc = ngrp(
        "reverify",
        "--rollouts",
        "rollouts.jsonl",
        "--output",
        "parity.jsonl",
        "--verifier-fn",
        "verifiers:parity",
        "--json",
        cwd=collected,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    after = rows(collected / "parity.jsonl")
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in after) == sorted(before)
    up = down = 0
    for row in after:
        old = before[(row["_ng_task_index"], row["_ng_rollout_index"])]
        assert row["response"] == old["response"]  # the stored response, not a new generation
        assert row["ngrp/previous_reward"] == old["reward"]
        assert row["reward"] == float(len(_text(old)) % 2 == 0)
        up += row["reward"] > old["reward"]
        down += row["reward"] < old["reward"]
    assert (result["changes"]["increased"], result["changes"]["decreased"]) == (up, down)
    assert up + down > 0, "the two verifiers agree on every row: nothing was tested"
    # the recipe: profile both, compare; each task's difference is the change of its mean reward
    for name in ("rollouts.jsonl", "parity.jsonl"):
        profiled = ngrp(
            "profile", "--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", name, cwd=collected
        )
        assert profiled.returncode == 0, profiled.stderr
    compared = ngrp(
        "compare", "rollouts_reward_profiling.jsonl", "parity_reward_profiling.jsonl", "--json", cwd=collected
    )
    assert compared.returncode == 0, compared.stderr
    per_task = {t["task"]: t for t in json.loads(compared.stdout)["per_task"]}
    for task in range(6):
        old = [r["reward"] for k, r in before.items() if k[0] == task]
        new = [r["reward"] for r in after if r["_ng_task_index"] == task]
        assert per_task[task]["diff"] == pytest.approx(sum(new) / len(new) - sum(old) / len(old))


def test_health_on_a_vllm_run(collected):
    proc = ngrp(
        "health",
        "--inputs",
        "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        "rollouts.jsonl",
        "--json",
        cwd=collected,
    )
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    capped = sum(1 for r in rows(collected / "rollouts.jsonl") if r["response"]["status"] == "incomplete")
    checks = {c["id"]: c for c in result["checks"]}
    cap_checks = (
        checks["ngrp/truncated_at_token_cap"]["findings"]
        + checks["model_call_runaway_generation"]["findings"]
    )
    assert cap_checks == capped
    assert result["verdicts"]["unhealthy"] >= capped
    assert checks["model_call_missing_token_counts"]["findings"] == 0
    check = json.loads(
        ngrp(
            "check",
            "--inputs",
            "rollouts_materialized_inputs.jsonl",
            "--rollouts",
            "rollouts.jsonl",
            "--json",
            cwd=collected,
        ).stdout
    )
    assert check["counts"]["stopped_at_token_cap"] == capped
