"""`compare_profiles`: paired statistics against hand-worked values, scipy and brute force."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from stats_helpers import paired_mover_by_hand, profile_row, write_profile

from ngrp_lib.artifacts import schemas
from ngrp_lib.errors import FindingsError
from ngrp_lib.stats.compare import CompareOptions, compare_profiles, sign_flip_p_value

A = [[1, 0], [0, 0], [1, 1]]
B = [[1, 1], [0, 1], [1, 1]]


def test_paired_difference_hand_worked(tmp_path):
    a, b = write_profile(tmp_path / "a.jsonl", A), write_profile(tmp_path / "b.jsonl", B)
    r = compare_profiles(a, b)
    # d = [0.5, 0.5, 0]: mean 1/3, sd = sqrt(1/12), SE = 1/6, t_{0.975,2} = 4.302653
    assert (r.n_tasks, r.n_dropped) == (3, 0)
    assert r.mean_a == pytest.approx(0.5) and r.mean_b == pytest.approx(5 / 6)
    assert r.mean_diff == pytest.approx(1 / 3)
    assert r.se_diff == pytest.approx(1 / 6)
    assert r.ci_low == pytest.approx(1 / 3 - 4.302653 / 6, abs=1e-6)
    assert r.ci_high == pytest.approx(1 / 3 + 4.302653 / 6, abs=1e-6)
    # sign flips of [0.5, 0.5, 0]: |sum| >= 1 in 4 of 8 patterns
    assert r.p_value_permutation == pytest.approx(0.5)
    assert r.binary and r.mcnemar is None  # two rollouts per task: no McNemar
    assert r.mde_80 == pytest.approx((1.959964 + 0.841621) / 6, abs=1e-5)


def test_t_test_matches_scipy(tmp_path):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    ta = rng.random((12, 5)).round(3).tolist()
    tb = rng.random((12, 5)).round(3).tolist()
    r = compare_profiles(write_profile(tmp_path / "a.jsonl", ta), write_profile(tmp_path / "b.jsonl", tb))
    ma, mb = np.mean(ta, axis=1), np.mean(tb, axis=1)
    ref = stats.ttest_rel(mb, ma)
    assert r.t_stat == pytest.approx(ref.statistic)
    assert r.p_value_t == pytest.approx(ref.pvalue, rel=1e-7)
    assert not r.binary and r.flips == []


def test_sign_flip_exact_equals_brute_force():
    d = np.array([0.3, -0.1, 0.25, 0.0, 0.7, -0.4, 0.15])
    obs = abs(d.sum())
    brute = sum(abs(np.dot(s, d)) >= obs - 1e-12 for s in itertools.product((-1, 1), repeat=d.size))
    p, method, n = sign_flip_p_value(d, seed=0)
    assert method == "exact" and n == 128
    assert p == pytest.approx(brute / 128)


def test_sign_flip_monte_carlo_is_seeded():
    d = np.random.default_rng(1).normal(0.1, 1, 40)
    p1, method, _ = sign_flip_p_value(d, seed=5)
    p2, _, _ = sign_flip_p_value(d, seed=5)
    assert method == "monte_carlo" and p1 == p2 and 0 < p1 <= 1


def test_bootstrap_reproducible_with_seed(tmp_path):
    rng = np.random.default_rng(0)
    a = write_profile(tmp_path / "a.jsonl", rng.integers(0, 2, (30, 4)).tolist())
    b = write_profile(tmp_path / "b.jsonl", rng.integers(0, 2, (30, 4)).tolist())
    r1, r2 = compare_profiles(a, b, CompareOptions(seed=7)), compare_profiles(a, b, CompareOptions(seed=7))
    r3 = compare_profiles(a, b, CompareOptions(seed=8))
    assert (r1.boot_ci_low, r1.boot_ci_high) == (r2.boot_ci_low, r2.boot_ci_high)
    assert (r1.boot_ci_low, r1.boot_ci_high) != (r3.boot_ci_low, r3.boot_ci_high)
    assert r1.boot_ci_low < r1.mean_diff < r1.boot_ci_high


def test_mismatched_tasks_refused_unless_intersect(tmp_path):
    a = write_profile(tmp_path / "a.jsonl", A)
    b = write_profile(tmp_path / "b.jsonl", B[:2])
    with pytest.raises(FindingsError, match="1 only in A"):
        compare_profiles(a, b)
    r = compare_profiles(a, b, CompareOptions(intersect=True))
    assert (r.n_tasks, r.n_dropped, r.n_only_a, r.n_only_b) == (2, 1, 1, 0)


def test_match_by_task_and_agent_not_line_order(tmp_path):
    rows_a = [profile_row(0, [1, 0], agent="x"), profile_row(0, [0, 0], agent="y")]
    rows_b = [profile_row(0, [0, 0], agent="y"), profile_row(0, [1, 1], agent="x")]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_a))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_b))
    r = compare_profiles(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    diffs = {(t.task, t.agent): t.diff for t in r.per_task}
    assert diffs == {(0, "x"): 0.5, (0, "y"): 0.0}


def test_mcnemar_with_one_binary_rollout_per_task(tmp_path):
    ta = [[1]] * 3 + [[0]] * 7
    tb = [[1]] * 2 + [[0]] + [[1]] * 6 + [[0]]
    r = compare_profiles(write_profile(tmp_path / "a.jsonl", ta), write_profile(tmp_path / "b.jsonl", tb))
    # A-only success: task 2 (b=1); B-only: tasks 3..8 (c=6): exact p = 2 * 8/128
    assert r.mcnemar.a_only_success == 1 and r.mcnemar.b_only_success == 6
    assert r.mcnemar.p_value == pytest.approx(0.125)


def test_flips_use_fisher_and_bh(tmp_path):
    stats = pytest.importorskip("scipy.stats")
    ta = [[0] * 16, [1] * 8 + [0] * 8, [1] * 16]
    tb = [[1] * 16, [1] * 8 + [0] * 8, [1] * 15 + [0]]
    r = compare_profiles(write_profile(tmp_path / "a.jsonl", ta), write_profile(tmp_path / "b.jsonl", tb))
    p0 = stats.fisher_exact([[16, 0], [0, 16]])[1]
    assert r.per_task[0].p_value == pytest.approx(p0)
    assert r.per_task[0].q_value == pytest.approx(min(1, p0 * 3))
    assert r.n_flips == 1 and r.flips[0].task == 0 and r.flips[0].direction == "better_in_b"


def test_null_rewards_excluded_with_count(tmp_path):
    a = write_profile(tmp_path / "a.jsonl", [[1, None], [None, None]])
    b = write_profile(tmp_path / "b.jsonl", [[0, 0], [1, 1]])
    r = compare_profiles(a, b)
    assert (r.n_tasks, r.n_undefined) == (1, 1)
    assert r.per_task[0].n_a == 1 and r.mean_diff == pytest.approx(-1.0)
    assert math.isnan(r.se_diff) and r.to_json()["se_diff"] is None


@pytest.mark.slow
def test_t_interval_coverage_on_simulated_runs(tmp_path):
    """B has a known true gain of 0.1 in per-task success probability; the 95% t interval covers it ~95%."""
    rng = np.random.default_rng(2024)
    sims, covered_t, covered_boot, tasks, k, delta = 200, 0, 0, 60, 4, 0.1
    for s in range(sims):
        p = rng.uniform(0.1, 0.8, tasks)
        a = (rng.random((tasks, k)) < p[:, None]).astype(int)
        b = (rng.random((tasks, k)) < (p + delta)[:, None]).astype(int)
        pa = write_profile(tmp_path / "a.jsonl", a.tolist())
        pb = write_profile(tmp_path / "b.jsonl", b.tolist())
        r = compare_profiles(pa, pb, CompareOptions(seed=s, n_bootstrap=400))
        covered_t += r.ci_low <= delta <= r.ci_high
        covered_boot += r.boot_ci_low <= delta <= r.boot_ci_high
    # 200 sims: binomial sd of the coverage is about 1.5 points; allow 3 sd.
    assert 0.90 <= covered_t / sims <= 0.995
    assert 0.88 <= covered_boot / sims <= 0.995


def test_cli_alpha_and_metric(run_ngrp, tmp_path):
    # Task 0 flips (Fisher p = 2/C(32,16) ~ 1.2e-9, BH q = 3p); tasks 1 and 2 do not.
    ta = [[0] * 16, [1] * 8 + [0] * 8, [1] * 16]
    tb = [[1] * 16, [1] * 8 + [0] * 8, [1] * 15 + [0]]
    a, b = write_profile(tmp_path / "a.jsonl", ta), write_profile(tmp_path / "b.jsonl", tb)
    default = json.loads(run_ngrp("compare", a, b, "--json").stdout)
    assert default["alpha"] == 0.05 and default["n_flips"] == 1
    strict = json.loads(run_ngrp("compare", a, b, "--json", "--alpha", "1e-12").stdout)
    assert strict["alpha"] == 1e-12 and strict["n_flips"] == 0
    assert strict["mde_80"] > default["mde_80"]
    # --metric reads another per-rollout field: lengths 10/20 in A, 30/50 in B -> mean diff 25
    la = write_profile(tmp_path / "la.jsonl", [[1, 0], [0, 1]], lengths=[[10, 20], [10, 20]])
    lb = write_profile(tmp_path / "lb.jsonl", [[1, 0], [0, 1]], lengths=[[30, 50], [30, 50]])
    tokens = json.loads(run_ngrp("compare", la, lb, "--json", "--metric", "output_tokens").stdout)
    reward = json.loads(run_ngrp("compare", la, lb, "--json").stdout)
    assert tokens["mean_diff"] == pytest.approx(25.0) and reward["mean_diff"] == pytest.approx(0.0)


def test_flip_direction_follows_the_pass_counts_the_test_is_on(tmp_path):
    """Task 0: A passes 10/10 at threshold 0.5, B 2/10, yet B's mean reward is higher (0.56 vs 0.55)."""
    a = write_profile(tmp_path / "a.jsonl", [[0.55] * 10, [0, 1]])
    b = write_profile(tmp_path / "b.jsonl", [[1, 1] + [0.45] * 8, [0, 1]])
    r = compare_profiles(a, b, CompareOptions(pass_threshold=0.5))
    assert r.per_task[0].diff > 0  # the mean moved up...
    flips = [(f.task, f.direction, f.a, f.b) for f in r.flips]
    assert flips == [(0, "worse_in_b", "10/10", "2/10")]  # ...but the pass count fell


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0, -1.0, float("nan")])
def test_alpha_outside_0_1_is_a_usage_error(tmp_path, alpha):
    from ngrp_lib.errors import UsageError

    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 1]])
    with pytest.raises(UsageError, match="--alpha"):
        compare_profiles(a, a, CompareOptions(alpha=alpha))


