"""Agent rollouts read item by item: turn numbers, tool calls with pretty arguments, tool outputs, the input
conversation; `inspect` text and --json on Gym-shaped agent rows (tests/agent_rows.py), and --grep over
tool names, arguments and outputs. Expected values are written out here from the rows' construction."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from agent_rows import agent_row, tool_output, write_run
from jsonschema import Draft202012Validator

from ngrp_lib.artifacts.items import pretty_arguments, readable_input, readable_output, turns_and_calls

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schemas" / "inspect_rollout.schema.json").read_text())
GYM_MULTIREWARD = REPO / "tests" / "golden" / "agent" / "example_tool_call_multireward.jsonl"


def test_turns_follow_model_calls():
    items = readable_output(agent_row(0, 0, turns=3)["response"])
    kinds = [(i.turn, i.kind) for i in items]
    assert kinds == [
        (1, "reasoning"), (1, "function_call"), (1, "function_call_output"),
        (2, "reasoning"), (2, "function_call"), (2, "function_call_output"),
        (3, "reasoning"), (3, "message"),
    ]  # fmt: skip
    assert turns_and_calls(agent_row(0, 0, turns=3)["response"]) == (3, 2)


def test_a_user_message_between_replies_opens_a_new_turn():
    """Blackjack's shape (Gym's committed example): assistant, user (the environment), assistant."""
    response = {
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hit"}]},
            {"type": "message", "role": "user", "content": "Your hand: 16"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "stand"}]},
        ]
    }
    items = readable_output(response)
    assert [(i.turn, i.role, i.text) for i in items] == [
        (1, "assistant", "hit"),
        (1, "user", "Your hand: 16"),
        (2, "assistant", "stand"),
    ]
    assert turns_and_calls(response) == (2, 0)


def test_two_calls_in_one_reply_are_one_turn():
    response = {
        "output": [
            {"type": "function_call", "name": "a", "arguments": "{}", "call_id": "1"},
            {"type": "function_call", "name": "b", "arguments": "{}", "call_id": "2"},
            {"type": "function_call_output", "call_id": "1", "output": "x"},
            {"type": "function_call_output", "call_id": "2", "output": "y"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ]
    }
    assert [i.turn for i in readable_output(response)] == [1, 1, 1, 1, 2]
    assert turns_and_calls(response) == (2, 2)


def test_arguments_pretty_printed_or_kept_as_written():
    assert pretty_arguments('{"city":"Paris","n":2}') == ('{\n  "city": "Paris",\n  "n": 2\n}', True)
    assert pretty_arguments('{"city": "Paris", n: 2') == ('{"city": "Paris", n: 2', False)
    assert pretty_arguments("[1, 2]") == ("[1, 2]", False)  # arguments are an object, not a list
    assert pretty_arguments({"already": "parsed"}) == ('{\n  "already": "parsed"\n}', True)


def test_input_conversation_read_whole():
    row = agent_row(5, 0)
    items = readable_input(row["responses_create_params"])
    assert [(i.turn, i.role, i.kind) for i in items] == [(0, "developer", "message"), (0, "user", "message")]
    assert items[1].text == "Which page documents feature 5?"
    assert [i.text for i in readable_input({"input": "plain prompt"})] == ["plain prompt"]


def test_gym_committed_example_rows_read():
    """Three rows of Gym's committed example_tool_call_multireward rollouts (copied, small)."""
    rows = [orjson.loads(line) for line in GYM_MULTIREWARD.read_bytes().splitlines()]
    for row in rows:
        items = readable_output(row["response"])
        calls = [i for i in items if i.kind == "function_call"]
        assert calls and all(i.name == "get_weather" and i.arguments_valid for i in calls)
        outputs = [i for i in items if i.kind == "function_call_output"]
        assert [o.call_id for o in outputs] == [c.call_id for c in calls]
        assert items[-1].kind == "message" and items[-1].turn == 2


@pytest.fixture
def run(tmp_path):
    defects = {(0, 1): "bad_args", (1, 0): "tool_error"}
    return write_run(tmp_path / "run", tasks=3, repeats=2, turns=4, chars=300, defects=defects)


