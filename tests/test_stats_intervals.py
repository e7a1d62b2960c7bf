"""Bounded intervals for rates: each against an independent reference (scipy, statsmodels, brute force),
the [0, 1] property, the one-sided bound at 0 and 1, each estimate's own n, and coverage in simulation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from interval_coverage import DESIGNS, METHODS, REPEATS_HEADER, coverage, repeat_coverage, repeat_designs
from scipy import stats as sps
from stats_helpers import write_profile

from ngrp_lib.stats import estimators, intervals
from ngrp_lib.stats.distributions import beta_ppf
from ngrp_lib.stats.summary import StatsSettings, compute_stats
from ngrp_lib.stats.uncertainty import t_interval

statsmodels = pytest.importorskip("statsmodels")
from statsmodels.stats.proportion import proportion_confint  # noqa: E402


@pytest.mark.parametrize(
    "q,a,b", [(0.025, 0.966, 96.6), (0.975, 1.966, 95.6), (0.5, 2, 3), (0.001, 0.3, 50), (0.999, 50, 0.3)]
)
def test_beta_ppf_is_scipys(q, a, b):
    assert beta_ppf(q, a, b) == pytest.approx(sps.beta.ppf(q, a, b), rel=1e-10)


def _effective_n(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """p and the df-adjusted effective n, computed here with scipy (not the library's quantiles)."""
    p, se = values.mean(), values.std(ddof=1) / math.sqrt(values.size)
    z, t = sps.norm.ppf(0.5 + level / 2), sps.t.ppf(0.5 + level / 2, values.size - 1)
    return p, p * (1 - p) / se**2 * (z / t) ** 2


@pytest.mark.parametrize("seed", range(5))
def test_korn_graubard_is_clopper_pearson_on_the_effective_n(seed):
    rng = np.random.default_rng(seed)
    values = rng.binomial(8, rng.beta(1, 2, 30)) / 8
    iv = t_interval(values)
    ours = intervals.korn_graubard(iv.value, iv.se, iv.n, 0.95, cap=1e9)
    p, n = _effective_n(values)
    ref = proportion_confint(p * n, n, alpha=0.05, method="beta")  # statsmodels: Clopper-Pearson
    assert (ours.low, ours.high) == pytest.approx(ref, rel=1e-9)
    wilson = intervals.wilson(iv.value, iv.se, iv.n, 0.95, cap=1e9)
    assert (wilson.low, wilson.high) == pytest.approx(proportion_confint(p * n, n, 0.05, "wilson"), rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_skewed_fractional_values_discount_the_effective_n_above_the_tasks(seed):
    # pass^4 on hard tasks: mostly 0, a few small fractions; the estimate rests on the few tasks off 0
    rng = np.random.default_rng(seed)
    n = np.full(100, 8)
    values = estimators.pass_hat_k(n, rng.binomial(8, rng.beta(0.25, 2, 100)), 4)
    iv = t_interval(values)
    m = values.sum() ** 2 / (values**2).sum()  # the tasks carrying it: inverse Herfindahl of the values
    ours = intervals.korn_graubard(
        iv.value, iv.se, iv.n, 0.95, cap=800, spread=intervals.carrying(values, iv.value)
    )
    # by hand with scipy's quantiles: n_var above T is scaled by m / (m + 10 (1 - m/T)), then (z/t_{T-1})^2
    z, t_tasks = sps.norm.ppf(0.975), sps.t.ppf(0.975, 99)
    n_var = min(800, iv.value * (1 - iv.value) / iv.se**2)
    if n_var > 100:
        n_var = 100 + (n_var - 100) * m / (m + 10 * (1 - m / 100))
    n_star = n_var * (z / t_tasks) ** 2
    ref = proportion_confint(iv.value * n_star, n_star, alpha=0.05, method="beta")
    assert (ours.low, ours.high) == pytest.approx(ref, rel=1e-9)
    plain = intervals.korn_graubard(iv.value, iv.se, iv.n, 0.95, cap=800)
    assert ours.high >= plain.high and ours.low <= plain.low


def test_the_tasks_carrying_an_estimate_by_hand():
    # 0/1 values: the tasks off the edge nearer p; equal fractions: their count; one dominant value: ~1
    assert intervals.carrying(np.array([0, 0, 1, 1, 1.0]), 0.4) == pytest.approx(3.0)
    assert intervals.carrying(np.array([1, 1, 0, 1, 1.0]), 0.8) == pytest.approx(1.0)
    assert intervals.carrying(np.array([0, 0.2, 0.2, 0.2, np.nan]), 0.15) == pytest.approx(3.0)
    # (0.5 + 0.01 + 0.01)^2 / (0.25 + 0.0001 + 0.0001) = 0.2704 / 0.2502
    assert intervals.carrying(np.array([0, 0.5, 0.01, 0.01]), 0.13) == pytest.approx(0.2704 / 0.2502)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=60))
