"""The digest of one rollout: what a person or an agent reads to see why it got its reward.

One place decides what "the answer", "the reasoning" and "finished" mean for a Responses-shaped rollout:
- the response text is every `output_text` part of every message item, joined: what a built-in verifier
  reads (`collect` verifies with `response_text`);
- the final text is the last message item's text, with an inline `<think>...</think>` block moved to the
  reasoning (models served without a reasoning parser write their thoughts into the message);
- the reasoning is the text of the `reasoning` items (summaries and content), then any inline block;
- the finish status is `incomplete` when the response says so or carries `incomplete_details` (the length
  limit: `reason` is `max_output_tokens`), else the response's own `status` (`completed`, `failed`...).
Verifier fields are the row's fields that its materialized input row does not have (the verify response),
with the expected answer read from the input row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..artifacts.items import CALL, Item, input_items, output_items
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
EXTRACTED_KEY = "extracted_answer"
DEFAULT_ANSWER_KEY = "expected_answer"
# Fields of a rollout row that are not the verifier's: the request and reply, identity and routing stamps.
ENVELOPE = frozenset(
    {"response", "responses_create_params", "reward", "mask_sample", "failure_kind", "failure_reason"}
    | {"agent_ref", "task_source", "skills_ref", EXTRACTED_KEY}
)
MAX_FIELD_CHARS = 300  # a verifier field that is an object or a long string is cut to this
CUT_SLACK = 40  # a text only a little over the budget is kept whole (the marker is as long as the cut)


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # completed | incomplete | failed | cancelled | in_progress | queued | unknown
    reason: str | None = None  # incomplete_details.reason or the error message

    @property
    def truncated(self) -> bool:
        return self.status == "incomplete"


def _items(response: Any) -> list[dict]:
    output = response.get("output") if isinstance(response, dict) else None
    return [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []


def _parts_text(parts: Any, kinds: tuple[str, ...]) -> str:
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
        _parts_text(item.get("content"), ("output_text",))
        for item in _items(response)
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
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
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
            text = _parts_text(item.get("summary"), ("summary_text",))
            text += _parts_text(item.get("content"), ("reasoning_text",))
            if text:
                thoughts.append(text)
    final = _parts_text(last_message.get("content"), ("output_text",)) if last_message is not None else ""
    if THINK_CLOSE in final:
        inline, final = split_think(final)
        if inline:
            thoughts.append(inline)
    return final, thoughts[0] if len(thoughts) == 1 else "\n\n".join(thoughts)


def finish(response: Any) -> Finish:
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


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value)


def token_counts(row: dict) -> tuple[int | None, int | None]:
    """(output tokens, reasoning tokens) from response.usage; None where absent."""
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None
    details = usage.get("output_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return _count(usage.get("output_tokens")), _count(reasoning)


def reward_of(row: dict) -> float | None:
    """The reward as a number (a bool counts as 0/1, as Gym's profiler counts it); None when null, absent or
    not a number."""
    value = row.get("reward")
    if isinstance(value, (int, float)) and value == value:
        return float(value)
    return None


def last_user_message(params: Any) -> str:
    """The text of the last user message of a row's `responses_create_params.input`."""
    if not isinstance(params, dict):
        return ""
    items = params.get("input")
    if isinstance(items, str):
        return items
    if not isinstance(items, list):
        return ""
    for item in reversed(items):
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            return _parts_text(item.get("content"), ("input_text", "output_text", "text"))
    return ""


def cut_middle(text: str, max_chars: int | None) -> str:
    """`text` cut to about `max_chars` with the cut marked; the end is kept longer (answers come last)."""
    if max_chars is None or len(text) <= max_chars + CUT_SLACK:
        return text
    head = max_chars // 3
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - head - tail:,} chars cut ...]\n{text[len(text) - tail :]}"


