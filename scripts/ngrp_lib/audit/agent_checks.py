"""Health checks for agent rollouts, read from `response.output` alone (no trajectory capture needed).

NeMo Gym 0.7.0 has no check with these meanings (its tool checks read its own trajectory capture, which
most agents do not write), so every id here is ngrp's:

- `ngrp/tool_arguments_invalid`: a `function_call` whose `arguments` do not parse as a JSON object. Gym's
  simple agent then sends the model `{"error": "Invalid tool call arguments: ..."}` instead of calling.
- `ngrp/tool_output_error`: a `function_call_output` that reports an error (not counted for the output of
  a call whose arguments were invalid: that error is the first check's). The rule (nothing else counts):
  the output is a JSON object with a non-empty `"error"` value (Gym's own wording for bad arguments, and
  the usual tool convention); or a JSON object whose only key is `"detail"` (the body FastAPI returns for
  an HTTP error from the resources server: an unknown tool route, arguments its model rejects, a crash);
  or text whose first line starts with `Error` / `error` / `ERROR` followed by `:`, or with
  `Traceback (most recent call last)`.
- `ngrp/tool_call_loop`: the same call (tool name and arguments, compared as parsed JSON so key order and
  spacing do not matter) made `--tool-loop-min-repeats` times or more in one rollout.
- `ngrp/ended_on_tool_call`: the last output item is a `function_call` or its `function_call_output`, and
  the row shows that the run's own limit cut the agent there (`ended_how`): Gymnasium's `truncated: true`
  (without `terminated: true`); `response.status` `incomplete` or an `incomplete_details.reason`; a
  termination the harness recorded that names a limit (`termination.reason`/`.detail`, `termination_reason`
  saying limit, max steps/turns, timeout or horizon, e.g. terminal_bench_4's `LimitsExceeded`;
  `horizon_reached: true`); or `max_steps` (on the row or its materialized input) reached by the turns.
- `ngrp/ended_on_tool_call_unknown`: it ended so, and the row shows neither such a cut nor an answer, so
  whether a step limit cut the agent is unknown (Gym's simple agent ends on a tool output only at its
  `max_steps`, which the row does not hold; other agents answer through a tool). Neither check fires when
  the call was the agent's answer or the environment's last step: `terminated: true` (a finished wordle
  game); one model turn (the action a single-step environment scores: circle_click's click,
  terminal_multi_harness's next command, single_step_tool_use's call); a termination the harness recorded
  as `completed`; or a last call to an answer tool, whose name has the word submit, answer, final or
  finish (`submit_final_result`, aviary's `submit_answer`, gdpval's `finish`). Both name the tool the agent
  stopped on (`detail.tool`, `detail.tools` for "which tool").
- `ngrp/context_window_exceeded`: the server said the context window is full: `response.error` (code or
  message), `incomplete_details.reason` or the row's `failure_reason` names it (the code
  `context_length_exceeded`, or "context length" / "context window" / "maximum context" in the text).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..artifacts.items import CALL, CALL_OUTPUT, MESSAGE, MODEL_ROLES, REASONING
from ..artifacts.response import output_list

ARGS_INVALID = "ngrp/tool_arguments_invalid"
OUTPUT_ERROR = "ngrp/tool_output_error"
CALL_LOOP = "ngrp/tool_call_loop"
ENDED_ON_CALL = "ngrp/ended_on_tool_call"
ENDED_UNKNOWN = "ngrp/ended_on_tool_call_unknown"
CONTEXT_FULL = "ngrp/context_window_exceeded"
AGENT_IDS = (ARGS_INVALID, OUTPUT_ERROR, CALL_LOOP, ENDED_ON_CALL, ENDED_UNKNOWN, CONTEXT_FULL)
TEXT_LIMIT = 200
_ERROR_TEXT = re.compile(r"\s*(?:(?:error|ERROR|Error)\b[^\n]{0,80}?:|Traceback \(most recent call last\))")
_CONTEXT = re.compile(r"context[_ ]length|context[ _]window|maximum context", re.IGNORECASE)
# a harness's recorded termination that names the run's limit (mini-swe-agent's LimitsExceeded, a timeout)
_LIMIT = re.compile(
    r"limit|max[_ ]?(?:steps|turns|iterations)|time[_ ]?out|timed[_ ]out|horizon", re.IGNORECASE
)
_ANSWER_WORDS = frozenset({"submit", "answer", "final", "finish"})  # an answer tool's name has one
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def output_reports_error(output: Any) -> bool:
    """The documented rule for a tool output that reports an error (see the module's docstring)."""
    if not isinstance(output, str):
        return False
    head = output.lstrip()[:1]
    if head == "{":
        if '"error"' not in output and '"detail"' not in output:  # most outputs stop here, unparsed
            return False
        try:
            value = orjson.loads(output)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(value, dict):
            return False
        error = value.get("error")
        return bool(error) or (list(value) == ["detail"] and bool(value["detail"]))
    return bool(_ERROR_TEXT.match(output))


def _arguments(raw: Any) -> tuple[Any, bool]:
    """(canonical arguments for comparing calls, valid)."""
    if isinstance(raw, dict):
        return orjson.dumps(raw, option=orjson.OPT_SORT_KEYS), True
    if not isinstance(raw, str):
        return repr(raw), False
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw, False
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS), isinstance(value, dict)


