"""Text rendering of `ngrp inspect`: a header per task, then each rollout's fields and texts."""

from __future__ import annotations

from typing import Any

from ..artifacts.items import Item
from ..inspect.digest import cut_middle
from ..inspect.run import InspectResult, Shown
from ..inspect.task_line import task_summary
from ..numbers import short

LABEL = 11


def task_header(t: dict[str, Any]) -> str:
    agent = f" (agent {t['agent']})" if t["agent"] is not None else ""
    from ..artifacts.task_lines import lines_text

    where = lines_text(t.get("source_lines"))
    return f"== task {t['task']}{f' ({where})' if where else ''}{agent}: " + task_summary(t)


def _profile_line(p: dict[str, Any]) -> str:
    return "   profile row: " + ", ".join(f"{k} {short(v)}" for k, v in p.items())


def _block(label: str, text: str) -> list[str]:
    """The text under its label; blank lines around it dropped (a reply that opens with "\\n\\n" put the
    answer two lines below its label), a text of only whitespace said so."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        lines = ["(whitespace only)" if text else "(empty)"]
    pad = " " * (LABEL + 5)
    return [f"     {label:<{LABEL}}" + lines[0]] + [pad + line for line in lines[1:]]


def rollout_block(s: Shown, max_chars: int | None, rollouts_name: str) -> list[str]:
    d = s.digest
    outcome = "masked" if d.masked else {True: "pass", False: "fail", None: "unscored"}[d.passed]
    status = d.finish.status + (f" ({d.finish.reason})" if d.finish.reason else "")
    tokens = "n/a" if d.output_tokens is None else f"{d.output_tokens:,}"
    head = (
        f"-- rollout {d.rollout_id}: reward {short(d.reward)} ({outcome}), {tokens} output tokens, "
        f"{status}, {rollouts_name}:{d.line}"
    )
    lines = [head]
    if d.failure:
        lines.append(f"     {'failure':<{LABEL}}{d.failure}")
    if d.output_unreadable:  # said, not shown as an empty answer
        lines.append(f"     {'output':<{LABEL}}not read: {d.output_unreadable}")
    lines += _block("prompt", cut_middle(d.prompt, max_chars))
    agentic = d.n_tool_calls > 0 or d.n_turns > 1
    if d.reasoning and not agentic:  # an agent's reasoning is shown turn by turn below
        lines += _block("reasoning", cut_middle(d.reasoning, max_chars))
    lines += _block("answer", cut_middle(d.final_text, max_chars))
    lines.append(
        f"     {'extracted':<{LABEL}}{short(d.extracted_answer)}   expected: {short(d.expected_answer)}"
    )
    if d.components is not None:
        lines.append(
            f"     {'components':<{LABEL}}" + "  ".join(f"{k}={short(v)}" for k, v in d.components.items())
        )
    if d.verifier:
        lines.append(
            f"     {'verifier':<{LABEL}}" + "  ".join(f"{k}={short(v)}" for k, v in d.verifier.items())
        )
    if agentic:
        lines.append(f"     {'turns':<{LABEL}}{d.n_turns}, {d.n_tool_calls} tool call(s)")
        lines += turn_lines(d.items, max_chars)
    return lines


ITEM_LABELS = {
    "reasoning": "reasoning",
    "message": "says",
    "function_call": "calls",
    "function_call_output": "tool output",
}


def item_label(item: Item) -> str:
    """What an item is, in a few words: `calls get_weather`, `tool output`, `user says`."""
    if item.kind == "function_call":
        bad = "" if item.arguments_valid is not False else " (arguments not valid JSON)"
        return f"calls {item.name or '(no name)'}{bad}"
    if item.kind == "message":
        return f"{item.role or 'assistant'} says"
    return ITEM_LABELS.get(item.kind, item.kind)


def turn_lines(items: list[Item], max_chars: int | None) -> list[str]:
    """Each output item in order under its turn number, its text indented below it."""
    out = []
    for item in items:
        call = f" ({item.call_id})" if item.call_id else ""
        out.append(f"       [turn {item.turn}] {item_label(item)}{call}")
        text = cut_middle(item.text, max_chars) if item.text else "(empty)"
        out += ["           " + line for line in text.split("\n")]
    return out


def footer(r: InspectResult) -> str:
    shown = f"{r.n_shown} rollout(s) shown"
    if r.selection.needs_rows:
        shown += f" ({r.n_row_tested} tested by --grep/--where)"
    text = (
        f"{shown} of {r.n_candidates} selected; {r.scan.rows} rollouts read from {r.paths.rollouts} "
        f"({len(r.table)} tasks)"
    )
    if r.limit is not None and r.n_shown >= r.limit and r.n_candidates > r.n_shown:
        text += f"; stopped at --limit {r.limit}"
    described = r.selection.describe()
    if described:
        text += "\nselection: " + "; ".join(described)
    return "\n".join([text, *(f"note: {n}" for n in r.notes)])


def render_lines(r: InspectResult, max_chars: int | None):
    """The text, line by line, as the rollouts are read (pass 2 streams)."""
    previous = None
    name = r.paths.rollouts.name
    for s in r.rollouts():
        key = (s.task["task"], s.task["agent"])
        if key != previous:
            yield task_header(s.task)
            if s.profile:
                yield _profile_line(s.profile)
            previous = key
        yield from rollout_block(s, max_chars, name)
