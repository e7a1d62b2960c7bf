"""The real NeMo Gym stack fixture: it starts, answers `/run` as the reference says, and stops cleanly."""

from __future__ import annotations

import json
import urllib.request

import pytest

pytestmark = [pytest.mark.gym, pytest.mark.vllm]


def post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def test_run_returns_a_verify_response(gym_stack, golden):
    row = json.loads(
        (golden.parent / "gym-stack" / "rollouts_materialized_inputs.jsonl").read_text().splitlines()[0]
    )
    result = post_json(gym_stack.env_run_url, row)
    assert {"responses_create_params", "response", "reward", "mask_sample", "expected_answer"} <= set(result)
    assert result["response"]["usage"]["output_tokens"] > 0 and isinstance(result["reward"], float)
    # The identity stamps are the collector's job: the server does not echo them.
    assert "_ng_task_index" not in result
    print(f"gym stack ready in {gym_stack.startup_seconds:.1f} s")
