"""`ngrp collect` against a real vLLM server on CPU: end to end, faults, kill -9 and resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from cli_helpers import ngrp_process as ngrp
from http_helpers import serve_app
from profile_compare import gym_profile

from ngrp_lib.artifacts import jsonl, schemas

pytestmark = pytest.mark.vllm


def write_tasks(path: Path, n: int, max_tokens: int = 8) -> Path:
    rows = [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": f"What is {i}+{i}? Box it."}],
                "max_output_tokens": max_tokens,
                "temperature": 1.0,
            },
            "expected_answer": str(2 * i),
            "difficulty": "easy" if i % 2 else "hard",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def collect_args(tasks, out, base_url, *extra):
    return [
        "collect",
        "--input",
        tasks,
        "--output",
        out,
        "--base-url",
        base_url,
        "--model",
        "tiny",
        "--verifier",
        "math",
        "--api",
        "chat",
        *extra,
    ]


def collect_endpoints_args(tasks, out, endpoints, *extra):
    """`ngrp collect` against an endpoints file (model from the file) with the math verifier."""
    return ["collect", "--input", tasks, "--output", out, "--endpoints", endpoints, "--verifier", "math",
            *extra]  # fmt: skip


def keys_of(path: Path) -> Counter:
    return Counter((r.data["_ng_task_index"], r.data["_ng_rollout_index"]) for r in jsonl.iter_rows(path))


def assert_exactly_once(out: Path, tasks: int, repeats: int) -> None:
    keys = keys_of(out)
    assert set(keys) == {(t, r) for t in range(tasks) for r in range(repeats)}
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]


def validate_rows(path: Path, schema: str) -> int:
    validator = schemas.validator(schema)
    count = 0
    for row in jsonl.iter_rows(path):
        validator.validate(row.data)
        count += 1
    return count


def test_chat_end_to_end_with_endpoints_file_and_token_ids(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(json.dumps({"endpoints": [{"base_url": vllm_server.base_url, "model": "tiny"}]}))
    out = tmp_path / "run" / "rollouts.jsonl"
    proc = ngrp(
        *collect_endpoints_args(tasks, out, endpoints, "--num-repeats", "3", "--model", "tiny"),
        "--api",
        "chat",
        "--seed-per-repeat",
        "--return-token-ids",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["expected"], summary["completed"], summary["failed"]) == (12, 12, 0)
    assert_exactly_once(out, 4, 3)
    assert validate_rows(out, "rollout") == 12
    assert validate_rows(tmp_path / "run" / "rollouts_materialized_inputs.jsonl", "materialized_input") == 12
    schemas.validator("run_manifest").validate(
        json.loads((tmp_path / "run" / "rollouts_run_manifest.json").read_text())
    )
    total_tokens = 0
    for row in (r.data for r in jsonl.iter_rows(out)):
        usage, item = row["response"]["usage"], row["response"]["output"][-1]
        assert (
            len(item["generation_token_ids"]) == len(item["generation_log_probs"]) == usage["output_tokens"]
        )
        assert len(item["prompt_token_ids"]) == usage["input_tokens"] > 0
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert (row["response"]["status"] == "incomplete") == (usage["output_tokens"] == 8)
        assert row["reward"] == float(row["is_correct"])  # the verifier's two fields agree
        assert row["agent_ref"] == {"name": "tiny"} and "difficulty" in row
        total_tokens += usage["output_tokens"]
    assert summary["output_tokens"] == total_tokens
    # Same seed, same prompt: vLLM's seeded sampling reproduces the tokens (a second run, same settings).
    again = tmp_path / "again" / "rollouts.jsonl"
    proc = ngrp(
        *collect_endpoints_args(tasks, again, endpoints, "--num-repeats", "3"),
        "--seed-per-repeat",
        "--return-token-ids",
    )
    assert proc.returncode == 0, proc.stderr

    def tokens(path):
        rows = (r.data for r in jsonl.iter_rows(path))
        return {
            (r["_ng_task_index"], r["_ng_rollout_index"]): r["response"]["output"][-1]["generation_token_ids"]
            for r in rows
        }

    assert tokens(out) == tokens(again)


def test_responses_api_with_a_user_verifier(vllm_server, tmp_path):
    (tmp_path / "my_verifier.py").write_text(
        "def score(row, response):\n"
        "    items = [i for i in response['output'] if i['type'] == 'message']\n"
        "    text = ''.join(p['text'] for i in items for p in i['content'])\n"
        "    return {'reward': len(text) % 2, 'text_len': len(text)}\n"
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "rollouts.jsonl"
    base = vllm_server.base_url.removesuffix("/v1")  # the /v1 suffix is optional
    proc = ngrp(
        "collect",
        "--input",
        tasks,
        "--output",
        out,
        "--num-repeats",
        "2",
        "--base-url",
        base,
        "--model",
        "tiny",
        "--api",
        "responses",
        "--verifier-fn",
        "my_verifier:score",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert_exactly_once(out, 3, 2)
    for row in (r.data for r in jsonl.iter_rows(out)):
        text = "".join(
            p["text"] for i in row["response"]["output"] if i["type"] == "message" for p in i["content"]
        )
        assert (row["reward"], row["text_len"]) == (len(text) % 2, len(text))
        assert row["response"]["object"] == "response" and row["response"]["usage"]["output_tokens"] > 0


def test_a_verifier_value_json_cannot_hold_is_a_recorded_failure(vllm_server, tmp_path):
    """A user verifier returning a Decimal (or an int past 64 bits) cannot be written as JSON: the attempt
    is recorded as verify_failed, the run goes on, and --resume does not crash on it either."""
    (tmp_path / "odd_verifier.py").write_text(
        "from decimal import Decimal\n"
        "def score(row, response):\n"
        "    return {'reward': 1.0, 'weight': Decimal('0.5') if row['_ng_task_index'] == 0 else 0.5}\n"
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "rollouts.jsonl"
    args = ["collect", "--input", tasks, "--output", out, "--base-url", vllm_server.base_url,
            "--model", "tiny", "--verifier-fn", "odd_verifier:score", "--max-attempts", "1"]  # fmt: skip
    for extra in ([], ["--resume"]):
        proc = ngrp(*args, *extra, cwd=tmp_path)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    rows = [r.data for r in jsonl.iter_rows(out)]
    assert [(r["_ng_task_index"], r["weight"]) for r in rows] == [(1, 0.5)]
    failures = [r.data for r in jsonl.iter_rows(tmp_path / "rollouts_failures.jsonl")]
    assert [(f["_ng_task_index"], f["_ng_failure_class"]) for f in failures] == [(0, "verify_failed")]
    assert "JSON" in failures[0]["_ng_failure_message"]


def test_resume_over_a_duplicated_row_is_not_called_complete(vllm_server, tmp_path):
    """The collector never writes a key twice; a row duplicated by hand (or by concatenation) would make
    the profiler refuse the run, so --resume must not report it complete."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "rollouts.jsonl"
    assert ngrp(*collect_args(tasks, out, vllm_server.base_url)).returncode == 0
    out.write_bytes(out.read_bytes() + out.read_bytes().splitlines(keepends=True)[0])
    proc = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--resume", "--json"))
    assert proc.returncode == 1 and "repeat a key" in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["duplicates_found"] == 1 and summary["missing"] == 0 and summary["complete"] is False


