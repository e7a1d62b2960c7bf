"""Reward components: `reward_components: {name: number}` beside `reward`, as multi-reward resources servers
write it. Each component is counted apart, and a row that lacks a component (or holds a non-number for
it) is counted and named, never read as zero, wherever it falls (before the component first appears too).
Which rows count is `stats.rows`' rule: masked rows are out (counted as masked), and an adaptive run gives
its first round alone (later-round rows counted apart), as for every other benchmark-level number.

Per component, over the rollouts that hold it as a number:
- the rollout-weighted mean sum(x) / n with a task-clustered interval: CR1 standard error
  se^2 = G/(G-1) * sum_t (S_t - mean * n_t)^2 / n^2 over the G tasks (S_t, n_t: the task's sum and count),
  and a t interval with G-1 degrees of freedom (the same clustering as `stats`' rollout-weighted mean);
  a component whose values are all 0 or 1 is a rate and gets the bounded interval `stats`' rates get
  (`intervals.rate_interval`: Korn-Graubard on that SE, one-sided at 0 or 1), never below 0;
- Pearson's correlation with the total reward, over the rollouts holding both as numbers.
Paired between two components of one run (stats, "which component drags"): per rollout holding both as
numbers d = X - Y, the rollout-weighted mean of d with the same task-clustered (CR1) t interval: the
rollouts of a task share its prompt, so they are not independent. Every pair by default (up to
MAX_AUTO_PAIRS components), or the pairs asked for.
Paired per component (compare): per task the component's mean in A and in B, over the tasks where both
have it; the mean of B - A over those tasks with a t interval on G-1 degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import iter_rows
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY
from . import methods
from .distributions import t_ppf
from .rows import COUNTED, MASKED, RowRule

KEY = "reward_components"
EXAMPLES = 5  # rollout ids named per missing component
MAX_AUTO_PAIRS = 4  # components up to which every pair is differenced without being asked (6 pairs)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and abs(value) != math.inf:
        return float(value)
    return None


@dataclass
class ComponentRows:
    """Per-rollout component values of a run, gathered from its rows."""

    rule: RowRule = field(default_factory=RowRule)
    n_rows: int = 0
    n_masked: int = 0  # rows left out as masked (`stats.rows`)
    n_later_round: int = 0  # an adaptive run's rows after its first round, left out
    n_with_components: int = 0
    rids: list[str] = field(default_factory=list)  # one entry per row holding reward_components
    names: list[str] = field(default_factory=list)  # in order of first appearance
    task: list[int] = field(default_factory=list)  # one entry per row holding reward_components
    reward: list[float | None] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  # component -> rollout ids lacking it
    not_numeric: dict[str, list[str]] = field(default_factory=dict)
    malformed: list[str] = field(default_factory=list)  # rows whose reward_components is not an object

    def add(self, row: dict) -> None:
        self.n_rows += 1
        status = self.rule.status(row)
        if status != COUNTED:
            if status == MASKED:
                self.n_masked += 1
            else:
                self.n_later_round += 1
            return
        raw = row.get(KEY)
        if raw is None:
            return
        rid = f"{row.get(TASK_KEY)}-{row.get(ROLLOUT_KEY)}"
        if not isinstance(raw, dict):
            self.malformed.append(rid)
            return
        task = row.get(TASK_KEY)
        if not isinstance(task, int) or isinstance(task, bool):
            return
        for name in raw:
            if name not in self.values:  # the rows before it lack it: missing, as anywhere else
                self.names.append(name)
                self.values[name] = [None] * self.n_with_components
                if self.rids:
                    self.missing[name] = list(self.rids)
        self.n_with_components += 1
        self.rids.append(rid)
        self.task.append(task)
        self.reward.append(_number(row.get("reward")))
        for name in self.names:
            value = _number(raw.get(name))
            self.values[name].append(value)
            if value is None:
                bucket = self.missing if name not in raw else self.not_numeric
                bucket.setdefault(name, []).append(rid)

    def lacking(self, name: str) -> int:
        """Rows holding reward_components without a number for `name` (absent, or not a number)."""
        return len(self.missing.get(name, [])) + len(self.not_numeric.get(name, []))


def read_components(
    path: Path | str, rows: Iterable[dict] | None = None, rule: RowRule | None = None
) -> ComponentRows:
    """The component values of a rollouts file (or of `rows`), over the rows `rule` counts."""
    found = ComponentRows(rule=rule or RowRule())
    refused: list[int] = []  # rows too deep: skipped here, named by attach_rollouts' note on the same file
    for row in rows if rows is not None else (r.data for r in iter_rows(Path(path), refused=refused)):
        found.add(row)
    return found


def _t(level: float, df: int) -> float:
    # ngrp's own quantile (checked against scipy in the tests): the analysis install has no scipy.
    return t_ppf(0.5 + level / 2, df)


def clustered_mean(tasks: list[int], values: list[float], level: float = 0.95) -> dict[str, Any]:
    """Rollout-weighted mean with the task-clustered (CR1) interval; None bounds with fewer than 2 tasks."""
    n = len(values)
    mean = sum(values) / n
    sums: dict[int, list[float]] = {}
    for task, value in zip(tasks, values, strict=True):
        acc = sums.setdefault(task, [0.0, 0.0])
        acc[0] += value
        acc[1] += 1
    g = len(sums)
    if g < 2:
        return {"mean": mean, "se": None, "ci_low": None, "ci_high": None, "n_tasks": g}
    se = math.sqrt(g / (g - 1) * sum((s - mean * k) ** 2 for s, k in sums.values()) / n**2)
    half = _t(level, g - 1) * se
    return {"mean": mean, "se": se, "ci_low": mean - half, "ci_high": mean + half, "n_tasks": g}


def pearson(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def component_pairs(found: ComponentRows, asked: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """The pairs to difference: those asked for (each name must be a component), else every pair in order
    of first appearance when there are 2 to MAX_AUTO_PAIRS components."""
    from ..errors import UsageError

    asked = list(asked)
    for x, y in asked:
        unknown = [name for name in (x, y) if name not in found.values]
        if unknown:
            known = ", ".join(found.names) or "none"
            raise UsageError(
                f"--component-diff: no reward component {unknown[0]!r} in the rollouts (components: {known})"
            )
        if x == y:
            raise UsageError(f"--component-diff needs two different components, not {x!r} twice")
    if asked:
        return asked
    names = found.names
    if not 2 <= len(names) <= MAX_AUTO_PAIRS:
        return []
    return [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))]


def component_difference(found: ComponentRows, x: str, y: str, level: float = 0.95) -> dict[str, Any]:
    """X - Y over the rollouts holding both as numbers: mean, task-clustered (CR1) SE, and the interval of
    `differences.clustered_difference` (JSON): MOVER when both are 0/1 (from the bounded intervals each
    component gets), the CR1 t interval otherwise, an exact bound when every difference is the same."""
    from .differences import clustered_difference

    kept = [
        (t, vx, vy)
        for t, vx, vy in zip(found.task, found.values[x], found.values[y], strict=True)
        if vx is not None and vy is not None
    ]
    entry: dict[str, Any] = {"a": x, "b": y, "n_rollouts": len(kept)}
    entry.update(
        clustered_mean([t for t, _, _ in kept], [vx - vy for _, vx, vy in kept], level)
        if kept
        else {"mean": None, "se": None, "ci_low": None, "ci_high": None, "n_tasks": 0}
    )
    entry["ci_method"] = methods.T
    found_interval = (
        clustered_difference([t for t, _, _ in kept], [v for _, v, _ in kept], [v for _, _, v in kept], level)
        if kept
        else None
    )
    if found_interval is not None:
        entry.update(ci_low=found_interval.low, ci_high=found_interval.high, ci_method=found_interval.method)
    entry["n_lacking"] = found.n_with_components - len(kept)
    return entry


def component_stats(
    found: ComponentRows, level: float = 0.95, diffs: Iterable[tuple[str, str]] = ()
) -> dict[str, Any]:
    """Each component's mean, interval, correlation with the total and its missing rows, and the paired
    differences between components (`diffs`; default every pair of up to MAX_AUTO_PAIRS) (JSON)."""
    out = []
    for name in found.names:
        column = found.values[name]
        kept = [(t, v) for t, v in zip(found.task, column, strict=True) if v is not None]
        pairs = [(v, r) for v, r in zip(column, found.reward, strict=True) if v is not None and r is not None]
        entry: dict[str, Any] = {"name": name, "n_rollouts": len(kept)}
        entry.update(
            clustered_mean([t for t, _ in kept], [v for _, v in kept], level)
            if kept
            else {"mean": None, "se": None, "ci_low": None, "ci_high": None, "n_tasks": 0}
        )
        entry["ci_method"] = methods.T
        if entry["ci_low"] is not None and all(v in (0, 1) for _, v in kept):  # a rate: bounded
            entry.update(_rate_bounds(kept, entry, level))
        entry["correlation_with_reward"] = pearson([v for v, _ in pairs], [r for _, r in pairs])
        entry["n_missing"] = len(found.missing.get(name, []))
        entry["n_not_numeric"] = len(found.not_numeric.get(name, []))
        entry["missing_examples"] = (found.missing.get(name, []) + found.not_numeric.get(name, []))[:EXAMPLES]
        out.append(entry)
    return {
        "level": level,
        "n_rows": found.n_rows,
        "n_masked": found.n_masked,
        "n_later_round": found.n_later_round,
        "n_with_components": found.n_with_components,
        "n_malformed": len(found.malformed),
        "components": out,
        "differences": [component_difference(found, x, y, level) for x, y in component_pairs(found, diffs)],
    }


def _rate_bounds(kept: list[tuple[int, float]], entry: dict[str, Any], level: float) -> dict[str, Any]:
    """A 0/1 component's interval as `stats`' rollout-weighted rate gets it (`intervals.rate_interval`:
    Korn-Graubard on the CR1 SE, capped at the rollouts, credit above T scaled by the tasks carrying it;
    one-sided at 0 or 1): within [0, 1], where a t interval can cross 0 on a rare component. Only where
    the t interval exists (2 tasks or more), as before."""
    from . import intervals

    per_task: dict[int, list[float]] = {}
    for task, value in kept:
        per_task.setdefault(task, []).append(value)
    means = [sum(v) / len(v) for v in per_task.values()]
    se = math.nan if entry["se"] is None else entry["se"]
    spread = intervals.carrying(means, entry["mean"])
    bounds = intervals.rate_interval(entry["mean"], se, len(means), level, len(kept), spread=spread)
    if bounds is None:
        return {}
    return {"ci_low": bounds.low, "ci_high": bounds.high, "ci_method": bounds.method}


def _task_means(found: ComponentRows, name: str) -> dict[int, float]:
    return {task: s / k for task, (s, k, _) in _task_sums(found, name).items()}


def _task_sums(found: ComponentRows, name: str) -> dict[int, list[Any]]:
    """Per task: [sum, count, all values 0 or 1] of the component's numbers."""
    sums: dict[int, list[Any]] = {}
    if name not in found.values:  # a component only the other run has: no task holds it here
        return sums
    for task, value in zip(found.task, found.values[name], strict=True):
        if value is not None:
            acc = sums.setdefault(task, [0.0, 0, True])
            acc[0] += value
            acc[1] += 1
            acc[2] = acc[2] and value in (0.0, 1.0)
    return sums


