"""`ngrp inspect`: selection and join on golden and generated runs, every filter, torn tails, partial runs,
fan-out agents, and the --json lines against their schema. Expected values are computed here from the
files (plain json) or from the generator's formulas, never from the code under test."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from run_helpers import SCRIPT, answer_of, reward_of, text_of, write_run
from scipy.stats import binomtest

from ngrp_lib.inspect.join import resolve
from ngrp_lib.inspect.run import inspect_run
from ngrp_lib.inspect.select import Filters, make_selection

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "gym-0.7.0"
SCHEMA = json.loads((REPO / "schemas" / "inspect_rollout.schema.json").read_text())


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shown(rollouts: Path, **options) -> list:
    sort = options.pop("sort", "task")
    limit = options.pop("limit", None)
    paths = resolve(rollouts, options.pop("inputs", None), options.pop("profile", None))
    result = inspect_run(paths, make_selection(Filters(**options)), sort=sort, limit=limit)
    return list(result.rollouts()), result


def keys(items) -> list[tuple[int, int]]:
    return [(s.digest.task, s.digest.rollout) for s in items]


def message_text(row: dict) -> str:
    return "".join(
        part["text"]
        for item in row["response"]["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


# -- golden runs (Gym 0.7.0's own files) -------------------------------------------------------------------


def test_golden_join_finds_inputs_and_profile_by_stem_and_counts_match_the_files():
    folder = GOLDEN / "case_complete"
    items, result = shown(folder / "rollouts.jsonl")
    assert result.paths.inputs == folder / "rollouts_materialized_inputs.jsonl"
    assert result.paths.profile == folder / "rollouts_reward_profiling.jsonl"
    raw = rows_of(folder / "rollouts.jsonl")
    assert sorted(keys(items)) == sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in raw)
    assert keys(items) == sorted(keys(items)), "default order: by task, then rollout"
    by_key = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in raw}
    inputs = {r["_ng_task_index"]: r for r in rows_of(folder / "rollouts_materialized_inputs.jsonl")}
    profile = {r["_ng_task_index"]: r for r in rows_of(folder / "rollouts_reward_profiling.jsonl")}
    for s in items:
        row = by_key[(s.digest.task, s.digest.rollout)]
        assert s.digest.reward == row["reward"]
        assert s.digest.response_text == message_text(row)
        assert s.digest.final_text == message_text(row)
        assert s.digest.reasoning == row["response"]["output"][0]["summary"][0]["text"]
        assert s.digest.output_tokens == row["response"]["usage"]["output_tokens"]
        assert s.digest.extracted_answer == row["extracted_answer"]
        assert s.digest.expected_answer == inputs[s.digest.task]["expected_answer"]
        assert s.digest.prompt == inputs[s.digest.task]["responses_create_params"]["input"][-1]["content"]
        assert s.digest.verifier == {"is_correct": row["is_correct"], "judge_score": row["judge_score"]}
        assert s.profile["mean/reward"] == profile[s.digest.task]["mean/reward"]
        rewards = [r["reward"] for r in raw if r["_ng_task_index"] == s.digest.task]
        passed = sum(r >= 1.0 for r in rewards)
        assert (s.task["n_scored"], s.task["n_passed"]) == (len(rewards), passed)
        assert s.task["mean_reward"] == pytest.approx(sum(rewards) / len(rewards))
        ci = binomtest(passed, len(rewards)).proportion_ci(method="wilson")
        assert (s.task["wilson_low_95"], s.task["wilson_high_95"]) == pytest.approx((ci.low, ci.high))
        assert s.task["expected"] == 4


def test_golden_fan_out_keeps_agents_apart():
    folder = GOLDEN / "case_fan_out"
    items, result = shown(folder / "rollouts.jsonl", agent="agent_b")
    raw = rows_of(folder / "rollouts.jsonl")
    want = sorted(
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in raw if r["agent_ref"]["name"] == "agent_b"
    )
    assert keys(items) == want and all(s.digest.agent == "agent_b" for s in items)
    assert len(result.table) == 6, "three tasks x two agents"
    for s in items:
        rewards = [
            r["reward"]
            for r in raw
            if r["_ng_task_index"] == s.digest.task and r["agent_ref"]["name"] == "agent_b"
        ]
        assert s.task["n_rollouts"] == len(rewards) == s.task["expected"] == 2
        assert s.task["n_passed"] == sum(r >= 1 for r in rewards)
        assert s.profile["num_rollouts"] == 2  # the agent's own profile row, not agent_a's


@pytest.mark.parametrize(("case", "short"), [("case_partial", {2: (2, 4)}), ("case_missing_task", {})])
def test_golden_partial_runs_say_what_is_missing(case, short):
    folder = GOLDEN / case
    items, result = shown(folder / "rollouts.jsonl")
    counts = {s.digest.task: (s.task["n_rollouts"], s.task["expected"]) for s in items}
    for task, pair in short.items():
        assert counts[task] == pair
    assert any(note.startswith("partial run") for note in result.notes), result.notes
    if case == "case_missing_task":
        assert 2 not in counts and "1 task(s) have none yet" in " ".join(result.notes)


def test_golden_masked_and_null_rewards_are_not_scored():
    items, _ = shown(GOLDEN / "case_masked" / "rollouts.jsonl")
    by_key = {(s.digest.task, s.digest.rollout): s for s in items}
    masked, null = by_key[(0, 1)], by_key[(1, 1)]
    assert masked.digest.masked and masked.digest.passed is None
    assert masked.task["n_masked"] == 1 and masked.task["n_scored"] == 3
    assert null.digest.reward is None and null.digest.passed is None and null.task["n_scored"] == 3


# -- generated runs: every filter ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    rollouts, _ = write_run(
        tmp_path_factory.mktemp("run"), tasks=15, repeats=4, truncate_every=5, script_task=4
    )
    return rollouts


def everything(tasks=15, repeats=4):
    return [(t, r) for t in range(tasks) for r in range(repeats)]


def test_no_filter_shows_every_rollout(run):
    assert keys(shown(run)[0]) == everything()


def test_task_filter(run):
    assert keys(shown(run, tasks=[3, 7])[0]) == [(t, r) for t in (3, 7) for r in range(4)]


@pytest.mark.parametrize("outcome", ["passed", "failed"])
def test_passed_and_failed(run, outcome):
    want = [(t, r) for t, r in everything() if (reward_of(t, r) == 1.0) == (outcome == "passed")]
    got = keys(shown(run, **{outcome: True})[0])
    assert got == want and got


def test_pass_threshold_moves_the_line(run):
    # rewards are 0/1: a threshold of 0 passes everything, so nothing fails
    assert shown(run, failed=True, threshold=0.0)[0] == []
    assert len(shown(run, passed=True, threshold=0.0)[0]) == 60


def test_reward_range(run):
    assert keys(shown(run, reward_min=0.5)[0]) == [k for k in everything() if reward_of(*k) >= 0.5]
    assert keys(shown(run, reward_max=0.5)[0]) == [k for k in everything() if reward_of(*k) <= 0.5]
    assert shown(run, reward_min=0.2, reward_max=0.8)[0] == []


def test_grep_searches_the_response_text(run):
    items, result = shown(run, grep=r"try 3:")
    assert keys(items) == [(t, 3) for t in range(15)]
    assert result.n_row_tested == 60
    assert keys(shown(run, grep=r"thinking about task 11 ")[0]) == [(11, r) for r in range(4)], (
        "reasoning too"
    )
    assert shown(run, grep=r"Question 5")[0] == [], "the prompt is not the response"


def test_where_tests_the_input_row(run):
    items, _ = shown(run, where=["level=hard"])
    assert {s.digest.task for s in items} == {t for t in range(15) if t % 3 == 2}
    assert keys(shown(run, where=["level=hard", "expected_answer=50"])[0]) == [(5, r) for r in range(4)]
    assert shown(run, where=["no_such_field=1"])[0] == []


@pytest.mark.parametrize("band", ["all-fail", "mixed", "all-pass"])
def test_band(run, band):
    def band_of(t):
        c = sum(reward_of(t, r) for r in range(4))
        return "all-fail" if c == 0 else "all-pass" if c == 4 else "mixed"

    items, _ = shown(run, band=band)
    assert {s.digest.task for s in items} == {t for t in range(15) if band_of(t) == band}
    assert items


def test_truncated(run):
    items, _ = shown(run, truncated=True)
    assert keys(items) == [(t, r) for t, r in everything() if (t * 4 + r) % 5 == 0]
    assert all(
        s.digest.finish.status == "incomplete" and s.digest.finish.reason == "max_output_tokens"
        for s in items
    )


def test_sort_and_limit(run):
    by_reward = shown(run, sort="reward")[0]
    rewards = [s.digest.reward for s in by_reward]
    assert rewards == sorted(rewards)
    by_tokens = shown(run, sort="tokens", limit=5)[0]
    tokens = [50 + 10 * r + t for t, r in everything()]
    assert [s.digest.output_tokens for s in by_tokens] == sorted(tokens, reverse=True)[:5]
    first, result = shown(run, failed=True, limit=3)
    assert len(first) == 3 and result.n_candidates > 3


def test_filters_combine(run):
    items, _ = shown(run, tasks=[2, 3, 4, 5], failed=True, where=["level=hard"])
    assert keys(items) == [(t, r) for t in (2, 5) for r in range(4) if reward_of(t, r) == 0.0]


def test_fan_out_generated(tmp_path):
    rollouts, _ = write_run(tmp_path, tasks=4, repeats=3, agents=("a1", "a2"))
    items, result = shown(rollouts, agent="a2", tasks=[1])
    assert keys(items) == [(1, r) for r in (3, 4, 5)] and {s.digest.agent for s in items} == {"a2"}
    assert all(s.task["expected"] == 3 and s.task["agent"] == "a2" for s in items)
    assert len(result.table) == 8


def test_digest_texts_match_the_file(run):
    raw = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows_of(run)}
    for s in shown(run)[0]:
        t, r = s.digest.task, s.digest.rollout
        assert s.digest.response_text == message_text(raw[(t, r)])
        expected = text_of(t, r) + (" " + SCRIPT if t == 4 else "")
        assert s.digest.final_text == expected
        assert s.digest.extracted_answer == answer_of(t, r)


# -- runs being written, partial, malformed -----------------------------------------------------------------


def test_torn_tail_is_skipped_and_noted(tmp_path):
    rollouts, _ = write_run(tmp_path, tasks=3, repeats=2)
    with open(rollouts, "ab") as handle:
        handle.write(b'{"_ng_task_index": 0, "_ng_rollout_index": 9, "response": {"out')
    items, result = shown(rollouts)
    assert len(items) == 6 and result.scan.torn_tail
    assert any("cut off" in n for n in result.notes)


def test_rows_appended_while_reading_are_left_for_the_next_read(tmp_path):
    rollouts, _ = write_run(tmp_path, tasks=3, repeats=2, drop=((2, 1),))
    paths = resolve(rollouts)
    result = inspect_run(paths, make_selection(Filters()))
    line = [r for r in rows_of(rollouts) if r["_ng_task_index"] == 2][0]
    with open(rollouts, "a") as handle:  # the collector appends the missing rollout after pass 1
        handle.write(json.dumps({**line, "_ng_rollout_index": 1}) + "\n")
    assert len(list(result.rollouts())) == 5, "the rollouts of pass 1, read back by offset"
    assert len(shown(rollouts)[0]) == 6


def test_a_bad_line_in_the_middle_names_file_and_line(tmp_path, run_ngrp):
    rollouts, _ = write_run(tmp_path, tasks=2, repeats=2)
    lines = rollouts.read_text().splitlines()
    lines[1] = lines[1][:-5]
    rollouts.write_text("\n".join(lines) + "\n")
    res = run_ngrp("inspect", rollouts)
    assert res.returncode == 3 and f"{rollouts}:2:" in res.stderr


def test_refuses_what_is_not_a_regular_file(tmp_path, run_ngrp):
    fifo = tmp_path / "rollouts.jsonl"
    os.mkfifo(fifo)
    res = run_ngrp("inspect", fifo)
    assert res.returncode == 3 and "not a regular file" in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--passed", "--failed"], "exclude each other"),
        (["--grep", "("], "not a regular expression"),
        (["--where", "level"], "FIELD=VALUE"),
        (["--reward-min", "1", "--reward-max", "0"], "above --reward-max"),
        (["--pass-threshold", "nan"], "finite"),
    ],
)
def test_bad_options_exit_2(run, run_ngrp, args, message):
    res = run_ngrp("inspect", run, *args)
    assert res.returncode == 2 and message in res.stderr, res.stderr


def test_missing_inputs_file_exits_3(run, run_ngrp, tmp_path):
    res = run_ngrp("inspect", run, "--inputs", tmp_path / "nope.jsonl")
    assert res.returncode == 3 and "no such file" in res.stderr


def test_without_inputs_prompts_come_from_the_rollouts(tmp_path):
    rollouts, materialized = write_run(tmp_path, tasks=2, repeats=2)
    materialized.unlink()
    items, result = shown(rollouts)
    assert result.paths.inputs is None and items[0].task["expected"] is None
    assert items[0].digest.prompt.startswith("Question 0:") and items[0].digest.expected_answer == "0"
    assert any("no materialized inputs" in n for n in result.notes)


# -- the command: text and --json ---------------------------------------------------------------------------


def test_json_lines_match_the_schema_and_the_file(run, run_ngrp):
    res = run_ngrp("inspect", run, "--json", "--limit", "0", "--max-chars", "20")
    assert res.returncode == 0, res.stderr
    validator = Draft202012Validator(SCHEMA)
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(lines) == 60
    raw = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows_of(run)}
    for item in lines:
        assert not list(validator.iter_errors(item)), item
        row = raw[(item["_ng_task_index"], item["_ng_rollout_index"])]
        assert item["response_text"] == message_text(row), "response_text is whole, byte for byte"
        assert item["chars"]["final_text"] == len(message_text(row))
        if item["chars"]["final_text"] > 60:
            assert "chars cut" in item["final_text"] and item["final_text"].endswith(message_text(row)[-5:])
    assert "60 rollout(s) shown" in res.stderr


def test_json_full_keeps_every_text_whole(run, run_ngrp):
    res = run_ngrp("inspect", run, "--json", "--full", "--task", "4")
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [item["final_text"] for item in lines] == [text_of(4, r) + " " + SCRIPT for r in range(4)]


def test_text_output_has_task_headers_with_wilson(run, run_ngrp):
    res = run_ngrp("inspect", run, "--task", "2", "--task", "0")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    c = sum(reward_of(2, r) for r in range(4))
    ci = binomtest(int(c), 4).proportion_ci(method="wilson")
    assert (
        f"== task 2 (agent policy_agent): passed {int(c)}/4 = {c / 4:.3f}, "
        f"95% Wilson [{ci.low:.3f}, {ci.high:.3f}]" in out
    )
    assert out.index("== task 0") < out.index("== task 2"), "in task order"
    assert out.count("-- rollout 2-") == 4 and "4 of 4 rollouts" in out
    assert text_of(2, 1) in out and "extracted  " in out and "expected: 20" in out
    assert "8 rollout(s) shown of 8 selected" in out


def test_text_marks_cuts_and_full_removes_them(tmp_path, run_ngrp):
    rollouts, _ = write_run(tmp_path, tasks=1, repeats=1)
    rows = rows_of(rollouts)
    long = "start " + "x" * 2000 + " the answer is \\boxed{0}"
    rows[0]["response"]["output"][1]["content"][0]["text"] = long
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cut = run_ngrp("inspect", rollouts, "--max-chars", "100").stdout
    assert "chars cut ...]" in cut and "\\boxed{0}" in cut and "x" * 200 not in cut
    full = run_ngrp("inspect", rollouts, "--full").stdout
    assert "x" * 2000 in full and "chars cut" not in full


def test_nothing_matched_is_not_an_error(run, run_ngrp):
    res = run_ngrp("inspect", run, "--grep", "no such text anywhere")
    assert res.returncode == 0 and "0 rollout(s) shown" in res.stdout


def test_explicit_inputs_and_profile_paths(tmp_path, run_ngrp):
    folder = tmp_path / "elsewhere"
    shutil.copytree(GOLDEN / "case_complete", folder)
    (folder / "rollouts.jsonl").rename(folder / "other.jsonl")
    res = run_ngrp("inspect", folder / "other.jsonl", "--json", "--task", "0")
    assert {json.loads(line)["expected_answer"] for line in res.stdout.splitlines()} == {"4"}, (
        "from the rollouts"
    )
    assert all(json.loads(line)["profile"] is None for line in res.stdout.splitlines())
    res = run_ngrp(
        "inspect",
        folder / "other.jsonl",
        "--json",
        "--task",
        "0",
        "--inputs",
        folder / "rollouts_materialized_inputs.jsonl",
        "--profile",
        folder / "rollouts_reward_profiling.jsonl",
    )
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert all(item["profile"]["mean/reward"] == 0.75 and item["task"]["expected"] == 4 for item in lines)


def test_parallel_scan_equals_the_serial_one(tmp_path):
    import numpy as np

    from ngrp_lib.inspect.facts import Facts, scan_all

    rollouts, _ = write_run(tmp_path, tasks=40, repeats=3, agents=("a1", "a2"), truncate_every=4)
    lines = rollouts.read_text().splitlines(keepends=True)
    lines.insert(50, "\n")  # a blank line in the middle
    rollouts.write_text("".join(lines) + '{"_ng_task_index": 1, "_ng_ro')  # and a torn tail
    serial = scan_all(rollouts, previews=True, workers=1)
    for workers in (2, 3):
        parallel = scan_all(rollouts, previews=True, workers=workers)
        for name in Facts.COLUMNS:
            assert np.array_equal(getattr(serial[0], name), getattr(parallel[0], name)), name
        assert parallel[0].agents == serial[0].agents and parallel[1] == serial[1]
        assert parallel[2].previews == serial[2].previews
    assert serial[1].torn_tail and serial[1].blank_lines == 1 and serial[1].rows == 240


def test_parallel_scan_names_the_bad_line(tmp_path):
    from ngrp_lib.errors import InputError
    from ngrp_lib.inspect.facts import scan_all

    rollouts, _ = write_run(tmp_path, tasks=20, repeats=4)
    lines = rollouts.read_text().splitlines()
    lines[70] = lines[70][:-3]
    rollouts.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"{rollouts}:71:"):
        scan_all(rollouts, workers=2)


@pytest.mark.parametrize("block", [64, 1 << 22])
def test_lines_holding_equals_a_row_by_row_search(tmp_path, monkeypatch, block):
    from ngrp_lib.inspect import facts as facts_module
    from ngrp_lib.inspect.facts import lines_holding, scan_all
    from ngrp_lib.inspect.select import Needle

    monkeypatch.setattr(facts_module, "BLOCK", block)  # tiny blocks: needles cut across block boundaries
    rollouts, _ = write_run(tmp_path, tasks=12, repeats=3)
    lines = rollouts.read_text().splitlines(keepends=True)
    lines.insert(5, "  \n")
    rollouts.write_text("".join(lines))
    facts, stats, _ = scan_all(rollouts)
    raw = [rollouts.read_bytes()[o : o + n] for o, n in zip(facts.offset, facts.length, strict=True)]
    for text, fold in [
        (b"try 2:", False),
        (b"TRY 2:", True),
        (b"boxed{71}", False),
        (b"TASK 1", True),
        (b"zzz", False),
    ]:
        mask = lines_holding(rollouts, Needle(text.lower() if fold else text, fold), facts, stats.size)
        want = [(text.lower() in r.lower()) if fold else (text in r) for r in raw]
        assert mask.tolist() == want, text


def test_a_task_not_in_the_run_is_named_not_just_zero_selected(run_ngrp):
    rollouts = GOLDEN / "case_complete" / "rollouts.jsonl"
    tasks = sorted({r["_ng_task_index"] for r in rows_of(rollouts)})
    items, result = shown(rollouts, tasks=[tasks[0], 99, 1000])
    assert items and all(s.digest.task == tasks[0] for s in items)
    span = f"{tasks[0]}-{tasks[-1]}, {len(tasks)} tasks"
    assert f"--task 99, 1000: not in this run (its tasks: {span})" in result.notes
    text = run_ngrp("inspect", rollouts, "--task", "99")
    assert text.returncode == 0 and "--task 99: not in this run" in text.stdout
