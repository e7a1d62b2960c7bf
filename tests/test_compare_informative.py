"""Issue 36 #13: `compare` answers "did B raise the share of GRPO-useful tasks?": B - A of P(informative
at G), paired by task, with its interval. Checked against brute force over every group of G rollouts,
the MOVER interval worked with scipy (stats_helpers), scipy's t test, and coverage in simulation with known
truth (tests/informative_coverage.py)."""

from __future__ import annotations

import itertools
import json
import math

import informative_coverage as sim
import numpy as np
import pytest
from stats_helpers import paired_mover_by_hand, write_profile

from ngrp_lib.artifacts import schemas
from ngrp_lib.errors import UsageError
from ngrp_lib.stats.compare import CompareOptions, compare_profiles

A = [[1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 1], [0, 0, 0, 1, 0, 0]]
B = [[1, 1, 0, 1, 0, 0], [1, 1, 1, 0, 1, 1], [0, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 1, 1, 0, 1]]


def brute_informative(rewards: list[int], group: int) -> float:
    """Share of all groups of `group` distinct rollouts holding both a pass and a fail."""
    groups = list(itertools.combinations(rewards, group))
    return sum(0 < sum(g) < group for g in groups) / len(groups)


def test_paired_informative_against_brute_force_and_scipy(tmp_path):
    stats = pytest.importorskip("scipy.stats")
    a, b = write_profile(tmp_path / "a.jsonl", A), write_profile(tmp_path / "b.jsonl", B)
    r = compare_profiles(a, b, CompareOptions(group_sizes=(3, 6)))
    assert [e.k for e in r.grpo_informative] == [3, 6]
    for entry in r.grpo_informative:
        fa = np.array([brute_informative(t, entry.k) for t in A])
        fb = np.array([brute_informative(t, entry.k) for t in B])
        d = fb - fa
        assert entry.n_tasks == len(A)
        assert entry.mean_a == pytest.approx(fa.mean()) and entry.mean_b == pytest.approx(fb.mean())
        assert entry.mean_diff == pytest.approx(d.mean())
        low, high = paired_mover_by_hand(fa, fb, [6] * len(A), [6] * len(B))
        assert (entry.ci_low, entry.ci_high) == (pytest.approx(low), pytest.approx(high))
        assert entry.ci_method == "mover" and entry.se_diff == pytest.approx(stats.sem(d))
        assert entry.p_value_t == pytest.approx(stats.ttest_rel(fb, fa).pvalue)
    # G=3 by hand for task 0 of A (1 pass in 6): groups holding the pass: C(5,2) = 10 of C(6,3) = 20
    assert brute_informative(A[0], 3) == 0.5


def test_default_group_is_the_repeats_both_hold(tmp_path):
    a, b = write_profile(tmp_path / "a.jsonl", A), write_profile(tmp_path / "b.jsonl", B)
    assert [e.k for e in compare_profiles(a, b).grpo_informative] == [6]
    r = compare_profiles(a, b, CompareOptions(group_sizes=(8,)))
    assert r.grpo_informative == [] and any("G=8" in n for n in r.notes)
    with pytest.raises(UsageError, match="at least 2"):
        compare_profiles(a, b, CompareOptions(group_sizes=(1,)))


def test_cli_text_and_json(tmp_path, run_ngrp):
    a, b = write_profile(tmp_path / "a.jsonl", A), write_profile(tmp_path / "b.jsonl", B)
    proc = run_ngrp("compare", a, b, "--group-size", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    schemas.validator("compare_result").validate(payload)
    (entry,) = payload["grpo_informative"]
    assert entry["k"] == 3 and entry["ci_method"] == "mover"
    text = run_ngrp("compare", a, b, "--group-size", "3").stdout
    assert "GRPO-informative share at G=3" in text and f"n={len(A)} tasks" in text
    assert run_ngrp("compare", a, b, "--group-size", "1").returncode == 2


def test_population_truth_matches_monte_carlo():
    """The simulation's exact truth, against a direct Monte Carlo average (independent of its algebra)."""
    rng = np.random.default_rng(11)
    p = rng.beta(0.5, 1.0, 2_000_000)
    mc = np.mean(1 - p**8 - (1 - p) ** 8)
    assert sim.p_informative_population(0.5, 8) == pytest.approx(mc, abs=2e-3)


@pytest.mark.parametrize("design", [sim.DESIGNS[0], sim.DESIGNS[1]], ids=["null", "shift"])
def test_interval_covers_the_truth_in_simulation(design):
    runs = 400
    covered, _ = sim.coverage(design, runs, seed=7)
    band = 3 * math.sqrt(0.95 * 0.05 / runs)  # 3 standard errors of a 95% coverage over 400 runs
    assert abs(covered - 0.95) <= band, f"{design.label()}: covers {covered}"


def test_the_answer_line_answers_the_group_size_question(tmp_path, run_ngrp):
    """W6: with --group-size the `answer:` line states the informative share's B - A with its interval
    (from brute force and scipy here), after the mean; without it, the mean alone as before."""
    a, b = write_profile(tmp_path / "a.jsonl", A), write_profile(tmp_path / "b.jsonl", B)
    fa, fb = (np.array([brute_informative(t, 3) for t in run]) for run in (A, B))
    d = fb - fa
    low, high = paired_mover_by_hand(fa, fb, [6] * len(A), [6] * len(B))
    answer = run_ngrp("compare", a, b, "--group-size", "3").stdout.rstrip().splitlines()[-1]
    assert answer.startswith("answer: mean reward: "), answer
    verdict = "B raises it" if low > 0 else "B lowers it" if high < 0 else "no difference detectable"
    assert (
        f"; GRPO-informative share at G=3: {verdict}: B - A = {d.mean():.4g}, "
        f"95% CI [{low:.4g}, {high:.4g}], n={len(A)} tasks" in answer
    ), answer
    plain = json.loads(run_ngrp("compare", a, b, "--json").stdout)
    assert plain["group_sizes_asked"] == [] and "GRPO" not in plain["answer"]["text"]
