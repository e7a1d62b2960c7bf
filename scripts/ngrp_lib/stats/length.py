"""Reward vs length. Pooled correlation is confounded by difficulty (hard tasks: long, wrong answers),
so within-task measures come first: the demeaned correlation and the fixed-effects slope."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .uncertainty import Interval, t_interval


@dataclass
class PooledCorrelation:
    value: float
    n_rollouts: int


@dataclass
class WithinCorrelation:
    value: float
    n_tasks: int
    n_rollouts: int


@dataclass
class Slope:
    slope: float
    se: float
    n_tasks: int
    n_rollouts: int


@dataclass
class Truncation:
    rate: float
    n_truncated: int
    n_rollouts: int
    mean_reward_truncated: float
    mean_reward_complete: float
    n_complete: int


@dataclass
class TokensPerSuccess:
    value: float
    tokens: float
    successes: int
    n_rollouts: int


@dataclass
class LengthBin:
    length_low: float
    length_high: float
    mean_reward: float
    n_rollouts: int


def _demean(x, mask):
    import numpy as np

    filled = np.where(mask, x, 0.0)
    n = mask.sum(axis=1)
    mean = filled.sum(axis=1) / np.where(n > 0, n, 1)
    return np.where(mask, x - mean[:, None], 0.0)


def pooled_correlation(rewards, lengths) -> PooledCorrelation:
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    r, length = rewards[mask], lengths[mask]
    value = math.nan
    if r.size >= 2 and r.std() > 0 and length.std() > 0:
        value = float(np.corrcoef(r, length)[0, 1])
    return PooledCorrelation(value, int(r.size))


def within_task_correlation(rewards, lengths) -> WithinCorrelation:
    """Correlation of task-demeaned reward and length, over tasks with variance in both."""
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    rt, lt = _demean(rewards, mask), _demean(lengths, mask)
    keep = ((rt**2).sum(axis=1) > 0) & ((lt**2).sum(axis=1) > 0)
    rt, lt = rt[keep], lt[keep]
    denom = math.sqrt(float((rt**2).sum() * (lt**2).sum()))
    value = float((rt * lt).sum()) / denom if denom > 0 else math.nan
    return WithinCorrelation(value, int(keep.sum()), int(mask[keep].sum()))


def fixed_effects_slope(rewards, lengths) -> Slope:
    """beta in r_ij = a_i + beta * L_ij + e, with a task-clustered (sandwich, G/(G-1)) SE."""
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    rt, lt = _demean(rewards, mask), _demean(lengths, mask)
    keep = (lt**2).sum(axis=1) > 0
    rt, lt = rt[keep], lt[keep]
    sxx = float((lt**2).sum())
    groups = int(keep.sum())
    if sxx == 0:
        return Slope(math.nan, math.nan, groups, int(mask[keep].sum()))
    beta = float((rt * lt).sum()) / sxx
    score = (lt * (rt - beta * lt)).sum(axis=1)
    se = math.sqrt(groups / (groups - 1) * float((score**2).sum())) / sxx if groups >= 2 else math.nan
    return Slope(beta, se, groups, int(mask[keep].sum()))


def length_gap(success, lengths) -> Interval:
    """Per-task mean length of correct minus incorrect rollouts, over tasks with both; t interval."""
    import numpy as np

    mask = ~np.isnan(success) & ~np.isnan(lengths)
    good = mask & (success == 1)
    bad = mask & (success == 0)
    both = good.any(axis=1) & bad.any(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(good, lengths, 0).sum(axis=1) / good.sum(axis=1) - np.where(bad, lengths, 0).sum(
            axis=1
        ) / bad.sum(axis=1)
    return t_interval(gap[both])


def truncation(rewards, truncated) -> Truncation:
    """Share of rollouts cut at the token limit and the mean reward of cut vs complete rollouts."""
    import numpy as np

    known = ~np.isnan(truncated) & ~np.isnan(rewards)
    cut = known & (truncated == 1)
    whole = known & (truncated == 0)
    n_known, n_cut = int(known.sum()), int(cut.sum())

    def mean(mask) -> float:
        return float(rewards[mask].mean()) if mask.any() else math.nan

    rate = n_cut / n_known if n_known else math.nan
    return Truncation(rate, n_cut, n_known, mean(cut), mean(whole), int(whole.sum()))


def tokens_per_success(success, lengths) -> TokensPerSuccess:
    import numpy as np

    mask = ~np.isnan(success) & ~np.isnan(lengths)
    wins = float(success[mask].sum())
    tokens = float(lengths[mask].sum())
    return TokensPerSuccess(tokens / wins if wins else math.nan, tokens, int(wins), int(mask.sum()))


def reward_by_length_bin(rewards, lengths, bins: int = 10) -> list[LengthBin]:
    """Mean reward per pooled length decile (for plots); each bin carries its n."""
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    r, length = rewards[mask], lengths[mask]
    if r.size == 0:
        return []
    edges = np.unique(np.quantile(length, np.linspace(0, 1, bins + 1)))
    which = np.clip(np.searchsorted(edges, length, side="right") - 1, 0, max(len(edges) - 2, 0))
    out = []
    for b in range(max(len(edges) - 1, 1)):
        sel = which == b
        if sel.any():
            high = float(edges[min(b + 1, len(edges) - 1)])
            out.append(LengthBin(float(edges[b]), high, float(r[sel].mean()), int(sel.sum())))
    return out
