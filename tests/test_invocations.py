"""`collect.invocations`: the manifest's runs[] entry of each invocation, a killed one closed by the next.

The real kill -9 against vLLM is in test_collect_cost_vllm.py; here the bookkeeping on hand-made files,
each figure worked out by hand."""

from __future__ import annotations

import json

from ngrp_lib.collect.invocations import close_killed, lost_in_flight, open_invocation, totals
from ngrp_lib.collect.metrics import GENERATED, PROMPT

URL = "http://127.0.0.1:8000/v1"


def _row(task: int, rollout: int, prompt: int, output: int, request: str | None = None) -> str:
    row = {"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 1.0,
           "response": {"usage": {"input_tokens": prompt, "output_tokens": output}}}  # fmt: skip
    if request is not None:
        row["_ngrp_shared_prefill"] = {"request": request, "rows": 2}
    return json.dumps(row) + "\n"


def test_a_dead_invocation_is_closed_by_the_next_with_what_it_wrote_and_lost(tmp_path):
    manifest, out, failures = tmp_path / "m.json", tmp_path / "r.jsonl", tmp_path / "f.jsonl"
    manifest.write_text("{}")
    out.write_text(_row(0, 0, 10, 5))  # an earlier invocation's row: not the killed one's
    start = {URL: {GENERATED: 100.0, PROMPT: 50.0}}
    first = open_invocation(manifest, out, failures, start, resumed=True)
    assert first is not None
    # the killed one wrote a grouped request (2 rows, prompt 7 shared) and a lone row, and one failure
    with out.open("a") as handle:
        handle.write(_row(1, 0, 7, 3, "g1") + _row(1, 1, 7, 4, "g1") + _row(2, 0, 9, 6))
    failures.write_text('{"_ng_task_index": 3, "_ng_rollout_index": 0}\n')
    now = {URL: {GENERATED: 140.0, PROMPT: 80.0}}  # the server generated 40, prefilled 30 since
    second = open_invocation(manifest, out, failures, now, resumed=True)
    runs = json.loads(manifest.read_text())["runs"]
    assert [r["status"] for r in runs] == ["killed", "running"] and runs[1]["id"] == second
    cost = runs[0]["cost"]
    assert (cost["rollouts"], cost["requests"], runs[0]["failed_attempts"]) == (
        3,
        3,
        1,
    )  # 2 requests + 1 failure
    # input per rollout, as the server prefills and counts it: the grouped prompt once for each row
    assert cost["input_unit"] == "per_rollout"
    assert (cost["input_tokens"], cost["output_tokens"]) == (7 + 7 + 9, 3 + 4 + 6)
    # lost: 40 - 13 generated; prompts 7 + 7 + 9 = 23 written, so 30 - 23, in the unit of input_tokens
    assert cost["lost_in_flight"] == {"output_tokens": 27, "input_tokens": 7, "source": "server /metrics"}
    assert cost["input_tokens"] + cost["lost_in_flight"]["input_tokens"] == 80 - 50  # the server's prefill
    assert "server_counters" not in runs[0]
    assert runs[1]["start"] == {
        "rollouts_bytes": out.stat().st_size,
        "failures_bytes": failures.stat().st_size,
    }


def test_unknown_is_never_0():
    written = {"input_tokens": 5, "output_tokens": 5}
    before = {URL: {GENERATED: 100.0, PROMPT: 50.0}}
    restarted = {URL: {GENERATED: 3.0, PROMPT: 2.0}}
    assert lost_in_flight(before, restarted, written, 1)["output_tokens"] == "unknown"
    assert (
        lost_in_flight(before, {}, written, 1)["source"]
        == "no server /metrics was readable at the next start"
    )
    assert lost_in_flight({}, before, written, 1)["input_tokens"] == "unknown"
    no_usage = {"input_tokens": None, "output_tokens": None}
    assert lost_in_flight(before, before, no_usage, 2)["output_tokens"] == "unknown"  # rows without counts
    assert (
        lost_in_flight(before, before, no_usage, 0)["output_tokens"] == 0
    )  # nothing written, nothing served