def test_inspect_json_lists_every_item(run, run_ngrp):
    res = run_ngrp("inspect", str(run), "--json", "--limit", "0", "--full")
    assert res.returncode == 0, res.stderr
    validator = Draft202012Validator(SCHEMA)
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(lines) == 6
    for line in lines:
        assert not list(validator.iter_errors(line)), line
        assert line["n_turns"] == 4 and line["n_tool_calls"] == 3
        assert [i["turn"] for i in line["items"]] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4]
        assert [i["role"] for i in line["input"]] == ["developer", "user"]
        task = line["_ng_task_index"]
        outputs = [i["text"] for i in line["items"] if i["type"] == "function_call_output"]
        if (task, line["_ng_rollout_index"]) == (0, 1):
            assert line["items"][1]["arguments_valid"] is False
            assert line["items"][1]["text"] == '{"query": "feature 0", page: 1'
        else:
            assert line["items"][1]["text"] == json.dumps({"query": f"feature {task}", "page": 1}, indent=2)
            assert outputs[0] == tool_output(task, 1, 300)


def test_inspect_json_cuts_long_tool_outputs(run, run_ngrp):
    res = run_ngrp("inspect", str(run), "--json", "--task", "2", "--max-chars", "40")
    line = json.loads(res.stdout.splitlines()[0])
    output = line["items"][2]
    assert output["chars"] == 300 and "chars cut" in output["text"] and len(output["text"]) < 120


def test_inspect_text_shows_turns_in_order(run, run_ngrp):
    res = run_ngrp("inspect", str(run), "--task", "0", "--limit", "2", "--full")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "turns      4, 3 tool call(s)" in out
    assert "[turn 1] calls search_docs (arguments not valid JSON)" in out
    positions = [out.index(f"[turn {n}]") for n in (1, 2, 3, 4)]
    assert positions == sorted(positions)
    assert '"page": 2' in out  # pretty-printed arguments


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("page out of range", [(1, 0)]),  # a tool output
        ("Invalid tool call", [(0, 1)]),  # Gym's output for bad arguments
        ("page: 1$", [(0, 1)]),  # the arguments as written (regex, not a literal)
        ("search_docs", [(t, r) for t in range(3) for r in range(2)]),  # the tool's name
        ("no such text", []),
    ],
)
def test_grep_reads_tool_names_arguments_and_outputs(run, run_ngrp, pattern, expected):
    res = run_ngrp("inspect", str(run), "--json", "--limit", "0", "--grep", pattern)
    assert res.returncode == 0, res.stderr
    found = [(j["_ng_task_index"], j["_ng_rollout_index"]) for j in map(json.loads, res.stdout.splitlines())]
    assert found == expected


def test_task_table_counts_mean_turns_and_tool_calls(tmp_path, run_ngrp):
    """Task 0: 4 turns and 3 turns (no answer: the last turn is dropped), 3 calls each; task 1: 2 and 5."""
    from agent_rows import materialized

    folder = tmp_path / "means"
    folder.mkdir()
    rows = [
        agent_row(0, 0, turns=4),  # 4 turns, 3 calls
        agent_row(0, 1, turns=4, defect="no_answer"),  # 3 turns, 3 calls
        agent_row(1, 0, turns=2),  # 2 turns, 1 call
        agent_row(1, 1, turns=5),  # 5 turns, 4 calls
    ]
    (folder / "rollouts.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    inputs = [materialized(t, r) for t in range(2) for r in range(2)]
    (folder / "rollouts_materialized_inputs.jsonl").write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in inputs)
    )
    res = run_ngrp("inspect", str(folder / "rollouts.jsonl"), "--json", "--limit", "0")
    tasks = {j["_ng_task_index"]: j["task"] for j in map(json.loads, res.stdout.splitlines())}
    assert (tasks[0]["mean_turns"], tasks[0]["mean_tool_calls"]) == (3.5, 3.0)
    assert (tasks[1]["mean_turns"], tasks[1]["mean_tool_calls"]) == (3.5, 2.5)
    text = run_ngrp("inspect", str(folder / "rollouts.jsonl"), "--task", "1").stdout
    assert "mean turns 3.5, mean tool calls 2.5" in text
