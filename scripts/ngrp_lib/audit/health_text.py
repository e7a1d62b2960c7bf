"""What a stored response says beyond its texts: tool calls, any content at all, where it stopped, its
token counts, and degenerate loops. (The final text and the reasoning are `inspect.digest`'s, the one
definition every command reads.)

Pure functions over one `response` object (an OpenAI Responses object as Gym stores it). They never raise
on odd shapes: a field of the wrong type reads as absent.
"""

from __future__ import annotations

from typing import Any

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
MAX_UNIT = 500  # longest repeated unit (characters) the loop detector looks for
_WINDOW = 32  # characters matched at each anchor to find a candidate period


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
    return _nonblank(response.get("output_text")) or _nonblank(response.get("output"))


def made_tool_call(response: dict) -> bool:
    """Whether any output item is a tool call (an agent turn that ends on a call has no final text)."""
    output = response.get("output")
    return isinstance(output, list) and any(
        isinstance(item, dict) and (item.get("type") in TOOL_CALL_TYPES or bool(item.get("tool_calls")))
        for item in output
    )


def stop_reason(response: dict) -> str | None:
    """The reason a response stopped early (`incomplete_details.reason`), if it says so."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return reason if isinstance(reason, str) else None


def token_counts(response: dict, not_given: Any = None) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens from `usage`; None when absent or not a non-negative integer.

    Responses names (`input_tokens`, `output_tokens`) first, chat names (`prompt_tokens`,
    `completion_tokens`) otherwise, as Gym reads them. `not_given` is the row's USAGE_MISSING: the counts
    ngrp's collector stored as 0 because the server gave none, None here too (missing, not zero).
    """
    usage = response.get("usage")
    if type(usage) is not dict:
        return None, None
    prompt = usage.get("input_tokens")
    if prompt is None:
        prompt = usage.get("prompt_tokens")
    completion = usage.get("output_tokens")
    if completion is None:
        completion = usage.get("completion_tokens")
    if type(not_given) is list and not_given:
        prompt = None if "prompt_tokens" in not_given else prompt
        completion = None if "completion_tokens" in not_given else completion
    return (
        prompt if type(prompt) is int and prompt >= 0 else None,
        completion if type(completion) is int and completion >= 0 else None,
    )


def find_loop(text: str, min_repeats: int, min_chars: int) -> tuple[str, int, int] | None:
    """The first degenerate loop found: (unit, copies, start) where `unit` (1 to MAX_UNIT characters)
    repeats at least `min_repeats` times back to back over at least `min_chars` characters.

    A loop is a stretch of text with period p (text[i] == text[i + p] throughout) holding
    `copies = len // p` whole copies. Anchors spaced about min_chars * (1 - 1/min_repeats) apart look
    for an earlier copy of the 32 characters before them within MAX_UNIT characters; each candidate
    period is then grown into its maximal stretch. Every loop of at least `min_chars` characters holds
    an anchor (tested against a brute-force search); normal text costs one `rfind` per anchor.
    """
    n = len(text)
    if n < min_chars or n < 2:
        return None
    # A loop of L >= min_chars characters has period p <= L / min_repeats, so the stretch where an anchor
    # finds it (the window and its copy p earlier, inside the loop) is L - window - p long, at least
    # min_chars * (1 - 1 / min_repeats) - window: anchors that far apart cannot all miss it.
    window = max(1, min(_WINDOW, min_chars // 4))
    stride = max(1, int(min_chars * (1 - 1 / min_repeats)) - window)
    # The usual text: no window has an earlier copy nearby. All anchors are searched through map (one C
    # call each, no Python step between them), then the few hits are tried in order from the end.
    anchors = range(n, window, -stride)
    reach = window + MAX_UNIT
    probes = [text[a - window : a] for a in anchors]
    starts = [a - reach if a > reach else 0 for a in anchors]
    hits = list(map(text.rfind, probes, starts, range(n - 1, window - 1, -stride)))
    if not hits or max(hits) < 0:
        return None
    for a, j in zip(anchors, hits, strict=True):
        if j >= 0:
            found = _loop_at(text, a, window, j, min_repeats, min_chars)
            if found is not None:
                return found
    return None


def _loop_at(
    text: str, a: int, w: int, j: int, min_repeats: int, min_chars: int
) -> tuple[str, int, int] | None:
    """Try each earlier copy of the window before `a` (the nearest, at j, first) as the loop's period."""
    probe = text[a - w : a]
    lo = max(0, a - w - MAX_UNIT)
    while True:
        if j < 0:
            return None
        p = a - w - j
        start, stop = _stretch(text, j, a, p)
        copies = (stop - start) // p
        if copies >= min_repeats and copies * p >= min_chars:
            return text[start : start + p], copies, start
        j = text.rfind(probe, lo, j + w - 1)


def _stretch(text: str, left: int, right: int, p: int) -> tuple[int, int]:
    """Grow [left, right), where text[i] == text[i + p] for left <= i < right - p, to its maximal extent."""
    while left >= p and text[left - p : left] == text[left : left + p]:
        left -= p
    while left > 0 and text[left - 1] == text[left - 1 + p]:
        left -= 1
    n = len(text)
    while right + p <= n and text[right : right + p] == text[right - p : right]:
        right += p
    while right < n and text[right] == text[right - p]:
        right += 1
    return left, right
