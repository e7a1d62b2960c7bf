"""Exact majority@k: the expected score of the majority answer over all k-subsets of a task's rollouts.

Classes are distinct answers; "no answer" (None) is its own class. A class's score is the mean reward
of its rollouts. Tie rule: when several classes share the top count, the score is the average of their
scores (as Gym and NeMo-Skills do). The expectation over all C(n, k) subsets is computed exactly with a
dynamic program over per-class counts (multivariate hypergeometric), not by enumerating subsets.
"""

from __future__ import annotations

import math
from functools import lru_cache

TIE_RULE = "ties share the win: the score is the mean of the tied classes' scores"
NO_ANSWER = "missing or empty answer is its own class (score = mean reward of those rollouts)"


def answer_classes(answers, rewards) -> tuple[tuple[int, float], ...]:
    """(count, score) per distinct answer over the rollouts with a defined reward; sorted (cache key)."""
    groups: dict = {}
    for answer, reward in zip(answers, rewards, strict=True):
        if reward is None or math.isnan(reward):
            continue
        key = ("answer", answer) if answer is not None else ("none",)
        total, count = groups.get(key, (0.0, 0))
        groups[key] = (total + reward, count + 1)
    return tuple(sorted((count, total / count) for total, count in groups.values()))


def _others_dp(counts: tuple[int, ...], cap: int, n: int):
    """ways[t, s]: ways to pick t rollouts from `counts` with every class < cap except s classes == cap."""
    import numpy as np

    ways = np.zeros((n + 1, len(counts) + 1))
    ways[0, 0] = 1.0
    for c in counts:
        new = np.zeros_like(ways)
        for y in range(min(c, cap) + 1):
            coef = math.comb(c, y)
            if y < cap:
                new[y:, :] += coef * ways[: n + 1 - y, :]
            else:
                new[y:, 1:] += coef * ways[: n + 1 - y, :-1]
        ways = new
    return ways


@lru_cache(maxsize=4096)
def majority_curve(classes: tuple[tuple[int, float], ...]) -> tuple[float, ...]:
    """majority@k for k = 1..n for one task given its (count, score) classes."""
    import numpy as np

    n = sum(c for c, _ in classes)
    expected = np.zeros(n + 1)
    ties = np.arange(len(classes)) + 1.0  # this class plus s others tied
    for j, (c_j, score) in enumerate(classes):
        if score == 0.0:
            continue  # contributes nothing to the expectation
        others = tuple(c for i, (c, _) in enumerate(classes) if i != j)
        for x in range(1, c_j + 1):
            ways = _others_dp(others, x, n)
            share = (ways / ties).sum(axis=1)  # each subset's win is split among the tied
            for k in range(x, n + 1):
                expected[k] += score * math.comb(c_j, x) * share[k - x]
    return tuple(float(expected[k] / math.comb(n, k)) for k in range(1, n + 1))


def majority_at_k(answers, rewards, ks: list[int]):
    """(tasks x len(ks)) matrix of exact majority@k; NaN where a task has fewer than k scored rollouts."""
    import numpy as np

    out = np.full((len(answers), len(ks)), np.nan)
    for i, (row_answers, row_rewards) in enumerate(zip(answers, rewards, strict=True)):
        curve = majority_curve(answer_classes(row_answers, row_rewards))
        for col, k in enumerate(ks):
            if 1 <= k <= len(curve):
                out[i, col] = curve[k - 1]
    return out
