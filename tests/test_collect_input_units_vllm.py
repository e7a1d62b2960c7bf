"""Replay 2026-12-05 W6 and W1, against the real vLLM server on CPU: a grouped request (one request, n
choices) does not prefill its prompt once. vLLM fans it out into n sequences, prefills and counts the
prompt for each (`vllm:prompt_tokens_total`), and looks each up in its prefix cache, the later ones
hitting the first's full blocks exactly as separate requests of one prompt do. So:
- every token total ngrp gives counts input per rollout, and equals the server's own prompt-token count;
- one request per rollout would send more requests but prefill the same (no "more prefill" promised).

Every figure is checked against one the test works out itself: the rows' usage summed from the file, the
server's counters read from its /metrics, and the prefix-cache hits from the block size and the prompts'
lengths (vLLM caches only full blocks, and never the block holding a prompt's last token)."""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path

import pytest
from test_collect_vllm import collect_args, ngrp

from ngrp_lib.artifacts import jsonl, schemas
from ngrp_lib.collect.metrics import HITS, PROMPT, QUERIES, parse_block_size, parse_counters

pytestmark = pytest.mark.vllm
RUNNING = "vllm:num_requests_running"
WORDS = ["the", "answer", "is", "what", "of", "a", "to", "and", "in", "number", "sum", "product", "prime",
         "box", "think", "so", "then", "we", "have", "two", "three"]  # fmt: skip


def metrics(base_url: str) -> tuple[dict[str, float], int]:
    """The server's prompt and prefix-cache counters and its KV-cache block size."""
    text = urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    block = parse_block_size(text)
    assert block is not None, "vLLM 0.32 exports vllm:cache_config_info"
    return parse_counters(text, (PROMPT, QUERIES, HITS, RUNNING)), block


def long_tasks(path: Path, n: int, words: int) -> Path:
    """Tasks whose prompts are fresh (a random tag first: nothing of them is cached yet) and `words`
    words long (a few blocks of the tiny model's tokens), each asking for 4 tokens."""
    rng = random.Random()
    rows = []
    for i in range(n):
        tag = f"{rng.getrandbits(64):x}"
        text = f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(words)) + f" What is {i}+{i}? Box it."
        params = {"input": [{"role": "user", "content": text}], "max_output_tokens": 4, "temperature": 1.0}
        rows.append({"responses_create_params": params, "expected_answer": str(2 * i)})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def expected_hits(prompts: dict[int, int], repeats: int, block: int) -> int:
    """Prefix-cache hits when each task's prompt is new to the server and sent `repeats` times: the first
    sequence finds nothing, each later one the full blocks before the prompt's last token."""
    return sum((repeats - 1) * ((p - 1) // block) * block for p in prompts.values())


def run_and_measure(base_url: str, tasks: Path, out: Path, *extra: str) -> tuple[dict, list[dict], dict, int]:
    before, block = metrics(base_url)
    done = ngrp(*collect_args(tasks, out, base_url, "--num-repeats", "4", "--json", *extra))
    assert done.returncode == 0, done.stderr
    after, _ = metrics(base_url)
    assert after.get(RUNNING, 0) == 0
    delta = {name: after[name] - before[name] for name in (PROMPT, QUERIES, HITS)}
    result = json.loads(done.stdout)
    schemas.validator("collect_result").validate(result)
    return result, [r.data for r in jsonl.iter_rows(out)], delta, block


@pytest.mark.parametrize("route", ["grouped", "one request per rollout"])
def test_input_totals_are_what_the_server_prefilled_grouped_or_not(vllm_server, tmp_path, route):
    extra = () if route == "grouped" else ("--one-request-per-rollout",)
    tasks = long_tasks(tmp_path / "tasks.jsonl", 3, words=380)  # about 450 tokens
    result, rows, delta, block = run_and_measure(vllm_server.base_url, tasks, tmp_path / "r.jsonl", *extra)
    cost = result["cost"]
    assert cost["requests"] == (3 if route == "grouped" else 12)
    prompts = {r["_ng_task_index"]: r["response"]["usage"]["input_tokens"] for r in rows}
    assert min(prompts.values()) > 2 * block, "prompts of a few blocks, so the prefix cache can hit"
    per_rollout = sum(r["response"]["usage"]["input_tokens"] for r in rows)
    assert per_rollout == 4 * sum(prompts.values())  # each grouped row carries the prompt it saw
    # the run's input is each rollout's prompt: exactly what the server counted as prefilled
    assert cost["input_unit"] == "per_rollout"
    assert cost["input_tokens"] == per_rollout == delta[PROMPT]
    # every sequence is looked up in the prefix cache, and the later ones of a prompt hit alike on both
    # routes: grouping saves requests, not prefill
    assert delta[QUERIES] == delta[PROMPT]
    assert delta[HITS] == expected_hits(prompts, 4, block) > 0
    assert cost["prefix_cache_hit_rate"] == round(delta[HITS] / delta[QUERIES], 4)
    if route == "grouped":
        assert cost["one_request_per_rollout"] == {
            "requests": 12, "extra_requests": 9, "input_tokens": per_rollout,
            "output_tokens": cost["output_tokens"],
        }  # fmt: skip
    manifest = json.loads((tmp_path / "r_run_manifest.json").read_text())
    schemas.validator("run_manifest").validate(manifest)
    assert manifest["runs"][-1]["cost"] == cost
    totals = manifest["totals"]
    assert (totals["input_unit"], totals["input_tokens"]) == ("per_rollout", per_rollout)


def test_a_grouped_runs_text_promises_no_prefill_and_stats_agrees(vllm_server, tmp_path, run_ngrp):
    tasks = long_tasks(tmp_path / "tasks.jsonl", 2, words=20)
    out = tmp_path / "r.jsonl"
    done = ngrp(*collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4"))
    assert done.returncode == 0, done.stderr
    rows = [r.data for r in jsonl.iter_rows(out)]
    per_rollout = sum(r["response"]["usage"]["input_tokens"] for r in rows)
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"tokens: input {per_rollout:,} (each rollout's prompt;") for line in lines)
    single = next(line for line in lines if line.startswith("one request per rollout"))
    assert single.startswith("one request per rollout would have sent 8 requests (6 more) and the same")
    assert "more prefill" not in done.stdout
    inputs = tmp_path / "r_materialized_inputs.jsonl"
    made = run_ngrp("profile", "--inputs", str(inputs), "--rollouts", str(out))
    assert made.returncode == 0, made.stderr
    summary = json.loads((tmp_path / "r_profile_summary.json").read_text())
    tokens = summary["tokens"]
    assert (tokens["input_unit"], tokens["input_tokens"]) == ("per_rollout", per_rollout)
    stats = run_ngrp("stats", str(tmp_path / "r_reward_profiling.jsonl"), "--bootstrap", "0")
    assert stats.returncode == 0, stats.stderr
    assert f"(input {per_rollout:,}, each rollout's prompt;" in stats.stdout
    assert "one request per rollout would have sent 8 requests (this run: 2) and the same" in stats.stdout
