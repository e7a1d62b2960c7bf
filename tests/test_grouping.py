"""One request per task group, without a server: which rows share a request, why rows go alone, how an
n-choice answer is split, what the cost totals count, and how /metrics counters are read."""

from __future__ import annotations

import json

import pytest

from ngrp_lib.artifacts.usage import CostTally, usage_counts
from ngrp_lib.collect.convert import ConversionError, response_from_chat
from ngrp_lib.collect.grouping import (
    APART,
    DIFFER,
    GREEDY,
    SEEDED,
    Grouper,
    has_seed,
    is_greedy,
    split_choices,
    whole_run_fallback,
)
from ngrp_lib.collect.metrics import HITS, QUERIES, hit_rate, parse_counters


def _row(task, rollout, **params):
    return {
        "responses_create_params": {"input": f"task {task}", **params},
        "agent_ref": {"name": "m"},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


def _keys(groups):
    return [[(r["_ng_task_index"], r["_ng_rollout_index"]) for r, _ in g] for g in groups]


def test_same_request_repeats_share_one_request_up_to_the_cap():
    items = [(_row(t, r), 0) for t in range(2) for r in range(5)]
    grouper = Grouper(cap=4)
    groups = list(grouper.groups(iter(items)))
    assert _keys(groups) == [
        [(0, 0), (0, 1), (0, 2), (0, 3)],
        [(0, 4)],
        [(1, 0), (1, 1), (1, 2), (1, 3)],
        [(1, 4)],
    ]
    assert grouper.fallbacks == {}  # the rest of a capped task is not "apart"


def test_a_resume_groups_only_the_missing_repeats_and_keeps_their_attempts():
    items = [(_row(0, 1), 2), (_row(0, 3), 1), (_row(0, 6), 0)]
    (group,) = Grouper().groups(iter(items))
    assert [(r["_ng_rollout_index"], a) for r, a in group] == [(1, 2), (3, 1), (6, 0)]


def test_seeded_rows_always_go_alone_even_when_identical():
    extra = {"metadata": {"extra_body": json.dumps({"seed": 3})}}
    items = [(_row(0, r, **extra), 0) for r in range(3)] + [(_row(1, r, seed=5), 0) for r in range(2)]
    grouper = Grouper()
    groups = list(grouper.groups(iter(items)))
    assert [len(g) for g in groups] == [1] * 5
    assert grouper.fallbacks == {SEEDED: 5}


def test_greedy_rows_go_alone():
    items = [(_row(0, r, temperature=0), 0) for r in range(3)] + [
        (_row(1, r, temperature=0.7), 0) for r in range(2)
    ]
    grouper = Grouper()
    assert [len(g) for g in grouper.groups(iter(items))] == [1, 1, 1, 2]
    assert grouper.fallbacks == {GREEDY: 3}
    assert is_greedy({"metadata": {"extra_body": '{"temperature": 0.0}'}, "temperature": 1.0})
    assert not is_greedy({"temperature": 1e-5})
    assert not is_greedy({})


def test_per_repeat_seeds_fall_back_and_say_so_once():
    said = []
    items = []
    for r in range(4):
        items.append((_row(0, r, metadata={"extra_body": json.dumps({"seed": r})}), 0))
    grouper = Grouper(log=said.append)
    assert [len(g) for g in grouper.groups(iter(items))] == [1, 1, 1, 1]
    assert said == [f"one request per rollout for {SEEDED}"]


def test_rows_of_a_task_that_differ_go_alone():
    items = [(_row(0, 0, temperature=0.1), 0), (_row(0, 1, temperature=0.9), 0), (_row(1, 0), 0)]
    grouper = Grouper()
    assert _keys(grouper.groups(iter(items))) == [[(0, 0)], [(0, 1)], [(1, 0)]]
    assert grouper.fallbacks == {DIFFER: 1}


def test_interleaved_repeats_are_not_grouped_and_named():
    items = [(_row(t, r), 0) for r in range(2) for t in range(3)]  # abcabc
    grouper = Grouper()
    assert all(len(g) == 1 for g in grouper.groups(iter(items)))
    assert grouper.fallbacks == {APART: 3}


def test_whole_run_fallbacks():
    assert whole_run_fallback(enabled=True, api="chat", gym=False) is None
    assert "one-request-per-rollout" in whole_run_fallback(enabled=False, api="chat", gym=False)
    assert "Responses API" in whole_run_fallback(enabled=True, api="responses", gym=False)
    assert "Gym" in whole_run_fallback(enabled=True, api="chat", gym=True)


def test_has_seed():
    assert has_seed({"seed": 0})
    assert has_seed({"metadata": {"extra_body": '{"seed": 1}'}})
    assert not has_seed({"metadata": {"extra_body": '{"top_k": 1}'}})
    assert not has_seed({"metadata": {"extra_body": "not json"}})  # fails alone, as a broken row
    assert not has_seed(None)


def _answer(n, ids=True, finish=("stop", "length")):
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": f"answer {i}"},
            "finish_reason": finish[i % len(finish)],
            **({"token_ids": list(range(3 + i))} if ids else {}),
        }
        for i in reversed(range(n))  # out of order: split in index order
    ]
    usage = {"prompt_tokens": 40, "completion_tokens": sum(3 + i for i in range(n)), "total_tokens": 0}
    return {"id": "chatcmpl-abc", "created": 1, "model": "m", "choices": choices, "usage": usage}


