"""Our quantiles and exact tests against scipy (a test-only dependency)."""

from __future__ import annotations

import math

import pytest
from ngrp_lib import distributions as D

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("p", [1e-10, 0.001, 0.025, 0.2, 0.5, 0.8, 0.975, 0.999999])
def test_norm_ppf_matches_scipy(p):
    assert D.norm_ppf(p) == pytest.approx(stats.norm.ppf(p), abs=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 29, 100, 5000])
@pytest.mark.parametrize("p", [0.005, 0.025, 0.1, 0.6, 0.975, 0.995])
def test_t_ppf_and_cdf_match_scipy(df, p):
    assert D.t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8, abs=1e-10)
    x = stats.t.ppf(p, df)
    assert D.t_cdf(x, df) == pytest.approx(p, abs=1e-11)


def test_t_quantile_hand_value():
    # Printed tables: t_{0.975, 2} = 4.303, t_{0.975, 10} = 2.228.
    assert D.t_ppf(0.975, 2) == pytest.approx(4.30265, abs=1e-5)
    assert D.t_ppf(0.975, 10) == pytest.approx(2.22814, abs=1e-5)


@pytest.mark.parametrize("table", [(3, 1, 1, 3), (0, 5, 5, 0), (2, 2, 2, 2), (10, 0, 3, 7), (1, 15, 9, 7)])
def test_fisher_matches_scipy(table):
    a, b, c, d = table
    assert D.fisher_exact_two_sided(a, b, c, d) == pytest.approx(
        stats.fisher_exact([[a, b], [c, d]])[1], rel=1e-9
    )


@pytest.mark.parametrize("k,n", [(0, 0), (0, 5), (2, 10), (7, 9), (30, 100)])
def test_binom_test_matches_scipy(k, n):
    expected = 1.0 if n == 0 else stats.binomtest(k, n, 0.5).pvalue
    assert D.binom_test_two_sided(k, n) == pytest.approx(expected, rel=1e-9)


def test_mcnemar_hand_value():
    # b=1, c=6: 2 * P(X <= 1 | n=7, 1/2) = 2 * 8/128.
    assert D.mcnemar_exact(1, 6) == pytest.approx(16 / 128)


def test_benjamini_hochberg_hand_values():
    q = D.benjamini_hochberg([0.01, 0.04, 0.03, math.nan, 0.2])
    # m=4 sorted 0.01,0.03,0.04,0.2 -> 0.04, min(0.06,0.0533)=0.0533, 0.0533, 0.2
    assert q[0] == pytest.approx(0.04)
    assert q[2] == pytest.approx(0.04 * 4 / 3)
    assert q[1] == pytest.approx(0.04 * 4 / 3)
    assert math.isnan(q[3])
    assert q[4] == pytest.approx(0.2)