def test_nothing_in_common_is_a_finding_not_a_row_of_nans(tmp_path):
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 1]])
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps({**json.loads(line), "_ng_task_index": 5 + i}) + "\n"
                         for i, line in enumerate(a.read_text().splitlines())))  # fmt: skip
    with pytest.raises(FindingsError, match="share no task"):
        compare_profiles(a, b, CompareOptions(intersect=True))
    with pytest.raises(FindingsError, match="'judge' in both"):
        compare_profiles(a, a, CompareOptions(metric="judge"))


def test_no_spread_gives_an_mde_from_within_task_variance_or_none(tmp_path):
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 1], [1, 1]])
    r = compare_profiles(a, a)
    # no spread between the paired differences: the MDE comes from rerun noise, s2/n = 0.25 on two tasks
    assert r.mean_diff == 0 and r.mde_80 == pytest.approx(2.8015852 * math.sqrt(2 * 0.25 + 2 * 0.25) / 3)
    flat = write_profile(tmp_path / "flat.jsonl", [[1, 1], [0, 0]])
    r = compare_profiles(flat, flat)  # no variance anywhere: no detectable effect, undefined rather than 0
    assert math.isnan(r.mde_80) and r.mde_basis == "none" and r.identical == "same_rewards_per_key"


def test_pairs_whose_task_data_differ_get_a_note(tmp_path):
    """Pairing is by _ng_task_index: a reordered task file pairs the wrong tasks, and the samples show it."""
    samples = [{"expected_answer": "4", "responses_create_params": {"input": "p1"}},
               {"expected_answer": "9", "responses_create_params": {"input": "p2"}}]  # fmt: skip
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 1]], sample=samples)
    same = [{**s, "responses_create_params": {"input": "new prompt"}} for s in samples]  # a prompt change
    b = write_profile(tmp_path / "b.jsonl", [[1, 1], [0, 0]], sample=same)
    assert not any("different task data" in n for n in compare_profiles(a, b).notes)
    swapped = write_profile(tmp_path / "c.jsonl", [[1, 1], [0, 0]], sample=same[::-1])  # rows reordered
    notes = compare_profiles(a, swapped).notes
    assert any("2 paired task(s) hold different task data" in n for n in notes)