def test_split_choices_gives_each_row_its_own_count_and_finish_status():
    chats = split_choices(_answer(3), 3)
    responses = [response_from_chat(c) for c in chats]
    assert [r["output"][0]["content"][0]["text"] for r in responses] == ["answer 0", "answer 1", "answer 2"]
    assert [r["usage"]["output_tokens"] for r in responses] == [3, 4, 5]
    assert [r["usage"]["input_tokens"] for r in responses] == [40, 40, 40]  # the prompt each saw
    assert [r["usage"]["total_tokens"] for r in responses] == [43, 44, 45]
    assert [r["status"] for r in responses] == ["completed", "incomplete", "completed"]
    assert len({r["id"] for r in responses}) == 3


def test_split_choices_without_token_ids_leaves_the_count_missing_not_guessed():
    chats = split_choices(_answer(2, ids=False), 2)
    assert all(c["usage"]["completion_tokens"] is None for c in chats)


@pytest.mark.parametrize("n", [1, 4])
def test_split_choices_refuses_another_number_of_choices(n):
    with pytest.raises(ConversionError, match="asked for"):
        split_choices(_answer(2), n)


def _rollout(prompt, output, missing=None, cached=None):
    row = {"response": {"usage": {"input_tokens": prompt, "output_tokens": output,
                                  "input_tokens_details": {"cached_tokens": cached}}}}  # fmt: skip
    if missing:
        row["_ngrp_usage_missing"] = missing
    return row


def test_cost_counts_a_grouped_prompt_once_per_rollout_and_never_turns_missing_into_zero():
    """Replay 2026-12-05 W1/W6: vLLM prefills a grouped request's prompt for each of its n sequences (and
    counts it so in /metrics), so every total counts it once per rollout, as each row's usage holds it."""
    tally = CostTally()
    shared = {"_ngrp_shared_prefill": {"request": "chatcmpl-1", "rows": 2}}
    tally.add({**_rollout(40, 3, cached=32), **shared})
    tally.add({**_rollout(40, 4, cached=32), **shared})
    tally.add(_rollout(10, 0, missing=["completion_tokens"]))
    tally.add(_rollout(7, 1), cached_reported=False)
    assert tally.to_json() == {
        "input_unit": "per_rollout",
        "input_tokens": 40 + 40 + 10 + 7,
        "cached_tokens": 32 + 32,
        "output_tokens": 8,
        "rows_without_usage": 0,
    }
    assert tally.requests == 3
    assert tally.one_request_per_rollout() == {
        "requests": 4,
        "extra_requests": 1,
        "input_tokens": 97,  # the same prefill either way
        "output_tokens": 8,
    }
    empty = CostTally()
    empty.add({"response": {"output": []}})
    assert empty.to_json() == {
        "input_unit": "per_rollout",
        "input_tokens": None,
        "cached_tokens": None,
        "output_tokens": None,
        "rows_without_usage": 1,
    }
    assert usage_counts(_rollout(0, 0, missing=["prompt_tokens", "completion_tokens"])) == (None, None, None)


def test_prometheus_counters_are_summed_over_labels_and_the_rate_taken_between_samples():
    text = (
        "# HELP vllm:prefix_cache_queries_total x\n"
        f'{QUERIES}{{engine="0",model_name="tiny"}} 100.0\n'
        f'{QUERIES}{{engine="1",model_name="tiny"}} 50.0\n'
        f'{HITS}{{engine="0",model_name="tiny"}} 30.0\n'
        "vllm:other_total 9\n"
        f"{HITS}_created 1.7e9\n"
    )
    assert parse_counters(text, (QUERIES, HITS)) == {QUERIES: 150.0, HITS: 30.0}
    before = {"a": (150.0, 30.0), "b": (10.0, 0.0)}
    after = {"a": (250.0, 110.0), "b": (5.0, 0.0), "c": (10.0, 10.0)}  # b restarted, c was not there
    assert hit_rate(before, after) == 0.8
    assert hit_rate({}, after) is None
    assert hit_rate(before, before) is None  # nothing queried: not a rate of 0