def test_zero_one_values_keep_the_plain_korn_graubard(values):
    # per-task values of 0 and 1 only (pass^K, a pass rate at K = 1): n_var = T - 1 never exceeds T
    v = np.array(values)
    iv = t_interval(v)
    if not 0 < iv.value < 1:
        return
    spread = intervals.carrying(v, iv.value)
    with_spread = intervals.korn_graubard(iv.value, iv.se, iv.n, 0.95, cap=8 * iv.n, spread=spread)
    assert with_spread == intervals.korn_graubard(iv.value, iv.se, iv.n, 0.95, cap=8 * iv.n)


def test_effective_n_is_capped_at_the_rollouts_behind_the_estimate():
    values = np.full(10, 0.5)  # no spread between tasks: the SE is 0, n_eff falls back to the cap
    iv = t_interval(values)
    capped = intervals.korn_graubard(iv.value, iv.se, iv.n, 0.95, cap=80)
    z, t = sps.norm.ppf(0.975), sps.t.ppf(0.975, 9)
    n = 80 * (z / t) ** 2
    assert (capped.low, capped.high) == pytest.approx(proportion_confint(0.5 * n, n, 0.05, "beta"), rel=1e-9)


@pytest.mark.parametrize("n_tasks", [1, 3, 12, 100])
def test_zero_and_one_get_a_one_sided_bound_on_their_tasks(n_tasks):
    zero = intervals.rate_interval(0.0, 0.0, n_tasks, 0.95, cap=8 * n_tasks)
    # brute force: the largest p with P(all n_tasks draws are 0) = (1 - p)^n >= 5%
    grid = np.linspace(0, 1, 200_001)
    assert zero.high == pytest.approx(grid[(1 - grid) ** n_tasks >= 0.05].max(), abs=1e-5)
    assert zero.low == 0.0 and zero.method == intervals.UPPER_BOUND and 0 < zero.high < 1
    one = intervals.rate_interval(1.0, 0.0, n_tasks, 0.95, cap=8 * n_tasks)
    assert one.high == 1.0 and one.low == pytest.approx(1 - zero.high) and one.method == intervals.LOWER_BOUND


