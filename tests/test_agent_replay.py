"""Agent rollouts as NeMo Gym's own environments write them (issue 36, wrong turns 8 and 9):

- one truncation rule everywhere: an agent's usage sums its model calls while `max_output_tokens` is per
  call, so `check`, `inspect` and `health` all read a several-turn rollout whose summed output tokens pass
  the cap as not truncated (before, `check` and `inspect` flagged it and `health` did not), and all read a
  reported length stop, or a one-call reply at the cap, as truncated;
- a rollout whose last item is the environment's own terminal step (a single-step click, a finished
  wordle game: `terminated: true`) is not `ngrp/ended_on_tool_call`, so its zero is not the setting's;
- a zero whose usage counts are missing is "unknown", not the infrastructure's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from agent_rows import _call, _output, agent_row, materialized

CAP = 100  # per model call; a 4-turn agent row reports 160 output tokens in all


def _write(folder: Path, rows: list[dict]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rollouts, inputs = folder / "r.jsonl", folder / "r_materialized_inputs.jsonl"
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    inputs.write_bytes(
        b"".join(
            orjson.dumps(
                {
                    **materialized(r["_ng_task_index"], r["_ng_rollout_index"]),
                    "responses_create_params": r["responses_create_params"],
                }  # fmt: skip
            )
            + b"\n"
            for r in rows
        )
    )
    return inputs, rollouts


def _capped(row: dict, cap: int = CAP) -> dict:
    row["responses_create_params"] = {**row["responses_create_params"], "max_output_tokens": cap}
    return row


def _truncation_run(tmp_path: Path) -> tuple[Path, Path]:
    several = [_capped(agent_row(0, r, turns=4)) for r in range(2)]  # 160 tokens summed over 4 calls
    stopped = _capped(agent_row(1, 0, turns=4))  # the server said it stopped at the cap
    stopped["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    stopped["response"]["status"] = "incomplete"
    one_call = _capped(agent_row(1, 1, turns=1), cap=40)  # one call, 40 tokens at a cap of 40
    return _write(tmp_path, [*several, stopped, one_call])


def test_one_truncation_rule_in_check_inspect_and_health(tmp_path, run_ngrp):
    inputs, rollouts = _truncation_run(tmp_path)
    check = json.loads(run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, "--json").stdout)
    health = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    inspect = run_ngrp("inspect", rollouts, "--truncated", "--json")
    assert inspect.returncode == 0, inspect.stderr
    lines = [json.loads(line) for line in inspect.stdout.splitlines()]  # JSON Lines, a rollout each
    shown = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in lines}
    by_health = next(c["affected"] for c in health["checks"] if c["id"] == "ngrp/truncated_at_token_cap")
    assert check["counts"]["stopped_at_token_cap"] == 2
    assert by_health == 2
    assert shown == {(1, 0), (1, 1)}


def _single_step(task: int, rollout: int, hit: bool) -> dict:
    """Gym's circle_click shape: one model turn, one `click` call, the environment's answer last."""
    row = agent_row(task, rollout, turns=1, components={"correctness": 1.0 if hit else 0.0})
    key = f"{task}_{rollout}"
    row["response"]["output"] = [
        _call(key, 1, '{"x": 123, "y": 511}', "click"),
        _output(key, 1, '{"x":123,"y":511}'),
    ]
    return row


def _finished_game(task: int, rollout: int, won: bool) -> dict:
    """Gym's wordle shape: several turns, the last guess a call with no output, `terminated: true`."""
    row = agent_row(task, rollout, turns=3, components={"correctness": 1.0 if won else 0.0})
    key = f"{task}_{rollout}"
    row["response"]["output"].append(_call(key, 9, '{"guess": "crump"}', "submit_guess"))
    row.update(terminated=True, truncated=False)
    return row


def test_the_environments_terminal_step_is_not_ended_on_tool_call(tmp_path, run_ngrp):
    rows = [_single_step(0, r, hit=r == 0) for r in range(3)] + [
        _finished_game(1, r, won=r == 0) for r in range(3)
    ]
    cut = agent_row(2, 0, turns=4, defect="cut", components={"correctness": 0.0})  # the env's limit
    inputs, rollouts = _write(tmp_path, [*rows, cut])
    data = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    ended = next(c for c in data["checks"] if c["id"] == "ngrp/ended_on_tool_call")
    assert ended["affected"] == 1  # only the agent cut short at its step limit
    zero = data["causes"]["zero_rewards"]
    assert zero["total"] == 5 and zero["by_cause"]["setting"] == 1 and zero["by_cause"]["policy"] == 4
    assert "4 are the policy's (4 clean wrong answers)" in data["causes"]["answer"]