def test_profile_summary_carries_the_runs_token_totals_and_sampling(run_ngrp, tmp_path):
    inputs, rollouts = [], []
    for task in range(2):
        for rollout in range(3):
            row = _row(task, rollout, temperature=0.5 if task else 1.0, max_output_tokens=16)
            inputs.append(row)
            out = {**row, "reward": float(rollout == 0), "response": {"output": [], "usage": {
                "input_tokens": 20, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5 + rollout, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 25 + rollout}}}  # fmt: skip
            if task == 0:  # task 0 came from one grouped request: its prompt counts once per rollout
                out["_ngrp_shared_prefill"] = {"request": "chatcmpl-0", "rows": 3}
            rollouts.append(out)
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    done = run_ngrp("profile", "--inputs", str(tmp_path / "m.jsonl"), "--rollouts", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r_profile_summary.json").read_text())
    assert summary["tokens"] == {
        "rows": 6,
        "input_unit": "per_rollout",
        "input_tokens": 6 * 20,  # every rollout's prompt, the grouped ones' too (as the server prefills)
        "cached_tokens": None,  # every row says 0: not told apart from "not reported"
        "output_tokens": 2 * (5 + 6 + 7),
        "rows_without_usage": 0,
        "requests": 1 + 3,  # task 0's grouped request, task 1's three of their own
        "one_request_per_rollout": {  # a request each: more requests, the same tokens
            "requests": 6,
            "extra_requests": 2,
            "input_tokens": 6 * 20,
            "output_tokens": 2 * (5 + 6 + 7),
        },
    }
    assert summary["sampling"] == {
        "temperature": [{"value": 0.5, "rows": 3}, {"value": 1.0, "rows": 3}],
        "max_output_tokens": [{"value": 16, "rows": 6}],
    }


def test_stats_and_report_say_what_the_profile_cost_and_bought(run_ngrp, tmp_path):
    test_profile_summary_carries_the_runs_token_totals_and_sampling(run_ngrp, tmp_path)
    profile = tmp_path / "r_reward_profiling.jsonl"
    done = run_ngrp("stats", str(profile), "--json")
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["cost"]
    total = 6 * 20 + 2 * (5 + 6 + 7)  # every rollout's prompt, every output token
    per_rollout = total / 6
    # each task: 1 success of 3, so a group of 2 is informative with probability 1 - C(2,2)/C(3,2) = 2/3
    assert cost["tokens_per_rollout"] == pytest.approx(round(per_rollout, 1))
    assert cost["tokens_per_success"] == pytest.approx(round(total / 2, 1))
    assert cost["tokens_per_informative_task"] == [
        {"group_size": 2, "tokens": pytest.approx(round(2 * per_rollout / (2 / 3), 1))}
    ]
    assert cost["sampling"]["temperature"] == [{"value": 0.5, "rows": 3}, {"value": 1.0, "rows": 3}]
    text = run_ngrp("stats", str(profile)).stdout
    assert "sampling: temperature 0.5 (3 rows), 1.0 (3 rows)" in text
    cost = "cost (input + output tokens): 26 per rollout, 78 per success; per GRPO-informative task 78 at G=2"
    assert cost in text
    assert "(input 120, each rollout's prompt; output 36; over 6 rollouts)" in text
    single = next(line for line in text.splitlines() if line.startswith("one request per rollout"))
    assert single == (
        "one request per rollout would have sent 6 requests (this run: 4) and the same tokens: a grouped"
        " request is one HTTP request, one chat template and one tokenization for its n rollouts; the"
        " server prefills every rollout's prompt either way, its prefix cache serving repeats of a prompt"
        " alike, grouped or not"
    )
    assert "prefill" not in single.split("the same tokens")[0]  # no prefill saving is promised


def test_stats_without_usage_says_not_reported_never_zero(run_ngrp, tmp_path):
    rows = [{**_row(0, r), "reward": float(r % 2), "response": {"output": []}} for r in range(2)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(_row(0, r)) + "\n" for r in range(2)))
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_ngrp("profile", "--inputs", str(tmp_path / "m.jsonl"),
                    "--rollouts", str(tmp_path / "r.jsonl")).returncode == 0  # fmt: skip
    summary = json.loads((tmp_path / "r_profile_summary.json").read_text())
    assert summary["tokens"]["input_tokens"] is None and summary["tokens"]["rows_without_usage"] == 2
    text = run_ngrp("stats", str(tmp_path / "r_reward_profiling.jsonl")).stdout
    assert "cost: not reported (the rows carry no token usage)" in text
    (tmp_path / "r_profile_summary.json").unlink()
    text = run_ngrp("stats", str(tmp_path / "r_reward_profiling.jsonl")).stdout
    assert "cost: not reported (no profile summary beside the profile" in text


