"""The items of a Responses-shaped rollout in order, with turn numbers: what an agent did, step by step.

NeMo Gym's simple agent loops model call -> tool calls -> model call until no call remains; its row's
`response.output` then holds every item in order: `reasoning`, `message` (assistant text), `function_call`
(`name`, `arguments` as a JSON string, `call_id`) and `function_call_output` (`call_id`, `output`).
Environments that speak for the user (blackjack) put `message` items with role `user` between turns.

A turn is one model call. Items the model writes (reasoning, an assistant message, a function call) belong
to the current turn; an item the model did not write (a tool's output, a user message) ends it, so the next
model item opens turn n+1. The input conversation (`responses_create_params.input`) is read by the same
rules with turn 0. The texts, finish and usage of a response are `response`'s (beside this module); this
module reads the same output items as steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .response import CALL, CALL_OUTPUT, MESSAGE, MODEL_ROLES, REASONING, output_list, parts_text
from .response import turns_and_calls as turns_and_calls  # defined beside the truncation rule that reads it

TEXT_PARTS = ("output_text", "input_text", "text", "summary_text", "reasoning_text", "refusal")


@dataclass(frozen=True, slots=True)
class Item:
    """One output (or input) item, made readable. `text` is the message or reasoning text, the tool's
    output, or a function call's arguments (pretty-printed when they are valid JSON, else as written)."""

    turn: int  # 1-based model turn; 0 for the input conversation
    kind: str  # reasoning | message | function_call | function_call_output | another item type
    role: str | None  # a message's role
    text: str
    name: str | None = None  # a function call's name
    call_id: str | None = None
    arguments_valid: bool | None = None  # a function call's arguments parse as a JSON object

    @property
    def by_model(self) -> bool:
        return self.kind in (REASONING, CALL) or (self.kind == MESSAGE and self.role in MODEL_ROLES)


def text_of(parts: Any) -> str:
    """The text of a content value: a string, or the parts of any text type, joined."""
    return parts_text(parts, TEXT_PARTS)


def pretty_arguments(raw: Any) -> tuple[str, bool]:
    """(text, valid): arguments pretty-printed when they are a JSON object (as a string, or already parsed),
    else written as they came with valid False."""
    value: Any = raw
    if isinstance(raw, str):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw, False
    if not isinstance(value, dict):
        return raw if isinstance(raw, str) else orjson.dumps(raw).decode(), False
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode(), True


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_item(item: dict, turn: int) -> Item:
    kind = item.get("type")
    role = _str(item.get("role"))
    if kind is None and role is not None:
        kind = MESSAGE  # an input message written as {role, content}
    kind = kind if isinstance(kind, str) else "unknown"
    if kind == CALL:
        text, valid = pretty_arguments(item.get("arguments"))
        return Item(turn, kind, None, text, _str(item.get("name")), _str(item.get("call_id")), valid)
    if kind == CALL_OUTPUT:
        output = item.get("output")
        text = output if isinstance(output, str) else text_of(output)
        return Item(turn, kind, None, text, call_id=_str(item.get("call_id")))
    if kind == REASONING:
        return Item(turn, kind, None, text_of(item.get("summary")) + text_of(item.get("content")))
    return Item(turn, kind, role, text_of(item.get("content")))


def read_items(items: Any, *, numbered: bool = True) -> list[Item]:
    """The readable items of a list (response.output, or the input conversation with numbered=False)."""
    if isinstance(items, str):
        return [Item(0, MESSAGE, "user", items)]
    if not isinstance(items, list):
        return []
    out: list[Item] = []
    turn, open_turn = 0, False
    for raw in items:
        if not isinstance(raw, dict):
            continue
        item = read_item(raw, turn)
        if numbered:
            if item.by_model and not open_turn:
                turn, open_turn = turn + 1, True
            elif not item.by_model:
                open_turn = False
            item = Item(turn, item.kind, item.role, item.text, item.name, item.call_id, item.arguments_valid)
        out.append(item)
    return out


def readable_output(response: Any) -> list[Item]:
    """The items of `response.output` in order, with their turn numbers."""
    return read_items(output_list(response))


def readable_input(params: Any) -> list[Item]:
    """The input conversation of `responses_create_params` (system, user and earlier turns), turn 0."""
    return read_items(params.get("input") if isinstance(params, dict) else None, numbered=False)
