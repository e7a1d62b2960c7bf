"""A rollout that ends on a tool call is a setting fault only when the row shows the run's limit cut it
(fresh replay 2026-12-05, wrong turn 2): NeMo Gym 0.7.0's own example rows end on a call in several ways,
and only some are cuts.

- answered through a tool: finance_agent_v2 ends every rollout on `submit_final_result` and its output,
  aviary on `submit_answer`, gdpval on `finish` (no output); terminal_multi_harness and
  single_step_tool_use are one turn whose call is the action the environment scores; terminal_bench_4's
  harness records `termination.reason: completed`. None is flagged, and their zeros are the policy's.
- cut by the run's limit: Gymnasium's `truncated: true` (wordle, indian_banking), a termination naming a
  limit (terminal_bench_4's `LimitsExceeded`), `incomplete_details`, `horizon_reached`, or `max_steps`
  (on the row or its materialized input) reached. `ngrp/ended_on_tool_call` [setting], with the evidence.
- neither: `ngrp/ended_on_tool_call_unknown` [unknown], so the answer line says unknown, not setting.

Both findings name the tool the agent stopped on, and health's "tools behind agent findings" lists them.
The rows are built here in each environment's shape (Gym's files are tens to hundreds of KB); the gym tier
runs the rule over every example_rollouts.jsonl of the installed Gym.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import orjson
import pytest
from agent_rows import _call, _message, _output, _reasoning, agent_row

from ngrp_lib.artifacts.assign_keys import assign_keys
from ngrp_lib.audit.health import run_health

CUT, UNKNOWN = "ngrp/ended_on_tool_call", "ngrp/ended_on_tool_call_unknown"


def _row(task: int, items: list[dict], reward: float, **top) -> dict:
    """A keyed agent row with `items` as its output (agent_rows' request and usage)."""
    row = agent_row(task, 0, turns=3, components={"correctness": reward})
    row["response"]["output"] = items
    row.update(top)
    return row


def _search(key: str, turn: int) -> list[dict]:
    return [
        _reasoning(key, turn, "look it up"),
        _call(key, turn, '{"query": "revenue"}', "sec_filing_search"),
        _output(key, turn, '{"results": "Revenue was 4.8B."}'),
    ]


def _submit(key: str, turn: int, tool: str = "submit_final_result", output: str | None = "{}") -> list[dict]:
    items = [_reasoning(key, turn, "done"), _call(key, turn, '{"final_result": "4.8B"}', tool)]
    return items + ([_output(key, turn, output)] if output is not None else [])


def _shapes() -> dict[str, tuple[dict, str | None]]:
    """name -> (row, the check it must raise or None). Task numbers are the dict's order."""
    rows: dict[str, tuple[dict, str | None]] = {}

    def add(name: str, items: list[dict], check: str | None, reward: float = 0.0, **top) -> None:
        rows[name] = (_row(len(rows), items, reward, **top), check)

    k = "k"
    # answered through a tool (finance_agent_v2, finance_sec_search; aviary; gdpval)
    add("finance_submit", _search(k, 1) + _search(k, 2) + _submit(k, 3), None)
    add("aviary_submit_answer", _search(k, 1) + _submit(k, 2, "submit_answer", "True"), None, 1.0)
    add("gdpval_finish", _search(k, 1) + [_message(k, "Done."), _call(k, 2, '{"reason": "ok"}', "finish")],
        None, 1.0)  # fmt: skip
    # one turn: the call is the action the environment scores (terminal_multi_harness, single_step_tool_use)
    add("one_turn_next_action", [_call(k, 1, '{"cmd": "git status"}', "exec_command")], None,
        expected_action={"name": "exec_command"})  # fmt: skip
    add("one_turn_two_calls", [_call(k, 1, '{"cmd": "pwd"}', "exec_command"),
        _call(k, 2, '{"session_id": 7}', "write_stdin")], None, 1.0)  # fmt: skip
    add("one_turn_message_and_call", [_message(k, "Let me check."),
        _call(k, 1, '{"user_id": "G1"}', "authenticate_user")], None)  # fmt: skip
    # the harness says the agent completed (terminal_bench_4 rows 3-4: mini-swe-agent's submit echo)
    add("termination_completed", _search(k, 1) + _search(k, 2) + [_call(k, 3, '{"command": "echo"}', "bash")],
        None, termination={"reason": "completed", "exit_code": None, "detail": None})  # fmt: skip
    # the environment ended the episode (a finished wordle game)
    add("terminated", _search(k, 1) + [_call(k, 2, '{"guess": "chump"}', "submit_guess")], None,
        terminated=True, truncated=False)  # fmt: skip
    # cut by the run's limit
    add("gymnasium_truncated", _search(k, 1) + _search(k, 2), CUT, terminated=False, truncated=True)
    add("limits_exceeded", _search(k, 1) + [_call(k, 2, '{"command": "ls"}', "bash")], CUT,
        termination={"reason": "nonzero_exit", "exit_code": None, "detail": "LimitsExceeded"})  # fmt: skip
    add("horizon_reached", _search(k, 1) + _search(k, 2), CUT, horizon_reached=True)
    add("max_steps_on_row", _search(k, 1) + _search(k, 2) + _search(k, 3), CUT, max_steps=3)
    add("max_steps_materialized", _search(k, 1) + _search(k, 2), CUT)  # its input says max_steps 2
    add("incomplete", _search(k, 1) + _search(k, 2), CUT)  # incomplete_details set below
    rows["incomplete"][0]["response"].update(status="incomplete", incomplete_details={"reason": "max_turns"})
    # neither: a generic tool's output last, nothing said (Gym's simple agent at a max_steps it does not
    # write), or max_steps not reached
    add("nothing_said", _search(k, 1) + _search(k, 2), UNKNOWN)
    add("max_steps_not_reached", _search(k, 1) + _search(k, 2), UNKNOWN, max_steps=10)
    add("nonzero_exit_no_limit", _search(k, 1) + _search(k, 2), UNKNOWN,
        termination={"reason": "nonzero_exit", "detail": "RuntimeError: boom"})  # fmt: skip
    add("answer_word_inside_a_name", _search(k, 1) + _submit(k, 2, "answers_lookup"), UNKNOWN)
    return rows


def _write(folder: Path, rows: list[dict], steps: dict[int, int] | None = None) -> tuple[Path, Path]:
    steps = steps or {}
    folder.mkdir(parents=True, exist_ok=True)
    rollouts, inputs = folder / "r.jsonl", folder / "r_materialized_inputs.jsonl"
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    keys = ("responses_create_params", "_ng_task_index", "_ng_rollout_index", "agent_ref")
    made = [{**{k: r[k] for k in keys}, **({"max_steps": steps[r["_ng_task_index"]]} if
             r["_ng_task_index"] in steps else {})} for r in rows]  # fmt: skip
    inputs.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in made))
    return inputs, rollouts


