"""Per-task tallies from rollout facts, and the task table built from them.

A task here is a (task index, agent) pair, as the profile keys its rows (fan-out gives one task index
several agents). Counts follow the profiler: a masked rollout or one without a numeric reward is not
scored; pass := reward >= threshold. Tallies are sums, so chunk tallies merge exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .facts import ERRORED, MASKED, TRUNCATED, Facts

SUMS = (
    "n_rows",
    "n_scored",
    "n_passed",
    "n_masked",
    "n_truncated",
    "n_errored",
    "reward_sum",
    "n_tokens",
    "tokens_sum",
    "turns_sum",
    "calls_sum",
)
BANDS = ("all_fail", "mixed", "all_pass", "none")


@dataclass
class Tally:
    """Sums per task, one entry per (task, agent code), sorted by task then agent code."""

    task: Any
    agent: Any
    sums: dict[str, Any]

    def __len__(self) -> int:
        return int(self.task.size)


def _group(task: Any, agent: Any) -> tuple[Any, Any, Any, Any]:
    """(order, starts, group task, group agent): rows sorted by (task, agent) and where each group starts."""
    import numpy as np

    order = np.lexsort((agent, task))
    t, a = task[order], agent[order]
    if not t.size:
        return order, np.zeros(0, dtype=np.int64), t, a
    new = np.ones(t.size, dtype=bool)
    new[1:] = (t[1:] != t[:-1]) | (a[1:] != a[:-1])
    starts = np.flatnonzero(new)
    return order, starts, t[starts], a[starts]


def _reduce(values: Any, order: Any, starts: Any) -> Any:
    import numpy as np

    if not starts.size:
        return np.zeros(0, dtype=values.dtype)
    return np.add.reduceat(values[order], starts)


def tally(facts: Facts, threshold: float) -> Tally:
    import numpy as np

    reward = facts.reward
    masked = (facts.flags & MASKED) != 0
    scored = ~np.isnan(reward) & ~masked
    with np.errstate(invalid="ignore"):
        passed = scored & (reward >= threshold)
    has_tokens = ~np.isnan(facts.tokens)
    columns = {
        "n_rows": np.ones(len(facts), dtype=np.int64),
        "n_scored": scored.astype(np.int64),
        "n_passed": passed.astype(np.int64),
        "n_masked": masked.astype(np.int64),
        "n_truncated": ((facts.flags & TRUNCATED) != 0).astype(np.int64),
        "n_errored": ((facts.flags & ERRORED) != 0).astype(np.int64),
        "reward_sum": np.where(scored, reward, 0.0),
        "n_tokens": has_tokens.astype(np.int64),
        "tokens_sum": np.where(has_tokens, facts.tokens, 0.0),
        "turns_sum": facts.turns.astype(np.int64),
        "calls_sum": facts.calls.astype(np.int64),
    }
    order, starts, task, agent = _group(facts.task, facts.agent)
    return Tally(task, agent, {name: _reduce(col, order, starts) for name, col in columns.items()})


def merge(tallies: list[Tally]) -> Tally:
    """One tally from the tallies of consecutive chunks (tasks spread over chunks are summed)."""
    import numpy as np

    if len(tallies) == 1:
        return tallies[0]
    task = np.concatenate([t.task for t in tallies]).astype(np.int64)
    agent = np.concatenate([t.agent for t in tallies]).astype(np.int32)
    order, starts, gt, ga = _group(task, agent)
    sums = {name: _reduce(np.concatenate([t.sums[name] for t in tallies]), order, starts) for name in SUMS}
    return Tally(gt, ga, sums)


@dataclass
class TaskTable:
    """The task table: one entry per (task, agent). Undefined values are NaN (with their n beside them)."""

    task: Any
    agent: Any  # agent codes into `agents`
    agents: list[str | None]
    n_rows: Any
    n_scored: Any
    n_passed: Any
    n_masked: Any
    n_truncated: Any
    n_errored: Any
    pass_rate: Any
    ci_low: Any
    ci_high: Any
    mean_reward: Any
    mean_tokens: Any
    truncated_share: Any
    mean_turns: Any  # model turns per rollout (every row counts)
    mean_calls: Any  # function calls per rollout
    band: Any  # all_fail | mixed | all_pass | none (no scored rollout)
    threshold: float
    expected: Any  # rollouts the materialized inputs hold for the task; -1 when unknown
    lines: Any = None  # artifacts.task_lines.TaskLines of the run, when its manifest records them

    def __len__(self) -> int:
        return int(self.task.size)

    def position(self, task: int, agent: int) -> int | None:
        import numpy as np

        hits = np.flatnonzero((self.task == task) & (self.agent == agent))
        return int(hits[0]) if hits.size else None

    def row(self, i: int) -> dict[str, Any]:
        """Entry i as JSON (the task table row of `inspect --json` and the viewer's API)."""
        return {
            "task": int(self.task[i]),
            "agent": self.agents[int(self.agent[i])],
            "n_rollouts": int(self.n_rows[i]),
            "n_scored": int(self.n_scored[i]),
            "n_passed": int(self.n_passed[i]),
            "n_masked": int(self.n_masked[i]),
            "n_truncated": int(self.n_truncated[i]),
            "n_errored": int(self.n_errored[i]),
            "expected": None if self.expected[i] < 0 else int(self.expected[i]),
            "pass_threshold": self.threshold,
            "pass_rate": _f(self.pass_rate[i]),
            "wilson_low_95": _f(self.ci_low[i]),
            "wilson_high_95": _f(self.ci_high[i]),
            "mean_reward": _f(self.mean_reward[i]),
            "mean_output_tokens": _f(self.mean_tokens[i]),
            "truncated_share": _f(self.truncated_share[i]),
            "mean_turns": _f(self.mean_turns[i]),
            "mean_tool_calls": _f(self.mean_calls[i]),
            "band": str(self.band[i]),
            "source_lines": None if self.lines is None else self.lines.of(int(self.task[i])),
        }


def _f(value: Any) -> float | None:
    value = float(value)
    return None if value != value else value


def _ratio(num: Any, den: Any) -> Any:
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def summarize(t: Tally, agents: list[str | None], threshold: float, expected: Any = None) -> TaskTable:
    """The table of a tally: pass rate with its Wilson interval, band, means and shares."""
    import numpy as np

    from ..stats.estimators import difficulty_band, wilson_interval

    s = t.sums
    low, high = wilson_interval(s["n_passed"], s["n_scored"])
    return TaskTable(
        task=t.task,
        agent=t.agent,
        agents=agents,
        n_rows=s["n_rows"],
        n_scored=s["n_scored"],
        n_passed=s["n_passed"],
        n_masked=s["n_masked"],
        n_truncated=s["n_truncated"],
        n_errored=s["n_errored"],
        pass_rate=_ratio(s["n_passed"], s["n_scored"]),
        ci_low=low,
        ci_high=high,
        mean_reward=_ratio(s["reward_sum"], s["n_scored"]),
        mean_tokens=_ratio(s["tokens_sum"], s["n_tokens"]),
        truncated_share=_ratio(s["n_truncated"], s["n_rows"]),
        mean_turns=_ratio(s["turns_sum"], s["n_rows"]),
        mean_calls=_ratio(s["calls_sum"], s["n_rows"]),
        band=difficulty_band(s["n_scored"], s["n_passed"]),
        threshold=threshold,
        expected=np.full(len(t), -1, dtype=np.int64) if expected is None else expected,
    )
