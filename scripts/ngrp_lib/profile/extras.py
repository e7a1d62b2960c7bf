"""Our per-task additions: pass rate at a threshold, unbiased pass@k, Wilson interval. Pure functions."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054  # standard normal quantile at 0.975
DEFAULT_PASS_THRESHOLD = 1.0  # pass := reward >= threshold; for Gym's 0/1 rewards that is reward == 1
PREFIX = "ngrp/"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021) unbiased pass@k = 1 - C(n-c, k) / C(n, k), as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n  # the product below telescopes to this; keep it exact
    fail_all = 1.0
    for i in range(n - c + 1, n + 1):
        fail_all *= 1.0 - k / i
    return 1.0 - fail_all


def ks_for(n: int) -> list[int]:
    """k = 1, 2, 4, ... up to n, and n itself."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if n >= 1 and ks[-1] != n:
        ks.append(n)
    return ks


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when n is 0."""
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def task_extras(rewards: list[float], num_null: int, threshold: float) -> dict[str, float | int | None]:
    """The extra keys of one profile row. `rewards` are the scored rewards (null/absent ones left out)."""
    n = len(rewards)
    c = sum(1 for r in rewards if r >= threshold)
    out: dict[str, float | int | None] = {
        PREFIX + "pass_threshold": threshold,
        PREFIX + "num_scored": n,
        PREFIX + "num_passed": c,
        PREFIX + "num_null_reward": num_null,
        PREFIX + "pass_rate": c / n if n else None,
    }
    interval = wilson_interval(c, n)
    out[PREFIX + "pass_rate_wilson_low_95"] = interval[0] if interval else None
    out[PREFIX + "pass_rate_wilson_high_95"] = interval[1] if interval else None
    for k in ks_for(n):
        out[f"{PREFIX}pass@{k}"] = pass_at_k(n, c, k)
    return out