def test_totals_add_every_invocation_and_the_killed_share(tmp_path):
    finished = {
        "status": "finished",
        "cost": {"requests": 4, "rollouts": 8, "input_unit": "per_rollout", "input_tokens": 40,
                 "output_tokens": 80},
    }  # fmt: skip
    old = {
        "cost": {"requests": 1, "rollouts": 2, "input_tokens": None, "output_tokens": 9}
    }  # an older manifest's
    killed = {"status": "running", "start": {"rollouts_bytes": 0, "failures_bytes": 0}, "server_counters": {}}
    out = tmp_path / "r.jsonl"
    out.write_text(_row(0, 0, 10, 5))
    close_killed(killed, out, tmp_path / "none.jsonl", {})
    t = totals([finished, old, killed])
    assert (t["invocations"], t["finished"], t["killed"]) == (3, 2, 1)
    assert (t["requests"], t["rollouts"], t["input_tokens"], t["output_tokens"]) == (6, 11, 50, 94)
    assert t["input_unit"] == "per_rollout"
    assert t["killed_share"]["rollouts"] == 1 and t["killed_share"]["output_tokens"] == 5
    assert t["killed_share"]["cached_tokens"] is None  # its row reported no cached count: not 0
    assert totals([finished])["killed_share"]["cached_tokens"] == 0  # none killed
    assert t["lost_in_flight"] == {"output_tokens": "unknown", "input_tokens": "unknown"}
    assert totals([finished])["lost_in_flight"] == {"output_tokens": 0, "input_tokens": 0}  # no kill


def _older(status: str, requests: int, rollouts: int, input_tokens: int, failed=0, single=None) -> dict:
    """A runs[] entry written before input_unit: its input counted a grouped request's prompt once."""
    cost = {"requests": requests, "rollouts": rollouts, "input_tokens": input_tokens, "cached_tokens": 3,
            "output_tokens": 10}  # fmt: skip
    if single is not None:
        cost["one_request_per_rollout"] = single
    return {"status": status, "failed_attempts": failed, "cost": cost}


def test_older_entries_are_read_in_the_unit_or_leave_the_input_unknown():
    """Replay 2026-12-05 W1: an older manifest's entries counted a grouped request's prompt once; totals
    never add them to per-rollout figures as if they were the same unit."""
    new = {"status": "finished", "failed_attempts": 0,
           "cost": {"requests": 2, "rollouts": 8, "input_unit": "per_rollout", "input_tokens": 80,
                    "cached_tokens": 0, "output_tokens": 10}}  # fmt: skip
    # a finished older entry: 2 grouped requests of 4, prompt 10; every row's prompt is in its single
    single = {"requests": 8, "input_tokens": 80, "output_tokens": 10, "extra_requests": 6,
              "extra_input_tokens": 60}  # fmt: skip
    grouped = _older("finished", 2, 8, 20, single=single)
    t = totals([new, grouped])
    assert (t["input_tokens"], t["cached_tokens"]) == (80 + 80, None)  # its cached count was per request
    # one that grouped nothing is the same in both units (a killed one: requests less failures >= rows)
    alone = _older("killed", 5, 4, 40, failed=1)
    t = totals([new, alone])
    assert (t["input_tokens"], t["cached_tokens"]) == (120, 3)
    assert t["killed_share"]["input_tokens"] == 40
    # a killed older entry that grouped: its per-request input cannot be converted: not reported, never
    # a sum of two units
    mixed = _older("killed", 2, 8, 20)
    t = totals([new, mixed])
    assert t["input_tokens"] is None and t["killed_share"]["input_tokens"] is None
    assert (t["output_tokens"], t["rollouts"]) == (20, 16)
