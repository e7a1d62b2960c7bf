"""An agent rollout's items as HTML (viewer task and compare pages, the report's explorer), and the input
conversation. Every string (tool names, argument keys and values, outputs) goes through `escape`.

The page stays bounded however long the rollout: each item's text is cut in the middle to a share of a
per-rollout character budget (the cut marked; `ngrp inspect --full` shows it whole), and a long text starts
collapsed to its first lines with the rest a click away.
"""

from __future__ import annotations

from typing import Any

from ..inspect.digest import cut_middle
from .markup import Markup, escape, join

BUDGET = 200_000  # characters of item text in one rollout card
MIN_ITEM, MAX_ITEM = 300, 8_000  # characters one item keeps, whatever the budget
OPEN_CHARS = 600  # a longer text starts collapsed
PEEK_CHARS = 160  # the collapsed text's first characters, in its summary line


def item_cap(n_items: int) -> int:
    return max(MIN_ITEM, min(MAX_ITEM, BUDGET // max(n_items, 1)))


def _label(item: dict[str, Any]) -> Markup:
    kind = item["type"]
    if kind == "function_call":
        bad = (
            Markup(" <span class='bad'>arguments not valid JSON</span>")
            if item["arguments_valid"] is False
            else Markup("")
        )
        return Markup("calls <code class='tool'>") + (item["name"] or "(no name)") + Markup("</code>") + bad
    if kind == "function_call_output":
        return Markup("tool output")
    if kind == "message":
        return escape(f"{item['role'] or 'assistant'} says")
    return escape(kind)


def _text(item: dict[str, Any], cap: int) -> Markup:
    text = cut_middle(item["text"], cap) if item["text"] else "(empty)"
    if len(text) <= OPEN_CHARS and item["type"] != "reasoning":
        return Markup("<pre class='text'>") + text + Markup("</pre>")
    peek = text[:PEEK_CHARS].replace("\n", " ")
    css = "item-text reasoning" if item["type"] == "reasoning" else "item-text"
    return (
        Markup(f"<details class='{css}'><summary>")
        + f"{peek}\u2026 ({item['chars']:,} chars)"
        + Markup("</summary><pre class='text'>")
        + text
        + Markup("</pre></details>")
    )


def item_html(item: dict[str, Any], cap: int) -> Markup:
    call = Markup("")
    if item["call_id"]:
        call = Markup(" <span class='call-id'>") + item["call_id"] + Markup("</span>")
    kind, turn = escape(item["type"]), int(item["turn"])
    return (
        Markup(f"<li class='item item-{kind}' data-turn='{turn}'><div class='head'>")
        + Markup(f"<span class='turn'>turn {turn}</span> ")
        + _label(item)
        + call
        + Markup("</div>")
        + _text(item, cap)
        + Markup("</li>")
    )


def turns_html(r: dict[str, Any]) -> Markup:
    """The rollout's items in order, for a rollout with tool calls or several turns; empty otherwise."""
    items = r.get("items") or []
    if not (r.get("n_tool_calls") or r.get("n_turns", 0) > 1):
        return Markup("")
    cap = item_cap(len(items))
    head = f"{r['n_turns']} turns, {r['n_tool_calls']} tool call(s)"
    return (
        Markup("<details class='turns' open><summary>")
        + head
        + Markup("</summary><ol class='items'>")
        + join(item_html(item, cap) for item in items)
        + Markup("</ol></details>")
    )


def input_html(items: list[dict[str, Any]]) -> Markup:
    """The input conversation (system, user, earlier turns), collapsed."""
    if not items:
        return Markup("")
    cap = item_cap(len(items))
    body = join(
        Markup("<li class='item'><div class='head'>")
        + _label(item)
        + Markup("</div><pre class='text'>")
        + cut_middle(item["text"], cap)
        + Markup("</pre></li>")
        for item in items
    )
    return (
        Markup("<details class='input-conversation'><summary>")
        + f"input conversation ({len(items)} item(s))"
        + Markup("</summary><ol class='items'>")
        + body
        + Markup("</ol></details>")
    )
