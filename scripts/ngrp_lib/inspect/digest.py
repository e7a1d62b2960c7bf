"""The digest of one rollout: what a person or an agent reads to see why it got its reward.

What the response says (the response text a built-in verifier reads, the final text, the reasoning, the
finish status and the token counts) is `artifacts.response`'s, the one reading every command shares.
Here: the prompt, the reward and pass, and the verifier fields: the row's fields that its materialized
input row does not have (the verify response), with the expected answer read from the input row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..artifacts.items import CALL, Item, readable_input, readable_output
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name
from ..artifacts.response import (
    Finish,
    final_and_reasoning,
    finish,
    function_call_count,
    nested_output_problem,
    output_and_reasoning_tokens,
    parts_text,
    response_text,
)

EXTRACTED_KEY = "extracted_answer"
DEFAULT_ANSWER_KEY = "expected_answer"
# Fields of a rollout row that are not the verifier's: the request and reply, identity and routing stamps.
ENVELOPE = frozenset(
    {"response", "responses_create_params", "reward", "mask_sample", "failure_kind", "failure_reason"}
    | {"agent_ref", "task_source", "skills_ref", EXTRACTED_KEY, "reward_components"}
)
MAX_FIELD_CHARS = 300  # a verifier field that is an object or a long string is cut to this
CUT_SLACK = 40  # a text only a little over the budget is kept whole (the marker is as long as the cut)


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
            return parts_text(item.get("content"), ("input_text", "output_text", "text"))
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
    components: dict[str, Any] | None = None  # reward_components as the row holds it
    output_unreadable: str | None = None  # why response.output was not read (nested_output_problem)

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
            "output_unreadable": self.output_unreadable,
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
            "reward_components": self.components,
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


def _components(value: Any) -> dict[str, Any] | None:
    """reward_components when it is an object (each value as written: a missing or odd one shows as such)."""
    return {str(k): _short(v) for k, v in value.items()} if isinstance(value, dict) else None


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
    items = readable_output(response)
    tokens, reasoning_tokens = output_and_reasoning_tokens(response)
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
        n_tool_calls=function_call_count(response),
        extracted_answer=_short(row.get(EXTRACTED_KEY)),
        expected_answer=_short(expected),
        verifier=verifier_fields(row, input_row, answer_key),
        failure=_failure(row),
        items=items,
        components=_components(row.get("reward_components")),
        output_unreadable=nested_output_problem(response),
        input_items=readable_input(
            source.get("responses_create_params") or row.get("responses_create_params")
        ),
    )