# --- issue 15: pass@k paired by task, correlation, MDE (z and t), tasks needed, degenerate comparisons ---


def _two_runs(tmp_path, seed=0, tasks=30, repeats=8, shift=0.0):
    rng = np.random.default_rng(seed)
    p = rng.beta(1, 1, tasks)
    ta = rng.binomial(1, p[:, None], (tasks, repeats)).tolist()
    tb = rng.binomial(1, np.clip(p + shift, 0, 1)[:, None], (tasks, repeats)).tolist()
    return write_profile(tmp_path / "a.jsonl", ta), write_profile(tmp_path / "b.jsonl", tb), ta, tb


def test_pass_at_k_paired_by_task_against_brute_force_and_scipy(tmp_path):
    from math import comb

    from scipy import stats as sps

    a, b, ta, tb = _two_runs(tmp_path)
    r = compare_profiles(a, b, CompareOptions(n_bootstrap=0))
    assert [e.k for e in r.pass_at_k] == [1, 2, 4, 8] and [e.k for e in r.pass_hat_k] == [1, 2, 4, 8]
    for e in r.pass_at_k + r.pass_hat_k:
        hat = e in r.pass_hat_k

        def value(row, k=e.k, hat=hat):
            n, c = len(row), sum(row)
            return comb(c, k) / comb(n, k) if hat else 1 - comb(n - c, k) / comb(n, k)

        fa, fb = np.array([value(x) for x in ta]), np.array([value(y) for y in tb])
        d = fb - fa
        assert e.mean_diff == pytest.approx(d.mean(), abs=1e-12) and e.n_tasks == 30
        if d.std() > 0:
            test = sps.ttest_1samp(d, 0.0)
            assert e.p_value_t == pytest.approx(test.pvalue, rel=1e-8)
            assert e.se_diff == pytest.approx(sps.sem(d), rel=1e-8)
        # the interval: MOVER from each run's bounded interval of the per-task rates (worked with scipy)
        low, high = paired_mover_by_hand(fa, fb, [8] * 30, [8] * 30)
        assert e.ci_method in ("mover", "constant_difference")
        assert (e.ci_low, e.ci_high) == (pytest.approx(low, rel=1e-6), pytest.approx(high, rel=1e-6))
    schemas.validator("compare_result").validate(r.to_json())


