"""The first run against a real vLLM server on CPU (issue 19): `collect` checks the servers before the
first row, stops early on a failure that repeats, and says what to do.

Each case checks the exit code, that the message names the problem, how many rows reached the server
(vLLM's own access log), and that the files of an earlier run are left as they were.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cli_helpers import ngrp_process as ngrp
from vllm_fixture import free_port

from ngrp_lib.artifacts import jsonl, schemas

pytestmark = pytest.mark.vllm
CHAT = ("POST", "/v1/chat/completions")


def tasks(path: Path, prompts: list[str], max_tokens: int = 4) -> Path:
    rows = [{"responses_create_params": {"input": p, "max_output_tokens": max_tokens, "temperature": 1.0},
             "expected_answer": "1"} for p in prompts]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def collect(task_file: Path, out: Path, *urls: str, model: str = "tiny", extra=(), env=None):
    bases = [a for url in urls for a in ("--base-url", url)]
    return ngrp("collect", "--input", task_file, "--output", out, *bases, "--model", model,
                "--verifier", "math", *extra, env=env)  # fmt: skip


def sent(server) -> int:
    """Chat requests the server answered so far (after its access log settles)."""
    time.sleep(0.5)
    return server.requests(*CHAT)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a run but its lock (which holds the pid of the last collector)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.suffix != ".lock"}


@pytest.fixture
def earlier_run(vllm_server, tmp_path):
    """A complete earlier run (2 tasks x 2 repeats) whose files must survive a refused run."""
    task_file = tasks(tmp_path / "tasks.jsonl", ["a", "b"])
    out = tmp_path / "run" / "rollouts.jsonl"
    first = collect(task_file, out, vllm_server.base_url, extra=["--num-repeats", "2"])
    assert first.returncode == 0, first.stderr
    return task_file, out, snapshot(out.parent)


def test_wrong_model_name_is_refused_before_any_row(vllm_server, earlier_run):
    task_file, out, before = earlier_run
    start = sent(vllm_server)
    for how in (["--resume"], ["--overwrite"]):
        proc = collect(
            task_file, out, vllm_server.base_url, model="wrong-name", extra=["--num-repeats", "2", *how]
        )
        assert proc.returncode == 2, proc.stderr
        assert f"model 'wrong-name' is not served at {vllm_server.base_url}; it serves: tiny" in proc.stderr
        assert "no row was sent" in proc.stderr and "Traceback" not in proc.stderr
    assert sent(vllm_server) == start
    assert snapshot(out.parent) == before  # --overwrite discarded nothing


def test_wrong_port_is_refused_before_any_row(vllm_server, earlier_run):
    task_file, out, before = earlier_run
    dead = f"http://127.0.0.1:{free_port()}/v1"
    start = sent(vllm_server)
    proc = collect(task_file, out, dead, extra=["--num-repeats", "2", "--resume"])
    assert proc.returncode == 2
    assert f"connection refused at {dead}: is the server running? `ngrp serve status`" in proc.stderr
    fresh = collect(task_file, out.parent / "other.jsonl", dead)
    assert fresh.returncode == 2 and "connection refused" in fresh.stderr
    assert sent(vllm_server) == start and snapshot(out.parent) == before  # other.jsonl not even begun


def test_server_with_api_key_wrong_key_and_no_key(vllm_server_factory, tmp_path):
    server = vllm_server_factory(api_key="sk-right-3f9a")
    task_file = tasks(tmp_path / "tasks.jsonl", ["a", "b", "c", "d"])
    out = tmp_path / "run" / "rollouts.jsonl"
    no_key = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    good = collect(task_file, out, server.base_url, env={**no_key, "OPENAI_API_KEY": "sk-right-3f9a"})
    assert good.returncode == 0, good.stderr
    before, start = snapshot(out.parent), sent(server)

    wrong = collect(
        task_file, out, server.base_url, extra=["--overwrite"], env={**no_key, "OPENAI_API_KEY": "x"}
    )
    assert wrong.returncode == 2
    assert f"401: the key in OPENAI_API_KEY was refused by {server.base_url}" in wrong.stderr
    missing = collect(task_file, out, server.base_url, extra=["--resume"], env=no_key)
    assert missing.returncode == 2
    assert f"401: {server.base_url} wants an API key and OPENAI_API_KEY is not set" in missing.stderr
    assert "export OPENAI_API_KEY=" in missing.stderr
    assert sent(server) == start and snapshot(out.parent) == before
    assert "sk-right-3f9a" not in good.stdout + good.stderr + "".join(map(bytes.decode, before.values()))

    # Without the pre-flight check the run itself stops after --abort-after-same rows and prints the fix.
    late = tmp_path / "late" / "rollouts.jsonl"
    proc = collect(task_file, late, server.base_url, env={**no_key, "OPENAI_API_KEY": "x"},
                   extra=["--skip-preflight", "--num-repeats", "3", "--abort-after-same", "3",
                          "--concurrency", "1", "--one-request-per-rollout", "--json"])  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert sent(server) == start + 3  # 12 rows, 3 sent
    summary = json.loads(proc.stdout)
    schemas.validator("collect_result").validate(summary)
    assert summary["attempted"] == 3 and summary["preflight"] is None and not summary["resume_helps"]
    assert "3 rows in a row failed the same way: HTTP 401" in summary["stopped_early"]
    (top,) = summary["top_failures"]
    assert (top["count"], top["http_status"], top["example_key"], top["retry_helps"]) == (
        3,
        401,
        [0, 0],
        False,
    )
    assert (
        "incomplete: rerun" not in proc.stderr
        and "fix: put the key the server expects in $OPENAI_API_KEY" in proc.stderr
    )


def test_max_output_tokens_over_the_context_is_refused_naming_the_row(vllm_server, earlier_run):
    task_file, out, before = earlier_run
    long_ask = tasks(out.parent.parent / "long.jsonl", ["a", "b", "c"])
    rows = long_ask.read_text().splitlines()
    rows[1] = rows[1].replace('"max_output_tokens": 4', '"max_output_tokens": 4000')
    long_ask.write_text("\n".join(rows) + "\n")
    start = sent(vllm_server)
    proc = ngrp("collect", "--input", long_ask, "--output", out, "--base-url", vllm_server.base_url,
                "--model", "tiny", "--verifier", "math", "--overwrite")  # fmt: skip
    assert proc.returncode == 2
    assert (
        f"{long_ask}:2 asks for max_output_tokens 4000, more than the 2048-token context of model 'tiny'"
        f" at {vllm_server.base_url}"
    ) in proc.stderr
    assert "--max-model-len" in proc.stderr
    # the same check on a materialized file names its line
    materialized = out.with_name("rollouts_materialized_inputs.jsonl")
    bad = out.parent.parent / "m.jsonl"
    lines = materialized.read_text().splitlines()
    bad.write_text(
        "\n".join([lines[0], lines[1].replace('"max_output_tokens":4', '"max_output_tokens":2049')]) + "\n"
    )
    proc = ngrp("collect", "--materialized", bad, "--output", out.parent.parent / "m_out.jsonl",
                "--base-url", vllm_server.base_url, "--model", "tiny", "--verifier", "math")  # fmt: skip
    assert proc.returncode == 2 and f"{bad}:2 asks for max_output_tokens 2049" in proc.stderr
    assert sent(vllm_server) == start and snapshot(out.parent) == before


def test_prompts_over_the_context_stop_the_run_after_n_tasks(vllm_server, tmp_path):
    """Prompts longer than the context: vLLM answers 400 to each. One bad task (all its repeats) does not
    stop the run; three in a row do (at the first row of the third), with the server's message and the fix,
    and the good rows stay."""
    long = "hello world " * 1500  # about 3,000 tokens with the tiny model's byte-level vocabulary
    # distinct lines: byte-identical task lines would be one task (Gym's numbering)
    prompts = ["short 0", f"1 {long}", "short 2", f"3 {long}", f"4 {long}", f"5 {long}", "short 6", "short 7"]
    task_file = tasks(tmp_path / "tasks.jsonl", prompts)
    out = tmp_path / "rollouts.jsonl"
    start = sent(vllm_server)
    args = [
        "--num-repeats",
        "2",
        "--abort-after-same",
        "3",
        "--concurrency",
        "1",
        "--one-request-per-rollout",
    ]
    proc = collect(task_file, out, vllm_server.base_url, extra=[*args, "--json"])
    assert proc.returncode == 1, proc.stderr
    assert sent(vllm_server) == start + 11  # tasks 0-4, two rows each, and the first row of task 5
    summary = json.loads(proc.stdout)
    schemas.validator("collect_result").validate(summary)
    assert (summary["succeeded"], summary["failed"], summary["missing"]) == (4, 7, 12)
    assert "5 rows of 3 different tasks in a row failed the same way" in summary["stopped_early"]
    assert "maximum context length is 2048 tokens" in summary["stopped_early"]
    (top,) = summary["top_failures"]
    assert top["count"] == 7 and top["http_status"] == 400 and top["example_key"] == [1, 0]
    assert "incomplete: rerun" not in proc.stderr and "--max-model-len" in summary["next_step"]
    done = {(r.data["_ng_task_index"], r.data["_ng_rollout_index"]) for r in jsonl.iter_rows(out)}
    assert done == {(0, 0), (0, 1), (2, 0), (2, 1)}
    text = collect(task_file, tmp_path / "again.jsonl", vllm_server.base_url, extra=args)
    assert "most common failures:" in text.stdout and "7x agent_run_error: HTTP 400" in text.stdout
    assert "(e.g. key (1, 0))" in text.stdout and "fix: " in text.stderr


def test_two_endpoints_one_dead_goes_on_with_the_other(vllm_server, tmp_path):
    task_file = tasks(tmp_path / "tasks.jsonl", ["a", "b", "c", "d"])
    dead = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "rollouts.jsonl"
    proc = collect(task_file, out, dead, vllm_server.base_url, extra=["--num-repeats", "2", "--json"])
    assert proc.returncode == 0, proc.stderr
    assert "left out 1 of 2 servers that failed the pre-flight check; going on with 1" in proc.stderr
    assert f"connection refused at {dead}" in proc.stderr
    summary = json.loads(proc.stdout)
    schemas.validator("collect_result").validate(summary)
    assert [(c["url"], c["ok"]) for c in summary["preflight"]] == [
        (dead, False),
        (vllm_server.base_url, True),
    ]
    assert summary["preflight"][1]["max_model_len"] == 2048 and summary["preflight"][1]["models"] == ["tiny"]
    assert {r.data["_ngrp_server"] for r in jsonl.iter_rows(out)} == {vllm_server.base_url}
    assert summary["completed"] == 8 and summary["failed"] == 0
    manifest = json.loads(out.with_name("rollouts_run_manifest.json").read_text())
    assert (
        "connection refused" in manifest["servers"][0]["left_out"]
        and "left_out" not in manifest["servers"][1]
    )