def test_missing_usage_is_unknown_not_infrastructure(tmp_path, run_ngrp):
    rows = [agent_row(0, r, turns=2, components={"correctness": 0.0}) for r in range(3)]
    for row in rows[:2]:
        del row["response"]["usage"]
    inputs, rollouts = _write(tmp_path, rows)
    data = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    zero = data["causes"]["zero_rewards"]
    assert zero["by_cause"]["infrastructure"] == 0 and zero["by_cause"]["unknown"] == 2
    assert zero["by_cause"]["policy"] == 1
    assert "2 unknown (model_call_missing_token_counts 2)" in data["causes"]["answer"]
    assert (
        next(c["cause"] for c in data["checks"] if c["id"] == "model_call_missing_token_counts") == "unknown"
    )


def _gym_examples() -> Path | None:
    venv = os.environ.get("NGRP_GYM_VENV")
    found = sorted(Path(venv).glob("lib/python3*/site-packages/resources_servers")) if venv else []
    return found[0] if found else None


@pytest.mark.gym
@pytest.mark.parametrize("server", ["circle_click", "wordle"])
def test_gyms_own_example_rollouts_are_not_a_setting_fault(tmp_path, run_ngrp, server):
    """Gym's committed example rows (clicks, wordle games): a click and a finished game are not
    ended_on_tool_call and their zeros not "setting"; a game cut at the environment's turn limit is."""
    root = _gym_examples()
    if root is None:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    rows = [
        json.loads(line)
        for line in (root / server / "data" / "example_rollouts.jsonl").read_text().splitlines()
    ]
    data = _health_of(rows, tmp_path, run_ngrp)
    # only a game the environment cut at its own step limit (Gymnasium's `truncated: true`) is the setting's
    cut = [r for r in rows if r.get("truncated") is True]
    assert next(c["affected"] for c in data["checks"] if c["id"] == "ngrp/ended_on_tool_call") == len(cut)
    zeros_cut = sum(1 for r in cut if r["reward"] == 0)
    assert data["causes"]["zero_rewards"]["by_cause"]["setting"] == zeros_cut
    assert data["causes"]["zero_rewards"]["total"] > zeros_cut  # the finished games' zeros are the policy's


def _aviary_examples() -> list[dict] | None:
    root = _gym_examples()
    if root is None:
        return None
    path = root / "aviary" / "data" / "example_rollouts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _transitions(task: int, rollout: int, answered: bool) -> dict:
    """Gym's aviary shape (`return_transitions`): the output is a list of transitions, each the
    conversation after that step (the user's task first), each extending the one before."""
    row = agent_row(task, rollout, turns=3, components={"correctness": 0.0})
    flat = row["response"]["output"]
    if not answered:
        flat = flat[:-2]  # stopped after a call's output: no final message
    user = {"content": "Which page documents it?", "role": "user", "type": "message"}
    row["response"]["output"] = [[user, *flat[:3]], [user, *flat]]
    row["response"]["contains_transitions"] = True
    row["response"]["env_id"], row["response"]["group_id"] = "e", str(task)
    return row


def test_aviarys_nested_outputs_are_read_in_health_and_inspect(tmp_path, run_ngrp):
    rows = [_transitions(0, 0, answered=True), _transitions(0, 1, answered=False)]
    broken = _transitions(0, 2, answered=True)
    broken["response"]["output"][1][0] = {"content": "another task", "role": "user", "type": "message"}
    inputs, rollouts = _write(tmp_path, [*rows, broken])
    data = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    affected = {c["id"]: c["affected"] for c in data["checks"] if c["affected"]}
    # the answered one is a clean wrong answer; the other ended on a tool output (no sign of a cut or of an
    # answer: unknown); the third is said unreadable
    assert affected == {"ngrp/ended_on_tool_call_unknown": 1, "ngrp/output_unreadable": 1}, affected
    assert "ngrp/empty_final_answer" not in affected
    shown = run_ngrp("inspect", rollouts, "--task", "0", "--full")
    assert shown.returncode == 0, shown.stderr
    assert "Feature 0 is on page 1." in shown.stdout  # the final message, from the last transition
    assert shown.stdout.count("search_docs") >= 2
    said = run_ngrp("inspect", rollouts, "--task", "0", "--json")
    unread = {
        json.loads(x)["_ng_rollout_index"]: json.loads(x)["output_unreadable"]
        for x in said.stdout.splitlines()
    }
    assert unread[0] is None and unread[1] is None and "do not each extend the one before" in unread[2]
    assert (
        "output      not read: response.output is 2 lists" in shown.stdout
        or "not read: response.output" in shown.stdout
    )


