"""Replay 2026-12-05 W1 and W6: one unit for input tokens in every total of a run, each rollout's prompt
(vLLM prefills a grouped request's prompt for each of its n sequences: tests/test_collect_input_units_vllm.py
measures it), and no prefill saving promised for grouping. Summaries and manifests written before the
unit (a grouped request's prompt once) are read in it, or said to be unknown, never mixed."""

from __future__ import annotations

import json

from test_grouping import test_profile_summary_carries_the_runs_token_totals_and_sampling as make_profile

from ngrp_lib.commands.collect import cost_lines, totals_lines
from ngrp_lib.stats.cost import in_unit


def _older(tokens: dict) -> dict:
    """The same tokens block as written before `input_unit`: the grouped prompt counted once per request."""
    older = {k: v for k, v in tokens.items() if k != "input_unit"}
    single = dict(tokens["one_request_per_rollout"])
    per_request = 20 + 3 * 20  # task 0's 3 grouped rows once, task 1's three rows of their own
    older.update(input_tokens=per_request, cached_tokens=0)
    single["extra_input_tokens"] = single["input_tokens"] - per_request
    older["one_request_per_rollout"] = single
    return older


def test_stats_reads_an_older_summary_in_the_unit(run_ngrp, tmp_path):
    make_profile(run_ngrp, tmp_path)
    path = tmp_path / "r_profile_summary.json"
    summary = json.loads(path.read_text())
    new = summary["tokens"]
    summary["tokens"] = _older(new)
    path.write_text(json.dumps(summary))
    done = run_ngrp("stats", str(tmp_path / "r_reward_profiling.jsonl"), "--json")
    assert done.returncode == 0, done.stderr
    tokens = json.loads(done.stdout)["cost"]["tokens"]
    assert tokens == {**new, "cached_tokens": None}  # its cached count was per request: unknown in the unit
    text = run_ngrp("stats", str(tmp_path / "r_reward_profiling.jsonl")).stdout
    assert "(input 120, each rollout's prompt; output 36; over 6 rollouts)" in text
    assert "prefill" not in text.split("one request per rollout")[1].split(": a grouped")[0]
    assert "more prefill" not in text


def test_in_unit_leaves_a_run_that_grouped_nothing_as_it_was():
    single = {"requests": 2, "input_tokens": 14, "output_tokens": 3, "extra_requests": 0,
              "extra_input_tokens": 0}  # fmt: skip
    tokens = {"rows": 2, "input_tokens": 14, "cached_tokens": 4, "output_tokens": 3, "rows_without_usage": 0,
              "requests": 2, "one_request_per_rollout": single}  # fmt: skip
    got = in_unit(tokens)
    assert (got["input_unit"], got["input_tokens"], got["cached_tokens"]) == ("per_rollout", 14, 4)
    assert "extra_input_tokens" not in got["one_request_per_rollout"]
    assert in_unit(None) is None and in_unit({**tokens, "input_unit": "per_rollout"})["cached_tokens"] == 4


def _cost(**over) -> dict:
    cost = {"requests": 32, "rollouts": 256, "input_unit": "per_rollout", "input_tokens": 11_168,
            "cached_tokens": None, "output_tokens": 5_407, "rows_without_usage": 0, "tokens_per_s": 120.0,
            "prefix_cache_hit_rate": 0.0, "prefix_cache_note": None,
            "one_request_per_rollout": {"requests": 256, "extra_requests": 224, "input_tokens": 11_168,
                                        "output_tokens": 5_407}}  # fmt: skip
    return {**cost, **over}


def test_collects_cost_lines_say_the_unit_and_what_grouping_saves():
    lines = cost_lines(_cost(), {"grouped": True, "cap": 16, "alone": {}, "fallback": None})
    assert lines[1].startswith(
        "tokens: input 11,168 (each rollout's prompt; cached not reported), output 5,407"
    )
    single = next(line for line in lines if line.startswith("one request per rollout"))
    assert single == (
        "one request per rollout would have sent 256 requests (224 more) and the same tokens: a grouped"
        " request is one HTTP request, one chat template and one tokenization for its n rollouts; the server"
        " prefills every rollout's prompt either way, its prefix cache serving repeats of a prompt alike,"
        " grouped or not"
    )


def test_the_whole_run_line_gives_written_and_lost_input_in_one_unit():
    totals = {"invocations": 2, "killed": 1, "requests": 32, "rollouts": 256, "input_unit": "per_rollout",
              "input_tokens": 11_168, "output_tokens": 5_407,
              "killed_share": {"rollouts": 176, "output_tokens": 3_649},
              "lost_in_flight": {"output_tokens": 1_835, "input_tokens": 3_488}}  # fmt: skip
    whole, killed = totals_lines(totals)
    assert whole == (
        "whole run: 2 invocations (1 killed): 32 requests, 256 rollouts written, 11,168 input (each rollout's"
        " prompt) and 5,407 output tokens"
    )
    assert killed.endswith(
        "lost in flight and regenerated after the kill: 1,835 output, 3,488 input tokens (the server's"
        " /metrics, prompts counted per rollout as above)"
    )
