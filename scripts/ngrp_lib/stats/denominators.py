"""What every command that reads a profile says about what its numbers stand on: the rollouts the run was
meant to have, those it has, those missing, and the tasks with no scored rollout (one block, the same in
`stats` and `compare`, text and JSON), and the few-task note.

The profile's rows state `expected_num_rollouts` (Gym's and ngrp's do); a task group with no completed
rollout has no row at all, so only `*_profile_summary.json` counts those (`missing_input_rows`): `stats`
and `compare` read the summary beside the profile when it counts the rows' completed rollouts
(`tasks_without_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.names import task_label
from .load import ProfileData

FEW_TASKS = 10  # below this many clusters, cluster-level intervals are not to be trusted
MAX_NAMED = 10  # unscored tasks named in text
PROFILE_SUFFIX = "_reward_profiling.jsonl"


@dataclass
class Denominators:
    """Rollouts expected (sum of the rows' expected_num_rollouts; null when no row states it), completed
    (listed in the rows' rollout_infos), missing and the completion %; rollouts scored (with a numeric
    value, after any exclusion); the tasks with none."""

    tasks: int
    expected_rollouts: int | None
    completed_rollouts: int
    missing_rollouts: int | None
    completion_pct: float | None
    scored_rollouts: int
    tasks_unscored: int
    unscored: list[str] = field(default_factory=list)  # their labels ("task 3", "task 3 / agent a")
    # task groups with no completed rollout (no profile row), from the *_profile_summary.json beside the
    # profile; None without one (or one that does not match the rows)
    tasks_without_rows: int | None = None

    @property
    def partial(self) -> bool:
        return self.completion_pct is not None and self.completion_pct < 100.0

    def lines(self, name: str = "") -> list[str]:
        """The text lines: only when the run is partial or a task has no scored rollout."""
        who = f"{name}: " if name else ""
        out = []
        if self.partial:
            out.append(
                f"{who}partial run: {self.completed_rollouts} of {self.expected_rollouts} expected rollouts "
                f"completed ({self.completion_pct:.1f}%), {self.missing_rollouts} missing; every number "
                "stands on the completed ones, and missing rollouts that are not random (timeouts on long "
                "answers, say) bias it"
            )
        if self.tasks_without_rows:
            out.append(
                f"{who}{self.tasks_without_rows} task group(s) with no completed rollout have no profile row "
                "(counted by the profile summary beside it): they are in no estimate and in the missing count"
            )
        if self.tasks_unscored:
            shown = ", ".join(self.unscored[:MAX_NAMED])
            more = f" and {self.tasks_unscored - MAX_NAMED} more" if self.tasks_unscored > MAX_NAMED else ""
            out.append(
                f"{who}{self.tasks_unscored} task(s) with no scored rollout, left out of every estimate: "
                f"{shown}{more}"
            )
        return out


def denominators(data: ProfileData, metric: str = "reward", *, beside_summary: bool = False) -> Denominators:
    """With `beside_summary`, the profile summary next to the file (same stem) adds the rollouts of task
    groups that have no row, when it counts the same completed rollouts as the rows list."""
    import numpy as np

    completed = sum(data.listed)
    stated = [e for e in data.expected if e is not None]
    expected = None
    if stated:  # a row without the key counts what it lists
        expected = sum(e if e is not None else n for e, n in zip(data.expected, data.listed, strict=True))
    scored = (~np.isnan(data.values[metric])).sum(axis=1)
    unscored = [task_label(*data.keys[i]) for i in np.flatnonzero(scored == 0)]
    dropped = None
    if beside_summary:
        gym = _summary_completion(data.path, completed)
        if gym is not None:
            expected, dropped = gym
    missing = None if expected is None else max(0, expected - completed)
    pct = None if expected is None else (100.0 if expected == 0 else 100.0 * completed / expected)
    return Denominators(
        data.n_tasks, expected, completed, missing, pct, int(scored.sum()), len(unscored), unscored, dropped
    )


def _summary_completion(profile: Path, completed: int) -> tuple[int, int] | None:
    """(expected rollouts, task groups without a row) from `<stem>_profile_summary.json`, or None when
    there is none, it is unreadable, or it counts other completed rollouts (another run's file)."""
    import orjson

    name = profile.name
    if not name.endswith(PROFILE_SUFFIX):
        return None
    path = profile.with_name(name[: -len(PROFILE_SUFFIX)] + "_profile_summary.json")
    try:
        if not path.is_file():
            return None
        gym = orjson.loads(path.read_bytes()).get("gym_completion")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(gym, dict):
        return None
    expected, done, dropped = (
        gym.get("expected_rollout_rows"),
        gym.get("completed_rollout_rows"),
        gym.get("missing_input_rows"),
    )
    if not (isinstance(expected, int) and isinstance(dropped, int) and done == completed):
        return None
    if not all(type(v) is int and v >= 0 for v in (expected, done, dropped)):
        return None  # a bool or a negative count: not a summary ngrp or Gym wrote
    return expected, dropped


def few_tasks_note(behind: str, estimates: str = "stats") -> str:
    """The few-task note, worded for what the numbers are ("stats": rates and means of one run;
    "compare": paired differences). `behind` names the estimates and their task counts."""
    if estimates == "compare":
        return (
            f"few tasks behind {behind}: below about {FEW_TASKS} tasks the paired t interval, the bootstrap "
            "(too narrow) and the p-values rest on a handful of differences; quote the per-task counts and "
            "flips, and add tasks before calling a difference"
        )
    return (
        f"few tasks behind {behind}: below about {FEW_TASKS} tasks no benchmark-level interval is reliable "
        "(in simulation at 6 tasks: the bootstrap is too narrow; t holds for an average of mid-range values "
        "but misses a rate near 0 or 1, such as pass@K or pass^k, most of the time; the bounded one (KG) "
        "holds but is wide); quote the counts and the per-task Wilson intervals (--json: per_task), and add "
        "tasks"
    )


def to_json(d: Denominators) -> dict[str, Any]:
    from ..jsonvalues import jsonable

    return jsonable(d)
