"""Completion accounting (Gym prints it; we also write it), per-agent counts, and the warnings for what
Gym does silently."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .records import Dataset


def completion_summary(data: Dataset) -> dict[str, Any]:
    """Gym's `profile_completion_summary`, over every row including masked ones, per (task, run key)."""
    expected: Counter = Counter()
    completed: Counter = Counter()
    for rec in data.inputs:
        group = (rec.task, rec.run_key)
        expected[group] += 1
        if (rec.task, rec.rollout) in data.results:
            completed[group] += 1
    complete = sum(1 for g, n in expected.items() if completed[g] == n)
    partial = sum(1 for g, n in expected.items() if 0 < completed[g] < n)
    n_expected, n_completed = len(data.inputs), sum(completed.values())
    input_keys = {(rec.task, rec.rollout) for rec in data.inputs}
    return {
        "expected_rollout_rows": n_expected,
        "completed_rollout_rows": n_completed,
        "missing_rollout_rows": n_expected - n_completed,
        "extra_rollout_rows": len(data.results.keys() - input_keys),
        "reward_profile_completion_pct": 100.0 if n_expected == 0 else 100.0 * n_completed / n_expected,
        "total_input_rows": len(expected),
        "complete_input_rows": complete,
        "partial_input_rows": partial,
        "missing_input_rows": len(expected) - complete - partial,
    }


def per_agent_counts(data: Dataset) -> list[dict[str, Any]]:
    """Expected / completed / missing / masked / null-reward rollouts and complete / partial / dropped tasks,
    per agent_ref.name (null for rows without one)."""
    rows: dict[Any, dict[str, Any]] = {}
    tasks: dict[Any, dict[int, list[int]]] = {}
    for rec in data.inputs:
        agent = rec.agent
        c = rows.setdefault(agent, dict.fromkeys(("expected", "completed", "missing", "masked", "null_reward"), 0))
        c["expected"] += 1
        result = data.results.get((rec.task, rec.rollout))
        done = tasks.setdefault(agent, {}).setdefault(rec.task, [0, 0])
        done[0] += 1
        if result is None:
            c["missing"] += 1
            continue
        c["completed"] += 1
        done[1] += 1
        if result.masked:
            c["masked"] += 1
        elif result.reward_state != "ok":
            c["null_reward"] += 1
    out = []
    for agent in sorted(rows, key=lambda a: (a is None, a or "")):
        per_task = tasks[agent].values()
        out.append(
            {
                "agent": agent,
                "counts": rows[agent],
                "tasks": {
                    "total": len(tasks[agent]),
                    "complete": sum(1 for e, d in per_task if d == e),
                    "partial": sum(1 for e, d in per_task if 0 < d < e),
                    "dropped": sum(1 for _, d in per_task if d == 0),
                },
            }
        )
    return out


def render_gym_text(summary: dict[str, Any], masked: int, paths: dict[str, str]) -> str:
    s = summary
    return "\n".join(
        [
            "Profiling outputs:",
            f"Reward profile completion: {s['completed_rollout_rows']}/{s['expected_rollout_rows']} rollout rows "
            f"({s['reward_profile_completion_pct']:.2f}%)",
            f"Input rows: {s['total_input_rows']} total; {s['complete_input_rows']} complete; "
            f"{s['partial_input_rows']} partial; {s['missing_input_rows']} without rollouts dropped from output.",
            f"Masked from quality metrics: {masked} rollout rows (kept in completion accounting above).",
            f"Reward profiling outputs: {paths['reward_profiling']}",
            f"Agent-level metrics: {paths['agent_metrics']}",
            f"Repeat-level metrics: {paths['repeat_level_metrics']}",
        ]
    )
