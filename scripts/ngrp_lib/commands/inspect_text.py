"""Text rendering of `ngrp inspect`: a header per task, then each rollout's fields and texts."""

from __future__ import annotations

from typing import Any

from ..artifacts.items import Item
from ..inspect.digest import cut_middle
from ..inspect.run import InspectResult, Shown

LABEL = 11


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def task_header(t: dict[str, Any]) -> str:
    """One line per task: pass rate with n and its Wilson interval, band, means, truncation, completeness."""
    agent = f" (agent {t['agent']})" if t["agent"] is not None else ""
    if t["n_scored"]:
        rate = (
            f"passed {t['n_passed']}/{t['n_scored']} = {t['pass_rate']:.3f}, 95% Wilson "
            f"[{t['wilson_low_95']:.3f}, {t['wilson_high_95']:.3f}] at reward >= {t['pass_threshold']:g}"
        )
    else:
        rate = "no scored rollout"
    parts = [rate, f"band {t['band'].replace('_', '-')}", f"mean reward {_num(t['mean_reward'])}"]
    if t["mean_output_tokens"] is not None:
        parts.append(f"mean output tokens {t['mean_output_tokens']:.0f}")
    if t.get("mean_tool_calls"):
        parts.append(f"mean turns {t['mean_turns']:.3g}, mean tool calls {t['mean_tool_calls']:.3g}")
    parts.append(f"truncated {t['n_truncated']}/{t['n_rollouts']}")
    if t["expected"] is not None:
        parts.append(f"{t['n_rollouts']} of {t['expected']} rollouts")
    if t["n_masked"]:
        parts.append(f"{t['n_masked']} masked")
    return f"== task {t['task']}{agent}: " + ", ".join(parts)


def _profile_line(p: dict[str, Any]) -> str:
    return "   profile row: " + ", ".join(f"{k} {_num(v)}" for k, v in p.items())


def _block(label: str, text: str) -> list[str]:
    lines = text.split("\n") if text else ["(empty)"]
    pad = " " * (LABEL + 5)
    return [f"     {label:<{LABEL}}" + lines[0]] + [pad + line for line in lines[1:]]


def rollout_block(s: Shown, max_chars: int | None, rollouts_name: str) -> list[str]:
    d = s.digest
    outcome = "masked" if d.masked else {True: "pass", False: "fail", None: "unscored"}[d.passed]
    status = d.finish.status + (f" ({d.finish.reason})" if d.finish.reason else "")
    tokens = "n/a" if d.output_tokens is None else f"{d.output_tokens:,}"
    head = (
        f"-- rollout {d.rollout_id}: reward {_num(d.reward)} ({outcome}), {tokens} output tokens, "
        f"{status}, {rollouts_name}:{d.line}"
    )
    lines = [head]
    if d.failure:
        lines.append(f"     {'failure':<{LABEL}}{d.failure}")
    lines += _block("prompt", cut_middle(d.prompt, max_chars))
    agentic = d.n_tool_calls > 0 or d.n_turns > 1
    if d.reasoning and not agentic:  # an agent's reasoning is shown turn by turn below
        lines += _block("reasoning", cut_middle(d.reasoning, max_chars))
    lines += _block("answer", cut_middle(d.final_text, max_chars))
    lines.append(
        f"     {'extracted':<{LABEL}}{_num(d.extracted_answer)}   expected: {_num(d.expected_answer)}"
    )
    if d.components is not None:
        lines.append(
            f"     {'components':<{LABEL}}" + "  ".join(f"{k}={_num(v)}" for k, v in d.components.items())
        )
    if d.verifier:
        lines.append(
            f"     {'verifier':<{LABEL}}" + "  ".join(f"{k}={_num(v)}" for k, v in d.verifier.items())
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