OLD_MANIFEST = {  # a manifest as ngrp collect wrote it before sampling, runs and cost existed
    "tool": {"name": "ngrp", "version": "0.1.0"},
    "created_at": "2026-11-30T10:00:00Z",
    "materialized": {"path": "r_materialized_inputs.jsonl", "sha256": "0" * 64, "rows": 4},
    "rollouts": {"path": "r.jsonl"},
    "options": {"num_repeats": 4},
    "identity": {"model": "m"},
    "model": "m",
    "servers": [{"url": "http://127.0.0.1:8000/v1", "model": "m"}],
    "backend": "chat",
}


def test_validate_takes_old_manifests_and_summaries_and_checks_the_new_fields(run_ngrp, tmp_path):
    from ngrp_lib.artifacts import schemas

    old = tmp_path / "r_run_manifest.json"
    old.write_text(json.dumps(OLD_MANIFEST))
    assert run_ngrp("validate", str(old)).returncode == 0
    grouping = {"grouped": True, "cap": 16, "fallback": None, "alone": {}, "seeded_rows": 0,
                "seeds": "no row carries a seed"}  # fmt: skip
    cost = {"requests": 2, "rollouts": 8, "wall_s": 1.0, "rollouts_per_s": 8.0, "input_tokens": None,
            "cached_tokens": None, "output_tokens": 40, "rows_without_usage": 0, "tokens_per_s": 40.0,
            "output_tokens_per_s": 40.0, "prefix_cache_hit_rate": None}  # fmt: skip
    run = {"finished_at": "2026-11-30T10:01:00Z", "resumed": False, "cost": cost, "grouping": grouping}
    new = {**OLD_MANIFEST, "sampling": {"temperature": 0.2}, "runs": [run]}
    old.write_text(json.dumps(new))
    assert run_ngrp("validate", str(old)).returncode == 0
    summary = tmp_path / "r_profile_summary.json"
    summary.write_text(json.dumps({"tool": {"name": "ngrp", "version": "0.1.0"}, "counts": {}}))
    assert run_ngrp("validate", str(summary)).returncode == 0  # no tokens, no sampling: an older summary
    tokens = {
        "rows": 1,
        "input_tokens": -1,
        "cached_tokens": None,
        "output_tokens": 0,
        "rows_without_usage": 0,
    }
    summary.write_text(json.dumps({"tool": {}, "counts": {}, "tokens": tokens}))
    assert run_ngrp("validate", str(summary)).returncode == 1  # a negative count is caught
    result = schemas.validator("collect_result")
    assert any("cost" in str(e.path) for e in result.iter_errors({"cost": {**cost, "requests": -1}}))


def test_rows_without_usage_are_not_reported_never_zero_tokens(run_ngrp, tmp_path):
    # 4 tasks x 4; rollout 3 of every task carries no usage. The 12 that do: 30 input + 50 + 10 r + t
    # output tokens (run_helpers), r in 0..2, t in 0..3: 12 x 80 + 10 x (0+1+2) x 4 + (0+1+2+3) x 3 = 1,098
    # over 12 rows = 91.5 per rollout (counting the 4 without usage as 0 gave 1,098 / 16 = 68.6)
    from run_helpers import write_run

    write_run(tmp_path, tasks=4, repeats=4)
    path = tmp_path / "rollouts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["_ng_rollout_index"] == 3:
            del row["response"]["usage"]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_ngrp(
        "profile", "--inputs", tmp_path / "rollouts_materialized_inputs.jsonl", "--rollouts", path
    )
    assert done.returncode == 0, done.stderr
    profile = tmp_path / "rollouts_reward_profiling.jsonl"
    result = json.loads(run_ngrp("stats", profile, "--json").stdout)
    cost = result["cost"]
    assert cost["tokens_per_rollout"] == 91.5 and cost["rollouts_with_usage"] == 12
    successes = sum(t["successes"] for t in result["per_task"])
    assert cost["tokens_per_success"] == pytest.approx(round(91.5 * 16 / successes, 1))
    text = run_ngrp("stats", profile).stdout
    assert "92 per rollout" in text and "over the 12 of 16 rollouts reporting usage" in text
