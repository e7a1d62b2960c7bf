"""Issue 36 #15: what a run would have cost one request per rollout, and why a prefix-cache hit rate is 0,
from the run's own usage and the server's own /metrics (pure parts; tests/test_collect_grouped_vllm.py
checks them on a real vLLM server)."""

from __future__ import annotations

from ngrp_lib.artifacts.names import SHARED_PREFILL
from ngrp_lib.artifacts.usage import CostTally
from ngrp_lib.collect.metrics import cache_note, parse_block_size

METRICS = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 420.0
"""


def test_block_size_from_vllm_metrics():
    assert parse_block_size(METRICS) == 128
    assert parse_block_size('vllm:cache_config_info{engine="0",block_size="16"} 1.0') == 16
    assert parse_block_size("vllm:prefix_cache_queries_total 1.0") is None
    assert parse_block_size('vllm:cache_config_info{block_size="none"} 1.0') is None


def test_cache_note_reasons():
    short = cache_note(0.0, {"a": 128, "b": 256}, 44, 5, 5)
    assert short is not None and "at most 44 tokens" in short and "(128 tokens on the server)" in short
    assert "16 tokens at the least" in (cache_note(0.0, {}, 9, 30, 5) or "")
    assert "every prompt this invocation sent (at most 44 tokens)" in short  # W7: not the run's
    once = cache_note(0.0, {"a": 16}, 300, 5, 5)  # 5 rollouts of 5 tasks: every prompt sent once
    assert once is not None and "went to the server once in this invocation (one rollout per task)" in once
    # Replay 2026-12-05 W6: 30 rollouts of 5 tasks in 5 grouped requests is not "each prompt once": vLLM
    # looks each of a request's n sequences up in its cache, the later ones hitting the first's blocks
    grouped = cache_note(0.0, {"a": 16}, 300, 30, 5)
    assert grouped is not None and "--no-enable-prefix-caching" in grouped
    assert "n rollouts count as n" in grouped and "went to the server once" not in grouped
    assert cache_note(0.25, {"a": 128}, 44, 5, 5) is None, "a rate above 0 needs no reason"
    assert cache_note(None, {}, 44, 5, 5) is None, "not reported stays not reported"


def _row(task: int, rollout: int, prompt: int, output: int, request: str | None) -> dict:
    row = {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "response": {"usage": {"input_tokens": prompt, "output_tokens": output}},
    }
    if request is not None:
        row[SHARED_PREFILL] = {"request": request, "rows": 3}
    return row


def test_every_row_prompt_against_a_hand_count():
    tally = CostTally()
    for r in range(3):  # one grouped request of 3 choices, prompt 40
        tally.add(_row(0, r, 40, 5 + r, "req-0"))
    tally.add(_row(1, 0, 70, 9, None))  # a row sent alone
    assert tally.input_tokens == 3 * 40 + 70  # once per rollout, as the server prefills it
    assert tally.requests == 2 and tally.one_request_per_rollout()["input_tokens"] == tally.input_tokens
    assert tally.max_prompt_tokens == 70 and tally.tasks == {0, 1}
    assert tally.output_tokens == 5 + 6 + 7 + 9