def test_each_gym_shape_gets_its_verdict_and_cause(tmp_path, run_ngrp):
    shapes = _shapes()
    names = list(shapes)
    steps = {names.index("max_steps_materialized"): 2}
    inputs, rollouts = _write(tmp_path, [row for row, _ in shapes.values()], steps)
    data = json.loads(run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json").stdout)
    verdicts = {
        json.loads(line)["_ng_task_index"]: json.loads(line)
        for line in (tmp_path / "r_rollout_verdicts.jsonl").read_text().splitlines()
    }
    for task, (name, (_, check)) in enumerate(shapes.items()):
        found = [f for f in verdicts[task]["findings"] if f["check"] in (CUT, UNKNOWN)]
        assert [f["check"] for f in found] == ([check] if check else []), name
        if found:
            tool = found[0]["detail"]["tool"]
            assert tool and found[0]["detail"]["tools"] == {tool: 1}, name  # names the tool it stopped on
            assert ("cut_by" in found[0]["detail"]) == (check == CUT), name
    detail = {
        name: next(f["detail"] for f in verdicts[names.index(name)]["findings"] if f["check"] == CUT)
        for name, (_, check) in shapes.items()
        if check == CUT
    }
    assert detail["gymnasium_truncated"]["cut_by"] == "truncated: true"
    assert detail["limits_exceeded"] == {
        "last_item": "function_call", "tool": "bash", "turns": 2,
        "cut_by": "termination.detail: LimitsExceeded", "tools": {"bash": 1},
    }  # fmt: skip
    assert detail["max_steps_materialized"]["cut_by"] == "max_steps 2 reached"
    assert detail["max_steps_on_row"]["cut_by"] == "max_steps 3 reached"
    assert detail["incomplete"]["cut_by"] == "incomplete_details.reason: max_turns"
    assert detail["horizon_reached"]["cut_by"] == "horizon_reached: true"
    # whose zeros: the cuts' are the setting's, the unknowns' unknown, the answered ones the policy's
    zeros = {name for name, (row, _) in shapes.items() if row["reward"] == 0}
    cut = sum(1 for n in zeros if shapes[n][1] == CUT)
    unknown = sum(1 for n in zeros if shapes[n][1] == UNKNOWN)
    by_cause = data["causes"]["zero_rewards"]["by_cause"]
    assert (by_cause["setting"], by_cause["unknown"], by_cause["policy"]) == (
        cut, unknown, len(zeros) - cut - unknown
    )  # fmt: skip
    answer = data["causes"]["answer"]
    assert f"{cut} setting ({CUT} {cut}; {CUT}: whether more steps would pass is unknown" in answer
    assert f"{unknown} unknown ({UNKNOWN} {unknown})" in answer
    causes = {c["id"]: c["cause"] for c in data["checks"]}
    assert (causes[CUT], causes[UNKNOWN]) == ("setting", "unknown")
    # "which tool": the tools behind agent findings include the tool each rollout stopped on
    tools = {t["tool"]: t["by_check"] for t in data["tools"]}
    assert tools["bash"][CUT]["rollouts"] == 1 and tools["sec_filing_search"][CUT]["rollouts"] == 5
    assert tools["sec_filing_search"][UNKNOWN]["rollouts"] == 3 and tools["answers_lookup"][UNKNOWN]
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert f"    {CUT}: rollouts" in text
    assert "  bash: 1 in 1 rollouts (ngrp/ended_on_tool_call 1 / 1)" in text


def test_a_finance_run_that_answers_through_a_tool_is_the_policys(tmp_path, run_ngrp):
    """The replay's case: every rollout ends on submit_final_result and its output; the zeros were
    blamed on the setting ("raise max_steps"), which would change nothing."""
    rewards = [0.0, 0.875, 0.75, 1.0, 0.0]
    rows = [_row(t, _search("f", 1) + _search("f", 2) + _submit("f", 3), r) for t, r in enumerate(rewards)]
    inputs, rollouts = _write(tmp_path, rows)
    data = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    assert {c["id"]: c["affected"] for c in data["checks"]}[CUT] == 0
    assert data["causes"]["zero_rewards"]["by_cause"]["policy"] == 2
    assert "2 are the policy's (2 clean wrong answers)" in data["causes"]["answer"]
    assert " setting (" not in data["causes"]["answer"]


def test_ignoring_the_unknown_check_makes_those_zeros_clean(tmp_path, run_ngrp):
    """An agent that answers through a tool of another name (`report`): the zero is unknown until the
    user, having read the rollout, leaves the check out; then it is a clean wrong answer."""
    rows = [_row(0, _search("r", 1) + _submit("r", 2, "report"), 0.0)]
    inputs, rollouts = _write(tmp_path, rows)
    said = [
        json.loads(run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json",
                            *extra).stdout)["causes"]["zero_rewards"]["by_cause"]
        for extra in ((), ("--ignore", UNKNOWN))
    ]  # fmt: skip
    assert (said[0]["unknown"], said[0]["policy"]) == (1, 0)
    assert (said[1]["unknown"], said[1]["policy"]) == (0, 1)


