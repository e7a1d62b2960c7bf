"""From "whether more tokens would pass is unknown" to the answer, on a real vLLM server (fresh replay
2026-12-05, wrong turn 9: the user re-ran all 256 rollouts at a larger cap though 20 tasks had a capped
zero). The flow as health and inspect print it, each command run as printed:

1. collect a run at a tight cap (3 tokens; the task lines ask vLLM to ignore end-of-sequence, so every
   reply is cut there);
2. `health`'s answer names the route: `ngrp inspect R --finding ngrp/truncated_at_token_cap --failed
   --tasks-out FILE`;
3. that command writes the task lines behind those rollouts (the tasks file's own lines, each with its
   `_ng_task_index`) and prints the `ngrp collect` command that runs them alone at 4x the cap;
4. that command collects only those tasks, numbered as before, at the new cap; the `then:` commands
   profile both runs and compare them on those tasks.

What the random-weight model answers is not asserted: the tasks are computed from the files.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_helpers import ENTRY

from ngrp_lib.artifacts import jsonl

pytestmark = pytest.mark.vllm

CAP, REPEATS, TASKS = 3, 3, 6


def _run(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A printed command, run as printed (`ngrp ...` by this checkout's entry point)."""
    if words[0] == "ngrp":
        words = [*ENTRY, *words[1:]]
    return subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=600)


def _tasks(path: Path) -> list[dict]:
    rows = [
        {
            "responses_create_params": {
                "input": [{"role": "user", "content": f"What is {i}+{i}? Box it."}],
                "temperature": 1.0,
                "metadata": {"extra_body": json.dumps({"ignore_eos": True})},  # every reply to the cap
            },
            "expected_answer": str(2 * i),
            "level": ["easy", "hard"][i % 2],
        }
        for i in range(TASKS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


CAP_CHECKS = ("ngrp/truncated_at_token_cap", "model_call_runaway_generation")


def _capped_failed_tasks(run: Path) -> set[int]:
    """Tasks with a rollout health flagged at the cap and scored below 1, read from the two files."""
    flagged = {
        (r["_ng_task_index"], r["_ng_rollout_index"])
        for r in map(json.loads, (run / "rollout_verdicts.jsonl").read_text().splitlines())
        if any(f["check"] in CAP_CHECKS for f in r["findings"])
    }
    return {
        r.data["_ng_task_index"]
        for r in jsonl.iter_rows(run / "rollouts.jsonl")
        if (r.data["_ng_task_index"], r.data["_ng_rollout_index"]) in flagged and r.data["reward"] < 1
    }


def _after(text: str, marker: str, end: str) -> str:
    start = text.index(marker) + len(marker)
    return text[start : text.index(end, start)]


def test_capped_zeros_are_settled_by_collecting_their_tasks_alone(vllm_server, tmp_path):
    rows = _tasks(tmp_path / "tasks.jsonl")
    collect = [
        "ngrp", "collect", "--input", "tasks.jsonl", "--output", "run/rollouts.jsonl",
        "--base-url", vllm_server.base_url, "--model", vllm_server.model, "--api", "chat",
        "--verifier", "math", "--num-repeats", str(REPEATS), "--max-output-tokens", str(CAP),
    ]  # fmt: skip
    done = _run(collect, tmp_path)
    assert done.returncode == 0, done.stderr
    health = _run(
        ["ngrp", "health", "--inputs", "run/rollouts_materialized_inputs.jsonl", "--rollouts",
         "run/rollouts.jsonl"], tmp_path,
    )  # fmt: skip
    assert health.returncode in (0, 1), health.stderr
    answer = health.stdout.splitlines()[-1]
    capped = _capped_failed_tasks(tmp_path / "run")
    assert capped, answer  # every reply stops at 3 tokens: a capped one scored below 1 is near certain
    # 2. the answer names the route, at this run's cap
    assert f"max_output_tokens {CAP}: cut there, so whether more tokens would pass is unknown" in answer
    route = _after(answer, "to settle it, collect those tasks alone at a larger cap: ", " (it prints")
    judged = _run(
        ["ngrp", "health", "--inputs", "run/rollouts_materialized_inputs.jsonl", "--rollouts",
         "run/rollouts.jsonl", "--no-write", "--json"], tmp_path,
    )  # fmt: skip
    by_check = json.loads(judged.stdout)["causes"]["zero_rewards"]["by_check"]
    said_checks = [c for c in by_check if c in CAP_CHECKS]
    assert route == (  # every cap check that decided a zero (a reply of 3 blank tokens is a runaway)
        "ngrp inspect run/rollouts.jsonl "
        + " ".join(f"--finding {c}" for c in said_checks)
        + " --failed --tasks-out run/capped_tasks.jsonl"
    )
    # 3. run it as printed: the task lines behind them, and the command that collects them
    wrote = _run(shlex.split(route), tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    written = [
        json.loads(line) for line in (tmp_path / "run" / "capped_tasks.jsonl").read_text().splitlines()
    ]
    assert [w["_ng_task_index"] for w in written] == sorted(capped)
    for w in written:  # the tasks file's own line, with its index added
        assert {k: v for k, v in w.items() if k != "_ng_task_index"} == rows[w["_ng_task_index"]]
    said = wrote.stdout.splitlines()
    assert said[0].startswith(f"wrote run/capped_tasks.jsonl: {len(capped)} tasks ({len(capped)} lines of ")
    assert "the run's tasks file" in said[0]
    assert said[1].startswith(f"next: collect those tasks alone at 4x the cap (max_output_tokens {CAP} -> 12")
    again = shlex.split(said[2])
    assert again[again.index("--input") + 1] == "run/capped_tasks.jsonl"
    assert again[again.index("--output") + 1] == "run/capped_tasks/rollouts.jsonl"
    assert again[again.index("--max-output-tokens") + 1] == "12" and "--resume" not in again
    assert again[again.index("--num-repeats") + 1] == str(REPEATS)
    # 4. collect them as printed: only those tasks, numbered as in the first run, at the new cap
    done = _run(again, tmp_path)
    assert done.returncode == 0, done.stderr
    new = [r.data for r in jsonl.iter_rows(tmp_path / "run" / "capped_tasks" / "rollouts.jsonl")]
    assert sorted({(r["_ng_task_index"], r["_ng_rollout_index"]) for r in new}) == [
        (t, k) for t in sorted(capped) for k in range(REPEATS)
    ]
    assert {r["responses_create_params"]["max_output_tokens"] for r in new} == {12}
    assert {r["response"]["usage"]["output_tokens"] for r in new} == {12}  # end-of-sequence ignored
    # then: profile both and compare them on those tasks, as printed
    assert said[3] == "then, to compare those tasks before and after:"
    for line in said[4:]:
        words = shlex.split(line)
        done = _run([*words, "--json"] if words[1] == "compare" else words, tmp_path)
        assert done.returncode == 0, (line, done.stderr)
    assert len(said) == 7 and shlex.split(said[-1])[1] == "compare"  # the old run is profiled too
    compared = json.loads(done.stdout)
    assert compared["n_tasks"] == len(capped) and compared["n_dropped"] == TASKS - len(capped)
