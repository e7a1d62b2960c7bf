"""The questions the lift agent of round 2 (evals/lift/results.md) wrote code for, asked of a real vLLM run
with SKILL.md's commands: are the stored rewards right (`reverify` with the run's own verifier), are
identical replies the policy's or a seed's (`health`), and what the collector's pre-flight check says."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import ngrp_process as ngrp
from test_collect_vllm import collect_args, write_tasks

from ngrp_lib.artifacts import jsonl, schemas

pytestmark = pytest.mark.vllm

TASKS, REPEATS = 4, 4


def _collect(vllm_server, tmp_path: Path, name: str, *extra: str) -> Path:
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS, max_tokens=4)
    out = tmp_path / name / "rollouts.jsonl"
    proc = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", str(REPEATS), *extra))
    assert proc.returncode == 0, proc.stderr
    # the pre-flight check answers "are the servers up, what do they serve, is a seed sent?" first
    first = next(line for line in proc.stderr.splitlines() if "passed the check" in line)
    assert f"servers: 1 of 1 passed the check (GET /models): {vllm_server.base_url}" in first
    assert "serves tiny (max_model_len " in first
    seed = {"--seed-per-repeat": "seed = rollout index", "seed=7": "seed 7 in every row"}
    assert next((v for k, v in seed.items() if k in extra), "no seed sent by ngrp") in first
    return out


def _answer_text(row: dict) -> str:
    return "".join(
        part.get("text", "")
        for item in row["response"]["output"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    )


def _health(out: Path) -> dict:
    inputs = out.with_name("rollouts_materialized_inputs.jsonl")
    proc = ngrp("health", "--inputs", inputs, "--rollouts", out, "--no-write", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    schemas.validator("health_result").validate(result)
    return result


def test_reverify_with_the_run_own_verifier_finds_every_reward_right(vllm_server, tmp_path):
    out = _collect(vllm_server, tmp_path, "run")
    rescored = tmp_path / "check" / "rollouts.jsonl"
    proc = ngrp("reverify", "--rollouts", out, "--output", rescored, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    schemas.validator("reverify_result").validate(result)
    assert result["verifier"] == "builtin:math"  # the run's, read from its manifest
    assert result["verifier_from"] == str(out.with_name("rollouts_run_manifest.json"))
    assert result["changes"]["changed"] == 0 and result["changes"]["rows"] == TASKS * REPEATS
    text = ngrp("reverify", "--rollouts", out, "--output", rescored, "--overwrite").stdout
    assert f"answer: every stored reward ({TASKS * REPEATS}) is what the run's verifier gives" in text
    # a stored reward changed by hand is found
    rows = [r.data for r in jsonl.iter_rows(out)]
    rows[0]["reward"] = 1.0 - rows[0]["reward"]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    audit = ngrp("reverify", "--rollouts", out, "--output", rescored, "--overwrite")
    assert f"answer: 1 of {TASKS * REPEATS} stored rewards differ" in audit.stdout
    assert audit.returncode == 1, audit.stderr  # a finding, as check's: DESIGN's exit 1
    again = ngrp("reverify", "--rollouts", out, "--output", rescored, "--overwrite", "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["exit_code"] == 1


def test_health_counts_identical_replies_and_says_whether_a_seed_made_them(vllm_server, tmp_path):
    runs = {
        "none": _collect(vllm_server, tmp_path, "unseeded"),
        "per_repeat": _collect(vllm_server, tmp_path, "per_repeat", "--seed-per-repeat"),
        "fixed": _collect(vllm_server, tmp_path, "fixed", "--set", "seed=7"),
    }
    for seed, out in runs.items():
        block = _health(out)["identical_replies"]
        texts: dict[int, list[str]] = {}
        for row in (r.data for r in jsonl.iter_rows(out)):
            text = _answer_text(row)
            if text.strip():
                texts.setdefault(row["_ng_task_index"], []).append(text)
        overall = Counter(t for v in texts.values() for t in v)
        assert block["seed"] == seed
        assert block["replies"] == sum(overall.values()) and block["distinct"] == len(overall)
        assert block["repeats_within_task"] == sum(len(v) - len(set(v)) for v in texts.values())
        assert block["tasks_all_alike"] == sum(1 for v in texts.values() if len(v) > 1 and len(set(v)) == 1)
    fixed = _health(runs["fixed"])["identical_replies"]
    # one seed for every row: every repeat of a task is the same draw, as the meaning says
    assert fixed["tasks_all_alike"] == fixed["tasks"] == TASKS and "the seed's" in fixed["meaning"]
    text = ngrp("health", "--inputs", runs["none"].with_name("rollouts_materialized_inputs.jsonl"),
                "--rollouts", runs["none"], "--no-write").stdout  # fmt: skip
    assert "identical replies: " in text and "ngrp sent no seed" in text
