"""Which tool breaks my agent? The agent findings of a run (`agent_checks`: invalid arguments, tool outputs
that report an error, call loops, the tool a rollout ended on, cut or not known to be), grouped by tool
name: for each tool, how often each went wrong, in how many rollouts, which rollouts (the first few
keys), and the `ngrp inspect` line that shows one.

Pure over the judged digests; each finding's `detail.tools` ({tool name: occurrences in the rollout})
is what `agent_checks` counted, so a rollout that calls two tools badly counts for both.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from .agent_checks import ARGS_INVALID, CALL_LOOP, ENDED_ON_CALL, ENDED_UNKNOWN, OUTPUT_ERROR

TOOL_CHECKS = (OUTPUT_ERROR, ARGS_INVALID, CALL_LOOP, ENDED_ON_CALL, ENDED_UNKNOWN)
EXAMPLES = 5  # rollout keys listed per tool and check
NO_NAME = "(no tool name)"


def tool_breakdown(digests: list[Any], inspect: str | None) -> list[dict[str, Any]]:
    """One entry per tool, most occurrences first: {tool, occurrences, rollouts, by_check: {check:
    {occurrences, rollouts, examples: [[task, rollout], ...], inspect}}}. `inspect`: the command that
    shows a run's rollouts (`ngrp inspect ROLLOUTS`), or None when no verdicts file is written (then
    `--finding` cannot read one and the line is left out)."""
    tools: dict[str, dict[str, Any]] = {}
    for digest in digests:
        seen: set[str] = set()
        for found in digest.findings:
            check = found.get("check")
            if check not in TOOL_CHECKS:
                continue
            counts = (found.get("detail") or {}).get("tools") or {}
            for name, n in counts.items():
                tool = name if isinstance(name, str) and name else NO_NAME
                entry = tools.setdefault(
                    tool, {"tool": tool, "occurrences": 0, "rollouts": 0, "by_check": {}}
                )
                part = entry["by_check"].setdefault(check, {"occurrences": 0, "rollouts": 0, "examples": []})
                entry["occurrences"] += n
                part["occurrences"] += n
                part["rollouts"] += 1
                if len(part["examples"]) < EXAMPLES:
                    part["examples"].append([digest.task, digest.rollout])
                if tool not in seen:
                    entry["rollouts"] += 1
                    seen.add(tool)
    out = sorted(tools.values(), key=lambda e: (-e["occurrences"], e["tool"]))
    for entry in out:
        for check, part in entry["by_check"].items():
            part["inspect"] = None if inspect is None else inspect_line(inspect, entry["tool"], check, part)
    return out


def inspect_line(inspect: str, tool: str, check: str, part: dict[str, Any]) -> str:
    """`ngrp inspect R --task T --finding CHECK --grep '^?tool$'...`: the first rollout of that tool and
    check (--grep matches tool names, so the task's other rollouts of the same check narrow to the tool)."""
    task = part["examples"][0][0]
    words = [f"--task {task}", f"--finding {check}"]
    if tool != NO_NAME:
        words.append(f"--grep {shlex.quote(re.escape(tool))}")
    return f"{inspect} {' '.join(words)} --limit 1"


def render(tools: list[dict[str, Any]], limit: int = 10) -> list[str]:
    """The text lines `ngrp health` prints under "tools behind agent findings"."""
    if not tools:
        return []
    lines = ["tools behind agent findings (occurrences / rollouts; which tool breaks the agent):"]
    for entry in tools[:limit]:
        parts = ", ".join(
            f"{check} {part['occurrences']} / {part['rollouts']}" for check, part in entry["by_check"].items()
        )
        lines.append(f"  {entry['tool']}: {entry['occurrences']} in {entry['rollouts']} rollouts ({parts})")
        for check, part in entry["by_check"].items():
            keys = ", ".join(f"({t}, {r})" for t, r in part["examples"])
            more = (
                f" and {part['rollouts'] - len(part['examples'])} more"
                if part["rollouts"] > len(part["examples"])
                else ""
            )
            lines.append(f"    {check}: rollouts {keys}{more}")
            if part["inspect"]:
                lines.append(f"      see one: {part['inspect']}")
    if len(tools) > limit:
        lines.append(f"  and {len(tools) - limit} more tools (--json: tools)")
    return lines
