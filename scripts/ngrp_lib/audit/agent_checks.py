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
- `ngrp/ended_on_tool_call`: the last output item is a `function_call` or its `function_call_output`: the
  model never answered after its last call (Gym's agent stops like this at `max_steps`). Not when that
  call was the environment's own last step: the row says `terminated: true` (Gymnasium's flag: a finished
  wordle game), or the rollout is one model turn making one call with the environment's answer last (a
  single-step environment such as circle_click's click).
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
CONTEXT_FULL = "ngrp/context_window_exceeded"
AGENT_IDS = (ARGS_INVALID, OUTPUT_ERROR, CALL_LOOP, ENDED_ON_CALL, CONTEXT_FULL)
TEXT_LIMIT = 200
_ERROR_TEXT = re.compile(r"\s*(?:(?:error|ERROR|Error)\b[^\n]{0,80}?:|Traceback \(most recent call last\))")
_CONTEXT = re.compile(r"context[_ ]length|context[ _]window|maximum context", re.IGNORECASE)


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
    response: dict, loop_min: int, ignored: frozenset[str], out: list[dict], terminated: bool = False
) -> None:
    """Append a finding per agent check that fires on this response (one per check: its first place,
    with a count where there are several). `terminated`: the row says the environment ended the episode
    (Gymnasium's `terminated: true`), so ending on a tool call is the environment's last step."""
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
    ended = terminated or _single_step(turn, sum(map(len, calls.values())), last)
    if (
        last is not None
        and last.get("type") in (CALL, CALL_OUTPUT)
        and not ended
        and ENDED_ON_CALL not in ignored
    ):
        out.append(_finding(ENDED_ON_CALL, {"last_item": last.get("type"), "turns": turn}, turn))


def _single_step(turns: int, calls: int, last: dict | None) -> bool:
    """A single-step environment's rollout (Gym's circle_click, `max_steps: 1`): one model turn making one
    call, and the environment's answer to it last. The call was the action the environment asked for, not
    a step cut short. (A multi-step agent run with `max_steps: 1` by mistake reads the same: its config
    says which.)"""
    return turns == 1 and calls == 1 and last is not None and last.get("type") == CALL_OUTPUT


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