def paired_components(a: ComponentRows, b: ComponentRows, level: float = 0.95) -> dict[str, Any]:
    """Per component, B - A of the per-task means over the tasks where both runs hold it (JSON): a 0/1
    component's task means are rates, so MOVER from each run's bounded interval
    (`differences.paired_task_difference`); others the t interval over tasks; the exact bound when every
    task's difference is the same and the values lie in [0, 1]."""
    from .differences import constant_difference, paired_task_difference

    out = []
    for name in [*a.names, *(n for n in b.names if n not in a.names)]:
        sa, sb = _task_sums(a, name), _task_sums(b, name)
        ma = {t: v[0] / v[1] for t, v in sa.items()}
        mb = {t: v[0] / v[1] for t, v in sb.items()}
        shared = sorted(ma.keys() & mb.keys())
        diffs = [mb[t] - ma[t] for t in shared]
        entry: dict[str, Any] = {
            "name": name,
            "n_tasks": len(shared),
            "only_a": len(ma.keys() - mb.keys()),
            "only_b": len(mb.keys() - ma.keys()),
            "mean_a": sum(ma[t] for t in shared) / len(shared) if shared else None,
            "mean_b": sum(mb[t] for t in shared) / len(shared) if shared else None,
            "diff": sum(diffs) / len(diffs) if diffs else None,
            "ci_low": None,
            "ci_high": None,
            "ci_method": methods.T,
        }
        if len(diffs) >= 2:
            mean = entry["diff"]
            sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
            half = _t(level, len(diffs) - 1) * sd / math.sqrt(len(diffs))
            entry["ci_low"], entry["ci_high"] = mean - half, mean + half
        rate = all(sa[t][2] and sb[t][2] for t in shared)
        unit = all(0.0 <= m[t] <= 1.0 for m in (ma, mb) for t in shared)
        if shared and rate:
            found = paired_task_difference(
                [ma[t] for t in shared], [mb[t] for t in shared],
                [sa[t][1] for t in shared], [sb[t][1] for t in shared], level,
            )  # fmt: skip
            if found is not None:
                entry.update(ci_low=found.low, ci_high=found.high, ci_method=found.method)
        elif shared and unit and max(diffs) - min(diffs) <= 1e-12:
            entry["ci_low"], entry["ci_high"] = constant_difference(diffs[0], len(diffs), level)
            entry["ci_method"] = methods.CONSTANT_DIFFERENCE
        out.append(entry)
    return {"level": level, "components": out}


