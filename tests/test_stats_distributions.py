"""Our quantiles and exact tests against scipy (a test-only dependency)."""

from __future__ import annotations

import math

import pytest

from ngrp_lib.stats import distributions as D

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("p", [1e-10, 0.001, 0.025, 0.2, 0.5, 0.8, 0.975, 0.999999])
def test_norm_ppf_matches_scipy(p):
    assert D.norm_ppf(p) == pytest.approx(stats.norm.ppf(p), abs=1e-9)


DFS = [1, 2, 3, 4, 5, 7, 9, 10, 29, 30, 99, 100, 101, 250, 1000, 5000, 12345, 1e5, 1e6]
TAILS = [1e-12, 1e-8, 1e-4, 0.005, 0.025, 0.1, 0.3, 0.45]
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 30: 2.042, 100: 1.984}  # printed tables


@pytest.mark.parametrize("df", DFS)
def test_t_ppf_matches_scipy_in_both_tails(df):
    # scipy is the reference, but its own tails move by up to ~3e-11 relative between releases
    # (1.15 vs 1.17); 1e-9 is far tighter than any use here and stable across them.
    tol = 1e-9
    for tail in TAILS:
        for p in (tail, 1.0 - tail):
            assert math.isclose(D.t_ppf(p, df), stats.t.ppf(p, df), rel_tol=tol), (p, df)
    for p in (0.51, 0.6, 0.75, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999):
        assert math.isclose(D.t_ppf(p, df), stats.t.ppf(p, df), rel_tol=tol), (p, df)


def test_t_ppf_tails_beyond_doubles_near_one():
    # Reflection through 1 - p would round 1e-12 away; the lower tail is solved as given.
    assert math.isclose(D.t_ppf(1e-12, 1), -1.0 / math.tan(math.pi * 1e-12), rel_tol=1e-12)
    assert math.isclose(D.t_ppf(1e-300, 1), -1.0 / math.tan(math.pi * 1e-300), rel_tol=1e-12)
    # t with 3 df: P(T < t) ~ 2 sqrt(3) / (pi |t|^3) far out (scipy returns inf here).
    t = D.t_ppf(1e-200, 3)
    assert math.isclose(2 * math.sqrt(3) / (math.pi * abs(t) ** 3), 1e-200, rel_tol=1e-9)


@pytest.mark.parametrize("df", [3, 4, 10, 1e6])
def test_t_ppf_near_the_centre(df):
    # p = 1/2 - d: t = -d / pdf(0) + O(d^3); scipy itself loses ~1e-9 here for df=4 (checked with mpmath).
    p = 0.5 - 1e-7
    assert math.isclose(D.t_ppf(p, df), -(0.5 - p) / stats.t.pdf(0.0, df), rel_tol=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 29, 100, 5000, 1e6])
@pytest.mark.parametrize("p", [0.005, 0.025, 0.1, 0.6, 0.975, 0.995])
def test_t_cdf_inverts_scipys_quantile(df, p):
    x = stats.t.ppf(p, df)
    assert D.t_cdf(x, df) == pytest.approx(p, abs=1e-11)
    assert D.t_two_sided_p(x, df) == pytest.approx(2 * min(p, 1 - p), rel=1e-9)


def test_t_quantile_hand_values():
    # closed forms: df=1 is Cauchy, tan(pi * 0.475); df=2 is 2(q - 1/2) sqrt(2 / (4q(1-q)))
    assert math.isclose(D.t_ppf(0.975, 1), math.tan(math.pi * 0.475), rel_tol=1e-13)
    assert math.isclose(D.t_ppf(0.975, 2), 0.95 * math.sqrt(2 / (4 * 0.975 * 0.025)), rel_tol=1e-13)
    assert math.isclose(D.t_ppf(0.975, 3), 3.182446305284263, rel_tol=1e-9)
    assert math.isclose(D.t_ppf(0.025, 9), -D.t_ppf(0.975, 9), rel_tol=1e-14)  # 1 - 0.975 != 0.025
    assert D.t_ppf(0.5, 4) == 0.0
    assert (D.t_ppf(0.0, 3), D.t_ppf(1.0, 3)) == (-math.inf, math.inf)
    assert math.isnan(D.t_ppf(0.5, 0)) and math.isnan(D.t_ppf(1.5, 3))


@pytest.mark.parametrize(("df", "expected"), sorted(T975.items()))
def test_t_quantile_matches_printed_table(df, expected):
    assert D.t_ppf(0.975, df) == pytest.approx(expected, abs=6e-4)
    assert D.t_ppf(0.025, df) == pytest.approx(-expected, abs=6e-4)


def test_betainc_matches_scipy():
    special = pytest.importorskip("scipy.special")
    for a, b, x in [(0.5, 0.5, 0.3), (2, 3, 0.4), (10, 0.5, 0.95), (0.5, 40, 0.01), (500, 0.5, 0.999)]:
        assert math.isclose(D.betainc(a, b, x), special.betainc(a, b, x), rel_tol=1e-12)


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
