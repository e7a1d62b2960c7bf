"""`ngrp reverify --verify-url` against a real NeMo Gym 0.7.0 resources server's /verify (string_match,
started by the Gym-stack fixture). Needs NGRP_GYM_VENV and NGRP_VLLM_VENV (tests/gym_stack_fixture.py)."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gym, pytest.mark.vllm, pytest.mark.slow]


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def resources_url(head_url: str) -> str:
    with urllib.request.urlopen(head_url + "/server_instances", timeout=10) as reply:
        servers = json.loads(reply.read())
    found = [s["url"] for s in servers if s.get("process_name") == "string_match" and s.get("url")]
    assert found, f"no string_match resources server in {servers}"
    return found[0]


def test_reverify_with_a_gym_resources_server(gym_stack, golden, tmp_path, run_ngrp):
    stack = golden.parent / "gym-stack"
    shutil.copy(stack / "rollouts_materialized_inputs.jsonl", tmp_path)
    stored = rows(stack / "rollouts_2rows.jsonl")  # real rows from this stack: garbage text, reward 0
    fixed = json.loads(json.dumps(stored[1]))
    fixed["response"]["output"][0]["content"][0]["text"] = "The capital is \\boxed{Paris}."
    (tmp_path / "rollouts.jsonl").write_text(json.dumps(stored[0]) + "\n" + json.dumps(fixed) + "\n")
    url = resources_url(gym_stack.head_url) + "/verify"
    proc = run_ngrp(
        "reverify",
        "--rollouts",
        "rollouts.jsonl",
        "--output",
        "rescored.jsonl",
        "--inputs",
        "rollouts_materialized_inputs.jsonl",
        "--verify-url",
        url,
        "--concurrency",
        "2",
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["changes"]["increased"] == 1 and result["changes"]["unchanged"] == 1
    out = {r["_ng_rollout_index"]: r for r in rows(tmp_path / "rescored.jsonl")}
    assert out[1]["reward"] == 1.0 and out[1]["extracted_answer"] == "Paris"  # Gym's verifier fields
    assert out[0]["reward"] == 0.0 and out[0]["ngrp/previous_reward"] == 0.0
    assert out[1]["_ng_environment_server"] == stored[1]["_ng_environment_server"]  # everything else kept
    assert out[0]["response"] == stored[0]["response"]