@pytest.mark.gym
def test_gym_eval_profile_reads_our_rollouts(vllm_server, tmp_path):
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv or not (Path(venv) / "bin" / "gym").exists():
        pytest.skip("no NeMo Gym venv: set NGRP_GYM_VENV")
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "rollouts.jsonl"
    assert ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4")).returncode == 0
    proc = gym_profile(Path(venv) / "bin" / "gym", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    profile = [json.loads(x) for x in (tmp_path / "rollouts_reward_profiling.jsonl").read_text().splitlines()]
    assert [(p["_ng_task_index"], p["num_rollouts"]) for p in profile] == [(0, 4), (1, 4), (2, 4)]
    rewards = {}
    for row in (r.data for r in jsonl.iter_rows(out)):
        rewards.setdefault(row["_ng_task_index"], []).append(row["reward"])
    for p in profile:
        assert p["mean/reward"] == pytest.approx(sum(rewards[p["_ng_task_index"]]) / 4)


@pytest.mark.slow  # starts a private server (about 15-50 s) so it can kill it
def test_server_killed_mid_run_then_resume_on_another_server(vllm_server_factory, vllm_server, tmp_path):
    private = vllm_server_factory()
    tasks = write_tasks(tmp_path / "tasks.jsonl", 30)
    out = tmp_path / "rollouts.jsonl"
    args = collect_args(
        tasks,
        out,
        private.base_url,
        "--num-repeats",
        "4",
        "--concurrency",
        "2",
        "--retry-base-delay",
        "0.05",
        "--max-retries",
        "1",
        "--json",
    )
    collector = subprocess.Popen(
        [*ENTRY, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(out.read_bytes().splitlines()) < 10):
        time.sleep(0.05)
    private.kill()
    stdout, stderr = collector.communicate(timeout=120)
    assert collector.returncode == 1, stderr
    summary = json.loads(stdout)
    assert 10 <= summary["completed"] < 120 and summary["stopped_early"], summary
    failures = list(jsonl.iter_rows(tmp_path / "rollouts_failures.jsonl"))
    assert failures and {f.data["_ng_failure_class"] for f in failures} <= {"agent_request_failed", "timeout"}
    # A different server (new port): servers are not part of the run's identity, so resume is allowed.
    # Runtime options (concurrency here) may change on resume too.
    resume = [a if a != private.base_url else vllm_server.base_url for a in args]
    proc = ngrp(*resume, "--resume", "--concurrency", "8")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped_completed"] == summary["completed"]
    assert_exactly_once(out, 30, 4)
    failed_keys = {(f.data["_ng_task_index"], f.data["_ng_rollout_index"]) for f in failures}
    retried = [
        r.data
        for r in jsonl.iter_rows(out)
        if (r.data["_ng_task_index"], r.data["_ng_rollout_index"]) in failed_keys
    ]
    assert retried and all(r["_ng_attempt_index"] >= 1 for r in retried)


def _rows_in(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_kill_9_at_random_points_then_resume_exactly_once(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 30)
    out = tmp_path / "rollouts.jsonl"
    base = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "4")
    rng = random.Random(7)
    killed_mid_run = 0
    for round_ in range(6):
        extra = ["--resume"] if round_ else []
        proc = subprocess.Popen(
            [*ENTRY, *map(str, base + extra)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Odd rounds: kill at a random moment (often while starting up); even rounds: after a random
        # number of new rows, so the kill lands mid-stream (possibly mid-write).
        before, target = _rows_in(out), rng.randint(1, 25)
        deadline = time.monotonic() + (rng.uniform(0.05, 1.0) if round_ % 2 else 60)
        while time.monotonic() < deadline and _rows_in(out) < before + target and proc.poll() is None:
            time.sleep(rng.uniform(0, 0.02))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed_mid_run += _rows_in(out) > before
    final = ngrp(*base, "--resume", "--json")
    assert final.returncode == 0, final.stderr
    assert_exactly_once(out, 30, 4)
    assert killed_mid_run >= 2
    assert json.loads(final.stdout)["completed"] == 120


@pytest.fixture
def verify_server():
    """A minimal resources-server `/verify` (the verifier side only; the model is the real vLLM)."""
    from aiohttp import web

    seen: list[dict] = []

    async def verify(request):
        body = await request.json()
        seen.append(body)
        text = "".join(
            p["text"] for i in body["response"]["output"] if i["type"] == "message" for p in i["content"]
        )
        return web.json_response({**body, "reward": float(len(text) > 3), "judge_note": "len>3"})

    app = web.Application()
    app.router.add_post("/verify", verify)
    with serve_app(app) as url:
        yield url + "/verify", seen


def test_verify_url_and_api_key_never_written(vllm_server, verify_server, tmp_path):
    url, seen = verify_server
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "rollouts.jsonl"
    secret = "sk-test-never-write-me-123"
    env = {**os.environ, "MY_KEY": secret}
    proc = ngrp(
        "collect",
        "--input",
        tasks,
        "--output",
        out,
        "--num-repeats",
        "2",
        "--base-url",
        vllm_server.base_url,
        "--model",
        "tiny",
        "--verify-url",
        url,
        "--api-key-env",
        "MY_KEY",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(seen) == 4 and all("response" in body and "expected_answer" in body for body in seen)
    for row in (r.data for r in jsonl.iter_rows(out)):
        text = "".join(
            p["text"] for i in row["response"]["output"] if i["type"] == "message" for p in i["content"]
        )
        assert row["reward"] == float(len(text) > 3) and row["judge_note"] == "len>3"
    leaked = [p.name for p in tmp_path.iterdir() if p.is_file() and secret in p.read_text(errors="replace")]
    assert not leaked and secret not in proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "rollouts_run_manifest.json").read_text())
    assert manifest["options"]["api_key_env"] == "MY_KEY"


def test_bad_request_is_not_retried_and_records_gym_failure_fields(vllm_server, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    too_long = {"input": "hi", "max_output_tokens": 100000}  # beyond --max-model-len: vLLM answers 400
    tasks.write_text(json.dumps({"responses_create_params": too_long, "expected_answer": "1"}) + "\n")
    out = tmp_path / "rollouts.jsonl"
    # (the pre-flight check would refuse this row before sending it: test_collect_first_run.py)
    proc = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--json", "--skip-preflight"))
    assert proc.returncode == 1 and json.loads(proc.stdout)["failures_by_class"] == {"agent_run_error": 1}
    (failure,) = [r.data for r in jsonl.iter_rows(tmp_path / "rollouts_failures.jsonl")]
    assert failure["_ng_failure_http_status"] == 400 and failure["_ngrp_retries"] == 0
    assert 0 < len(failure["_ng_failure_response_body"]) <= 2000 and "reward" not in failure
    schemas.validator("failure").validate(failure)


@pytest.fixture
def flaky_proxy(vllm_server):
    """A pass-through proxy in front of the real vLLM that answers 503 to every other request."""
    import aiohttp
    from aiohttp import web

    calls = {"n": 0, "refused": 0}

    async def forward(request):
        calls["n"] += 1
        if calls["n"] % 2:
            calls["refused"] += 1
            return web.Response(status=503, text="overloaded, try again")
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                vllm_server.base_url + "/chat/completions",
                data=await request.read(),
                headers={"content-type": "application/json"},
            ) as reply,
        ):
            return web.Response(status=reply.status, body=await reply.read(), content_type="application/json")

    async def models(request):  # the pre-flight check's GET /v1/models passes through
        async with aiohttp.ClientSession() as session, session.get(vllm_server.base_url + "/models") as reply:
            return web.Response(status=reply.status, body=await reply.read(), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", forward)
    app.router.add_get("/v1/models", models)
    with serve_app(app) as url:
        yield url + "/v1", calls


def test_503_is_retried_with_backoff_until_it_succeeds(flaky_proxy, tmp_path):
    url, calls = flaky_proxy
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    out = tmp_path / "rollouts.jsonl"
    proc = ngrp(
        *collect_args(
            tasks,
            out,
            url,
            "--num-repeats",
            "2",
            "--concurrency",  # sequences in flight: one request of n=2 at a time
            "2",
            "--max-retries",
            "2",
            "--retry-base-delay",
            "0.01",
            "--json",
        )
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["completed"] == 6 and summary["failed"] == 0
    # one request per task (2 repeats as n=2), each: one 503, then a success
    assert summary["cost"]["requests"] == 3
    assert calls["refused"] == 3 and calls["n"] == 6
    assert_exactly_once(out, 3, 2)


def test_several_endpoints_keep_each_task_on_one_server(vllm_server, tmp_path):
    # Two spellings of the same real server stand in for two servers; routing is by task index.
    second = vllm_server.base_url.replace("127.0.0.1", "localhost")
    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(
        json.dumps(
            {
                "endpoints": [
                    {"base_url": vllm_server.base_url, "model": "tiny"},
                    {"base_url": second, "model": "tiny"},
                ]
            }
        )
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
    out = tmp_path / "rollouts.jsonl"
    proc = ngrp(
        *collect_endpoints_args(tasks, out, endpoints, "--num-repeats", "3"),
    )
    assert proc.returncode == 0, proc.stderr
    servers: dict[int, set] = {}
    for row in (r.data for r in jsonl.iter_rows(out)):
        servers.setdefault(row["_ng_task_index"], set()).add(row["_ngrp_server"])
    assert all(len(s) == 1 for s in servers.values())
    assert {t: s.pop() for t, s in servers.items()} == {
        t: (vllm_server.base_url, second)[t % 2] for t in range(6)
    }
    manifest = json.loads((tmp_path / "rollouts_run_manifest.json").read_text())
    assert [s["url"] for s in manifest["servers"]] == [vllm_server.base_url, second]
