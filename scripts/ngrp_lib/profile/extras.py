"""Our per-task additions: pass rate at a threshold, unbiased pass@k, Wilson interval. Pure functions."""

from __future__ import annotations

from ..stats.estimators import pass_at_k_one, wilson_one

DEFAULT_PASS_THRESHOLD = 1.0  # pass := reward >= threshold; for Gym's 0/1 rewards that is reward == 1
PREFIX = "ngrp/"


def ks_for(n: int) -> list[int]:
    """k = 1, 2, 4, ... up to n, and n itself."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if n >= 1 and ks[-1] != n:
        ks.append(n)
    return ks


def task_extras(n: int, c: int, num_null: int, threshold: float) -> dict[str, float | int | None]:
    """The extra keys of one profile row: `n` scored rewards (null/absent ones left out), `c` of them
    at or above `threshold`."""
    out: dict[str, float | int | None] = {
        PREFIX + "pass_threshold": threshold,
        PREFIX + "num_scored": n,
        PREFIX + "num_passed": c,
        PREFIX + "num_null_reward": num_null,
        PREFIX + "pass_rate": c / n if n else None,
    }
    interval = wilson_one(c, n)
    out[PREFIX + "pass_rate_wilson_low_95"] = interval[0] if interval else None
    out[PREFIX + "pass_rate_wilson_high_95"] = interval[1] if interval else None
    for k in ks_for(n):
        out[f"{PREFIX}pass@{k}"] = pass_at_k_one(n, c, k)
    return out
