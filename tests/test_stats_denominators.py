"""What the numbers stand on (issue 28): the denominators block of stats and compare on a partial run, the
few-task note in both, and every interval naming its method from the one registry (stats.methods)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from stats_helpers import profile_row

from ngrp_lib.artifacts import schemas
from ngrp_lib.stats import methods
from ngrp_lib.stats.compare import CompareOptions, compare_profiles
from ngrp_lib.stats.summary import StatsSettings, compute_stats


def _partial_profile(path, tasks: int = 20, expected: int = 8, seed: int = 0, drop: int = 3):
    """`tasks` rows that expect `expected` rollouts each; task 1 has no scored rollout (null rewards) and
    every third task lost `drop` of its rollouts."""
    rng = np.random.default_rng(seed)
    lines = []
    for t in range(tasks):
        n = expected - (drop if t % 3 == 0 else 0)
        rewards: list = [int(x) for x in rng.binomial(1, 0.4, n)]
        if t == 1:
            rewards = [None] * n
        row = profile_row(t, rewards)
        row["expected_num_rollouts"] = expected
        row["missing_num_rollouts"] = expected - n
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_stats_states_expected_completed_missing_and_unscored(tmp_path):
    prof = _partial_profile(tmp_path / "p_reward_profiling.jsonl")
    r = compute_stats(prof, settings=StatsSettings(n_bootstrap=0))
    d = r.to_json()["denominators"]
    # independent count: 20 x 8 expected, 7 tasks (0, 3, ..., 18) lost 3 each
    assert d["expected_rollouts"] == 160 and d["completed_rollouts"] == 160 - 21
    assert d["missing_rollouts"] == 21 and d["completion_pct"] == pytest.approx(100 * 139 / 160)
    assert d["scored_rollouts"] == 139 - 8 and d["tasks_unscored"] == 1 and d["unscored"] == ["task 1"]
    schemas.validator("stats_result").validate(r.to_json())
    partial = next(n for n in r.notes if n.startswith("partial run"))
    assert "139 of 160 expected rollouts completed (86.9%), 21 missing" in partial
    assert any("1 task(s) with no scored rollout" in n and "task 1" in n for n in r.notes)


def test_a_complete_run_says_nothing_but_keeps_the_block(tmp_path):
    prof = _partial_profile(tmp_path / "p_reward_profiling.jsonl", drop=0)
    prof.write_text(prof.read_text().replace('"reward": null', '"reward": 1'))
    r = compute_stats(prof, settings=StatsSettings(n_bootstrap=0))
    assert r.denominators.completion_pct == 100.0 and r.denominators.missing_rollouts == 0
    assert not any(n.startswith("partial run") or "no scored rollout" in n for n in r.notes)


def test_stats_and_compare_text_and_json_carry_it(run_ngrp, tmp_path):
    a = _partial_profile(tmp_path / "a_reward_profiling.jsonl", seed=1)
    b = _partial_profile(tmp_path / "b_reward_profiling.jsonl", seed=2, drop=1)
    text = run_ngrp("stats", a, "--bootstrap", "0")
    assert "note: partial run: 139 of 160 expected rollouts completed (86.9%), 21 missing" in text.stdout
    assert "with no scored rollout, left out of every estimate: task 1" in text.stdout
    cmp_text = run_ngrp("compare", a, b, "--bootstrap", "0")
    assert "profile A: partial run: 139 of 160" in cmp_text.stdout
    assert (
        "profile B: partial run: 153 of 160 expected rollouts completed (95.6%), 7 missing" in cmp_text.stdout
    )
    payload = json.loads(run_ngrp("compare", a, b, "--bootstrap", "0", "--json").stdout)
    schemas.validator("compare_result").validate(payload)
    assert payload["denominators"]["b"]["missing_rollouts"] == 7
    assert payload["denominators"]["a"]["unscored"] == ["task 1"]


def test_a_profile_without_expected_counts_has_null_completion(tmp_path):
    from stats_helpers import write_profile

    r = compute_stats(
        write_profile(tmp_path / "p.jsonl", [[1, 0, 1]] * 12), settings=StatsSettings(n_bootstrap=0)
    )
    d = r.denominators
    assert d.expected_rollouts is None and d.completion_pct is None and d.completed_rollouts == 36
    assert not d.partial


def test_compare_gives_the_few_task_note_stats_gives(tmp_path):
    a = _partial_profile(tmp_path / "a_reward_profiling.jsonl", tasks=6, seed=3, drop=0)
    b = _partial_profile(tmp_path / "b_reward_profiling.jsonl", tasks=6, seed=4, drop=0)
    r = compare_profiles(a, b, CompareOptions(n_bootstrap=0))
    assert any(n.startswith("few tasks behind the comparison (5 paired tasks)") for n in r.notes)
    s = compute_stats(a, settings=StatsSettings(n_bootstrap=0))
    assert any(n.startswith("few tasks behind every estimate (5 tasks)") for n in s.notes)
    many = _partial_profile(tmp_path / "c_reward_profiling.jsonl", tasks=12, seed=5, drop=0)
    assert not any(
        n.startswith("few tasks") for n in compare_profiles(many, many, CompareOptions(n_bootstrap=0)).notes
    )


def _methods_in(node, key: str = "ci_method"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _methods_in(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _methods_in(v, key)


def _with_lengths(path, tasks: int = 15):
    rng = np.random.default_rng(7)
    lines = []
    for t in range(tasks):
        rewards = [int(x) for x in rng.binomial(1, 0.5, 6)]
        lines.append(json.dumps(profile_row(t, rewards, lengths=[int(x) for x in rng.integers(50, 500, 6)],
                                            sample={"level": "easy" if t % 2 else "hard"})))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_interval_names_a_registered_method(run_ngrp, tmp_path):
    prof = _with_lengths(tmp_path / "p_reward_profiling.jsonl")
    stats = json.loads(run_ngrp("stats", prof, "--group-by", "level", "--bootstrap", "50", "--json").stdout)
    found = set(_methods_in(stats))
    assert found and found <= set(methods.HEADLINE) | {None}
    gap = stats["overall"]["reward_length"]["correct_minus_incorrect_length"]
    assert gap["ci_method"] == methods.T
    cmp = json.loads(run_ngrp("compare", prof, prof, "--bootstrap", "50", "--json").stdout)
    # the same profile twice: every task's difference is 0, so no t width: the constant-difference bound
    assert cmp["ci_method"] == methods.CONSTANT_DIFFERENCE and cmp["boot_ci_method"] == methods.BOOTSTRAP
    assert {e["ci_method"] for e in cmp["pass_at_k"] + cmp["pass_hat_k"]} == {methods.CONSTANT_DIFFERENCE}
    assert all(m in methods.METHODS for m in _methods_in(cmp) if m is not None)


def test_text_intervals_carry_their_tags(run_ngrp, tmp_path):
    prof = _with_lengths(tmp_path / "p_reward_profiling.jsonl")
    out = run_ngrp("stats", prof, "--group-by", "level", "--bootstrap", "50").stdout
    group_lines = [line for line in out.splitlines() if line.startswith(("  easy", "  hard"))]
    assert len(group_lines) == 2 and all(" mean " in g and " KG [" in g for g in group_lines)
    difficulty = next(line for line in out.splitlines() if line.startswith("  difficulty:"))
    assert difficulty.count("KG [") + difficulty.count("upper [") + difficulty.count("lower [") == 3
    assert "correct - incorrect length" in out and "t [" in out.split("correct - incorrect length")[1]
    for m in (methods.KORN_GRAUBARD, methods.T, methods.BOOTSTRAP):
        assert (
            methods.METHODS[m].tag in out.splitlines()[-1]
            and methods.METHODS[m].label in out.splitlines()[-1]
        )


def test_the_schemas_list_the_registrys_headline_methods():
    enums = set()
    for node in _schema_nodes(schemas.load("stats_result"), "ci_method"):
        enums |= {e for e in node.get("enum", []) if e is not None}
    assert enums == set(methods.HEADLINE) | set(methods.DIFFERENCES)
    enums = set()
    for node in _schema_nodes(schemas.load("compare_result"), "ci_method"):
        enums |= {e for e in node.get("enum", []) if e is not None}
    assert enums == set(methods.DIFFERENCES)


def _schema_nodes(node, key):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict):
                yield v
            yield from _schema_nodes(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _schema_nodes(v, key)


def test_curriculum_carries_the_same_block(run_ngrp, tmp_path):
    prof = _partial_profile(tmp_path / "p_reward_profiling.jsonl")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"q": f"task {t}"}) + "\n" for t in range(20)))
    text = run_ngrp("curriculum", prof, "--tasks", tasks, "-o", tmp_path / "band.jsonl", "--min", "0.1")
    assert "note: partial run: 139 of 160 expected rollouts completed (86.9%), 21 missing" in text.stdout
    payload = json.loads(
        run_ngrp(
            "curriculum", prof, "--tasks", tasks, "-o", tmp_path / "b2.jsonl", "--min", "0.1", "--json"
        ).stdout
    )
    schemas.validator("curriculum_result").validate(payload)
    assert payload["denominators"]["missing_rollouts"] == 21 and payload["denominators"]["unscored"] == [
        "task 1"
    ]


def _masked_partial_run(folder, run_ngrp):
    """40 tasks x 8 (320 expected): tasks 0-9 return nothing (no profile row), tasks 10-19 lose 3 rollouts
    each (30), tasks 20-29 have rollout 7 masked (10), tasks 30-39 a null reward at rollout 6 (10)."""
    from run_helpers import write_run

    drop = tuple((t, r) for t in range(10) for r in range(8))
    drop += tuple((t, r) for t in range(10, 20) for r in range(3))
    write_run(folder, tasks=40, repeats=8, drop=drop)
    path = folder / "rollouts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        t, r = row["_ng_task_index"], row["_ng_rollout_index"]
        if 20 <= t < 30 and r == 7:
            row["mask_sample"] = True
        if t >= 30 and r == 6:
            row["reward"] = None
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_ngrp("profile", "--allow-partial", "--inputs", folder / "rollouts_materialized_inputs.jsonl",
                    "--rollouts", path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "rollouts_reward_profiling.jsonl"


def test_masked_null_and_missing_rows_each_count_once(run_ngrp, tmp_path):
    # by hand: expected 40 x 8 = 320; completed 320 - 80 (tasks 0-9) - 30 = 210, masked ones included;
    # missing 320 - 210 = 110; masked 10; scored 210 - 10 masked - 10 null = 190; share 210/320 = 65.625%.
    # (Before issue 35 one masked rollout made the summary unused: expected 230, missing 30, no note.)
    prof = _masked_partial_run(tmp_path / "run", run_ngrp)
    d = compute_stats(prof, settings=StatsSettings(n_bootstrap=0)).to_json()["denominators"]
    assert (d["expected_rollouts"], d["completed_rollouts"], d["missing_rollouts"]) == (320, 210, 110)
    assert (d["masked_rollouts"], d["scored_rollouts"], d["tasks_without_rows"]) == (10, 190, 10)
    assert d["completion_pct"] == pytest.approx(65.625)
    text = run_ngrp("stats", prof).stdout
    assert "210 of 320 expected rollouts completed (65.6%), 110 missing" in text
    assert "10 masked rollout(s)" in text
    both = json.loads(run_ngrp("compare", prof, prof, "--json").stdout)["denominators"]
    assert (
        both["a"] == both["b"] and both["a"]["missing_rollouts"] == 110 and both["a"]["masked_rollouts"] == 10
    )


def test_without_the_summary_the_rows_stand_and_masked_is_unknown(run_ngrp, tmp_path):
    prof = _masked_partial_run(tmp_path / "run", run_ngrp)
    (tmp_path / "run" / "rollouts_profile_summary.json").unlink()
    d = compute_stats(prof, settings=StatsSettings(n_bootstrap=0)).to_json()["denominators"]
    # the rows: 30 rows; expected 10 x 8 + 10 x 7 (masked left out by Gym) + 10 x 8 = 230, listed 200
    assert (d["expected_rollouts"], d["completed_rollouts"], d["missing_rollouts"]) == (230, 200, 30)
    assert d["masked_rollouts"] is None and d["tasks_without_rows"] is None
