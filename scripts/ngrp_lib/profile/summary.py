"""Completion accounting (Gym prints it; we also write it), per-agent counts, and the warnings for what
Gym does silently."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dataset import FIRST_KEYS, NONE, Dataset, numbers, plan_ids
from .records import LAST_MASKED_ID, UNHEALTHY_ID

_AGENT_COUNTS = (
    "expected", "completed", "missing", "masked", "null_reward", "non_numeric_reward", "unhealthy_excluded",
)  # fmt: skip
_TASK_COUNTS = ("total", "complete", "partial", "dropped")


@dataclass
class Accounting:
    """What the completion summary and the per-agent counts are made of; shards split by task add up."""

    inputs: int = 0
    completed: int = 0
    results: int = 0
    groups: list[int] = field(
        default_factory=lambda: [0, 0, 0]
    )  # (task, run key) groups: total, complete, partial
    agents: dict[str | None, list[list[int]]] = field(
        default_factory=dict
    )  # agent -> [6 counts, 4 task counts]

    def add(self, other: Accounting) -> None:
        self.inputs += other.inputs
        self.completed += other.completed
        self.results += other.results
        self.groups = [a + b for a, b in zip(self.groups, other.groups, strict=True)]
        for agent, (counts, tasks) in other.agents.items():
            mine = self.agents.setdefault(agent, [[0] * len(_AGENT_COUNTS), [0] * len(_TASK_COUNTS)])
            mine[0] = [a + b for a, b in zip(mine[0], counts, strict=True)]
            mine[1] = [a + b for a, b in zip(mine[1], tasks, strict=True)]

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "completed": self.completed,
            "results": self.results,
            "groups": self.groups,
            "agents": [[agent, *counts] for agent, counts in self.agents.items()],
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Accounting:
        agents = {entry[0]: [list(entry[1]), list(entry[2])] for entry in raw["agents"]}
        return cls(raw["inputs"], raw["completed"], raw["results"], list(raw["groups"]), agents)


def account(data: Dataset) -> Accounting:
    """Gym's `profile_completion_summary` (every row including masked ones, per (task, run key)) and our
    per-agent counts (per agent_ref.name; null for rows without one), over the input arrays at once."""
    import numpy as np

    inputs = data.inputs
    tasks = numbers(inputs, "task")
    linked = numbers(inputs, "result")
    done = linked >= 0
    plans = plan_ids(data.results)
    states = np.array([_STATE_CODE[p.reward_state] for p in data.results.plans], dtype=np.int64)
    state = np.zeros(len(linked), dtype=np.int64)  # the reward state code of each matched input's rollout
    masked = np.zeros(len(linked), dtype=bool)
    row_plan = plans[linked[done]]
    masked[done] = row_plan <= LAST_MASKED_ID
    state[done] = np.where(masked[done], 0, states[row_plan])
    unhealthy = np.zeros(len(linked), dtype=bool)
    unhealthy[done] = row_plan == UNHEALTHY_ID
    del row_plan
    run_keys = numbers(inputs, "run_key", "int32")
    agents = numbers(inputs, "agent", "int32")
    out = Accounting(len(tasks), int(done.sum()), len(data.results))
    out.groups = _complete_groups(tasks, run_keys, done)
    for code in np.unique(agents).tolist():
        mine = agents == code
        counts = [
            int(mine.sum()),
            int((mine & done).sum()),
            int((mine & ~done).sum()),
            int((mine & masked & ~unhealthy).sum()),
            int((mine & (state == _NULL)).sum()),
            int((mine & (state == _NON_NUMERIC)).sum()),
            int((mine & unhealthy).sum()),
        ]
        total, complete, partial = _complete_groups(
            tasks[mine], np.zeros(int(mine.sum()), np.int64), done[mine]
        )
        agent = None if code == NONE else inputs.agents.values[code]
        out.agents[agent] = [counts, [total, complete, partial, total - complete - partial]]
    return out


_NULL, _NON_NUMERIC = 1, 2
_STATE_CODE = {"ok": 0, "null": _NULL, "absent": _NULL, "non_numeric": _NON_NUMERIC, "unhealthy": 0}


def _complete_groups(tasks: Any, keys: Any, done: Any) -> list[int]:
    """Groups of (task, key): how many, how many with every row done, how many with some."""
    import numpy as np

    if len(tasks) == 0:
        return [0, 0, 0]
    order = np.lexsort((keys, tasks))
    tasks, keys = tasks[order], keys[order]
    starts = np.nonzero(np.r_[True, (tasks[1:] != tasks[:-1]) | (keys[1:] != keys[:-1])])[0]
    expected = np.diff(np.append(starts, len(tasks)))
    completed = np.add.reduceat(done[order].astype(np.int64), starts)
    complete = int((completed == expected).sum())
    partial = int(((completed > 0) & (completed < expected)).sum())
    return [len(starts), complete, partial]


@dataclass
class GymCompletion:
    """Gym's `profile_completion_summary`: rollout rows and input rows (task groups) by completion."""

    expected_rollout_rows: int
    completed_rollout_rows: int
    missing_rollout_rows: int
    extra_rollout_rows: int
    reward_profile_completion_pct: float
    total_input_rows: int
    complete_input_rows: int
    partial_input_rows: int
    missing_input_rows: int  # task groups with no completed rollout, dropped from the output