def test_correlation_mde_t_and_tasks_needed(tmp_path):
    from scipy import stats as sps
    from statsmodels.stats.power import TTestPower

    a, b, ta, tb = _two_runs(tmp_path, seed=4, shift=0.05)
    r = compare_profiles(a, b, CompareOptions(n_bootstrap=0, effect=0.05))
    ma, mb = np.mean(ta, axis=1), np.mean(tb, axis=1)
    assert r.correlation.value == pytest.approx(sps.pearsonr(ma, mb).statistic, rel=1e-10)
    sd = np.std(mb - ma, ddof=1)
    assert r.mde_80 == pytest.approx((sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * sd / np.sqrt(30))
    assert r.mde_80_t == pytest.approx((sps.t.ppf(0.975, 29) + sps.t.ppf(0.8, 29)) * sd / np.sqrt(30))
    exact = TTestPower().solve_power(effect_size=0.05 / sd, alpha=0.05, power=0.8, alternative="two-sided")
    assert r.tasks_needed in (math.ceil(exact), math.ceil(exact) + 1) and r.mde_basis == "paired differences"


def test_identical_runs_are_a_finding_with_mde_from_within_task_variance(tmp_path, run_ngrp):
    a, _, ta, _ = _two_runs(tmp_path)
    twin = write_profile(tmp_path / "twin.jsonl", ta)
    r = compare_profiles(a, twin, CompareOptions(n_bootstrap=0))
    assert r.identical == "same_rewards_per_key" and r.notes[0].startswith("identical outcomes")
    s2 = np.var(ta, axis=1, ddof=1) / 8
    se = math.sqrt(2 * s2.sum()) / 30  # both runs' rerun noise
    assert r.mde_basis == "within-task variance" and r.mde_80 == pytest.approx(2.8015852 * se, rel=1e-6)
    # the same per-task means from other rollouts: zero differences, but not the same rewards per key
    shuffled = write_profile(tmp_path / "shuffled.jsonl", [row[::-1] for row in ta])
    assert compare_profiles(a, shuffled, CompareOptions(n_bootstrap=0)).identical == "zero_differences"
    (tmp_path / "x").mkdir()
    assert (
        compare_profiles(*_two_runs(tmp_path / "x", seed=1)[:2], CompareOptions(n_bootstrap=0)).identical
        is None
    )
    text = run_ngrp("compare", a, twin, "--bootstrap", "0")
    assert text.returncode == 0 and "finding: identical outcomes: the same rollouts or seed?" in text.stdout


@pytest.mark.slow
def test_paired_t_type_one_error_under_the_null_and_power():
    from interval_coverage import compare_rejections

    for k in (None, 4):  # the mean difference, and pass@4 paired by task
        rate = compare_rejections(runs=1000, tasks=50, shift=0.0, k=k, seed=11)
        assert 0.03 <= rate <= 0.07, (k, rate)
    assert compare_rejections(runs=300, tasks=100, shift=0.1, k=None, seed=12) >= 0.8


def test_within_task_se_by_brute_force_and_silent_on_single_rollouts():
    import math
    import statistics
    import warnings

    import numpy as np

    from ngrp_lib.stats.paired import within_se

    nan = float("nan")
    a = np.array([[1.0, 0.0, 1.0], [1.0, nan, nan], [0.0, 0.0, 1.0]])  # task 1: one rollout in A
    b = np.array([[1.0, 1.0, nan], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    kept = [0, 2]  # tasks with at least two scored rollouts in both runs
    total = 0.0
    for t in kept:
        xa = [x for x in a[t] if not math.isnan(x)]
        xb = [x for x in b[t] if not math.isnan(x)]
        total += statistics.variance(xa) / len(xa) + statistics.variance(xb) / len(xb)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.nanvar's "Degrees of freedom <= 0" would fail here
        got = within_se(a, b)
    assert got == pytest.approx(math.sqrt(total) / len(kept), rel=1e-12)


def test_no_flip_says_why_when_counts_changed(tmp_path):
    """Pass counts dropped in every task but no task flipped: the note says how many changed and whether
    any task could flip at all with these repeats (the extreme table's Fisher p, checked by scipy)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    a = write_profile(tmp_path / "a.jsonl", [[1, 1, 0, 0]] * 6)
    b = write_profile(tmp_path / "b.jsonl", [[1, 0, 0, 0]] * 5 + [[1, 1, 0, 0]])
    r = compare_profiles(a, b, CompareOptions(pass_threshold=0.5))
    assert r.n_flips == 0
    floor = scipy_stats.fisher_exact([[4, 0], [0, 4]]).pvalue  # 2 / C(8, 4) = 0.0286
    note = next(n for n in r.notes if "changed pass counts" in n)
    assert "5 task(s) changed pass counts (B higher in 0, lower in 5)" in note
    assert f"p is at least {floor:.3g}" in note  # 0.0286 < 0.05: a task could flip, these did not
    two = compare_profiles(
        write_profile(tmp_path / "c.jsonl", [[1, 1]] * 3), write_profile(tmp_path / "d.jsonl", [[0, 0]] * 3),
        CompareOptions(pass_threshold=0.5),
    )  # fmt: skip
    assert two.n_flips == 0 and any(
        "no task can (the smallest Fisher p a task can reach is 0.333)" in n for n in two.notes
    )


def test_the_task_data_note_and_row_differences_agree(tmp_path):
    """One check of how paired rows differ (stats.rowdiff): the note names task data exactly when the row
    differences name a dataset field, and neither calls a routing stamp or a request field task data."""
    base = [{"expected_answer": e, "responses_create_params": {"input": p, "temperature": 0.7}}
            for e, p in (("4", "p1"), ("9", "p2"))]  # fmt: skip
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 1]], sample=base)
    variants = {
        "routing": ([{**s, "task_source": "other"} for s in base], False),
        "request": ([{**s, "responses_create_params": {"input": "p", "top_p": 0.9}} for s in base], False),
        "dataset": ([{**base[0], "expected_answer": "5"}, base[1]], True),
        "both": ([{**base[0], "expected_answer": "5", "task_source": "x"}, base[1]], True),
    }
    for name, (samples, differs) in variants.items():
        b = write_profile(tmp_path / f"{name}.jsonl", [[1, 1], [0, 0]], sample=samples)
        r = compare_profiles(a, b)
        noted = [n for n in r.notes if "different task data" in n]
        named = {f["field"] for f in r.row_differences["fields"]}
        assert bool(noted) == differs == ("expected_answer" in named), name
        if differs:
            assert noted[0].startswith("1 paired task(s) hold different task data") and "task 0" in noted[0]
    # the viewer's per-pair "same task" flag is the same check
    from ngrp_lib.stats.rowdiff import same_task

    assert same_task({**base[0], "task_source": "x", "_ng_task_index": 3}, base[0])
    assert not same_task({**base[0], "expected_answer": "5"}, base[0])