def components_text(summary: dict[str, Any]) -> list[str]:
    """The stats text section: one line per component, then the rows lacking one."""
    if not summary["components"]:
        return []
    pct = f"{summary['level']:.0%}"
    lines = [
        f"reward components ({summary['n_with_components']} of {summary['n_rows']} rows carry them; "
        f"mean [{pct} task-clustered interval], correlation with reward):"
    ]
    left_out = []
    if summary.get("n_masked"):
        left_out.append(f"{summary['n_masked']} masked row(s)")
    if summary.get("n_later_round"):
        left_out.append(f"{summary['n_later_round']} row(s) after the adaptive run's first round")
    if left_out:
        lines.append(f"  left out, as from every other estimate: {', '.join(left_out)}")
    for c in summary["components"]:
        ci = "n/a" if c["ci_low"] is None else f"[{c['ci_low']:.3f}, {c['ci_high']:.3f}]"
        mean = "n/a" if c["mean"] is None else f"{c['mean']:.3f}"
        r = "n/a" if c["correlation_with_reward"] is None else f"{c['correlation_with_reward']:+.2f}"
        line = f"  {c['name']}: {mean} {ci}, r {r}, n {c['n_rollouts']} rollouts / {c['n_tasks']} tasks"
        lacking = c["n_missing"] + c["n_not_numeric"]
        if lacking:
            line += (
                f"; MISSING in {lacking} row(s), e.g. {', '.join(c['missing_examples'])} (not counted as 0)"
            )
        lines.append(line)
    if summary["n_malformed"]:
        lines.append(f"  {summary['n_malformed']} row(s) hold a reward_components that is not an object")
    differences = summary.get("differences") or []
    if differences:
        lines.append(
            f"paired differences between components (X - Y per rollout, {pct} task-clustered interval: MOVER "
            "for 0/1 components, from their bounded intervals; t for others; const: all differences equal):"
        )
    for d in differences:
        ci = (
            "n/a"
            if d["ci_low"] is None
            else f"{methods.tag(d['ci_method'])} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        )
        mean = "n/a" if d["mean"] is None else f"{d['mean']:+.3f}"
        verdict = ""
        if d["ci_low"] is not None and (d["ci_low"] > 0 or d["ci_high"] < 0):
            verdict = f"; {d['b'] if d['ci_low'] > 0 else d['a']} is lower"
        elif d["ci_low"] is not None:
            verdict = "; no difference detectable at this n"
        lines.append(
            f"  {d['a']} - {d['b']}: {mean} {ci}, n {d['n_rollouts']} rollouts / {d['n_tasks']} tasks"
            + verdict
        )
    return lines