def gym_completion(acc: Accounting) -> GymCompletion:
    total, complete, partial = acc.groups
    return GymCompletion(
        expected_rollout_rows=acc.inputs,
        completed_rollout_rows=acc.completed,
        missing_rollout_rows=acc.inputs - acc.completed,
        extra_rollout_rows=acc.results - acc.completed,  # alignment guarantees inputs are unique
        reward_profile_completion_pct=100.0 if acc.inputs == 0 else 100.0 * acc.completed / acc.inputs,
        total_input_rows=total,
        complete_input_rows=complete,
        partial_input_rows=partial,
        missing_input_rows=total - complete - partial,
    )


def agent_entries(acc: Accounting) -> list[dict[str, Any]]:
    out = []
    for agent in sorted(acc.agents, key=lambda a: (a is None, a or "")):
        counts, tasks = acc.agents[agent]
        out.append(
            {
                "agent": agent,
                "counts": dict(zip(_AGENT_COUNTS, counts, strict=True)),
                "tasks": dict(zip(_TASK_COUNTS, tasks, strict=True)),
            }
        )
    return out


@dataclass
class Facts:
    """What the profile summary and its warnings need beyond the rows and metric files; for shards split by
    task, the union's facts follow from the shards' (`add`)."""

    accounting: Accounting
    missing_count: int = 0
    missing: list[tuple[int, int]] = field(default_factory=list)  # the first few missing keys, sorted
    non_binary: bool = False  # some scored reward is neither 0 nor 1
    table_rows: int = 0  # matched measured rollouts
    labelled_rows: int = 0  # ... of which have an agent label

    def add(self, other: Facts) -> None:
        self.accounting.add(other.accounting)
        self.missing_count += other.missing_count
        self.missing = sorted(self.missing + other.missing)[:FIRST_KEYS]
        self.non_binary |= other.non_binary
        self.table_rows += other.table_rows
        self.labelled_rows += other.labelled_rows

    def to_json(self) -> dict[str, Any]:
        return {
            "accounting": self.accounting.to_json(),
            "missing_count": self.missing_count,
            "missing": self.missing,
            "non_binary": self.non_binary,
            "table_rows": self.table_rows,
            "labelled_rows": self.labelled_rows,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Facts:
        return cls(
            Accounting.from_json(raw["accounting"]),
            raw["missing_count"],
            [tuple(key) for key in raw["missing"]],
            raw["non_binary"],
            raw["table_rows"],
            raw["labelled_rows"],
        )


def counts_of(completion: GymCompletion, per_agent: list[dict[str, Any]]) -> dict[str, int]:
    masked = sum(a["counts"]["masked"] for a in per_agent)
    unhealthy = sum(a["counts"]["unhealthy_excluded"] for a in per_agent)
    null = sum(a["counts"]["null_reward"] for a in per_agent)
    non_numeric = sum(a["counts"]["non_numeric_reward"] for a in per_agent)
    return {
        "expected": completion.expected_rollout_rows,
        "completed": completion.completed_rollout_rows,
        "missing": completion.missing_rollout_rows,
        "extra": completion.extra_rollout_rows,
        "masked": masked,
        "measured": completion.completed_rollout_rows - masked - unhealthy,
        "null_reward": null,
        "non_numeric_reward": non_numeric,
        "unhealthy_excluded": unhealthy,
    }


def add_agent_means(per_agent: list, agents: list, task_means_by_label: dict) -> None:
    """Next to Gym's rollout-weighted mean/reward, the task-weighted one (mean of per-task means)."""
    pooled = {e["agent_ref"]["name"]: e.get("mean/reward") for e in agents}
    for entry in per_agent:
        task_means = task_means_by_label.get(entry["agent"])
        entry["mean_reward_rollout_weighted"] = pooled.get(entry["agent"])
        entry["mean_reward_task_weighted"] = sum(task_means) / len(task_means) if task_means else None


def _empty_run_warnings(completion: GymCompletion) -> list[str]:
    """A profile of nothing is written (as Gym writes it) but never reads as a result."""
    if not completion.expected_rollout_rows:
        return [
            "NO INPUT ROWS: the materialized inputs hold no rows, so the profile files are written EMPTY and"
            " say nothing about the policy; materialize and collect a task file with rows first"
        ]
    if not completion.completed_rollout_rows:
        return [
            f"NO ROLLOUT COMPLETED (0 of {completion.expected_rollout_rows}): the profile files are written,"
            " as Gym's profiler writes them, but they are EMPTY and say nothing about the policy; collect the"
            " rollouts first (`ngrp check` names the fix or the --resume command)"
        ]
    return []


def data_warnings(
    counts: dict[str, int], completion: GymCompletion, incomplete: list, facts: Facts, options: Any
) -> list[str]:
    out = _empty_run_warnings(completion)
    if counts["null_reward"]:
        how = {
            "exclude": "left out of mean/reward and the other reward statistics, as Gym does, so those "
            "tasks' "
            "numbers stand on fewer rollouts; use --null-reward zero or error to decide otherwise",
            "zero": "counted as reward 0 (--null-reward zero)",
        }[options.null_reward]
        out.append(f"{counts['null_reward']} measured rollout(s) have a null or absent reward: {how}")
    if counts["non_numeric_reward"]:
        out.append(
            f"{counts['non_numeric_reward']} measured rollout(s) have a reward that is not a number (a "
            "string?): left out of mean/reward and the other reward statistics, as Gym does, whatever "
            "--null-reward says; fix the verifier (`ngrp validate` names the rows)"
        )
    if facts.missing_count:
        out.append(
            f"partial profile: {facts.missing_count} rollout(s) missing (first "
            + ", ".join(f"({t}, {r})" for t, r in facts.missing[:5])
            + "); "
            f"{completion.partial_input_rows} partial and "
            f"{completion.missing_input_rows} dropped task group(s). "
            "Agent-level mean/* pools rollouts, so tasks with more completed rollouts weigh more; see "
            "mean_reward_task_weighted in the profile summary"
        )
    if incomplete:
        first = incomplete[0]
        out.append(
            f"{len(incomplete)} repeat(s) are missing rollouts for some tasks (e.g. agent="
            f"{first['agent_ref']['name']!r}, _ng_rollout_index={first['_ng_rollout_index']}, "
            f"missing_count={first['missing_count']}): repeat-level statistics use unequal sample sizes"
        )
    if counts["masked"]:
        out.append(f"{counts['masked']} masked rollout(s) (mask_sample) left out of the quality metrics")
    if counts["unhealthy_excluded"]:
        out.append(
            f"{counts['unhealthy_excluded']} unhealthy rollout(s) left out of the quality metrics as masked "
            f"ones are (--exclude-unhealthy {options.exclude_unhealthy}); Gym's files count them as masked"
        )
    if not options.gym_only and facts.non_binary:
        out.append(
            f"rewards are not all 0/1: ngrp/pass_rate and ngrp/pass@k count a rollout as passed when its "
            f"reward >= {options.pass_threshold:g} (--pass-threshold); state that threshold with any pass "
            "rate, or quote mean/reward"
        )
    if facts.table_rows and not facts.labelled_rows:
        out.append(
            "no materialized row has an agent_ref (or _ng_environment_server): the agent and repeat-level "
            "metric files are empty, as in Gym"
        )
    return out
