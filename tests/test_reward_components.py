"""Reward components (`reward_components` beside `reward`): statistics against values worked out by hand,
missing components counted and named (never zero), and the stats / compare / inspect surfaces."""

from __future__ import annotations

import json
import math

import orjson
import pytest
from agent_rows import agent_row, materialized
from stats_helpers import paired_mover_by_hand

from ngrp_lib.stats.components import component_stats, components_text, paired_components, read_components
from ngrp_lib.stats.rows import RowRule

T_975_1 = 12.706204736174698  # t quantile, 1 degree of freedom (two tasks)


def _row(task: int, rollout: int, components: dict, reward: float) -> dict:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "reward": reward,
        "reward_components": components,
    }


RUN_A = [
    _row(0, 0, {"a": 1, "b": 0}, 1),
    _row(0, 1, {"a": 0, "b": 1}, 1),
    _row(1, 0, {"a": 1, "b": 1}, 2),
    _row(1, 1, {"a": 1}, 1),  # b missing
]


def test_component_means_intervals_and_correlations_by_hand():
    summary = component_stats(read_components("", rows=RUN_A))
    a, b = summary["components"]
    # a = [1, 0 | 1, 1]: mean 3/4; cluster residuals S_t - mean*n_t = -0.5, +0.5;
    # se^2 = G/(G-1) * 0.5 / n^2 = 2 * 0.5 / 16 -> se 0.25
    assert a["name"] == "a" and a["n_rollouts"] == 4 and a["n_tasks"] == 2
    assert a["mean"] == 0.75 and a["se"] == pytest.approx(0.25)
    # a 0/1 component is a rate: bounded (the t interval 0.75 +- 12.7 * 0.25 would leave [0, 1])
    assert a["ci_method"] == "korn_graubard" and 0 <= a["ci_low"] < 0.75 < a["ci_high"] <= 1
    half = dict(RUN_A[0], reward_components={"a": 0.5})  # a fraction: the t interval, by hand
    (t_a,) = component_stats(read_components("", rows=[half, *RUN_A[1:]]))["components"][:1]
    assert t_a["ci_method"] == "t" and t_a["mean"] == 0.625
    assert t_a["ci_low"] == pytest.approx(0.625 - T_975_1 * t_a["se"])
    assert t_a["ci_high"] == pytest.approx(0.625 + T_975_1 * t_a["se"])
    # corr([1,0,1,1], [1,1,2,1]): sxy 0.25, sxx 0.75, syy 0.75 -> 1/3
    assert a["correlation_with_reward"] == pytest.approx(1 / 3)
    # b = [0, 1 | 1], rollout 1-1 lacks it: mean 2/3, residuals -1/3, +1/3: se^2 = 2 * (2/9) / 9
    assert b["n_rollouts"] == 3 and b["mean"] == pytest.approx(2 / 3)
    assert b["se"] == pytest.approx(math.sqrt(4 / 81))
    assert b["correlation_with_reward"] == pytest.approx(0.5)  # over [0,1,1] vs [1,1,2]
    assert (b["n_missing"], b["n_not_numeric"], b["missing_examples"]) == (1, 0, ["1-1"])
    assert summary["n_rows"] == summary["n_with_components"] == 4


def test_a_rare_zero_one_component_has_a_bounded_interval_as_the_headline_rates():
    """W9: 1 pass in 160 rollouts of 40 tasks. The t interval crosses 0; the component gets stats' rate
    interval (Korn-Graubard on the CR1 SE), here recomputed with scipy; an all-zero one the exact one-sided
    bound 1 - 0.05^(1/T)."""
    stats = pytest.importorskip("scipy.stats")
    rows = [
        _row(t, r, {"only_number": int(t == r == 0), "never": 0}, 0.0) for t in range(40) for r in range(4)
    ]
    rare, never = component_stats(read_components("", rows=rows))["components"]
    p, n, tasks = 1 / 160, 160, 40
    resid = [1 - 4 * p] + [-4 * p] * 39
    se = math.sqrt(tasks / (tasks - 1) * sum(x * x for x in resid)) / n
    assert rare["se"] == pytest.approx(se) and p - stats.t.ppf(0.975, tasks - 1) * se < 0  # t would cross 0
    n_eff = min(n, p * (1 - p) / se**2)
    m = 1.0  # one task carries it
    n_eff = tasks + (n_eff - tasks) * m / (m + 10 * (1 - m / tasks))
    n_eff *= (stats.norm.ppf(0.975) / stats.t.ppf(0.975, tasks - 1)) ** 2
    x = p * n_eff
    low, high = stats.beta.ppf(0.025, x, n_eff - x + 1), stats.beta.ppf(0.975, x + 1, n_eff - x)
    assert rare["ci_method"] == "korn_graubard" and rare["ci_low"] >= 0
    assert (rare["ci_low"], rare["ci_high"]) == (pytest.approx(low, rel=1e-6), pytest.approx(high, rel=1e-6))
    assert never["ci_method"] == "one_sided_upper"
    assert (never["ci_low"], never["ci_high"]) == (0.0, pytest.approx(1 - 0.05 ** (1 / tasks)))
    text = "\n".join(components_text(component_stats(read_components("", rows=rows))))
    assert "only_number: 0.006 [0.000," in text