@pytest.mark.gym
def test_gyms_own_aviary_rows_have_answers_not_empty_final_answer(tmp_path, run_ngrp):
    rows = _aviary_examples()
    if rows is None:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    for i, row in enumerate(rows):  # Gym's committed file has no identity keys: numbered here
        row.update(_ng_task_index=i, _ng_rollout_index=0)
    data = _health_of(rows, tmp_path, run_ngrp)
    affected = {c["id"]: c["affected"] for c in data["checks"] if c["affected"]}
    assert "ngrp/empty_final_answer" not in affected and "ngrp/output_unreadable" not in affected, affected
    last = rows[0]["response"]["output"][-1][-1]["content"][0]["text"]
    shown = run_ngrp("inspect", tmp_path / "r.jsonl", "--task", "0", "--full")
    assert last in shown.stdout and "calculator" in shown.stdout  # the final answer and the tool call


def _rename_tool(row: dict, old: str, new: str) -> dict:
    for item in row["response"]["output"]:
        if item.get("type") == "function_call" and item.get("name") == old:
            item["name"] = new
    return row


def test_which_tool_breaks_the_agent(tmp_path, run_ngrp):
    """Issue 36, wrong turn 6: agent findings grouped by tool name, with counts, the rollouts behind them
    and an inspect line that shows one of them."""
    rows = [agent_row(t, r, turns=4) for t in range(3) for r in range(3)]
    errors = {(1, 0), (1, 2), (2, 1)}  # get_page's outputs report an error
    for t, r in errors:
        rows[t * 3 + r] = _rename_tool(
            agent_row(t, r, turns=4, defect="tool_error"), "search_docs", "get_page"
        )
    rows[0] = agent_row(0, 0, turns=4, defect="bad_args")  # search_docs called with broken arguments
    rows[8] = agent_row(2, 2, turns=4, defect="loop")  # search_docs called 3 times the same way
    inputs, rollouts = _write(tmp_path, rows)
    proc = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    tools = {e["tool"]: e for e in json.loads(proc.stdout)["tools"]}
    get_page = tools["get_page"]["by_check"]["ngrp/tool_output_error"]
    assert (get_page["occurrences"], get_page["rollouts"]) == (3, 3)
    assert sorted(map(tuple, get_page["examples"])) == sorted(errors)
    assert "ngrp/tool_output_error" not in tools["search_docs"]["by_check"]
    bad = tools["search_docs"]["by_check"]["ngrp/tool_arguments_invalid"]
    assert (bad["occurrences"], bad["rollouts"], bad["examples"]) == (1, 1, [[0, 0]])
    loop = tools["search_docs"]["by_check"]["ngrp/tool_call_loop"]
    assert (loop["occurrences"], loop["rollouts"], loop["examples"]) == (3, 1, [[2, 2]])
    assert tools["search_docs"]["occurrences"] == 4 and tools["search_docs"]["rollouts"] == 2
    assert list(tools) == ["search_docs", "get_page"]  # most occurrences first
    # the inspect line, run as printed, shows a get_page rollout with the error
    line = get_page["inspect"]
    assert line.startswith(f"ngrp inspect {rollouts} --task 1 --finding ngrp/tool_output_error")
    import shlex

    shown = run_ngrp(*shlex.split(line)[1:])
    assert shown.returncode == 0, shown.stderr
    assert "get_page" in shown.stdout and "page out of range" in shown.stdout
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert "  get_page: 3 in 3 rollouts (ngrp/tool_output_error 3 / 3)" in text
    assert "    ngrp/tool_output_error: rollouts (1, 0), (1, 2), (2, 1)" in text


def _health_of(rows: list[dict], folder, run_ngrp) -> dict:
    """`health --no-write --json` on these rollout rows (written to FOLDER/r.jsonl), with materialized
    inputs cut from them."""
    inputs, rollouts = folder / "m.jsonl", folder / "r.jsonl"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    keys = ("responses_create_params", "_ng_task_index", "_ng_rollout_index")
    inputs.write_text("".join(json.dumps({k: r[k] for k in keys}) + "\n" for r in rows))
    return json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
