"""Tiny writers for synthetic reward profiles and rollouts files (the shapes Gym 0.7.0 writes)."""

from __future__ import annotations

import json
from pathlib import Path


def profile_row(task: int, rewards: list, *, agent: str | None = None, lengths: list | None = None,
                sample: dict | None = None, first_rollout: int = 0) -> dict:  # fmt: skip
    infos = []
    for j, reward in enumerate(rewards):
        r = first_rollout + j
        info = {"rollout_id": f"{task}:{r}", "_ng_task_index": task, "_ng_rollout_index": r, "reward": reward}
        if lengths is not None:
            info["output_tokens"] = lengths[j]
        infos.append(info)
    row = {"_ng_task_index": task}
    if agent is not None:
        row["agent_ref"] = {"name": agent}
    row.update({"sample": sample or {}, "num_rollouts": len(rewards), "rollout_infos": infos})
    return row


def write_profile(path: Path, tasks: list[list], **kwargs) -> Path:
    """tasks[i] is the reward list of task i. Extra per-task options via kwargs lists (lengths, sample)."""
    lines = []
    for i, rewards in enumerate(tasks):
        opts = {k: v[i] for k, v in kwargs.items()}
        lines.append(json.dumps(profile_row(i, rewards, **opts)))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_rollouts(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rollout(task: int, rollout_index: int, reward: float, *, answer=None, incomplete: bool = False) -> dict:
    response = {"status": "incomplete" if incomplete else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None}  # fmt: skip
    row = {"_ng_task_index": task, "_ng_rollout_index": rollout_index, "reward": reward, "response": response}
    if answer is not None:
        row["extracted_answer"] = answer
    return row


# -- independent references for bounded paired differences (scipy, worked from the formulas) ------------


def korn_graubard_scipy(p: float, se: float, tasks: int, cap: float, spread: float, level: float = 0.95):
    """A rate's interval as `stats` states it (references/statistics.md), from scipy's quantiles: one-sided
    at 0 or 1; else Clopper-Pearson on n* = min(cap, p(1-p)/se^2), its part above T scaled by
    m / (m + 10 (1 - m/T)), times (z / t_{T-1})^2."""
    from scipy import stats

    if p <= 0:
        return 0.0, 1 - (1 - level) ** (1 / tasks)
    if p >= 1:
        return (1 - level) ** (1 / tasks), 1.0
    n = cap if se <= 0 else min(cap, p * (1 - p) / se**2)
    if n > tasks:
        m = min(max(0.0, spread), tasks)
        rest = 10 * (1 - m / tasks)
        n = tasks + (n - tasks) * (m / (m + rest) if m + rest > 0 else 1.0)
    q = 0.5 + level / 2
    n *= (stats.norm.ppf(q) / stats.t.ppf(q, tasks - 1)) ** 2
    x, alpha = p * n, 1 - level
    low = stats.beta.ppf(alpha / 2, x, n - x + 1) if x > 0 else 0.0
    high = stats.beta.ppf(1 - alpha / 2, x + 1, n - x) if x < n else 1.0
    return float(low), float(high)


def carrying_by_hand(values, p: float) -> float:
    """(sum d)^2 / sum d^2 over the distances d of the values from the edge nearer p."""
    d = [v if p < 0.5 else 1 - v for v in values]
    square = sum(x * x for x in d)
    return 0.0 if square <= 0 else sum(d) ** 2 / square


def mover_by_hand(x: float, bx, y: float, by, r: float):
    """Zou and Donner (2008), eq. for theta1 - theta2 from (l1, u1), (l2, u2) and corr r."""
    import math

    low = x - y - math.sqrt((x - bx[0]) ** 2 + (by[1] - y) ** 2 - 2 * r * (x - bx[0]) * (by[1] - y))
    high = x - y + math.sqrt((bx[1] - x) ** 2 + (y - by[0]) ** 2 - 2 * r * (bx[1] - x) * (y - by[0]))
    return max(-1.0, low), min(1.0, high)


def paired_mover_by_hand(fa, fb, na, nb, level: float = 0.95):
    """B - A of per-task rates, paired by task: each run's mean with its Korn-Graubard interval (task SE,
    capped at the run's rollouts), Pearson's r of the per-task values (scipy), then MOVER; when every
    difference is c, [c q - (1 - q), c q + (1 - q)] with q = (1 - level)^(1/T)."""
    import math

    import numpy as np
    from scipy import stats

    fa, fb = np.asarray(fa, dtype=float), np.asarray(fb, dtype=float)
    d, t = fb - fa, len(fa)
    if np.ptp(d) == 0:
        q = (1 - level) ** (1 / t)
        return max(-1.0, d[0] * q - (1 - q)), min(1.0, d[0] * q + (1 - q))
    ma, mb = fa.mean(), fb.mean()
    ba = korn_graubard_scipy(ma, stats.sem(fa), t, float(np.sum(na)), carrying_by_hand(fa, ma), level)
    bb = korn_graubard_scipy(mb, stats.sem(fb), t, float(np.sum(nb)), carrying_by_hand(fb, mb), level)
    r = stats.pearsonr(fa, fb).statistic if np.ptp(fa) > 0 and np.ptp(fb) > 0 else 0.0
    if math.isnan(r):
        r = 0.0
    return mover_by_hand(mb, bb, ma, ba, r)


def clustered_mover_by_hand(tasks, xs, ys, level: float = 0.95):
    """X - Y of two 0/1 components on the same rows, clustered by task: each mean's Korn-Graubard interval
    on its CR1 SE (capped at the rows, the skew credit from its task means), r from the CR1 covariance
    G/(G-1) sum_t (Sx_t - x n_t)(Sy_t - y n_t) / n^2, then MOVER; every difference c: the exact bound."""
    import math

    n, groups = len(xs), sorted(set(tasks))
    d = [x - y for x, y in zip(xs, ys, strict=True)]
    g = len(groups)
    if max(d) == min(d):
        q = (1 - level) ** (1 / g)
        return max(-1.0, d[0] * q - (1 - q)), min(1.0, d[0] * q + (1 - q))
    mx, my = sum(xs) / n, sum(ys) / n
    rx = {t: sum(x - mx for x, u in zip(xs, tasks, strict=True) if u == t) for t in groups}
    ry = {t: sum(y - my for y, u in zip(ys, tasks, strict=True) if u == t) for t in groups}
    vx = g / (g - 1) * sum(v * v for v in rx.values()) / n**2
    vy = g / (g - 1) * sum(v * v for v in ry.values()) / n**2
    cov = g / (g - 1) * sum(rx[t] * ry[t] for t in groups) / n**2

    def means(values):
        return [sum(v for v, u in zip(values, tasks, strict=True) if u == t) / tasks.count(t) for t in groups]

    bx = korn_graubard_scipy(mx, math.sqrt(vx), g, n, carrying_by_hand(means(xs), mx), level)
    by = korn_graubard_scipy(my, math.sqrt(vy), g, n, carrying_by_hand(means(ys), my), level)
    r = cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else 0.0
    return mover_by_hand(mx, bx, my, by, r)
