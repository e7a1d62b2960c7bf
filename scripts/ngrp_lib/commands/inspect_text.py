"""Text rendering of `ngrp inspect`: a header per task, then each rollout's fields and texts."""

from __future__ import annotations

from typing import Any

from ..inspect.digest import cut_middle
from ..inspect.run import InspectResult, Shown
from ..inspect.task_line import task_summary
from ..numbers import short

LABEL = 11


def task_header(t: dict[str, Any]) -> str:
    agent = f" (agent {t['agent']})" if t["agent"] is not None else ""
    return f"== task {t['task']}{agent}: " + task_summary(t)


def _profile_line(p: dict[str, Any]) -> str:
    return "   profile row: " + ", ".join(f"{k} {short(v)}" for k, v in p.items())


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
        f"-- rollout {d.rollout_id}: reward {short(d.reward)} ({outcome}), {tokens} output tokens, "
        f"{status}, {rollouts_name}:{d.line}"
    )
    lines = [head]
    if d.failure:
        lines.append(f"     {'failure':<{LABEL}}{d.failure}")
    lines += _block("prompt", cut_middle(d.prompt, max_chars))
    if d.reasoning:
        lines += _block("reasoning", cut_middle(d.reasoning, max_chars))
    lines += _block("answer", cut_middle(d.final_text, max_chars))
    lines.append(
        f"     {'extracted':<{LABEL}}{short(d.extracted_answer)}   expected: {short(d.expected_answer)}"
    )
    if d.verifier:
        lines.append(
            f"     {'verifier':<{LABEL}}" + "  ".join(f"{k}={short(v)}" for k, v in d.verifier.items())
        )
    if d.n_tool_calls:
        lines.append(f"     {'tool calls':<{LABEL}}{d.n_tool_calls}")
    return lines


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
