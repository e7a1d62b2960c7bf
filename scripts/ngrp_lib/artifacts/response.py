"""What a stored response says: the one place that reads a rollout's `response.output` and `response.usage`.

A rollout row's `response` is an OpenAI Responses object as NeMo Gym stores it. Every command that needs
its texts, its finish or its token counts asks this module, so a built-in verifier (`collect`), a health
check (`health`, `check`), the statistics (`stats`) and what a person reads (`inspect`, `view`) all mean
the same thing by the same name. Every function is pure and never raises on odd shapes: a field of the
wrong type reads as absent.

Texts
- `response_text`: every `output_text` part of every message item, joined: what a built-in verifier scores.
- `final_and_reasoning`: the last message item's text, with an inline `<think>...</think>` block moved to
  the reasoning (models served without a reasoning parser write their thoughts into the message), and the
  text of the `reasoning` items (summaries and content), then any inline block.
- `has_content`, `made_tool_call`, `function_call_count`: whether it said anything, called a tool, how often.
- Every item in order with its turn number (an agent's steps): `artifacts.items`, beside this module.

Finish
- `finish`: `incomplete` when the response says so or carries `incomplete_details` (the length limit:
  `reason` is `max_output_tokens`), else the response's own `status` (`completed`, `failed`...).
- `stop_reason`: `incomplete_details.reason` alone, as the health checks compare it with LENGTH_REASONS.

Truncated (one meaning in every command: check, health, inspect, view, stats, report)
- `stopped_at_token_cap`: the response stopped at the token limit: it says so (`incomplete_details.reason`
  is `max_output_tokens`, `length` or `max_tokens`), or its completion tokens reached the request's
  `max_output_tokens`, said or not (in a response of one model call: an agent's usage sums its calls,
  the cap is per call). An `incomplete` status for another reason (a content filter) is not.
- `truncated`: the same for a rollout row, its cap from the request it stored unless the caller knows it.

Usage (three readings, each named for what it returns; they differ on purpose, see each docstring)
- `usage`: the `usage` object itself, or None (the profiler profiles every number in it).
- `prompt_and_completion_tokens`: Gym's reading for the health checks (Responses names, then chat names).
- `output_and_reasoning_tokens`: what `inspect` and `view` show (Responses names only).
- `output_tokens_or_zero`: the count the collector tallies for its progress line (0 when absent).
- `input_cached_output_tokens`: the cost reading (`artifacts.usage`): Gym's prompt and completion counts
  plus the cached prompt tokens, None where not reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .names import USAGE_MISSING

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
REASONING, MESSAGE, CALL, CALL_OUTPUT = "reasoning", "message", "function_call", "function_call_output"
MODEL_ROLES = (None, "assistant")  # a message item by the model (Gym writes "assistant"; None: unsaid)
_INPUT_ROLES = frozenset({"user", "system", "developer"})  # a transition's opening messages (the task's)
# Finish reasons (Responses `incomplete_details.reason`, chat `finish_reason`) that mean "stopped at the cap".
LENGTH_REASONS = frozenset({"length", "max_output_tokens", "max_tokens"})
FAILED_STATUSES = frozenset({"failed", "error", "cancelled"})
TOOL_CALL_TYPES = frozenset(
    {
        "function_call", "tool_call", "tool_use", "mcp_call", "mcp_list_tools", "mcp_approval_request",
        "file_search_call", "web_search_call", "computer_call", "image_generation_call",
        "code_interpreter_call", "local_shell_call", "custom_tool_call",
    }
)  # fmt: skip
# Keys whose non-blank text counts as content (what Gym's runaway check reads as "the call said something").
_CONTENT_KEYS = (
    "text", "content", "output_text", "answer", "refusal", "encrypted_content", "reasoning",
    "reasoning_content", "summary",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # completed | incomplete | failed | cancelled | in_progress | queued | unknown
    reason: str | None = None  # incomplete_details.reason or the error message

    @property
    def truncated(self) -> bool:
        return self.status == "incomplete"


def output_list(response: Any) -> list | None:
    """`response.output` as the one list of items every reader walks; None when there is none to read.

    Gym's aviary agent with `return_transitions` (`contains_transitions: true`) writes a list of
    transitions instead: each a list, the conversation after that step, each extending the one before.
    Such an output is read as its last transition, without the opening messages of the task (the user's,
    the system's) it starts with. A nested output of any other shape is not read (None):
    `nested_output_problem` says why, and `ngrp health` flags it as `ngrp/output_unreadable`."""
    output = response.get("output") if isinstance(response, dict) else None
    if type(output) is not list:
        return None
    if not output or type(output[0]) is not list:  # the usual flat list: one type test per row
        return output
    return _last_transition(output)


def _last_transition(output: list) -> list | None:
    if not all(type(step) is list for step in output):
        return None
    from itertools import pairwise

    for before, after in pairwise(output):
        if after[: len(before)] != before:
            return None
    last = output[-1]
    start = 0
    while start < len(last) and _opening(last[start]):
        start += 1
    return last[start:]


def _opening(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "message" and item.get("role") in _INPUT_ROLES


def nested_output_problem(response: Any) -> str | None:
    """Why a nested `response.output` cannot be read (see `output_list`), or None (flat, or transitions)."""
    output = response.get("output") if isinstance(response, dict) else None
    if type(output) is not list or not output or type(output[0]) is not list:
        return None
    if _last_transition(output) is not None:
        return None
    if not all(type(step) is list for step in output):
        return f"response.output mixes lists and items ({len(output)} entries): not Gym's transitions"
    return (
        f"response.output is {len(output)} lists that do not each extend the one before (not Gym's aviary "
        "transitions): which items are the rollout's cannot be told"
    )


def output_items(response: Any) -> list[dict]:
    """The response's output items that are objects ([] when it has no output list to read)."""
    output = output_list(response)
    return [item for item in output if isinstance(item, dict)] if output is not None else []


def parts_text(parts: Any, kinds: tuple[str, ...]) -> str:
    """The text of the content parts whose type is one of `kinds`, joined (a plain string is its own text)."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    if len(parts) == 1:  # the usual case, without building a list
        part = parts[0]
        if isinstance(part, dict) and part.get("type") in kinds:
            text = part.get("text")
            return text if isinstance(text, str) else ""
        return ""
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)
    ]
    return "".join(texts)


def response_text(response: Any) -> str:
    """Every output_text part of every message item, joined: the text a built-in verifier reads."""
    return "".join(
        parts_text(item.get("content"), ("output_text",))
        for item in output_items(response)
        if item.get("type") == "message"
    )


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a message that holds an inline `<think>` block; ('', text) when it has none.
    A reply that only closes the block (the chat template opened it) splits at its last `</think>` too."""
    cut = text.rfind(THINK_CLOSE)
    if cut < 0:
        return "", text
    thought = text[:cut]
    start = thought.find(THINK_OPEN)
    if start >= 0 and not thought[:start].strip():
        thought = thought[start + len(THINK_OPEN) :]
    return thought.strip(), text[cut + len(THINK_CLOSE) :].strip()


def final_and_reasoning(response: Any) -> tuple[str, str]:
    """(final text, reasoning text) of a response; either may be empty. One walk over the output items
    (`ngrp health` calls this for every rollout of a run)."""
    output = output_list(response)
    if output is None:
        return "", ""
    last_message: dict | None = None
    thoughts = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            last_message = item
        elif kind == "reasoning":
            text = parts_text(item.get("summary"), ("summary_text",))
            text += parts_text(item.get("content"), ("reasoning_text",))
            if text:
                thoughts.append(text)
    final = parts_text(last_message.get("content"), ("output_text",)) if last_message is not None else ""
    if THINK_CLOSE in final:
        inline, final = split_think(final)
        if inline:
            thoughts.append(inline)
    return final, thoughts[0] if len(thoughts) == 1 else "\n\n".join(thoughts)


def function_call_count(response: Any) -> int:
    """How many `function_call` items the output holds (the tool calls `inspect` counts)."""
    return sum(1 for item in output_items(response) if item.get("type") == "function_call")


def _nonblank(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list):
        return any(_nonblank(item) for item in value)
    if isinstance(value, dict):
        return any(_nonblank(value.get(key)) for key in _CONTENT_KEYS)
    return False


def has_content(response: dict) -> bool:
    """Whether the response holds any non-blank text (answer, reasoning, refusal, ...) in its output."""
    return _nonblank(response.get("output_text")) or _nonblank(output_list(response))


def made_tool_call(response: dict) -> bool:
    """Whether any output item is a tool call of any kind (an agent turn that ends on a call has no final
    text)."""
    output = output_list(response)
    return output is not None and any(
        isinstance(item, dict) and (item.get("type") in TOOL_CALL_TYPES or bool(item.get("tool_calls")))
        for item in output
    )


def finish(response: Any) -> Finish:
    """How the response ended: `incomplete` (with its reason) when cut short, else its own status."""
    if not isinstance(response, dict):
        return Finish("unknown", "the row has no response object")
    details = response.get("incomplete_details")
    status = response.get("status")
    if status == "incomplete" or details:
        reason = details.get("reason") if isinstance(details, dict) else None
        return Finish("incomplete", reason if isinstance(reason, str) else None)
    error = response.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return Finish(
        status if isinstance(status, str) else "unknown", message if isinstance(message, str) else None
    )


def stop_reason(response: dict) -> str | None:
    """The reason a response stopped early (`incomplete_details.reason`), if it says so."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return reason if isinstance(reason, str) else None


def usage(response: Any) -> dict | None:
    """The response's `usage` object, or None when it has none (or it is not an object)."""
    found = response.get("usage") if isinstance(response, dict) else None
    return found if isinstance(found, dict) else None


def prompt_and_completion_tokens(response: dict, not_given: Any = None) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens from `usage`, as Gym's health checks read them; None when absent or not
    a non-negative integer.

    Responses names (`input_tokens`, `output_tokens`) first, chat names (`prompt_tokens`,
    `completion_tokens`) otherwise. `not_given` is the row's USAGE_MISSING: the counts ngrp's collector
    stored as 0 because the server gave none, None here too (missing, not zero).
    """
    counts = response.get("usage")
    if type(counts) is not dict:
        return None, None
    return _prompt_and_completion(counts, not_given)


def _prompt_and_completion(counts: dict, not_given: Any) -> tuple[int | None, int | None]:
    """`prompt_and_completion_tokens` of a response whose `usage` is `counts` (a dict)."""
    prompt = counts.get("input_tokens")
    if prompt is None:
        prompt = counts.get("prompt_tokens")
    completion = counts.get("output_tokens")
    if completion is None:
        completion = counts.get("completion_tokens")
    if type(not_given) is list and not_given:
        prompt = None if "prompt_tokens" in not_given else prompt
        completion = None if "completion_tokens" in not_given else completion
    return (
        prompt if type(prompt) is int and prompt >= 0 else None,
        completion if type(completion) is int and completion >= 0 else None,
    )


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value)


def output_and_reasoning_tokens(response: Any) -> tuple[int | None, int | None]:
    """(output tokens, reasoning tokens) from `usage.output_tokens` and
    `usage.output_tokens_details.reasoning_tokens`, as `inspect` shows them; None where absent (a float
    count is cut to an integer)."""
    counts = usage(response)
    if counts is None:
        return None, None
    details = counts.get("output_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return _count(counts.get("output_tokens")), _count(reasoning)


def output_tokens_or_zero(response: dict) -> int:
    """`usage.output_tokens` when it is an integer, else 0: the count a collector adds to its tally."""
    counts = response.get("usage")
    tokens = counts.get("output_tokens") if isinstance(counts, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0


def stopped_at_token_cap(response: Any, cap: Any, completion: int | None) -> bool:
    """THE meaning of "truncated" (see the module's docstring): a length stop the response reports, or
    `completion` tokens (as `prompt_and_completion_tokens` reads them) at or past a positive `cap` in a
    response of one model call. An agent's response of several model turns sums their usage (Gym
    accumulates it) while the cap is per call: its sum says nothing, only a reported length stop does."""
    if not isinstance(response, dict):
        return False
    if stop_reason(response) in LENGTH_REASONS:
        return True
    if not (type(cap) is int and cap > 0 and completion is not None and completion >= cap):
        return False
    return turns_and_calls(response)[0] <= 1


def request_token_cap(row: dict) -> int | None:
    """`responses_create_params.max_output_tokens` of a row (the request it stored), or None."""
    params = row.get("responses_create_params")
    cap = params.get("max_output_tokens") if isinstance(params, dict) else None
    return cap if type(cap) is int else None


def truncated(row: dict, cap: int | None = None, not_given: Any = None) -> bool:
    """Whether a rollout row stopped at the token limit; `cap` from its materialized input when the caller
    has it, else the request the row stored. `not_given`: the row's USAGE_MISSING (None: read it here)."""
    response = row.get("response")
    if not isinstance(response, dict):
        return False
    missing = row.get(USAGE_MISSING) if not_given is None else not_given
    completion = prompt_and_completion_tokens(response, missing)[1]
    return stopped_at_token_cap(response, request_token_cap(row) if cap is None else cap, completion)


def input_cached_output_tokens(
    response: Any, not_given: Any = None
) -> tuple[int | None, int | None, int | None]:
    """(input, cached, output) tokens, as `prompt_and_completion_tokens` reads the first and last (so a
    count the row names in `not_given`, its USAGE_MISSING, is None), and the cached prompt tokens from
    `input_tokens_details.cached_tokens` (chat: `prompt_tokens_details`); None where not reported."""
    counts = usage(response)
    if counts is None:
        return None, None, None
    # prompt_and_completion_tokens(response, not_given), without reading `usage` again (every rollout of a
    # profile passes here); it reads only a plain dict
    prompt, completion = _prompt_and_completion(counts, not_given) if type(counts) is dict else (None, None)
    details = counts.get("input_tokens_details")
    if not isinstance(details, dict):
        details = counts.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    # a cached count above the prompt's is out of range (a hostile or broken server): not reported
    held = type(cached) is int and cached >= 0 and (prompt is None or cached <= prompt)
    return prompt, cached if held else None, completion


def turns_and_calls(response: Any) -> tuple[int, int]:
    """(model turns, function calls) of a response, counted without building items (every row of a run)."""
    output = output_list(response)
    if output is None:
        return 0, 0
    turns = calls = 0
    open_turn = False
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == CALL:
            calls += 1
            model = True
        else:
            model = kind == REASONING or (kind == MESSAGE and item.get("role") in MODEL_ROLES)
        if model and not open_turn:
            turns += 1
        open_turn = model
    return turns, calls