rates = st.lists(st.floats(0, 1), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(values=rates, level=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@example(values=[0.9999999999999999, 0.9999999999999999], level=0.9)  # beta_ppf once started at x = 1.0
def test_every_rate_interval_lies_in_0_1_and_holds_its_value(values, level):
    iv = t_interval(np.array(values), level)
    for method in intervals.CANDIDATES:
        bounds = intervals.rate_interval(iv.value, iv.se, iv.n, level, cap=8 * iv.n, method=method)
        if bounds is None:
            assert iv.n == 1 and 0 < iv.value < 1
            continue
        assert 0.0 <= bounds.low <= bounds.high <= 1.0
        assert bounds.low <= iv.value + 1e-12 and iv.value - 1e-12 <= bounds.high


@settings(max_examples=40, deadline=None)
@given(
    tasks=st.lists(st.lists(st.sampled_from([0, 1, None]), min_size=1, max_size=6), min_size=1, max_size=8)
)
def test_every_rate_estimate_of_stats_lies_in_0_1(tmp_path_factory, tasks):
    prof = write_profile(tmp_path_factory.mktemp("p") / "p.jsonl", tasks)
    o = compute_stats(prof, settings=StatsSettings(n_bootstrap=50)).to_json()["overall"]
    estimates = [o["mean_reward"]["task_weighted"], o["mean_reward"]["rollout_weighted"]]
    estimates += [o["pass_rate"], *o["pass_at_k"], *o["pass_hat_k"], *o["grpo_informative"]]
    estimates += [o["difficulty"][band] for band in ("all_fail", "mixed", "all_pass")]
    for e in estimates:
        if e and e["ci_low"] is not None:
            assert 0.0 <= e["ci_low"] <= e["ci_high"] <= 1.0, e


def test_rollout_weighted_cr1_se_and_interval_are_statsmodels(tmp_path):
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    tasks = [
        rng.binomial(1, p, size=int(k)).tolist()
        for p, k in zip(rng.beta(1, 1, 25), rng.integers(2, 9, 25), strict=True)
    ]
    o = compute_stats(
        write_profile(tmp_path / "p.jsonl", tasks), settings=StatsSettings(n_bootstrap=0, interval="t")
    ).to_json()["overall"]
    y = np.concatenate([np.array(t, dtype=float) for t in tasks])
    groups = np.repeat(np.arange(len(tasks)), [len(t) for t in tasks])
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    rw = o["mean_reward"]["rollout_weighted"]
    assert rw["value"] == pytest.approx(fit.params[0])
    assert rw["se_clustered"] == pytest.approx(fit.bse[0], rel=1e-10)  # CR1: G/(G-1), (N-1)/(N-k) = 1
    assert (rw["ci_low"], rw["ci_high"]) == pytest.approx(tuple(fit.conf_int()[0]), rel=1e-10)  # G-1 df
    assert rw["ci_method"] == "t"


def test_zero_estimate_is_a_one_sided_bound_with_its_n(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0, 1, 0]] * 30)
    o = compute_stats(prof, settings=StatsSettings(n_bootstrap=100)).to_json()["overall"]
    hat4 = o["pass_hat_k"][3]
    assert hat4["value"] == 0.0 and hat4["ci_method"] == "one_sided_upper" and hat4["n_tasks"] == 30
    assert hat4["ci_high"] == pytest.approx(1 - 0.05 ** (1 / 30)) and hat4["t_ci_high"] == 0.0
    assert hat4["n_rollouts"] == 120
    t_only = compute_stats(prof, settings=StatsSettings(n_bootstrap=0, interval="t")).to_json()["overall"]
    assert t_only["pass_hat_k"][3]["ci_method"] == "t" and t_only["pass_hat_k"][3]["ci_high"] == 0.0


def test_few_tasks_note_is_judged_on_each_estimates_own_n(tmp_path):
    # 12 tasks, only 4 of them with 7 rollouts: pass@7 stands on 4 tasks, the mean on 12.
    tasks = [[1, 0, 1]] * 8 + [[1, 0, 0, 1, 1, 0, 1]] * 4
    r = compute_stats(write_profile(tmp_path / "p.jsonl", tasks), settings=StatsSettings(n_bootstrap=0))
    note = next(n for n in r.notes if n.startswith("few tasks"))
    assert "pass@7 (4 tasks)" in note and "pass^4 (4 tasks)" in note and "mean reward" not in note
    assert r.overall.pass_at_k[6].estimate.n_tasks == 4
    assert 0 <= r.overall.pass_at_k[6].estimate.ci_low <= r.overall.pass_at_k[6].estimate.ci_high <= 1
    many = compute_stats(
        write_profile(tmp_path / "q.jsonl", [[1, 0]] * 12), settings=StatsSettings(n_bootstrap=0)
    )
    assert not any(n.startswith("few tasks") for n in many.notes)


