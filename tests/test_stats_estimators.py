"""Each estimator against hand-worked values and brute-force enumeration of subsets."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngrp_lib.stats import estimators as E
from ngrp_lib.stats import length as L
from ngrp_lib.stats.majority import answer_classes, majority_at_k, majority_curve
from ngrp_lib.stats.uncertainty import bootstrap_interval, bootstrap_means, t_interval
from ngrp_lib.stats.variance import decompose, repeats_for_width


def brute_mean_over_subsets(values, k, fn):
    subsets = list(itertools.combinations(values, k))
    return sum(fn(s) for s in subsets) / len(subsets)


def test_pass_at_k_hand_values():
    # n=4, c=1: pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert E.pass_at_k(4, 1, 2) == pytest.approx(0.5)
    # n=5, c=2: pass@3 = 1 - C(3,3)/C(5,3) = 0.9; pass^2 = C(2,2)/C(5,2) = 0.1
    assert E.pass_at_k(5, 2, 3) == pytest.approx(0.9)
    assert E.pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert E.pass_at_k(4, 3, 2) == 1.0  # n - c < k
    assert math.isnan(E.pass_at_k(3, 1, 4)) and math.isnan(E.pass_hat_k(3, 1, 4))


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_and_pass_hat_k_brute_force(n):
    for c in range(n + 1):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            assert E.pass_at_k(n, c, k) == pytest.approx(brute_mean_over_subsets(outcomes, k, max))
            assert E.pass_hat_k(n, c, k) == pytest.approx(brute_mean_over_subsets(outcomes, k, min))


def test_pass_at_1_is_the_mean_pass_rate():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 20, 200)
    c = rng.integers(0, 21, 200) % (n + 1)
    assert np.allclose(E.pass_at_k(n, c, 1), c / n)
    assert np.allclose(E.pass_hat_k(n, c, 1), c / n)


def test_pass_at_k_large_n_is_stable():
    # n=1000, c=1, k=500: exactly k/n.
    assert E.pass_at_k(1000, 1, 500) == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_best_and_worst_of_k_brute_force(seed):
    rnd = random.Random(seed)
    n = rnd.randint(1, 7)
    values = [round(rnd.random(), 3) for _ in range(n)]
    row = np.array([values + [np.nan] * 2])
    for k in range(1, n + 1):
        assert E.expected_extreme_of_k(row, k, True)[0] == pytest.approx(
            brute_mean_over_subsets(values, k, max)
        )
        assert E.expected_extreme_of_k(row, k, False)[0] == pytest.approx(
            brute_mean_over_subsets(values, k, min)
        )
    assert math.isnan(E.expected_extreme_of_k(row, n + 1, True)[0])


def test_best_of_k_on_binary_equals_pass_at_k():
    rows = np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=float)
    for k in range(1, 6):
        assert np.allclose(E.expected_extreme_of_k(rows, k), E.pass_at_k(5, rows.sum(axis=1), k))


@given(st.lists(st.sampled_from([0.0, 0.25, 1.0, float("nan")]), min_size=1, max_size=9), st.randoms())
@settings(max_examples=60, deadline=None)
def test_invariant_to_rollout_order(values, rnd):
    row = np.array([values])
    shuffled = values[:]
    rnd.shuffle(shuffled)
    other = np.array([shuffled])
    for k in range(1, len(values) + 1):
        a, b = E.expected_extreme_of_k(row, k), E.expected_extreme_of_k(other, k)
        assert np.allclose(a, b, equal_nan=True)
    assert np.allclose(E.row_means(row), E.row_means(other), equal_nan=True)
    answers = [["x", "y", None][int(v * 4) % 3] if not math.isnan(v) else None for v in values]
    perm = list(range(len(values)))
    rnd.shuffle(perm)
    m1 = majority_at_k([answers], [values], list(range(1, len(values) + 1)))
    m2 = majority_at_k(
        [[answers[i] for i in perm]], [[values[i] for i in perm]], list(range(1, len(values) + 1))
    )
    assert np.allclose(m1, m2, equal_nan=True)


def brute_majority(answers, rewards, k):
    score = {}
    for a in set(answers):
        rs = [r for x, r in zip(answers, rewards, strict=True) if x == a]
        score[a] = sum(rs) / len(rs)
    total = 0.0
    subsets = list(itertools.combinations(range(len(answers)), k))
    for sub in subsets:
        tally = {}
        for i in sub:
            tally[answers[i]] = tally.get(answers[i], 0) + 1
        top = max(tally.values())
        tied = [a for a, c in tally.items() if c == top]
        total += sum(score[a] for a in tied) / len(tied)
    return total / len(subsets)


@pytest.mark.parametrize("seed", range(25))
def test_majority_exact_equals_subset_enumeration(seed):
    rnd = random.Random(seed)
    n = rnd.randint(1, 9)
    answers = [rnd.choice(["4", "5", "6", None]) for _ in range(n)]
    rewards = [1.0 if a == "4" else 0.0 for a in answers]
    curve = majority_curve(answer_classes(answers, rewards))
    for k in range(1, n + 1):
        assert curve[k - 1] == pytest.approx(brute_majority(answers, rewards, k), abs=1e-12)


def test_majority_hand_values():
    # answers a,a,b with a correct: k=2 subsets {a,a}->1, {a,b}x2 tie -> 1/2 each: (1 + .5 + .5)/3
    assert majority_curve(answer_classes(["a", "a", "b"], [1, 1, 0]))[1] == pytest.approx(2 / 3)
    # "no answer" is its own class and can win: None,None,a (a correct): k=3 -> None wins -> 0
    assert majority_curve(answer_classes([None, None, "a"], [0, 0, 1]))[2] == 0.0


def test_wilson_hand_value():
    low, high = E.wilson_interval(np.array([0]), np.array([16]))
    assert low[0] == pytest.approx(0.0, abs=1e-12)
    assert high[0] == pytest.approx(0.19360, abs=1e-4)  # the rule-of-three region (3/16 = 0.19)


def test_p_informative_brute_force_and_plug_in_limit():
    for n in range(2, 8):
        for c in range(n + 1):
            outcomes = [1] * c + [0] * (n - c)
            for g in range(2, n + 1):
                brute = brute_mean_over_subsets(outcomes, g, lambda s: float(0 < sum(s) < len(s)))
                assert E.p_informative(n, c, g) == pytest.approx(brute)
    # Large n: close to 1 - p^G - (1-p)^G
    assert E.p_informative(10000, 3000, 4) == pytest.approx(1 - 0.3**4 - 0.7**4, abs=1e-3)


def test_difficulty_bands():
    bands = E.difficulty_band(np.array([4, 4, 4, 0]), np.array([0, 4, 2, 0]))
    assert bands.tolist() == ["all_fail", "all_pass", "mixed", "none"]


def test_t_interval_and_bootstrap():
    iv = t_interval([0.75, 0.625, 0.25, np.nan])
    assert iv.n == 3 and iv.value == pytest.approx(0.541667, abs=1e-6)
    assert iv.se == pytest.approx(np.std([0.75, 0.625, 0.25], ddof=1) / math.sqrt(3))
    assert iv.ci_high - iv.value == pytest.approx(4.302653 * iv.se, rel=1e-6)
    v = np.random.default_rng(1).random(50)
    assert bootstrap_interval(v, 500, 3) == bootstrap_interval(v, 500, 3)
    assert bootstrap_interval(v, 500, 3) != bootstrap_interval(v, 500, 4)


def test_bootstrap_keeps_tasks_whole_and_handles_nan():
    # Column 2 is undefined for task 0; replicate means use only defined tasks.
    values = np.array([[1.0, np.nan], [0.0, 0.5], [0.0, 0.5]])
    reps = bootstrap_means(values, 300, 0)
    assert np.all((reps[:, 0] >= 0) & (reps[:, 0] <= 1))
    assert np.allclose(reps[:, 1][~np.isnan(reps[:, 1])], 0.5)
    # The bootstrap SE of a mean is close to sd/sqrt(T) for large B.
    v = np.random.default_rng(2).random(400)
    assert bootstrap_means(v, 4000, 1)[:, 0].std() == pytest.approx(v.std() / 20, rel=0.08)


def test_variance_decomposition_hand_worked():
    # case_complete rewards. Task means .75, .625, .25; s^2 = .25, 5/48, .25
    r = np.array([[1, 0, 1, 1], [0.25, 0.5, 0.75, 1], [0, 0, 1, 0]], dtype=float)
    v = decompose(r)
    s2 = np.array([0.25, 5 / 48, 0.25])
    assert v.sigma2_within == pytest.approx(s2.mean())
    var_means = np.var([0.75, 0.625, 0.25], ddof=1)
    assert v.sigma2_between == pytest.approx(var_means - (s2 / 4).mean())
    icc = v.sigma2_between / (v.sigma2_between + v.sigma2_within)
    assert v.icc == pytest.approx(icc)
    assert v.design_effect == pytest.approx(1 + 3 * icc)
    assert v.n_effective == pytest.approx(12 / (1 + 3 * icc))
    assert v.se_conditional == pytest.approx(math.sqrt((s2 / 4).mean() / 3))


def test_between_variance_truncated_at_zero():
    r = np.array([[1, 0], [0, 1], [1, 0]], dtype=float)  # identical task means
    assert decompose(r).sigma2_between == 0.0 and decompose(r).icc == 0.0


def test_repeats_for_width():
    need = repeats_for_width(0.25, 0.2)
    # (2 * 1.96 * 0.5 / 0.2)^2 = 96.04 -> 97
    assert need.worst_case_binary == 97 and need.typical == 97


def test_fixed_effects_slope_equals_dummy_regression_with_cluster_sandwich():
    rng = np.random.default_rng(5)
    tasks, k = 8, 5
    lengths = rng.integers(50, 500, (tasks, k)).astype(float)
    rewards = (rng.random((tasks, k)) < 0.5).astype(float)
    rewards[0, 1] = np.nan
    fe = L.fixed_effects_slope(rewards, lengths)
    mask = ~np.isnan(rewards)
    ti, _ = np.nonzero(mask)
    X = np.column_stack([np.eye(tasks)[ti], lengths[mask]])
    y = rewards[mask]
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    e = y - X @ beta
    bread = np.linalg.inv(X.T @ X)
    meat = sum(np.outer(X[ti == g].T @ e[ti == g], X[ti == g].T @ e[ti == g]) for g in range(tasks))
    cov = tasks / (tasks - 1) * bread @ meat @ bread
    assert fe.slope == pytest.approx(beta[-1])
    assert fe.se == pytest.approx(math.sqrt(cov[-1, -1]))


def test_within_and_pooled_correlation():
    # Two tasks; within each, longer is better; across tasks, the long task fails more.
    rewards = np.array([[0.0, 1.0], [0.0, 0.5]])
    lengths = np.array([[10.0, 20.0], [100.0, 110.0]])
    within = L.within_task_correlation(rewards, lengths)
    # demeaned r: +-.5, +-.25; demeaned L: +-5 in both: 7.5 / sqrt(0.625 * 100)
    assert within.value == pytest.approx(7.5 / math.sqrt(62.5)) and within.n_tasks == 2
    pooled = L.pooled_correlation(rewards, lengths)
    assert pooled.value == pytest.approx(np.corrcoef(rewards.ravel(), lengths.ravel())[0, 1])


def test_length_gap_truncation_tokens_per_success():
    success = np.array([[1, 0, 1], [1, 1, 1]], dtype=float)
    lengths = np.array([[10, 30, 20], [5, 5, 5]], dtype=float)
    gap = L.length_gap(success, lengths)
    assert gap.n == 1 and gap.value == pytest.approx(15 - 30)
    trunc = L.truncation(success, np.array([[0, 1, 0], [np.nan, 0, 0]]))
    assert trunc.n_rollouts == 5 and trunc.rate == pytest.approx(0.2)
    assert trunc.mean_reward_truncated == 0.0 and trunc.mean_reward_complete == 1.0
    tps = L.tokens_per_success(success, lengths)
    assert tps.value == pytest.approx(75 / 5)


def test_repeats_needed_undefined_without_within_task_variance():
    assert repeats_for_width(0.0, 0.2).typical is None
    assert repeats_for_width(float("nan"), 0.2).typical is None


def test_beta_binomial_shrinkage_hand_worked():
    n = np.array([4, 4, 4, 0])
    c = np.array([0, 2, 4, 0])
    # rates 0, .5, 1: m = .5; with v_b = 0.125: a + b = .25/.125 - 1 = 1, a = b = .5
    a, b, shrunk = E.beta_binomial_shrinkage(n, c, 0.125)
    assert (a, b) == pytest.approx((0.5, 0.5))
    assert shrunk[:3] == pytest.approx([0.5 / 5, 2.5 / 5, 4.5 / 5]) and math.isnan(shrunk[3])
    _, _, pooled = E.beta_binomial_shrinkage(n, c, 0.0)  # no between-task variance: all shrink to m
    assert pooled[:3] == pytest.approx([0.5, 0.5, 0.5])
    a, _, raw = E.beta_binomial_shrinkage(n, c, 0.3)  # moments admit no prior: raw rates
    assert math.isnan(a) and raw[:3] == pytest.approx([0, 0.5, 1])


def test_repeats_needed_beyond_a_json_integer_is_none():
    # rewards of +-1e100 (allowed by profile) give a within-task variance near 1e200: the count must not
    # become an integer orjson cannot write (stats --json crashed with "Integer exceeds 64-bit range")
    assert repeats_for_width(2.2e199, 0.2).typical is None
    assert repeats_for_width(1e300, 0.2).typical is None
    assert repeats_for_width(0.25, 0.2).typical == 97


def test_tasks_needed_with_a_huge_spread_is_none_not_overflow():
    from ngrp_lib.stats.paired import tasks_needed

    assert tasks_needed(1e200, 0.05, 0.05) is None
