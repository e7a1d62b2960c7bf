"""The cost of every invocation against the real vLLM server on CPU: a collect killed with `kill -9` is
accounted for by the next one (what it wrote, what it lost in flight by the server's /metrics), and the
run's totals add both up.

Every figure is checked against one worked out here independently: rows counted and their usage summed
from the files, the server's generated and prefilled tokens read from its /metrics by the test itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from cli_helpers import ngrp_process as ngrp
from test_collect_vllm import collect_args, write_tasks

from ngrp_lib.artifacts import schemas
from ngrp_lib.collect.metrics import GENERATED, PROMPT, parse_counters

pytestmark = pytest.mark.vllm
RUNNING = "vllm:num_requests_running"


def server_counts(base_url: str) -> dict[str, float]:
    """The server's generated and prefilled tokens, read once nothing is running on it any more (an
    aborted request stops at the server a moment after its client died)."""
    url = base_url.removesuffix("/v1") + "/metrics"
    for _ in range(200):
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        counts = parse_counters(text, (GENERATED, PROMPT, RUNNING))
        if counts.get(RUNNING, 0) == 0:
            return counts
        time.sleep(0.05)
    raise AssertionError("the server kept running requests")


def decoding(base_url: str) -> None:
    """Return once the server is generating tokens for a running request (sampled twice, 50 ms apart)."""
    url = base_url.removesuffix("/v1") + "/metrics"
    last = None
    for _ in range(400):
        counts = parse_counters(urllib.request.urlopen(url, timeout=10).read().decode(), (GENERATED, RUNNING))
        if counts.get(RUNNING, 0) > 0 and last is not None and counts[GENERATED] > last:
            return
        last = counts.get(GENERATED)
        time.sleep(0.05)
    raise AssertionError("the server generated nothing while the collector ran")


def usage_sums(path: Path) -> tuple[int, int, int, int]:
    """(rows, requests, input tokens, output tokens) of the complete rollout rows (a torn last line left
    out), from their usage: the rows of one grouped request (n > 1) are one request, and each row's
    prompt counts (vLLM prefills, and counts, a grouped request's prompt once for each of its n
    sequences)."""
    rows = [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]
    requests = {(s["request"] if (s := row.get("_ngrp_shared_prefill")) else i) for i, row in enumerate(rows)}
    prompts = sum(row["response"]["usage"]["input_tokens"] for row in rows)
    output = sum(row["response"]["usage"]["output_tokens"] for row in rows)
    return len(rows), len(requests), prompts, output


def complete_rows(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_kill_9_then_resume_accounts_both_invocations_and_what_the_kill_lost(vllm_server, tmp_path):
    # 128 tokens a reply: a request runs long enough that the kill lands inside it even on a loaded
    # machine (with 32 the request in flight could finish between the check and the kill)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 16, max_tokens=128)
    out = tmp_path / "rollouts.jsonl"
    base = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "4")
    before = server_counts(vllm_server.base_url)
    proc = subprocess.Popen([*ENTRY, *map(str, base)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and complete_rows(out) < 12 and proc.poll() is None:
        time.sleep(0.01)
    decoding(vllm_server.base_url)  # kill mid-generation: tokens in flight are lost
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    at_kill = server_counts(vllm_server.base_url)
    manifest_path = tmp_path / "rollouts_run_manifest.json"
    running = json.loads(manifest_path.read_text())["runs"]
    assert [r["status"] for r in running] == ["running"] and running[0]["cost"] is None
    written = complete_rows(out)  # a torn last line is the kill's, cut by the resume: not written
    _, killed_requests, killed_in, killed_out = usage_sums(out)

    final = ngrp(*base, "--resume", "--json")
    assert final.returncode == 0, final.stderr
    result = json.loads(final.stdout)
    schemas.validator("collect_result").validate(result)
    manifest = json.loads(manifest_path.read_text())
    schemas.validator("run_manifest").validate(manifest)
    killed, resumed = manifest["runs"]
    assert (killed["status"], resumed["status"]) == ("killed", "finished") and resumed["resumed"]
    # what the killed invocation wrote, from the rows past its start (the file was empty then)
    assert killed["cost"]["rollouts"] == killed["succeeded"] == written >= 12
    assert (killed["cost"]["input_tokens"], killed["cost"]["output_tokens"]) == (killed_in, killed_out)
    assert killed["cost"]["input_unit"] == "per_rollout"
    assert killed["cost"]["requests"] == killed_requests < written  # grouped: n = 4 per request
    # what it lost in flight: the server's tokens between its start and the resume, less its rows'
    lost = killed["cost"]["lost_in_flight"]
    generated = at_kill[GENERATED] - before[GENERATED]
    prefilled = at_kill[PROMPT] - before[PROMPT]
    assert lost["output_tokens"] == round(generated - killed_out) > 0  # killed mid-generation
    assert lost["input_tokens"] == round(prefilled - killed_in) >= 0
    assert lost["source"] == "server /metrics"
    # replay 2026-12-05 W1: written and lost are in one unit, so they add up to what the server prefilled
    assert killed["cost"]["input_tokens"] + lost["input_tokens"] == round(prefilled)
    # the totals add both invocations, over every row in the file, and name the killed one's share
    rows, _, all_in, all_out = usage_sums(out)
    totals = manifest["totals"]
    assert rows == 64 and totals["rollouts"] == rows == written + resumed["cost"]["rollouts"]
    assert (totals["input_tokens"], totals["output_tokens"]) == (all_in, all_out)
    # the whole run in one unit: the rows' prompts plus what the kill lost is what the server prefilled
    assert totals["input_unit"] == "per_rollout"
    at_end = server_counts(vllm_server.base_url)
    prefilled_all = round(at_end[PROMPT] - before[PROMPT])
    assert totals["input_tokens"] + totals["lost_in_flight"]["input_tokens"] == prefilled_all
    assert totals["killed_share"]["input_tokens"] == killed_in
    assert (totals["invocations"], totals["killed"], totals["finished"]) == (2, 1, 1)
    assert totals["requests"] == killed_requests + resumed["cost"]["requests"]
    assert totals["killed_share"]["rollouts"] == written
    assert totals["killed_share"]["output_tokens"] == killed_out
    assert totals["lost_in_flight"] == {
        "output_tokens": lost["output_tokens"],
        "input_tokens": lost["input_tokens"],
    }
    assert result["run_totals"] == totals
    text = ngrp(*base, "--resume")  # nothing left: a third invocation, its line names the killed share
    assert text.returncode == 0, text.stderr
    assert f"3 invocations (1 killed): {totals['requests']} requests, 64 rollouts written" in text.stdout
    assert f"killed invocations: {written} rollouts written, {killed_out:,} output tokens" in text.stdout
    assert f"regenerated after the kill: {lost['output_tokens']:,} output" in text.stdout
    assert f"{totals['input_tokens']:,} input (each rollout's prompt) and" in text.stdout
    lost_words = f"{lost['input_tokens']:,} input tokens (the server's /metrics, prompts counted per rollout"
    assert lost_words in text.stdout


def test_a_kill_with_no_metrics_readable_says_unknown_never_0(vllm_server, tmp_path):
    """--skip-preflight reads no /metrics: the killed invocation's loss is unknown, not 0."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", 12, max_tokens=48)
    out = tmp_path / "rollouts.jsonl"
    base = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "2", "--concurrency", "4",
                        "--skip-preflight")  # fmt: skip
    proc = subprocess.Popen([*ENTRY, *map(str, base)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and complete_rows(out) < 4 and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    final = ngrp(*base, "--resume", "--json")
    assert final.returncode == 0, final.stderr
    totals = json.loads(final.stdout)["run_totals"]
    killed = json.loads((tmp_path / "rollouts_run_manifest.json").read_text())["runs"][0]
    assert killed["status"] == "killed" and killed["cost"]["rollouts"] >= 4
    assert killed["cost"]["lost_in_flight"] == {
        "output_tokens": "unknown",
        "input_tokens": "unknown",
        "source": "no server /metrics was readable when the invocation started",
    }
    assert totals["lost_in_flight"] == {"output_tokens": "unknown", "input_tokens": "unknown"}
    assert totals["rollouts"] == 24
