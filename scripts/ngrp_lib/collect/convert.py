"""Responses API <-> Chat Completions, the way Gym's vllm_model adapter maps them (text and tools).

`chat_request` turns a row's `responses_create_params` into a `/v1/chat/completions` body;
`response_from_chat` turns the answer into a Responses-shaped `response` (output message items, usage
with details, status and `incomplete_details`). With token ids requested, the assistant item carries
`prompt_token_ids`, `generation_token_ids` and `generation_log_probs` like Gym's training mode.
"""

from __future__ import annotations

import json
from typing import Any

from ..jsonvalues import shown

# Responses create params that map 1:1 onto chat fields (None values are dropped).
_SAME = ("temperature", "top_p", "parallel_tool_calls", "user", "store", "service_tier")
# Fields only the Responses API has; not sent to chat.
_RESPONSES_ONLY = {
    "input",
    "instructions",
    "max_output_tokens",
    "metadata",
    "tools",
    "tool_choice",
    "reasoning",
    "text",
    "include",
    "previous_response_id",
    "truncation",
    "background",
    "prompt",
    "max_tool_calls",
    "top_logprobs",
    "stream",
    "stream_options",
    "model",
    "conversation",
    "context_management",
    "moderation",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
}


class ConversionError(ValueError):
    """The request uses something the chat conversion cannot express."""


def extra_body(params: dict) -> dict:
    """Gym passes vLLM extras (for example `seed`) as a JSON string in `metadata.extra_body`."""
    metadata = params.get("metadata") or {}
    raw = metadata.get("extra_body") if isinstance(metadata, dict) else None
    if not raw:
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ConversionError(f"metadata.extra_body is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConversionError("metadata.extra_body must encode a JSON object")
    return value


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ConversionError(f"unsupported content part: {shown(part)[:80]}")
        return "".join(parts)
    raise ConversionError(f"unsupported message content: {shown(content)[:80]}")


def chat_messages(params: dict) -> list[dict]:
    messages: list[dict] = []
    if params.get("instructions"):
        messages.append({"role": "system", "content": params["instructions"]})
    items = params.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list):
        raise ConversionError("responses_create_params.input must be a string or a list of messages")
    for item in items:
        messages.append(_chat_message(item))
    return messages


def _chat_message(item: Any) -> dict:
    if not isinstance(item, dict):
        raise ConversionError(f"unsupported input item: {shown(item)[:80]}")
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role", "user")
        return {
            "role": "system" if role == "developer" else role,
            "content": _text_of(item.get("content", "")),
        }
    if kind == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if kind == "function_call_output":
        return {
            "role": "tool",
            "tool_call_id": item.get("call_id"),
            "content": _text_of(item.get("output", "")),
        }
    raise ConversionError(f"input item type {kind!r} has no chat equivalent")


def _chat_tools(tools: list) -> list[dict]:
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ConversionError(f"only function tools convert to chat, got {shown(tool)[:80]}")
        fields = {
            k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
        }
        out.append({"type": "function", "function": fields})
    return out


def chat_request(params: dict, model: str, *, token_ids: bool = False) -> dict:
    """The chat completions body for one row's `responses_create_params`."""
    body: dict[str, Any] = {"model": model, "messages": chat_messages(params)}
    for key in _SAME:
        if params.get(key) is not None:
            body[key] = params[key]
    if params.get("max_output_tokens") is not None:
        body["max_tokens"] = params["max_output_tokens"]
    if params.get("tools"):
        body["tools"] = _chat_tools(params["tools"])
    choice = params.get("tool_choice")
    if isinstance(choice, str) and params.get("tools"):
        body["tool_choice"] = choice
    for key, value in params.items():  # vLLM-style extras passed at top level are kept
        if key not in _RESPONSES_ONLY and key not in body and value is not None and key not in _SAME:
            body[key] = value
    body.update(extra_body(params))
    if token_ids:
        body.update({"logprobs": True, "top_logprobs": 0, "return_token_ids": True})
    return body