def test_the_bootstrap_of_an_estimate_on_some_tasks_resamples_those_tasks(tmp_path):
    # pass^6 is defined on the 4 tasks with 7 rollouts of 30: values 1/7, 1, 1, 1 (mean 0.786). Resampling
    # those 4 (each estimate's own n, as t and Korn-Graubard): by enumeration of the 4^4 resamples, the
    # 2.5% point is (3/7 + 1)/4 = 0.357 (all four 1/7 has probability 1/256). A domain bootstrap over all
    # 30 tasks gave replicates of one eligible task, 1/7 alone, low bound 0.143.
    tasks = [[1, 0, 1]] * 26 + [[1, 1, 1, 1, 1, 1, 0]] + [[1] * 7] * 3
    o = compute_stats(write_profile(tmp_path / "p.jsonl", tasks), settings=StatsSettings(n_bootstrap=4000))
    hat6 = o.overall.pass_hat_k[5].estimate
    assert hat6.n_tasks == 4 and hat6.value == pytest.approx((1 / 7 + 3) / 4)
    assert hat6.boot_ci_low == pytest.approx((3 / 7 + 1) / 4, abs=0.03) and hat6.boot_ci_high == 1.0


def test_the_documented_table_is_the_scripts_designs_and_holds():
    # references/statistics.md's table is written by `python tests/interval_coverage.py --write`: its rows
    # are the designs the slow tests run, in order, and its headline column is at least 0.92 in each
    doc = (Path(__file__).resolve().parents[1] / "references" / "statistics.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if line.startswith("| ") and "| design |" not in line]
    table = [row.split(" | ") for row in rows if row.split(" | ")[0][2:] in {d.name for d in DESIGNS}]
    assert [cells[0][2:] for cells in table] == [d.name for d in DESIGNS]
    header = next(line for line in doc.splitlines() if line.startswith("| design | true value |"))
    assert header.strip("| ").split(" | ")[2:] == list(METHODS)
    for cells in table:
        assert float(cells[-1].split()[0]) >= 0.92, cells


@pytest.mark.slow
@pytest.mark.parametrize("design", DESIGNS, ids=[d.name for d in DESIGNS])
def test_headline_interval_covers_in_simulation(design):
    # 400 runs each, fixed seed: at least 0.92 (the binomial band of 0.95 at 400 runs) in every design,
    # k between 1 and K on skewed populations, 6 and 12 tasks, all-0/1 populations and partial runs
    # included (references/statistics.md prints the table: python tests/interval_coverage.py).
    result = coverage(design, 400, seed=0, methods=("headline",))["headline"]
    assert result["coverage"] >= 0.92, result


def test_the_documented_many_repeats_table_is_the_scripts_and_holds():
    # the K = 4 to 64 table (issue 35), written by `python tests/interval_coverage.py --repeats --write`:
    # one row per estimand and population, one cell per task count, each at least 0.92
    doc = (Path(__file__).resolve().parents[1] / "references" / "statistics.md").read_text(encoding="utf-8")
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(REPEATS_HEADER))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    rows = lines[start + 2 : end]
    names = list(dict.fromkeys(d.name.rsplit(", ", 1)[0] for d in repeat_designs()))
    assert [row.split(" | ")[0][2:] for row in rows] == names
    for row in rows:
        cells = row.strip("| ").split(" | ")[2:]
        assert len(cells) == 3 and all(float(cell.split()[0]) >= 0.92 for cell in cells), row


@pytest.mark.slow
@pytest.mark.parametrize("design", repeat_designs(), ids=[d.name for d in repeat_designs()])
def test_headline_covers_at_many_repeats(design):
    # K up to 64, k in {2, K/4, K/2}, pass@k and pass^k skewed both ways, 8 to 200 tasks: 400 runs each
    # (a different seed from the table's), at least 0.92
    assert repeat_coverage(design, 400, seed=1)["coverage"] >= 0.92
