"""The one line that sums a task up, written once: `ngrp inspect`, the viewer's task page, the report."""

from __future__ import annotations

from typing import Any

from ..numbers import interval, num, short


def rate_text(t: dict[str, Any], digits: int = 2) -> tuple[str, str]:
    """("passed/scored = rate", "[low, high]" of its 95% Wilson interval) of a task row; n/a if unscored."""
    if not t["n_scored"]:
        return "n/a", ""
    return (
        f"{t['n_passed']}/{t['n_scored']} = {num(t['pass_rate'], digits)}",
        interval(t["wilson_low_95"], t["wilson_high_95"], digits),
    )


def task_summary(t: dict[str, Any]) -> str:
    """Pass rate with n and its Wilson interval, band, means, truncation and completeness of a task row."""
    if t["n_scored"]:
        rate, ci = rate_text(t, 3)
        passed = f"passed {rate}, 95% Wilson {ci} at reward >= {t['pass_threshold']:g}"
    else:
        passed = "no scored rollout"
    parts = [passed, f"band {t['band'].replace('_', '-')}", f"mean reward {short(t['mean_reward'])}"]
    if t["mean_output_tokens"] is not None:
        parts.append(f"mean output tokens {num(t['mean_output_tokens'], 0)}")
    if t.get("mean_tool_calls"):
        parts.append(f"mean turns {short(t['mean_turns'])}, mean tool calls {short(t['mean_tool_calls'])}")
    parts.append(f"truncated {t['n_truncated']}/{t['n_rollouts']}")
    if t["expected"] is not None:
        parts.append(f"{t['n_rollouts']} of {t['expected']} rollouts")
    if t["n_masked"]:
        parts.append(f"{t['n_masked']} masked")
    return ", ".join(parts)


def with_lines(t: dict[str, Any], text: str) -> str:
    """`text` led by the task's source lines (`lines 4, 8: ...`), when the run recorded them."""
    from ..artifacts.task_lines import lines_text

    where = lines_text(t.get("source_lines"))
    return f"task file {where}; {text}" if where else text
