"""What every command that reads a profile says about what its numbers stand on: the rollouts the run was
meant to have, those that came back, those masked, those missing, and the tasks with no scored rollout
(one block, the same in `stats` and `compare`, text and JSON), and the few-task note.

Each figure comes from its own count (`stats.rows` is the rule for which rows count):
- expected: every rollout the run asked for; completed: those that came back, masked ones included;
  masked: those left out of every statistic by `mask_sample`; missing = expected - completed; the
  completion share = completed / expected; scored: rollouts with a numeric value (null rewards are
  completed but not scored).
- The profile's rows list only unmasked rollouts, and their `expected_num_rollouts` leave masked ones out
  too; a task group with no completed rollout has no row at all. So `*_profile_summary.json` beside the
  profile is the source when it describes these rows (its completed rollouts less its masked and excluded
  ones equal the rows' listed rollouts); without it the block stands on the rows, and masked is null
  (unknown).
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
    """Rollouts expected, completed (masked ones included), missing (expected - completed) and the
    completion %; masked (null when unknown: no matching profile summary); rollouts scored (with a numeric
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
    masked_rollouts: int | None = None  # from the profile summary; null without one

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
        if self.masked_rollouts:
            out.append(
                f"{who}{self.masked_rollouts} masked rollout(s) (mask_sample) completed but are left out of "
                "every estimate (not counted missing)"
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
    """With `beside_summary`, the profile summary next to the file (same stem) gives expected, completed
    and masked rollouts and the task groups with no row, when it describes these rows."""
    import numpy as np

    completed = sum(data.listed)
    stated = [e for e in data.expected if e is not None]
    expected = None
    if stated:  # a row without the key counts what it lists
        expected = sum(e if e is not None else n for e, n in zip(data.expected, data.listed, strict=True))
    scored = (~np.isnan(data.values[metric])).sum(axis=1)
    unscored = [task_label(*data.keys[i]) for i in np.flatnonzero(scored == 0)]
    dropped = masked = None
    if beside_summary:
        found = _summary_counts(data.path, completed)
        if found is not None:
            expected, completed, masked, dropped = found
    missing = None if expected is None else max(0, expected - completed)
    pct = None if expected is None else (100.0 if expected == 0 else 100.0 * completed / expected)
    return Denominators(
        data.n_tasks,
        expected,
        completed,
        missing,
        pct,
        int(scored.sum()),
        len(unscored),
        unscored,
        dropped,
        masked,
    )


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None  # a bool or a negative: not a count


def _summary_counts(profile: Path, listed: int) -> tuple[int, int, int, int] | None:
    """(expected, completed, masked rollouts, task groups without a row) from `<stem>_profile_summary.json`,
    or None when there is none, it is unreadable, or it counts other rollouts than the rows list (another
    run's file): its completed rollouts less the masked and excluded ones must be the rows' `listed`."""
    import orjson

    name = profile.name
    if not name.endswith(PROFILE_SUFFIX):
        return None
    path = profile.with_name(name[: -len(PROFILE_SUFFIX)] + "_profile_summary.json")
    try:
        if not path.is_file():
            return None
        summary = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    gym = summary.get("gym_completion") if isinstance(summary, dict) else None
    if not isinstance(gym, dict):
        return None
    expected, done, dropped = (
        _count(gym.get("expected_rollout_rows")),
        _count(gym.get("completed_rollout_rows")),
        _count(gym.get("missing_input_rows")),
    )
    if expected is None or done is None or dropped is None:
        return None
    counts = summary.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    masked = _count(counts.get("masked", 0))
    excluded = _count(counts.get("unhealthy_excluded", 0))
    if masked is None or excluded is None or done - masked - excluded != listed:
        return None
    return expected, done, masked, dropped


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
