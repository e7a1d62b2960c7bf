"""Completion accounting (Gym prints it; we also write it), per-agent counts, and the warnings for what
Gym does silently."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .records import UNHEALTHY, Dataset


def account(data: Dataset) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One pass over the inputs: Gym's `profile_completion_summary` (every row including masked ones,
    per (task, run key)) and our per-agent counts (per agent_ref.name; null for rows without one)."""
    expected: Counter = Counter()
    completed: Counter = Counter()
    # agent -> [expected, completed, missing, masked, null, non-numeric, unhealthy]
    agents: dict[Any, list[int]] = {}
    agent_tasks: dict[Any, dict[int, list[int]]] = {}  # agent -> task -> [expected, completed]
    for rec in data.inputs:
        group = (rec.task, rec.run_key)
        result = rec.result
        expected[group] += 1
        c = agents.get(rec.agent)
        if c is None:
            c = agents[rec.agent] = [0, 0, 0, 0, 0, 0, 0]
            agent_tasks[rec.agent] = {}
        c[0] += 1
        done = agent_tasks[rec.agent].get(rec.task)
        if done is None:
            done = agent_tasks[rec.agent][rec.task] = [0, 0]
        done[0] += 1
        if result is None:
            c[2] += 1
            continue
        completed[group] += 1
        c[1] += 1
        done[1] += 1
        if result.reward_state == UNHEALTHY:
            c[6] += 1
        elif result.masked:
            c[3] += 1
        elif result.reward_state == "non_numeric":
            c[5] += 1
        elif result.reward_state != "ok":
            c[4] += 1
    return _gym_summary(data, expected, completed), _agent_entries(agents, agent_tasks)


def _gym_summary(data: Dataset, expected: Counter, completed: Counter) -> dict[str, Any]:
    complete = sum(1 for g, n in expected.items() if completed[g] == n)
    partial = sum(1 for g, n in expected.items() if 0 < completed[g] < n)
    n_expected, n_completed = len(data.inputs), sum(completed.values())
    return {
        "expected_rollout_rows": n_expected,
        "completed_rollout_rows": n_completed,
        "missing_rollout_rows": n_expected - n_completed,
        "extra_rollout_rows": len(data.results) - n_completed,  # alignment guarantees inputs are unique
        "reward_profile_completion_pct": 100.0 if n_expected == 0 else 100.0 * n_completed / n_expected,
        "total_input_rows": len(expected),
        "complete_input_rows": complete,
        "partial_input_rows": partial,
        "missing_input_rows": len(expected) - complete - partial,
    }


_AGENT_COUNTS = (
    "expected", "completed", "missing", "masked", "null_reward", "non_numeric_reward", "unhealthy_excluded",
)  # fmt: skip


def _agent_entries(agents: dict, agent_tasks: dict) -> list[dict[str, Any]]:
    out = []
    for agent in sorted(agents, key=lambda a: (a is None, a or "")):
        per_task = agent_tasks[agent].values()
        counts = dict(zip(_AGENT_COUNTS, agents[agent], strict=True))
        out.append(
            {
                "agent": agent,
                "counts": counts,
                "tasks": {
                    "total": len(per_task),
                    "complete": sum(1 for e, d in per_task if d == e),
                    "partial": sum(1 for e, d in per_task if 0 < d < e),
                    "dropped": sum(1 for _, d in per_task if d == 0),
                },
            }
        )
    return out