def test_a_missing_or_non_numeric_component_is_never_zero():
    rows = [
        _row(0, 0, {"a": 1.0, "b": 1.0}, 2),
        _row(0, 1, {"a": "n/a", "b": 1.0}, 1),
        _row(1, 0, {"b": 0.5}, 0.5),
    ]
    a = component_stats(read_components("", rows=rows))["components"][0]
    assert a["mean"] == 1.0 and a["n_rollouts"] == 1, "only the one number counts; a zero would give 1/3"
    assert (a["n_missing"], a["n_not_numeric"]) == (1, 1)
    assert a["missing_examples"] == ["1-0", "0-1"]
    assert a["ci_low"] is None, "one task: no clustered interval"


def test_paired_difference_per_component_by_hand():
    run_b = [
        _row(0, 0, {"a": 1, "b": 1}, 2),
        _row(0, 1, {"a": 1, "b": 1}, 2),
        _row(1, 0, {"a": 0, "b": 0}, 0),
        _row(1, 1, {"a": 0, "b": 0}, 0),
    ]
    paired = paired_components(read_components("", rows=RUN_A), read_components("", rows=run_b))
    a, b = paired["components"]
    # a per task: A 0.5, 1.0; B 1.0, 0.0 -> diffs +0.5, -1.0: mean -0.25 (the t interval, -0.25 -+ 12.7 *
    # 0.75, would leave [-1, 1]). A 0/1 component's task means are rates: MOVER from each run's bounded
    # interval (2 rollouts a task in each run), worked with scipy
    assert a["n_tasks"] == 2 and a["diff"] == pytest.approx(-0.25)
    assert a["ci_method"] == "mover"
    low, high = paired_mover_by_hand([0.5, 1.0], [1.0, 0.0], [2, 2], [2, 2])
    assert (a["ci_low"], a["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert -1 <= a["ci_low"] < -0.25 < a["ci_high"] <= 1
    assert (a["mean_a"], a["mean_b"]) == (0.75, 0.5)
    # b per task: A 0.5, 1.0 (1-1 lacks it: task 1's mean is over 1-0 alone); B 1.0, 0.0
    assert b["diff"] == pytest.approx(-0.25)
    low, high = paired_mover_by_hand([0.5, 1.0], [1.0, 0.0], [2, 1], [2, 2])
    assert (b["ci_low"], b["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    # a fractional component: the t interval over tasks; every task's difference the same: the exact bound
    fractional = [dict(r, reward_components={"a": 0.5 * r["reward_components"]["a"]}) for r in run_b]
    f, only_a = paired_components(read_components("", rows=RUN_A), read_components("", rows=fractional))[
        "components"
    ]
    # B's task means 0.5, 0.0 against A's 0.5, 1.0: diffs 0, -1, mean -0.5, se 0.5
    assert f["ci_method"] == "t" and f["diff"] == pytest.approx(-0.5)
    assert (f["ci_low"], f["ci_high"]) == (
        pytest.approx(-0.5 - T_975_1 * 0.5),
        pytest.approx(-0.5 + T_975_1 * 0.5),
    )
    assert (only_a["name"], only_a["n_tasks"], only_a["only_a"]) == ("b", 0, 2), "a component B never has"
    (same,) = paired_components(read_components("", rows=run_b), read_components("", rows=run_b))[
        "components"
    ][:1]
    assert same["ci_method"] == "constant_difference" and same["diff"] == 0
    assert (same["ci_low"], same["ci_high"]) == (
        pytest.approx(-(1 - 0.05**0.5)),
        pytest.approx(1 - 0.05**0.5),
    )


def test_stats_with_rollouts_reports_each_component(components_run, run_ngrp):
    rows = [orjson.loads(line) for line in (components_run / "rollouts.jsonl").read_bytes().splitlines()]
    res = run_ngrp(
        "stats", str(components_run / "rollouts_reward_profiling.jsonl"),
        "--rollouts", str(components_run / "rollouts.jsonl"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    found = {c["name"]: c for c in json.loads(res.stdout)["reward_components"]["components"]}
    fmt = [r["reward_components"]["format"] for r in rows if "format" in r["reward_components"]]
    assert found["format"]["mean"] == pytest.approx(sum(fmt) / len(fmt)) and len(fmt) == 15
    assert found["format"]["missing_examples"] == ["2-1"] and found["correctness"]["n_missing"] == 0
    text = run_ngrp(
        "stats",
        str(components_run / "rollouts_reward_profiling.jsonl"),
        "--rollouts",
        str(components_run / "rollouts.jsonl"),
    ).stdout
    assert "format:" in text and "MISSING in 1 row(s), e.g. 2-1 (not counted as 0)" in text


def test_compare_finds_rollouts_beside_profiles(components_run, run_ngrp, tmp_path):
    res = run_ngrp(
        "compare", str(components_run / "rollouts_reward_profiling.jsonl"),
        str(components_run / "rollouts_reward_profiling.jsonl"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    comps = json.loads(res.stdout)["reward_components"]["components"]
    assert [c["name"] for c in comps] == ["correctness", "format"]
    assert all(c["diff"] == 0 and c["n_tasks"] == 4 for c in comps)


def test_inspect_shows_components_per_rollout(tmp_path, run_ngrp):
    folder = tmp_path / "one"
    folder.mkdir()
    row = agent_row(0, 0, components={"correctness": 1.0, "format": 0.0})
    (folder / "rollouts.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    (folder / "rollouts_materialized_inputs.jsonl").write_bytes(orjson.dumps(materialized(0, 0)) + b"\n")
    line = json.loads(run_ngrp("inspect", str(folder / "rollouts.jsonl"), "--json").stdout)
    assert line["reward_components"] == {"correctness": 1.0, "format": 0.0}
    assert "reward_components" not in line["verifier"]
    text = run_ngrp("inspect", str(folder / "rollouts.jsonl")).stdout
    assert "components correctness=1  format=0" in text


def test_profile_adds_per_task_component_means_after_gyms_keys(components_run):
    rows = [orjson.loads(line) for line in (components_run / "rollouts.jsonl").read_bytes().splitlines()]
    profile = [
        orjson.loads(line)
        for line in (components_run / "rollouts_reward_profiling.jsonl").read_bytes().splitlines()
    ]
    for prow in profile:
        task = prow["_ng_task_index"]
        mine = [r["reward_components"] for r in rows if r["_ng_task_index"] == task]
        for name in ("correctness", "format"):
            values = [c[name] for c in mine if name in c]
            assert prow[f"ngrp/component_mean/{name}"] == pytest.approx(sum(values) / len(values))
            assert prow[f"ngrp/component_n/{name}"] == len(values)
        missing = prow.get("ngrp/component_missing/format")
        assert missing == (1 if task == 2 else None), "missing counted, never a zero"
        keys = list(prow)
        assert keys.index("ngrp/pass_threshold") < keys.index("ngrp/component_mean/correctness")
        gym_keys = [k for k in keys if not k.startswith("ngrp/")]
        assert keys[: len(gym_keys)] == gym_keys, "Gym's keys first and unchanged"


# Issue 35: which rows count is stats.rows' one rule; a missing component counts wherever it falls.


def test_a_component_missing_before_its_first_appearance_is_counted_missing():
    # rows {a:1}, {a:1,b:1}, {a:0,b:0}, {a:0}: b is missing in rows 1 and 4 (2 rows), not 1
    rows = [
        _row(0, 0, {"a": 1}, 1),
        _row(0, 1, {"a": 1, "b": 1}, 1),
        _row(1, 0, {"a": 0, "b": 0}, 0),
        _row(1, 1, {"a": 0}, 0),
    ]
    b = component_stats(read_components("", rows=rows))["components"][1]
    assert b["name"] == "b" and b["n_rollouts"] == 2 and b["mean"] == 0.5
    assert (b["n_missing"], b["missing_examples"]) == (2, ["0-0", "1-1"])


def test_a_component_one_task_never_carries_is_missing_in_its_rows():
    rows = [_row(0, r, {"a": 1}, 1) for r in range(3)] + [_row(1, r, {"a": 0, "b": 1}, 0) for r in range(3)]
    b = component_stats(read_components("", rows=rows))["components"][1]
    assert (b["n_missing"], b["n_rollouts"], b["n_tasks"]) == (3, 3, 1)


def _masked_run() -> list[dict]:
    """4 tasks x 4; rollout 3 of every task masked, its component 100; the 12 unmasked rows carry c =
    reward, 4 of them 1 (mean 1/3). Counting the masked rows gives (4 + 400) / 16 = 25.25."""
    rows = []
    for t in range(4):
        for r in range(4):
            if r == 3:
                row = _row(t, r, {"c": 100}, 1)
                row["mask_sample"] = True
            else:
                reward = 1 if r == 0 else 0
                row = _row(t, r, {"c": reward}, reward)
            rows.append(row)
    return rows


def test_masked_rows_are_out_of_component_statistics_and_counted():
    summary = component_stats(read_components("", rows=_masked_run()))
    c = summary["components"][0]
    assert c["mean"] == pytest.approx(1 / 3) and c["n_rollouts"] == 12, "not 25.25 over 16"
    assert c["se"] == 0.0 and c["n_missing"] == 0  # every task's mean is 1/3: no between-task spread
    assert (summary["n_rows"], summary["n_masked"], summary["n_with_components"]) == (16, 4, 12)
    assert "left out, as from every other estimate: 4 masked row(s)" in "\n".join(components_text(summary))


def test_compare_leaves_masked_rows_out_of_component_differences():
    clean = [row for row in _masked_run() if not row.get("mask_sample")]
    paired = paired_components(read_components("", rows=_masked_run()), read_components("", rows=clean))
    (c,) = paired["components"]
    assert c["diff"] == 0.0 and c["mean_a"] == pytest.approx(1 / 3), "not 25.25 - 1/3"


def test_an_adaptive_runs_components_use_its_first_round():
    # R = 2: rollouts 0-1 of every task; later rounds (indices 2..) went to unsettled tasks only.
    # task 0: first round c = 1, 0; later 0, 0, 0, 0. task 1: first round 1, 1 (settled).
    # first round: mean (1 + 0 + 1 + 1) / 4 = 0.75; over every round it would be 3/8 = 0.375
    rows = [_row(0, r, {"c": v}, v) for r, v in enumerate([1, 0, 0, 0, 0, 0])]
    rows += [_row(1, r, {"c": 1}, 1) for r in range(2)]
    summary = component_stats(read_components("", rows=rows, rule=RowRule(first_round=2)))
    c = summary["components"][0]
    assert c["mean"] == 0.75 and c["n_rollouts"] == 4 and summary["n_later_round"] == 4
    assert component_stats(read_components("", rows=rows))["components"][0]["mean"] == 0.375


def test_stats_and_compare_read_the_rule_from_the_runs_files(tmp_path, run_ngrp):
    from ngrp_lib.artifacts.names import manifest_path_for
    from ngrp_lib.commands.compare import paired_components_of
    from ngrp_lib.commands.stats import components_of

    masked = tmp_path / "masked.jsonl"
    masked.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _masked_run()))
    assert components_of(masked)["components"][0]["mean"] == pytest.approx(1 / 3)
    adaptive = tmp_path / "adaptive" / "rollouts.jsonl"
    adaptive.parent.mkdir()
    rows = [_row(0, r, {"c": v}, v) for r, v in enumerate([1, 0, 0, 0])] + [_row(1, 0, {"c": 1}, 1)]
    rows.append(_row(1, 1, {"c": 1}, 1))
    adaptive.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    block = {"rule": "learnable", "first_round": 2}
    manifest_path_for(adaptive).write_text(
        json.dumps({"identity": {"adaptive": block, "materialize": {"num_repeats": 8}}, "adaptive": {}})
    )
    found = components_of(adaptive)
    assert found["components"][0]["mean"] == 0.75 and found["n_later_round"] == 2
    paired = paired_components_of(masked, adaptive)["components"][0]
    # per task: A (masked run) 1/3 each; B first round 0.5 (task 0), 1.0 (task 1)
    assert paired["diff"] == pytest.approx(((0.5 - 1 / 3) + (1 - 1 / 3)) / 2)


def test_rows_left_out_as_unhealthy_leave_the_components_as_masked_rows_do():
    from ngrp_lib.artifacts.names import pack_key

    # run A without its masked rows; rollout 0 of task 0 (c = 1) excluded as unhealthy: 3 ones in 11
    rows = [row for row in _masked_run() if not row.get("mask_sample")]
    summary = component_stats(
        read_components("", rows=rows, rule=RowRule(excluded=frozenset({pack_key((0, 0))})))
    )
    c = summary["components"][0]
    assert c["mean"] == pytest.approx(3 / 11) and c["n_rollouts"] == 11 and summary["n_masked"] == 1