def _gym_servers() -> Path | None:
    venv = os.environ.get("NGRP_GYM_VENV")
    found = sorted(Path(venv).glob("lib/python3*/site-packages/resources_servers")) if venv else []
    return found[0] if found else None


# Gym 0.7.0's example rows that end cut by the run's limit, read row by row: indian_banking row 3 and
# wordle row 3 (`truncated: true`), terminal_bench_4 rows 0-2 (`termination.detail: LimitsExceeded`).
# Every other row that ends on a call answered (see the module's docstring); none is unknown.
GYM_CUT = {"indian_banking": 1, "terminal_bench_4": 3, "wordle": 1}
GYM_SETTING_ZEROS = {"terminal_bench_4": 3, "wordle": 1}  # of those, the zeros


@pytest.mark.gym
def test_the_rule_on_every_gym_example_rollouts_file(tmp_path):
    root = _gym_servers()
    if root is None:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    judged, cut, unknown, setting_zeros = 0, {}, {}, {}
    for source in sorted(root.glob("*/data/example_rollouts.jsonl")):
        env = source.parts[-3]
        folder = tmp_path / env
        folder.mkdir()
        text = source.read_bytes()
        if not text.strip().startswith(b"{"):
            continue  # placeholder rows (tavily_search: `<PLACEHOLDER ROW>`)
        (folder / "src.jsonl").write_bytes(text if text.endswith(b"\n") else text + b"\n")
        try:
            assign_keys(folder / "src.jsonl", folder / "r.jsonl")
        except Exception:  # rows assign-keys cannot number without --task-field, or without a prompt
            try:
                assign_keys(folder / "src.jsonl", folder / "r.jsonl", task_field="task_idx", overwrite=True)
            except Exception:
                continue
        try:
            health = run_health(folder / "r_materialized_inputs.jsonl", folder / "r.jsonl", write=False)
            data = health.to_json()
        except Exception:  # a file that is not rollouts (genrm_compare, multichallenge: no responses)
            continue
        judged += 1
        affected = {c["id"]: c["affected"] for c in data["checks"]}
        if affected[CUT]:
            cut[env] = affected[CUT]
        if affected[UNKNOWN]:
            unknown[env] = affected[UNKNOWN]
        zeros = data["causes"]["zero_rewards"]["by_check"].get(CUT)
        if zeros:
            setting_zeros[env] = zeros
    assert judged > 100, judged
    assert cut == GYM_CUT and unknown == {} and setting_zeros == GYM_SETTING_ZEROS