def _short(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        value = orjson.dumps(value).decode()
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        return cut_middle(value, MAX_FIELD_CHARS)
    return value


def verifier_fields(row: dict, input_row: dict | None, answer_key: str) -> dict[str, Any]:
    """The row's fields its input row does not have, outside the envelope and identity stamps (without an
    input row: every such field but the answer), in row order, long values cut."""
    known = input_row if input_row is not None else {answer_key: None}
    return {
        k: _short(v)
        for k, v in row.items()
        if k not in ENVELOPE and k not in known and not k.startswith("_ng")
    }


@dataclass
class RolloutDigest:
    task: int
    rollout: int
    agent: str | None
    line: int
    reward: float | None
    passed: bool | None
    masked: bool
    output_tokens: int | None
    reasoning_tokens: int | None
    finish: Finish
    prompt: str
    final_text: str
    reasoning: str
    response_text: str
    n_tool_calls: int
    extracted_answer: Any
    expected_answer: Any
    verifier: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    items: list[Item] = field(default_factory=list)  # response.output in order, with turn numbers
    input_items: list[Item] = field(default_factory=list)  # the input conversation

    @property
    def n_turns(self) -> int:
        return self.items[-1].turn if self.items else 0

    def tool_texts(self) -> Iterator[str]:
        """Tool names, arguments and outputs: what `--grep` and the viewer's search also read."""
        for item in self.items:
            if item.name is not None:
                yield item.name
            if item.kind in (CALL, "function_call_output"):
                yield item.text

    @property
    def rollout_id(self) -> str:
        return f"{self.task}-{self.rollout}"

    def to_json(self, max_chars: int | None = None) -> dict[str, Any]:
        """The schema's object (schemas/inspect_rollout.schema.json); texts cut to `max_chars` except
        `response_text`, which is always whole."""
        return {
            "rollout_id": self.rollout_id,
            TASK_KEY: self.task,
            ROLLOUT_KEY: self.rollout,
            "agent": self.agent,
            "line": self.line,
            "reward": self.reward,
            "passed": self.passed,
            "masked": self.masked,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "finish_status": self.finish.status,
            "finish_reason": self.finish.reason,
            "failure": self.failure,
            "prompt": cut_middle(self.prompt, max_chars),
            "final_text": cut_middle(self.final_text, max_chars),
            "reasoning": cut_middle(self.reasoning, max_chars),
            "chars": {
                "prompt": len(self.prompt),
                "final_text": len(self.final_text),
                "reasoning": len(self.reasoning),
            },
            "n_tool_calls": self.n_tool_calls,
            "n_turns": self.n_turns,
            "items": [item_json(item, max_chars) for item in self.items],
            "input": [item_json(item, max_chars) for item in self.input_items],
            "extracted_answer": self.extracted_answer,
            "expected_answer": self.expected_answer,
            "verifier": self.verifier,
            "response_text": self.response_text,
        }


def item_json(item: Item, max_chars: int | None = None) -> dict[str, Any]:
    """An output or input item as `inspect --json` writes it (schemas/inspect_rollout.schema.json)."""
    return {
        "turn": item.turn,
        "type": item.kind,
        "role": item.role,
        "name": item.name,
        "call_id": item.call_id,
        "arguments_valid": item.arguments_valid,
        "text": cut_middle(item.text, max_chars),
        "chars": len(item.text),
    }


def is_passed(reward: float | None, masked: bool, threshold: float) -> bool | None:
    """Pass := reward >= threshold, as the profiler counts it; None for a masked or unscored rollout."""
    return None if reward is None or masked else reward >= threshold


def _failure(row: dict) -> str | None:
    kind, reason = row.get("failure_kind"), row.get("failure_reason")
    if not kind and not reason:
        return None
    return ": ".join(str(x) for x in (kind, reason) if x)


def digest(
    row: dict,
    input_row: dict | None = None,
    *,
    line: int = 0,
    threshold: float = 1.0,
    answer_key: str = DEFAULT_ANSWER_KEY,
) -> RolloutDigest:
    """Digest one rollout row (joined with its materialized input row when there is one)."""
    response = row.get("response")
    final, reasoning = final_and_reasoning(response)
    items = output_items(response)
    tokens, reasoning_tokens = token_counts(row)
    reward = reward_of(row)
    masked = row.get("mask_sample") is True
    source = input_row if input_row is not None else row
    expected = source.get(answer_key, row.get(answer_key))
    task: Any = row.get(TASK_KEY)  # the callers pass rows with a valid identity key
    rollout: Any = row.get(ROLLOUT_KEY)
    return RolloutDigest(
        task=task,
        rollout=rollout,
        agent=agent_name(row) or (agent_name(input_row) if input_row else None),
        line=line,
        reward=reward,
        passed=is_passed(reward, masked, threshold),
        masked=masked,
        output_tokens=tokens,
        reasoning_tokens=reasoning_tokens,
        finish=finish(response),
        prompt=last_user_message(source.get("responses_create_params") or row.get("responses_create_params")),
        final_text=final,
        reasoning=reasoning,
        response_text=response_text(response),
        n_tool_calls=sum(1 for item in items if item.kind == CALL),
        extracted_answer=_short(row.get(EXTRACTED_KEY)),
        expected_answer=_short(expected),
        verifier=verifier_fields(row, input_row, answer_key),
        failure=_failure(row),
        items=items,
        input_items=input_items(source.get("responses_create_params") or row.get("responses_create_params")),
    )
