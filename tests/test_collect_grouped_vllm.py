"""One request per task group and the sampling options, against the real vLLM server on CPU: every key
exactly once (also through kill -9 and resume), each row's own token counts, seeds never sent with n > 1
(the server stays healthy), and a --temperature 0 run giving the same answer on every repeat."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from profile_compare import PROFILE_ARGS, compare_outputs, gym_profile
from test_collect_vllm import _rows_in, assert_exactly_once, collect_args, ngrp, validate_rows, write_tasks

from ngrp_lib.artifacts import jsonl, schemas

pytestmark = pytest.mark.vllm


def rows_of(path: Path) -> list[dict]:
    return [r.data for r in jsonl.iter_rows(path)]


def server_healthy(server) -> bool:
    """/health answers 200 and a plain chat request still completes (a dead engine answers 500)."""
    root = server.base_url.removesuffix("/v1")
    with urllib.request.urlopen(root + "/health", timeout=10) as reply:
        if reply.status != 200:
            return False
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.status == 200


def test_grouped_run_each_key_once_with_its_own_tokens_and_cost(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 5, max_tokens=12)
    out = tmp_path / "rollouts.jsonl"
    args = collect_args(
        tasks, out, vllm_server.base_url, "--num-repeats", "6", "--return-token-ids", "--json"
    )
    done = ngrp(*args)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    schemas.validator("collect_result").validate(summary)
    assert summary["cost"]["requests"] == 5  # one request per task
    assert summary["grouping"]["grouped"] and summary["grouping"]["alone"] == {}
    assert_exactly_once(out, 5, 6)
    assert validate_rows(out, "rollout") == 30
    rows = rows_of(out)
    for row in rows:
        usage, item = row["response"]["usage"], row["response"]["output"][-1]
        assert usage["output_tokens"] == len(item["generation_token_ids"])  # the choice's own count
        assert usage["input_tokens"] == len(item["prompt_token_ids"])  # the prompt this rollout saw
        assert row["_ngrp_shared_prefill"]["rows"] == 6
        # a choice below the cap stopped by itself; one at the cap stopped for length, or its 12th token was
        # the end of its answer (vLLM then says "stop"): its status is the choice's own finish reason
        if usage["output_tokens"] < 12:
            assert row["response"]["status"] == "completed"
        if row["response"]["status"] == "incomplete":
            assert usage["output_tokens"] == 12
    # each choice keeps its own finish: 12 tokens of the tiny model rarely end an answer, so some rows stop
    # for length (incomplete) while they share one request
    assert any(row["response"]["status"] == "incomplete" for row in rows)
    by_request: dict[str, list[dict]] = {}
    for row in rows:
        by_request.setdefault(row["_ngrp_shared_prefill"]["request"], []).append(row)
    assert sorted(len(v) for v in by_request.values()) == [6] * 5
    assert all(len({r["_ng_task_index"] for r in v}) == 1 for v in by_request.values())
    # cost: each rollout's prompt (vLLM prefills a grouped request's prompt for each of its n sequences:
    # tests/test_collect_input_units_vllm.py reads it from /metrics), every choice's own completion tokens
    cost = summary["cost"]
    every_prompt = sum(r["response"]["usage"]["input_tokens"] for r in rows)
    assert cost["input_unit"] == "per_rollout" and cost["input_tokens"] == every_prompt
    assert cost["output_tokens"] == sum(r["response"]["usage"]["output_tokens"] for r in rows)
    assert cost["cached_tokens"] is None  # this server does not report it: not a 0
    assert cost["prefix_cache_hit_rate"] is not None  # vLLM 0.32 exports the counters
    # issue 36 #15: one request per rollout: more requests, the same tokens (no prefill saved by grouping)
    single = cost["one_request_per_rollout"]
    assert single == {
        "requests": 30, "extra_requests": 25, "input_tokens": every_prompt,
        "output_tokens": cost["output_tokens"],
    }  # fmt: skip
    longest = max(r["response"]["usage"]["input_tokens"] for r in rows)
    assert longest < 128, longest  # vLLM's CPU block is 128 tokens: no prompt fills one, nothing can hit
    assert cost["prefix_cache_hit_rate"] == 0
    assert cost["prefix_cache_note"] == (
        f"every prompt this invocation sent (at most {longest} tokens) is shorter than one KV-cache block"
        " (128 tokens on the server): only full blocks are cached, so no prompt could hit"
    )
    manifest = json.loads((tmp_path / "rollouts_run_manifest.json").read_text())
    schemas.validator("run_manifest").validate(manifest)
    assert manifest["runs"][-1]["cost"] == cost
    assert server_healthy(vllm_server)


def test_temperature_zero_gives_the_same_answer_on_every_repeat(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4, max_tokens=8)  # the rows ask for temperature 1.0
    out = tmp_path / "rollouts.jsonl"
    extra = ("--num-repeats", "5", "--temperature", "0", "--max-output-tokens", "6", "--set", "top_k=1")
    done = ngrp(*collect_args(tasks, out, vllm_server.base_url, *extra, "--json"))
    assert done.returncode == 0, done.stderr
    grouping = json.loads(done.stdout)["grouping"]  # vLLM refuses n > 1 with greedy sampling (HTTP 400)
    assert list(grouping["alone"].values()) == [20] and "greedy" in next(iter(grouping["alone"]))
    rows = rows_of(out)
    assert all(r["responses_create_params"]["temperature"] == 0 for r in rows)
    assert all(r["responses_create_params"]["max_output_tokens"] == 6 for r in rows)
    texts: dict[int, set[str]] = {}
    for row in rows:
        texts.setdefault(row["_ng_task_index"], set()).add(
            row["response"]["output"][-1]["content"][0]["text"]
        )
    assert sorted(texts) == [0, 1, 2, 3]
    assert all(len(answers) == 1 for answers in texts.values()), texts
    manifest = json.loads((tmp_path / "rollouts_run_manifest.json").read_text())
    assert manifest["sampling"] == {"temperature": 0.0, "max_output_tokens": 6, "top_k": 1}


def test_temperature_one_differs_across_repeats_so_the_zero_test_can_fail(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2, max_tokens=8)
    out = tmp_path / "rollouts.jsonl"
    done = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "6", "--temperature", "1"))
    assert done.returncode == 0, done.stderr
    texts: dict[int, set[str]] = {}
    for row in rows_of(out):
        texts.setdefault(row["_ng_task_index"], set()).add(
            row["response"]["output"][-1]["content"][0]["text"]
        )
    assert all(len(answers) > 1 for answers in texts.values()), texts


def test_per_repeat_seeds_fall_back_and_the_server_stays_healthy(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    out = tmp_path / "rollouts.jsonl"
    args = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--seed-per-repeat", "--json")
    done = ngrp(*args)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["cost"]["requests"] == 16  # one per rollout: never a seed with n > 1
    assert summary["grouping"]["seeded_rows"] == 16
    assert list(summary["grouping"]["alone"].values()) == [16]
    assert "seed" in next(iter(summary["grouping"]["alone"]))
    assert done.stderr.count("one request per rollout for rows with a seed") == 1  # said once
    assert not any("_ngrp_shared_prefill" in r for r in rows_of(out))
    assert_exactly_once(out, 4, 4)
    assert server_healthy(vllm_server)
    # the same seed on every repeat: still sent alone (the rows are equal, but seeded)
    same = tmp_path / "same.jsonl"
    row = json.loads(tasks.read_text().splitlines()[0])
    row["responses_create_params"]["seed"] = 7
    same.write_text(json.dumps(row) + "\n")
    out2 = tmp_path / "same_rollouts.jsonl"
    done = ngrp(*collect_args(same, out2, vllm_server.base_url, "--num-repeats", "4", "--json"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cost"]["requests"] == 4
    assert server_healthy(vllm_server)


def test_one_request_per_rollout_and_the_responses_api_do_not_group(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    for extra, why in ((("--one-request-per-rollout",), "--one-request-per-rollout"),
                       (("--api", "responses"), "Responses API")):  # fmt: skip
        out = tmp_path / f"rollouts{len(why)}.jsonl"
        args = [*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "3", "--json"), *extra]
        done = ngrp(*args)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["cost"]["requests"] == 9
        assert why in summary["grouping"]["fallback"]
        assert_exactly_once(out, 3, 3)


def test_kill_9_during_grouped_requests_then_resume_exactly_once(vllm_server, tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", 24, max_tokens=16)
    out = tmp_path / "rollouts.jsonl"
    base = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "6", "--concurrency", "3")
    rng = random.Random(11)
    for round_ in range(5):
        extra = ["--resume"] if round_ else []
        proc = subprocess.Popen(
            [*ENTRY, *map(str, base + extra)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        before, target = _rows_in(out), rng.randint(1, 20)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _rows_in(out) < before + target and proc.poll() is None:
            time.sleep(rng.uniform(0, 0.01))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    final = ngrp(*base, "--resume", "--json")
    assert final.returncode == 0, final.stderr
    assert_exactly_once(out, 24, 6)
    check = ngrp("check", "--inputs", tmp_path / "rollouts_materialized_inputs.jsonl", "--rollouts", out)
    assert check.returncode == 0, check.stdout + check.stderr
    assert server_healthy(vllm_server)


def test_half_a_group_on_disk_resumes_as_a_smaller_group(vllm_server, tmp_path):
    """What a kill between the rows of one group leaves: some of its rows written, the next one torn."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "rollouts.jsonl"
    base = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "6")
    assert ngrp(*base).returncode == 0
    lines = out.read_bytes().splitlines(keepends=True)
    keys = [(r.data["_ng_task_index"], r.data["_ng_rollout_index"]) for r in jsonl.iter_rows(out)]
    kept = [line for line, (task, rollout) in zip(lines, keys, strict=True) if task or rollout < 2]
    assert len(kept) == 8
    out.write_bytes(b"".join(kept) + lines[-1][:40])  # task 0 keeps rollouts 0 and 1, then a torn line
    check = ngrp("check", "--inputs", tmp_path / "rollouts_materialized_inputs.jsonl", "--rollouts", out,
                 "--json")  # fmt: skip
    assert check.returncode == 1  # findings: keys missing (and the torn line), none duplicated
    done = ngrp(*base, "--resume", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["cost"]["requests"] == 1 and summary["cost"]["rollouts"] == 4
    assert_exactly_once(out, 2, 6)
    resent = [r for r in rows_of(out) if r["_ng_task_index"] == 0 and r["_ng_rollout_index"] >= 2]
    assert [r["_ngrp_shared_prefill"]["rows"] for r in resent] == [4] * 4


@pytest.mark.gym
def test_gym_eval_profile_reads_a_grouped_run_as_ngrp_does(vllm_server, tmp_path, run_ngrp):
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv or not (Path(venv) / "bin" / "gym").exists():
        pytest.skip("no NeMo Gym venv: set NGRP_GYM_VENV")
    gym_dir, ours_dir = tmp_path / "gym", tmp_path / "ours"
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    out = gym_dir / "rollouts.jsonl"
    done = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "5", "--json"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cost"]["requests"] == 4
    assert all(r["_ngrp_shared_prefill"]["rows"] == 5 for r in rows_of(out))
    shutil.copytree(gym_dir, ours_dir)
    gym = gym_profile(Path(venv) / "bin" / "gym", gym_dir)
    assert gym.returncode == 0, gym.stdout + gym.stderr
    ours = run_ngrp("profile", *PROFILE_ARGS, cwd=ours_dir)
    assert ours.returncode == 0, ours.stderr
    assert compare_outputs(ours_dir / "rollouts.jsonl", gym_dir / "rollouts.jsonl", allow_extras=True) == []
    profile = [json.loads(x) for x in (gym_dir / "rollouts_reward_profiling.jsonl").read_text().splitlines()]
    assert [(p["_ng_task_index"], p["num_rollouts"]) for p in profile] == [(t, 5) for t in range(4)]


def test_two_temperatures_end_to_end(vllm_server, tmp_path, run_ngrp):
    """The documented recipe: the same tasks at two temperatures, profiled, compared, each run's sampling
    read back from its rows."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 6)
    profiles = []
    for t in ("0.2", "1.0"):
        out = tmp_path / f"t{t}" / "rollouts.jsonl"
        done = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--temperature", t))
        assert done.returncode == 0, done.stderr
        inputs = out.with_name("rollouts_materialized_inputs.jsonl")
        assert ngrp("profile", "--inputs", inputs, "--rollouts", out).returncode == 0
        profiles.append(out.with_name("rollouts_reward_profiling.jsonl"))
        stats = json.loads(ngrp("stats", profiles[-1], "--json").stdout)
        assert stats["cost"]["sampling"]["temperature"] == [{"value": float(t), "rows": 24}]
        assert stats["cost"]["tokens_per_rollout"] > 0
    compared = ngrp("compare", *profiles, "--json")
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["n_tasks"] == 6
