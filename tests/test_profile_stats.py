"""Numeric kernels of the profiler against independent references: scipy (t quantiles), brute-force
enumeration (pass@k), hand-worked values (Wilson, CI), and plain per-group numpy (grouped describe)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ngrp_lib.profile.extras import ks_for, task_extras
from ngrp_lib.profile.kernels import describe_groups, gym_confidence_interval, series_stats
from ngrp_lib.stats.estimators import pass_at_k_one, wilson_one

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")


def test_t_interval_is_scipys_interval_to_the_bit():
    """Gym calls scipy's `t.interval`; with scipy installed ngrp takes scipy's quantiles, so the ends are
    the same floats (scipy's quantiles are not correctly rounded: nothing else gives their bits)."""
    rng = np.random.default_rng(4)
    for n in [2, 3, 4, 8, 9, 17, 100, 1000, 12345, 10**6]:
        mean, sem = float(rng.normal() * 10), float(rng.random() * 3)
        ref = scipy_stats.t.interval(0.95, df=n - 1, loc=mean, scale=sem)
        assert gym_confidence_interval(mean, sem, n) == (float(ref[0]), float(ref[1])), n
    assert gym_confidence_interval(1.0, 0.0, 4) == (1.0, 1.0)  # Gym collapses the interval when sem is 0
    assert gym_confidence_interval(1.0, 0.5, 1) is None


def test_t_interval_without_scipy_uses_ngrps_own_quantile(monkeypatch):
    import sys

    from ngrp_lib.profile import kernels

    kernels.gym_t_quantiles.cache_clear()
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # import fails as if scipy were absent
    try:
        assert kernels.gym_t_quantiles(5) is None
        low, high = gym_confidence_interval(0.5, 0.2, 6)
    finally:
        kernels.gym_t_quantiles.cache_clear()
    ref = scipy_stats.t.interval(0.95, df=5, loc=0.5, scale=0.2)
    assert math.isclose(low, ref[0], rel_tol=1e-13) and math.isclose(high, ref[1], rel_tol=1e-13)


def test_segment_sums_are_numpys_1d_sum_of_each_group():
    """pandas sums a group's column with numpy's pairwise 1-D loop; a running sum differs from 9 values on,
    and the pairwise loop splits again past 128: sizes on both sides of both, and empty groups."""
    from ngrp_lib.profile.kernels import segment_sums

    rng = np.random.default_rng(9)
    sizes = np.array([0, 1, 3, 8, 9, 16, 17, 127, 128, 129, 300, 1000, 9, 9, 0, 2])
    matrix = rng.normal(size=(int(sizes.sum()), 3)) * 10.0 ** rng.integers(-4, 4, size=(int(sizes.sum()), 3))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    got = segment_sums(matrix, starts, sizes)
    for g, (start, size) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        for col in range(3):
            assert got[g, col] == np.sum(matrix[start : start + size, col].copy()), (size, col)
    running = np.add.reduceat(matrix, starts[sizes > 0], axis=0)
    assert (running != got[sizes > 0]).any()  # the running sum really is another float somewhere


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 10))
def test_pass_at_k_matches_subset_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert math.isclose(
                pass_at_k_one(n, c, k), _brute_pass_at_k(n, c, k), rel_tol=1e-12, abs_tol=1e-15
            )


def test_pass_at_k_large_n_is_stable():
    # 1 - C(n-c, k)/C(n, k) with exact integers as the reference
    n, c, k = 1000, 3, 64
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert math.isclose(pass_at_k_one(n, c, k), exact, rel_tol=1e-12)
    with pytest.raises(ValueError):
        pass_at_k_one(4, 5, 1)


def test_ks_for():
    assert ks_for(1) == [1]
    assert ks_for(4) == [1, 2, 4]
    assert ks_for(6) == [1, 2, 4, 6]
    assert ks_for(0) == []


def test_wilson_hand_worked():
    # 8 passes of 10: p = 0.8, z = 1.96: centre 0.716740, half-width 0.226578 (worked by hand)
    low, high = wilson_one(8, 10)
    assert math.isclose(low, 0.490162, abs_tol=2e-6)
    assert math.isclose(high, 0.943318, abs_tol=2e-6)
    low, high = wilson_one(0, 4)
    assert low == 0.0 and math.isclose(high, 3.8414588 / (4 + 3.8414588), rel_tol=1e-7)  # z^2/(n+z^2)
    assert wilson_one(0, 0) is None


def test_task_extras_threshold_and_nulls():
    out = task_extras(4, 2, num_null=1, threshold=1.0)
    assert out["ngrp/num_passed"] == 2 and out["ngrp/num_scored"] == 4 and out["ngrp/pass_rate"] == 0.5
    assert out["ngrp/pass@1"] == 0.5 and math.isclose(out["ngrp/pass@2"], 1 - 1 / 6)
    assert out["ngrp/pass@4"] == 1.0 and out["ngrp/num_null_reward"] == 1
    empty = task_extras(0, 0, 2, 1.0)
    assert empty["ngrp/pass_rate"] is None and "ngrp/pass@1" not in empty


def test_describe_groups_matches_per_group_numpy():
    rng = np.random.default_rng(7)
    sizes = [1, 2, 3, 5, 8, 9, 17, 1, 4]
    matrix = rng.normal(size=(sum(sizes), 4))
    matrix[rng.random(matrix.shape) < 0.25] = np.nan
    matrix[:, 3] = np.round(matrix[:, 3])  # ties
    starts = np.cumsum([0, *sizes[:-1]])
    got = describe_groups(matrix, starts)
    for g, (lo, size) in enumerate(zip(starts, sizes, strict=False)):
        block = matrix[lo : lo + size]
        for c in range(4):
            x = block[:, c][~np.isnan(block[:, c])]
            if len(x) == 0:
                for stat in ("mean", "max", "min", "median"):
                    assert np.isnan(got[stat][g, c])
                continue
            assert math.isclose(got["mean"][g, c], x.mean(), rel_tol=1e-12, abs_tol=1e-15)
            assert got["max"][g, c] == x.max() and got["min"][g, c] == x.min()
            assert math.isclose(got["median"][g, c], np.median(x), rel_tol=1e-12, abs_tol=1e-15)
            all_std_nan = all(np.sum(~np.isnan(block[:, j])) < 2 for j in range(4))
            if len(x) >= 2:
                assert math.isclose(got["std"][g, c], x.std(ddof=1), rel_tol=1e-12)
            elif all_std_nan and len(x) == size:
                assert got["std"][g, c] == 0.0  # Gym: single rollout -> std 0 for complete columns
            else:
                assert np.isnan(got["std"][g, c])


def test_series_stats_hand_values():
    s = series_stats(np.array([4.0, 1.0, np.nan, 3.0, 2.0]))
    assert s["n"] == 4 and s["mean"] == 2.5 and s["median"] == 2.5
    assert s["p25"] == 1.75 and s["p75"] == 3.25  # linear interpolation, as pandas
    assert math.isclose(s["std"], math.sqrt(5 / 3), rel_tol=1e-15)
    assert series_stats(np.array([7.0]))["std"] == 0.0
    assert series_stats(np.array([np.nan])) is None
