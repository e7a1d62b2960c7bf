"""Reward vs length. Pooled correlation is confounded by difficulty (hard tasks: long, wrong answers),
so within-task measures come first: the demeaned correlation and the fixed-effects slope."""

from __future__ import annotations

import math

from .uncertainty import t_interval


def _demean(x, mask):
    import numpy as np

    filled = np.where(mask, x, 0.0)
    n = mask.sum(axis=1)
    mean = filled.sum(axis=1) / np.where(n > 0, n, 1)
    return np.where(mask, x - mean[:, None], 0.0)


def pooled_correlation(rewards, lengths) -> dict:
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    r, length = rewards[mask], lengths[mask]
    value = math.nan
    if r.size >= 2 and r.std() > 0 and length.std() > 0:
        value = float(np.corrcoef(r, length)[0, 1])
    return {"value": value, "n_rollouts": int(r.size)}


def within_task_correlation(rewards, lengths) -> dict:
    """Correlation of task-demeaned reward and length, over tasks with variance in both."""
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    rt, lt = _demean(rewards, mask), _demean(lengths, mask)
    keep = ((rt**2).sum(axis=1) > 0) & ((lt**2).sum(axis=1) > 0)
    rt, lt = rt[keep], lt[keep]
    denom = math.sqrt(float((rt**2).sum() * (lt**2).sum()))
    value = float((rt * lt).sum()) / denom if denom > 0 else math.nan
    return {"value": value, "n_tasks": int(keep.sum()), "n_rollouts": int(mask[keep].sum())}


def fixed_effects_slope(rewards, lengths) -> dict:
    """beta in r_ij = a_i + beta * L_ij + e, with a task-clustered (sandwich, G/(G-1)) SE."""
    import numpy as np

    mask = ~np.isnan(rewards) & ~np.isnan(lengths)
    rt, lt = _demean(rewards, mask), _demean(lengths, mask)
    keep = (lt**2).sum(axis=1) > 0
    rt, lt = rt[keep], lt[keep]
    sxx = float((lt**2).sum())
    groups = int(keep.sum())
    if sxx == 0:
        return {"slope": math.nan, "se": math.nan, "n_tasks": groups, "n_rollouts": int(mask[keep].sum())}
    beta = float((rt * lt).sum()) / sxx
    score = (lt * (rt - beta * lt)).sum(axis=1)
    se = math.sqrt(groups / (groups - 1) * float((score**2).sum())) / sxx if groups >= 2 else math.nan
    return {"slope": beta, "se": se, "n_tasks": groups, "n_rollouts": int(mask[keep].sum())}


def length_gap(success, lengths):
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


def truncation(rewards, truncated) -> dict:
    """Share of rollouts cut at the token limit and the mean reward of cut vs complete rollouts."""
    import numpy as np

    known = ~np.isnan(truncated) & ~np.isnan(rewards)
    cut = known & (truncated == 1)
    whole = known & (truncated == 0)
    n_known, n_cut = int(known.sum()), int(cut.sum())

    def mean(mask) -> float:
        return float(rewards[mask].mean()) if mask.any() else math.nan

    return {
        "rate": n_cut / n_known if n_known else math.nan,
        "n_truncated": n_cut,
        "n_rollouts": n_known,
        "mean_reward_truncated": mean(cut),
        "mean_reward_complete": mean(whole),
        "n_complete": int(whole.sum()),
    }


def tokens_per_success(success, lengths) -> dict:
    import numpy as np

    mask = ~np.isnan(success) & ~np.isnan(lengths)
    wins = float(success[mask].sum())
    tokens = float(lengths[mask].sum())
    return {
        "value": tokens / wins if wins else math.nan,
        "tokens": tokens,
        "successes": int(wins),
        "n_rollouts": int(mask.sum()),
    }


def reward_by_length_bin(rewards, lengths, bins: int = 10) -> list[dict]:
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
            out.append(
                {
                    "length_low": float(edges[b]),
                    "length_high": float(edges[min(b + 1, len(edges) - 1)]),
                    "mean_reward": float(r[sel].mean()),
                    "n_rollouts": int(sel.sum()),
                }
            )
    return out