@pytest.mark.gym
@pytest.mark.parametrize("server", ["finance_agent_v2", "terminal_multi_harness", "aviary"])
def test_the_replays_three_environments(tmp_path, run_ngrp, server):
    """The replay's three false positives, on Gym's own rows as the replay ran them: assign-keys, then
    health. None is flagged now, and no zero is the setting's."""
    root = _gym_servers()
    if root is None:
        pytest.skip("NGRP_GYM_VENV is not set: `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier")
    shutil.copy(root / server / "data" / "example_rollouts.jsonl", tmp_path / "src.jsonl")
    field = ("--task-field", "task_idx") if server == "aviary" else ()  # aviary's prompt is the env's
    made = run_ngrp("assign-keys", tmp_path / "src.jsonl", "--output", tmp_path / "r.jsonl", *field)
    assert made.returncode == 0, made.stderr
    proc = run_ngrp("health", "--inputs", tmp_path / "r_materialized_inputs.jsonl", "--rollouts",
                    tmp_path / "r.jsonl", "--no-write", "--json")  # fmt: skip
    data = json.loads(proc.stdout)
    affected = {c["id"]: c["affected"] for c in data["checks"]}
    assert (affected[CUT], affected[UNKNOWN]) == (0, 0)
    assert data["causes"]["zero_rewards"]["by_cause"]["setting"] == 0
    if server == "finance_agent_v2":
        assert "2 are the policy's (2 clean wrong answers)" in data["causes"]["answer"]


def test_the_answer_names_the_route_that_settles_a_cut_and_it_runs(tmp_path, run_ngrp):
    """A zero cut at the step limit is the limit's only if more steps would pass: the answer says so and
    names the command that writes those tasks' lines, which then says what to raise."""
    rows = [agent_row(t, r, turns=3, defect="cut" if t < 2 else None, components={"correctness": 0.0})
            for t in range(4) for r in range(2)]  # fmt: skip
    inputs, rollouts = _write(tmp_path, rows)
    health = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts)
    answer = health.stdout.splitlines()[-1]
    route = f"ngrp inspect {rollouts} --finding {CUT} --failed --tasks-out {tmp_path / 'cut_tasks.jsonl'}"
    assert (
        f"4 setting ({CUT} 4; {CUT}: whether more steps would pass is unknown; to settle it: {route}, "
        "then collect them with a larger max_steps)" in answer
    )
    done = run_ngrp(*route.split()[1:])
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "cut_tasks.jsonl").read_text().splitlines()
    assert [json.loads(x)["_ng_task_index"] for x in written] == [0, 1]
    assert (
        done.stdout.splitlines()[1] == "next: raise the agent's max_steps (its Gym config) and collect them:"
    )