def _clip(value: Any) -> Any:
    return value[:TEXT_LIMIT] if isinstance(value, str) else value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def agent_findings(
    response: dict,
    loop_min: int,
    ignored: frozenset[str],
    out: list[dict],
    row: dict | None = None,
    max_steps: int | None = None,
) -> None:
    """Append a finding per agent check that fires on this response (one per check: its first place,
    with a count where there are several). `row`: the rollout row (the environment's `terminated` /
    `truncated` flags, a recorded termination, `max_steps`); `max_steps`: the materialized input's."""
    output = output_list(response)
    if not output:
        return
    turn, open_turn = 0, False
    bad_args: list[dict] = []
    errors: list[dict] = []
    names: dict[str, str | None] = {}
    refused: set[str] = set()  # calls with invalid arguments: their error output is that, not a tool error
    calls: dict[tuple[Any, Any], list[int]] = {}
    for item in output:
        if type(item) is not dict:
            continue
        kind = item.get("type")
        model = kind in (CALL, REASONING) or (kind == MESSAGE and item.get("role") in MODEL_ROLES)
        if model and not open_turn:
            turn += 1
        open_turn = model
        if kind == CALL:
            name = _str(item.get("name"))
            names[str(item.get("call_id"))] = name
            canonical, valid = _arguments(item.get("arguments"))
            if not valid:
                refused.add(str(item.get("call_id")))
                bad_args.append({"turn": turn, "tool": name, "arguments": _clip(item.get("arguments"))})
            calls.setdefault((name, canonical), []).append(turn)
        elif (
            kind == CALL_OUTPUT
            and str(item.get("call_id")) not in refused
            and output_reports_error(item.get("output"))
        ):
            tool = names.get(str(item.get("call_id")))
            errors.append({"turn": turn, "tool": tool, "output": _clip(item.get("output"))})
    _emit(out, ignored, ARGS_INVALID, bad_args)
    _emit(out, ignored, OUTPUT_ERROR, errors)
    if CALL_LOOP not in ignored:
        _loop(calls, loop_min, out)
    last = next((i for i in reversed(output) if type(i) is dict), None)
    if last is None or last.get("type") not in (CALL, CALL_OUTPUT):
        return
    tool = names.get(str(last.get("call_id"))) if last.get("type") == CALL_OUTPUT else _str(last.get("name"))
    if tool is None and names:
        tool = list(names.values())[-1]
    how, evidence = ended_how(row or {}, response, turn, tool, max_steps)
    check = ENDED_ON_CALL if how == CUT else ENDED_UNKNOWN if how == UNKNOWN_END else None
    if check is not None and check not in ignored:
        detail: dict[str, Any] = {"last_item": last.get("type"), "tool": tool, "turns": turn}
        if how == CUT:
            detail["cut_by"] = evidence
        detail["tools"] = {tool or "": 1}  # the tool it stopped on, for `tool_breakdown`
        out.append(_finding(check, detail, turn))


CUT, ANSWERED, UNKNOWN_END = "cut", "answered", "unknown"


