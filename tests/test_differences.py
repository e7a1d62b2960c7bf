"""Intervals for a paired difference of bounded means (`stats.differences`): MOVER against statsmodels'
Newcombe interval, the constant-difference bound by hand, compare's degenerate mean difference, and
coverage in simulation with known truth (tests/difference_coverage.py: the full table is in
references/statistics.md)."""

from __future__ import annotations

import math

import difference_coverage as sim
import numpy as np
import pytest
from stats_helpers import write_profile

from ngrp_lib.stats.compare import CompareOptions, compare_profiles
from ngrp_lib.stats.differences import constant_difference, mover, paired_task_difference
from ngrp_lib.stats.intervals import Bounds


@pytest.mark.parametrize("counts", [(7, 10, 3, 12), (0, 8, 5, 9), (20, 20, 1, 30), (45, 200, 60, 180)])
def test_mover_with_wilson_intervals_and_no_correlation_is_newcombes_interval(counts):
    """For independent proportions MOVER from two Wilson intervals (r = 0) is Newcombe's hybrid score
    interval (method 10), which statsmodels implements on its own."""
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    c1, n1, c2, n2 = counts
    w1, w2 = (proportion.proportion_confint(c, n, method="wilson") for c, n in ((c1, n1), (c2, n2)))
    low, high = mover(c1 / n1, Bounds(*w1, ""), c2 / n2, Bounds(*w2, ""), 0.0)
    want = proportion.confint_proportions_2indep(c1, n1, c2, n2, method="newcomb", compare="diff")
    assert (low, high) == (pytest.approx(want[0], abs=1e-12), pytest.approx(want[1], abs=1e-12))


def test_mover_of_symmetric_intervals_recovers_the_variance_of_the_difference():
    """With x +- h_x and y +- h_y, MOVER is (x - y) +- sqrt(h_x^2 + h_y^2 - 2 r h_x h_y): the normal
    interval of the difference of two correlated estimates (r = 1 and equal widths: no width from them)."""
    for r in (-1.0, -0.3, 0.0, 0.6, 1.0):
        low, high = mover(0.6, Bounds(0.5, 0.7, ""), 0.4, Bounds(0.25, 0.55, ""), r)
        half = math.sqrt(0.1**2 + 0.15**2 - 2 * r * 0.1 * 0.15)
        assert (low, high) == (pytest.approx(0.2 - half), pytest.approx(0.2 + half))
    assert mover(1.0, Bounds(0.0, 1.0, ""), 0.0, Bounds(0.0, 1.0, ""), -1.0) == (-1.0, 1.0), "within [-1, 1]"


def test_constant_difference_by_hand():
    q5, q30 = 0.05 ** (1 / 5), 0.05 ** (1 / 30)
    assert constant_difference(1.0, 5, 0.95) == (pytest.approx(2 * q5 - 1), 1.0)
    assert constant_difference(-1.0, 5, 0.95) == (-1.0, pytest.approx(1 - 2 * q5))
    assert constant_difference(0.0, 30, 0.95) == (pytest.approx(q30 - 1), pytest.approx(1 - q30))
    low, high = constant_difference(0.25, 5, 0.95)
    assert (low, high) == (pytest.approx(0.25 * q5 - (1 - q5)), pytest.approx(0.25 * q5 + (1 - q5)))
    # the bound is tight: a difference that is c with probability q and +-1 otherwise can reach it
    assert paired_task_difference([0.0] * 5, [1.0] * 5, [1] * 5, [1] * 5).low == pytest.approx(2 * q5 - 1)


def test_compare_mean_difference_keeps_t_and_is_never_zero_width(tmp_path):
    """compare's mean difference keeps the paired t interval (its coverage holds from 30 tasks on), but
    when every task's difference is the same it has no width: 5 tasks that all go from 0 to 1 gave
    [1, 1]; now the exact bound [2 * 0.05^(1/5) - 1, 1], and B still beats A."""
    a = write_profile(tmp_path / "a.jsonl", [[0]] * 5)
    b = write_profile(tmp_path / "b.jsonl", [[1]] * 5)
    r = compare_profiles(a, b, CompareOptions(n_bootstrap=0))
    assert r.ci_method == "constant_difference" and r.mean_diff == 1
    assert (r.ci_low, r.ci_high) == (pytest.approx(2 * 0.05 ** (1 / 5) - 1), 1.0)
    assert r.answer["claim"] == "b_better"
    spread = write_profile(tmp_path / "c.jsonl", [[1], [1], [0], [1], [1]])
    assert compare_profiles(a, spread, CompareOptions(n_bootstrap=0)).ci_method == "t"
    unbounded = write_profile(tmp_path / "d.jsonl", [[3]] * 5)
    assert compare_profiles(a, unbounded, CompareOptions(n_bootstrap=0)).ci_method == "t", "not in [0, 1]"


# Coverage in simulation (the designs the replay's wrong turn and the table point at): at least 0.92 and
# never a zero-width interval. 400 runs each: 3 standard errors of a 0.95 coverage are 0.033.
def _design(name: str):
    (found,) = [d for d in [*sim.component_designs(), *sim.run_designs()] if d.name == name]
    return found


DESIGNS = {
    "edge components, K=1, T=5 (the replay's)": ("edge, Beta(30,1) - Beta(1,30), K=1", 5),
    "rare discordance, K=4, T=30": ("rare discordance (2% / 1%), K=4", 30),
    "correlated, K=1, T=30": ("correlated, Y = X lost 10%, K=1", 30),
    "pass^8 hard, B = A^0.7, T=30": ("pass^8, hard Beta(0.5,2), B = A^0.7", 30),
    "P(informative at 8), T=5": ("P(informative at 8), Beta(2,1), B = A^3", 5),
}


@pytest.mark.parametrize("name", list(DESIGNS))
def test_coverage_in_simulation_with_known_truth(name):
    design_name, tasks = DESIGNS[name]
    design = _design(design_name)
    generate = sim.component_runs if isinstance(design, sim.Components) else sim.compare_runs
    result = sim.tally(generate(design, tasks, 400, seed=tasks))
    ours = result["ngrp"]
    assert ours["coverage"] >= 0.92, f"{name}: {ours}"
    assert ours["zero"] == 0, f"{name}: zero-width intervals"
    assert np.isfinite(ours["width"])


def test_the_simulation_truths_against_monte_carlo():
    """The exact truths of two designs, against a direct average over many draws (independent algebra)."""
    rng = np.random.default_rng(3)
    p = rng.beta(0.5, 2, 2_000_000)
    hard = _design("pass^8, hard Beta(0.5,2), B = A^0.7")
    assert hard.truth == pytest.approx(np.mean((p**0.7) ** 8 - p**8), abs=2e-4)
    edge = _design("edge, Beta(30,1) - Beta(1,30), K=1")
    x, y = edge.draw(rng, 200_000, 1)
    assert edge.truth == pytest.approx(float(np.mean(x - y)), abs=5e-3)
