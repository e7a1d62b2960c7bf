"""`ngrp stats` / `ngrp compare`: library results on golden and synthetic profiles, CLI wiring, exit codes."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from cli_helpers import validated
from conftest import REPO
from stats_helpers import profile_row, rollout, write_profile, write_rollouts

from ngrp_lib.errors import FindingsError, InputError, UsageError
from ngrp_lib.stats.summary import StatsSettings, compute_stats


def test_golden_case_complete_numbers(golden):
    prof = golden / "case_complete" / "rollouts_reward_profiling.jsonl"
    r = compute_stats(
        prof,
        golden / "case_complete" / "rollouts.jsonl",
        StatsSettings(pass_threshold=0.5, answer_key="extracted_answer", n_bootstrap=200),
    )
    o = r.to_json()["overall"]
    # rewards t0=[1,0,1,1], t1=[.25,.5,.75,1], t2=[0,0,1,0]
    assert o["mean_reward"]["task_weighted"]["value"] == pytest.approx((0.75 + 0.625 + 0.25) / 3)
    assert o["mean_reward"]["rollout_weighted"]["value"] == pytest.approx(6.5 / 12)
    # threshold 0.5: successes 3, 3, 1 of 4
    assert o["pass_rate"]["value"] == pytest.approx(7 / 12)
    assert [e["value"] for e in o["pass_at_k"]] == pytest.approx([7 / 12, 5 / 6, 11 / 12, 1.0])
    assert o["difficulty"]["mixed"]["n_tasks"] == 3
    assert r.inputs["rollouts"] == {"matched": 12, "not_in_profile": 0, "profile_rollouts_not_in_file": 0}
    validated(r.to_json(), "stats_result")


def test_masked_golden_null_reward_excluded_and_counted(golden):
    r = compute_stats(
        golden / "case_masked" / "rollouts_reward_profiling.jsonl", None, StatsSettings(n_bootstrap=0)
    )
    o = r.to_json()["overall"]
    assert o["n_null_rewards"] == 1 and o["n_rollouts"] == 10
    # task 1 is [.25, null, .75, 1]: mean over 3, as Gym's mean/reward
    assert r.per_task[1]["mean_reward"] == pytest.approx(2 / 3) and r.per_task[1]["n"] == 3
    assert o["binary"] is False and o["pass_rate"] is None and o["best_of_k"]
    # k = 4: only task 1... no: task 0 has 3 rollouts, task 1 has 3 scored, task 2 has 4
    assert o["best_of_k"][3]["n_tasks"] == 1
    validated(r.to_json(), "stats_result")


def test_pass_at_k_nan_when_fewer_rollouts(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0, 0, 1], [1, 1]])
    o = compute_stats(prof, settings=StatsSettings(n_bootstrap=0)).to_json()["overall"]
    assert o["pass_at_k"][2]["n_tasks"] == 1 and o["pass_at_k"][2]["value"] == pytest.approx(1 - 0 / 4)
    assert o["pass_at_k"][0]["n_tasks"] == 2
    assert r_per_task_pass1_equals_mean(prof)


def r_per_task_pass1_equals_mean(prof) -> bool:
    r = compute_stats(prof, settings=StatsSettings(n_bootstrap=0)).to_json()
    rates = [t["pass_rate"] for t in r["per_task"]]
    return r["overall"]["pass_at_k"][0]["value"] == pytest.approx(np.mean(rates))


def test_stats_invariant_to_rollout_order_and_seeded(tmp_path):
    rng = np.random.default_rng(0)
    tasks = rng.integers(0, 2, (20, 6)).tolist()
    lengths = rng.integers(10, 300, (20, 6)).tolist()
    a = write_profile(tmp_path / "a.jsonl", tasks, lengths=lengths)
    rows = [json.loads(line) for line in a.read_text().splitlines()]
    for row in rows:
        random.Random(row["_ng_task_index"]).shuffle(row["rollout_infos"])
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ja = compute_stats(a, settings=StatsSettings(n_bootstrap=300, seed=4)).to_json()
    jb = compute_stats(b, settings=StatsSettings(n_bootstrap=300, seed=4)).to_json()
    ja.pop("profile"), jb.pop("profile")
    assert flatten(ja).keys() == flatten(jb).keys()
    for key, value in flatten(ja).items():
        assert flatten(jb)[key] == (pytest.approx(value, abs=1e-12) if isinstance(value, float) else value), (
            key
        )


def flatten(value, prefix=""):
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{prefix}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in flatten(item, f"{prefix}/{i}").items()}
    return {prefix: value}


def test_group_by_agent_on_fan_out_golden(golden):
    r = compute_stats(
        golden / "case_fan_out" / "rollouts_reward_profiling.jsonl",
        None,
        StatsSettings(group_by="agent", n_bootstrap=0),
    )
    labels = [g.scope for g in r.groups]
    assert labels == ["agent_a", "agent_b"]
    assert sum(g.n_tasks for g in r.groups) == r.overall.n_tasks


def test_majority_and_truncation_from_rollouts(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 1, 0], [0, 0, 1]], lengths=[[10, 20, 300], [5, 6, 7]])
    rows = [
        rollout(0, 0, 1, answer="4"),
        rollout(0, 1, 1, answer="4"),
        rollout(0, 2, 0, incomplete=True),
        rollout(1, 0, 0, answer="7"),
        rollout(1, 1, 0, answer="7"),
        rollout(1, 2, 1, answer="6"),
    ]
    roll = write_rollouts(tmp_path / "rollouts.jsonl", rows)
    o = compute_stats(prof, roll, StatsSettings(answer_key="extracted_answer", n_bootstrap=0)).to_json()[
        "overall"
    ]
    # task 0: answers 4,4,None (None scores 0): maj@3 = 1; task 1: 7,7,6: maj@3 = 0
    assert o["majority_at_k"][2]["value"] == pytest.approx(0.5)
    trunc = o["reward_length"]["truncation"]
    assert trunc["n_truncated"] == 1 and trunc["rate"] == pytest.approx(1 / 6)
    assert trunc["mean_reward_truncated"] == 0.0


def test_cli_stats_json_validates_and_text_is_bounded(run_ngrp, tmp_path):
    rng = np.random.default_rng(1)
    tasks = rng.integers(0, 2, (40, 32)).tolist()
    prof = write_profile(
        tmp_path / "p.jsonl", tasks, sample=[{"difficulty": "hard" if i % 2 else "easy"} for i in range(40)]
    )
    res = run_ngrp(
        "stats", prof, "--json", "--group-by", "difficulty", "--bootstrap", "100", "--group-size", "8"
    )
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    validated(payload, "stats_result")
    assert len(payload["overall"]["pass_at_k"]) == 32 and len(payload["groups"]) == 2
    assert payload["overall"]["grpo_informative"][0]["group_size"] == 8
    text = run_ngrp("stats", prof, "--k", "1,4,16", "--bootstrap", "50")
    assert text.returncode == 0 and "pass@16" in text.stdout and "pass@2 " not in text.stdout
    assert len(text.stdout.splitlines()) < 40
    full = run_ngrp("stats", prof, "--bootstrap", "0")
    assert len(full.stdout.splitlines()) < 45  # 32 k values, but the table shows at most 8 per curve


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["--k", "one"], 2, "--k takes"),
        (["--group-size", "1"], 2, "group-size"),
        (["--answer-key", "extracted_answer"], 2, "--rollouts"),
        (["--bootstrap", "-1"], 2, "--bootstrap"),
    ],
)
def test_cli_stats_usage_errors(run_ngrp, tmp_path, args, code, needle):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0]])
    res = run_ngrp("stats", prof, *args)
    assert res.returncode == code and needle in res.stderr


def test_cli_stats_bad_input_exit_3(run_ngrp, tmp_path):
    assert run_ngrp("stats", tmp_path / "missing.jsonl").returncode == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_ng_task_index": 0, "rollout_infos": 5}\n')
    res = run_ngrp("stats", bad)
    assert res.returncode == 3 and "rollout_infos" in res.stderr
    dup = tmp_path / "dup.jsonl"
    dup.write_text((json.dumps(profile_row(0, [1])) + "\n") * 2)
    assert run_ngrp("stats", dup).returncode == 3


def test_cli_compare(run_ngrp, tmp_path):
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 0], [1, 1]])
    b = write_profile(tmp_path / "b.jsonl", [[1, 1], [0, 1]])
    res = run_ngrp("compare", a, b)
    assert res.returncode == 1 and "--intersect" in res.stderr
    res = run_ngrp("compare", a, b, "--intersect", "--json")
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    validated(payload, "compare_result")
    assert payload["n_dropped"] == 1 and payload["mean_diff"] == pytest.approx(0.5)
    text = run_ngrp("compare", a, b, "--intersect")
    assert "1 dropped by --intersect" in text.stdout and "sign-flip" in text.stdout
    assert run_ngrp("compare", a, tmp_path / "nope.jsonl").returncode == 3


def test_help_has_examples(run_ngrp):
    for name in ("stats", "compare"):
        res = run_ngrp(name, "--help")
        assert res.returncode == 0 and "Example:" in res.stdout and "Exit codes" in res.stdout


def test_rollouts_missing_from_file_are_left_out_of_majority(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 1, 0]])
    roll = write_rollouts(tmp_path / "r.jsonl", [rollout(0, 0, 1, answer="4"), rollout(0, 2, 0, answer="5")])
    r = compute_stats(prof, roll, StatsSettings(answer_key="extracted_answer", n_bootstrap=0))
    assert r.inputs["rollouts"]["profile_rollouts_not_in_file"] == 1
    # Only answers 4 (right) and 5 (wrong) are known: maj@2 is a tie -> (1 + 0) / 2; maj@3 undefined.
    maj = r.to_json()["overall"]["majority_at_k"]
    assert maj[1]["value"] == pytest.approx(0.5) and maj[2]["value"] is None
    assert any("not in the rollouts file" in note for note in r.notes)


def test_empty_profile_is_a_finding(run_ngrp, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    res = run_ngrp("stats", tmp_path / "empty.jsonl")
    assert res.returncode == 1 and "no rows" in res.stderr


def test_all_null_rewards_render_without_numbers(run_ngrp, tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[None, None]])
    res = run_ngrp("stats", prof, "--json")
    payload = json.loads(res.stdout)
    assert res.returncode == 0 and payload["overall"]["n_tasks_unscored"] == 1
    assert payload["overall"]["mean_reward"]["task_weighted"]["value"] is None
    assert run_ngrp("stats", prof).returncode == 0


def test_bootstrap_se_close_to_t_se(tmp_path):
    rng = np.random.default_rng(9)
    prof = write_profile(tmp_path / "p.jsonl", rng.integers(0, 2, (200, 4)).tolist())
    o = compute_stats(prof, settings=StatsSettings(n_bootstrap=3000, seed=1)).to_json()["overall"]
    tw = o["mean_reward"]["task_weighted"]
    # The bootstrap SE of a mean is sd * sqrt((n-1)/n) / sqrt(n): within Monte Carlo error of the t SE.
    assert tw["boot_se"] == pytest.approx(tw["se"], rel=0.06)


def test_group_by_missing_field_is_noted(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0], [0, 0]])
    r = compute_stats(prof, settings=StatsSettings(group_by="difficulty", n_bootstrap=0))
    assert [g.scope for g in r.groups] == ["(missing)"]
    assert any("'difficulty'" in note for note in r.notes)


@pytest.mark.parametrize(
    "profile",
    [
        "gym-0.7.0/case_complete/rollouts_reward_profiling.jsonl",
        "gym-0.7.0/case_masked/rollouts_reward_profiling.jsonl",
        "gym-0.7.0/case_fan_out/rollouts_reward_profiling.jsonl",
        "gym-stack/profile_reward_profiling_2rows.jsonl",
    ],
)
def test_per_task_means_match_gym_mean_reward(profile):
    path = REPO / "tests" / "golden" / profile
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    r = compute_stats(path, settings=StatsSettings(n_bootstrap=0))
    assert len(r.per_task) == len(rows)
    for ours, gym in zip(r.per_task, rows, strict=True):
        assert ours["task"] == gym["_ng_task_index"]
        assert ours["mean_reward"] == pytest.approx(gym["mean/reward"])
        scored = sum(info.get("reward") is not None for info in gym["rollout_infos"])
        assert ours["n"] == scored


def test_cli_target_width(run_ngrp, golden):
    prof = golden / "case_complete" / "rollouts_reward_profiling.jsonl"
    need = {}
    for width in ("0.2", "0.1"):
        res = run_ngrp("stats", prof, "--json", "--target-width", width)
        assert res.returncode == 0, res.stderr
        need[width] = json.loads(res.stdout)["overall"]["repeats_needed"]
        assert need[width]["target_width"] == float(width)
    # worst case p = 0.5: ceil((2 * 1.959964 * 0.5 / width)^2) = ceil(96.04) and ceil(384.15)
    assert (need["0.2"]["worst_case_binary"], need["0.1"]["worst_case_binary"]) == (97, 385)
    # halving the width needs ~4x the repeats (up to the ceiling)
    assert 4 * (need["0.2"]["typical"] - 1) < need["0.1"]["typical"] <= 4 * need["0.2"]["typical"]
    assert run_ngrp("stats", prof, "--target-width", "0").returncode == 2


def test_majority_under_a_threshold_scores_passes_like_pass_at_k(golden):
    """majority@1 is the chance one rollout is 'correct'; under --pass-threshold that is pass@1."""
    r = compute_stats(
        golden / "case_complete" / "rollouts_reward_profiling.jsonl",
        golden / "case_complete" / "rollouts.jsonl",
        StatsSettings(pass_threshold=0.5, answer_key="extracted_answer", n_bootstrap=0),
    )
    o = r.to_json()["overall"]
    assert o["pass_at_k"][0]["value"] == pytest.approx(7 / 12)
    assert o["majority_at_k"][0]["value"] == pytest.approx(7 / 12)  # was the mean reward, 6.5 / 12


def test_rollouts_file_problems_are_named(tmp_path):
    prof = write_profile(tmp_path / "p_reward_profiling.jsonl", [[1, 0, 1], [0, 1, 1]])
    rows = [rollout(t, r, [[1, 0, 1], [0, 1, 1]][t][r], answer="4") for t in range(2) for r in range(3)]
    dup = write_rollouts(tmp_path / "dup.jsonl", [*rows[:1], *rows[:1], *rows[2:]])  # (0,0) twice, (0,1) gone
    settings = StatsSettings(answer_key="extracted_answer", n_bootstrap=0)
    with pytest.raises(FindingsError, match=r"\(0, 0\) appears twice \(lines 1 and 2\)"):
        compute_stats(prof, dup, settings)
    with pytest.raises(
        InputError, match="this is a profile \\(\\*_reward_profiling.jsonl\\): pass the rollouts file"
    ):
        compute_stats(prof, prof, settings)
    good = write_rollouts(tmp_path / "r.jsonl", rows)
    notes = compute_stats(prof, good, StatsSettings(answer_key="nosuch", n_bootstrap=0)).notes
    assert any("no rollout has a value under --answer-key 'nosuch'" in note for note in notes)


@pytest.mark.parametrize("width", [float("inf"), float("nan"), 0.0])
def test_target_width_must_be_finite_and_positive(tmp_path, width):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0], [0, 1]])
    with pytest.raises(UsageError, match="--target-width"):
        compute_stats(prof, settings=StatsSettings(target_width=width, n_bootstrap=0))


def test_a_tiny_target_width_gives_no_count_instead_of_a_crash(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0], [0, 1]])
    o = compute_stats(prof, settings=StatsSettings(target_width=1e-200, n_bootstrap=0)).to_json()["overall"]
    assert o["repeats_needed"]["typical"] is None and o["repeats_needed"]["worst_case_binary"] is None


@pytest.mark.parametrize(
    ("runs", "bound"), [([[1], [0], [1]], 0.95), ([[1, 1, 1, 1], [0, 0, 0, 0]], 1 - 0.05**0.25)]
)
def test_all_fail_upper_bound_is_exact_and_never_above_1(tmp_path, runs, bound):
    """0 of n solved: the one-sided 95% bound solves (1 - p)^n = 0.05 (the rule of three's 3/n gave 3.0)."""
    prof = write_profile(tmp_path / "p.jsonl", runs)
    o = compute_stats(prof, settings=StatsSettings(n_bootstrap=0)).to_json()["overall"]
    assert o["difficulty"]["all_fail_upper_bound_95_median"] == pytest.approx(bound)


def test_one_task_gives_no_bootstrap_interval_just_as_no_t_interval(tmp_path):
    prof = write_profile(tmp_path / "p.jsonl", [[1, 0, 1]])
    mean = compute_stats(prof, settings=StatsSettings(n_bootstrap=200)).to_json()["overall"]["mean_reward"]
    task = mean["task_weighted"]
    assert task["value"] == pytest.approx(2 / 3)
    assert task["ci_low"] is None and task["boot_ci_low"] is None and task["boot_ci_high"] is None