def ended_how(
    row: dict, response: dict, turns: int, tool: str | None, max_steps: int | None = None
) -> tuple[str, str]:
    """How a rollout whose last item is a tool call (or its output) ended: (CUT, the evidence that the
    run's limit cut it), (ANSWERED, why the call was the answer or the environment's last step), or
    (UNKNOWN_END, "") when the row tells neither. The documented rule (the module's docstring), in order:
    the environment's own end, a limit's cut, one model turn, a completed termination, an answer tool,
    `max_steps` reached. (A `max_steps` of 1 reached in one turn is how a single-step environment is run,
    so the one-turn rule comes before it.)"""
    if row.get("terminated") is True:
        return ANSWERED, "terminated: true"
    if row.get("truncated") is True:
        return CUT, "truncated: true"
    status = response.get("status")
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if isinstance(reason, str) and reason:
        return CUT, f"incomplete_details.reason: {_clip(reason)}"
    if status == "incomplete":
        return CUT, "status: incomplete"
    said = _termination(row)
    if row.get("horizon_reached") is True:
        return CUT, "horizon_reached: true"
    limit = next((f"{where}: {text}" for where, text in said if _LIMIT.search(text)), None)
    if limit is not None:
        return CUT, _clip(limit)
    if turns == 1:
        return ANSWERED, "one model turn"
    if any(text == "completed" for where, text in said if where.endswith("reason")):
        return ANSWERED, "termination: completed"
    if tool is not None and _ANSWER_WORDS.intersection(w.lower() for w in _WORD.findall(tool)):
        return ANSWERED, f"answer tool {tool}"
    steps = row.get("max_steps")
    steps = steps if type(steps) is int else max_steps
    if type(steps) is int and steps > 0 and turns >= steps:
        return CUT, f"max_steps {steps} reached"
    return UNKNOWN_END, ""


def _termination(row: dict) -> list[tuple[str, str]]:
    """What a harness recorded about how the rollout ended: terminal_bench_4's `termination` object
    (`reason`, `detail`), or a `termination_reason` string."""
    said: list[tuple[str, str]] = []
    block = row.get("termination")
    if isinstance(block, dict):
        said += [(f"termination.{k}", v) for k in ("reason", "detail") if isinstance(v := block.get(k), str)]
    elif isinstance(block, str):
        said.append(("termination", block))
    if isinstance(row.get("termination_reason"), str):
        said.append(("termination_reason", row["termination_reason"]))
    return said


def _finding(check: str, detail: dict, turn: int) -> dict:
    return {"check": check, "locator": {"turn": turn}, "detail": detail}


def _emit(out: list[dict], ignored: frozenset[str], check: str, found: list[dict]) -> None:
    if found and check not in ignored:
        first = found[0]
        tools: dict[str, int] = {}
        for each in found:  # every tool it happened with, for `tool_breakdown` ("which tool breaks it")
            tools[each["tool"] or ""] = tools.get(each["tool"] or "", 0) + 1
        out.append(_finding(check, {**first, "count": len(found), "tools": tools}, first["turn"]))


def _loop(calls: dict[tuple[Any, Any], list[int]], loop_min: int, out: list[dict]) -> None:
    (name, canonical), turns = max(calls.items(), key=lambda kv: len(kv[1]), default=((None, None), []))
    if len(turns) >= loop_min:
        args = canonical.decode() if isinstance(canonical, bytes) else canonical
        detail = {"tool": name, "arguments": _clip(args), "copies": len(turns), "first_turn": turns[0],
                  "tools": {name or "": len(turns)}}  # fmt: skip
        out.append(_finding(CALL_LOOP, detail, turns[0]))


def context_overflow(row: dict, response: dict | None) -> dict | None:
    """The detail of a context-window overflow the server reported, or None."""
    said: list[tuple[str, Any]] = []
    if isinstance(response, dict):
        error = response.get("error")
        if isinstance(error, dict):
            said += [("error.code", error.get("code")), ("error.message", error.get("message"))]
        elif isinstance(error, str):
            said.append(("error", error))
        details = response.get("incomplete_details")
        if isinstance(details, dict):
            said.append(("incomplete_details.reason", details.get("reason")))
    said.append(("failure_reason", row.get("failure_reason")))
    for where, text in said:
        if isinstance(text, str) and _CONTEXT.search(text):
            return {"where": where, "said": _clip(text)}
    return None