def responses_request(params: dict, model: str) -> dict:
    """The `/v1/responses` body: the row's params, our model, extras from metadata.extra_body at top level."""
    body = {k: v for k, v in params.items() if v is not None}
    body["model"] = model
    extras = extra_body(params)
    if extras:
        metadata = {k: v for k, v in (params.get("metadata") or {}).items() if k != "extra_body"}
        if metadata:
            body["metadata"] = metadata
        else:
            body.pop("metadata", None)
        body.update(extras)
    return body


def missing_counts(chat: dict) -> list[str]:
    """The token counts a chat completion leaves out (`prompt_tokens`, `completion_tokens`: absent or
    null). The converted `usage` holds 0 for them, as Gym's profiler needs numbers; the row names them
    under USAGE_MISSING so that `ngrp health` reports missing counts, not zero completion tokens."""
    usage = chat.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return [name for name in ("prompt_tokens", "completion_tokens") if usage.get(name) is None]


def _count(usage: dict, name: str) -> int:
    """A count as the server gave it, 0 where it gave none; a count of another kind is a broken reply."""
    value = usage.get(name)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise ConversionError(f"usage.{name} is {value!r}, not a non-negative integer: a broken reply")
    return value


def _usage(chat: dict) -> dict:
    usage = chat.get("usage")
    if usage is None:
        usage = {}
    elif not isinstance(usage, dict):
        raise ConversionError(f"usage is {_json_type(usage)}, not an object: a broken reply")
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    prompt_details = usage.get("prompt_tokens_details")
    cached = _count(prompt_details, "cached_tokens") if isinstance(prompt_details, dict) else 0
    completion_details = usage.get("completion_tokens_details")
    reasoning = _count(completion_details, "reasoning_tokens") if isinstance(completion_details, dict) else 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": _count(usage, "total_tokens") or prompt + completion,
    }


def response_from_chat(chat: dict, *, token_ids: bool = False) -> dict:
    """A Responses-shaped `response` for a chat completion with one choice."""
    choices = chat.get("choices") or []
    if not isinstance(choices, list) or not choices:
        raise ConversionError("chat completion has no choices")
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        got = _json_type(choice.get("message")) if isinstance(choice, dict) else "no choice object"
        raise ConversionError(f"chat completion choice has no message object (got {got}): a broken reply")
    message = choice["message"]
    if not isinstance(message.get("content"), (str, type(None))):
        raise ConversionError(f"message content is {_json_type(message['content'])}, not text")
    if not isinstance(message.get("tool_calls") or [], list):
        raise ConversionError("message tool_calls is not a list")
    ident = str(chat.get("id", "")).removeprefix("chatcmpl-")
    output: list[dict] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        output.append(
            {
                "id": f"rs_{ident}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reasoning}],
            }
        )
    output.append(
        {
            "id": f"msg_{ident}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": message.get("content") or "", "annotations": []}],
        }
    )
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append(
            {
                "id": f"fc_{call.get('id')}",
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments", ""),
                "status": "completed",
            }
        )
    if token_ids:
        output[-1].update(token_fields(chat, choice))
    truncated = choice.get("finish_reason") == "length"
    return {
        "id": f"resp_{ident}",
        "created_at": float(chat.get("created") or 0),
        "model": chat.get("model"),
        "object": "response",
        "output": output,
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "usage": _usage(chat),
    }


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def token_fields(chat: dict, choice: dict) -> dict:
    """prompt_token_ids, generation_token_ids, generation_log_probs (vLLM `return_token_ids` + logprobs)."""
    generation = choice.get("token_ids")
    logprobs = [entry.get("logprob") for entry in ((choice.get("logprobs") or {}).get("content") or [])]
    if generation is None:
        raise ConversionError("the server returned no token ids (is it vLLM with return_token_ids support?)")
    if logprobs and len(logprobs) != len(generation):
        raise ConversionError(f"{len(generation)} generated token ids but {len(logprobs)} logprobs")
    return {
        "prompt_token_ids": chat.get("prompt_token_ids") or [],
        "generation_token_ids": generation,
        "generation_log_probs": logprobs,
    }
