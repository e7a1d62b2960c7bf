"""Issue 36 #14: which reward component drags? `stats --rollouts R` differences two components of one
run, X - Y per rollout, with a task-clustered interval (MOVER for 0/1 components, t for others, an exact
bound when every difference is the same); checked by hand, with scipy's quantiles, and against
statsmodels' cluster-robust OLS (an independent implementation)."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
from stats_helpers import carrying_by_hand, clustered_mover_by_hand, korn_graubard_scipy

from ngrp_lib.artifacts import schemas
from ngrp_lib.errors import UsageError
from ngrp_lib.stats.components import component_pairs, component_stats, components_text, read_components

T_975_1 = 12.706204736174698  # t quantile, 1 degree of freedom (two tasks)


def _row(task: int, rollout: int, components: dict) -> dict:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "reward": 1,
        "reward_components": components,
    }


def test_difference_by_hand():
    rows = [
        _row(0, 0, {"fmt": 1, "ok": 0}),
        _row(0, 1, {"fmt": 1, "ok": 1}),
        _row(1, 0, {"fmt": 1, "ok": 0}),
        _row(1, 1, {"fmt": 1}),  # ok missing: the pair leaves this rollout out, never a 0
    ]
    (d,) = component_stats(read_components("", rows=rows))["differences"]
    # fmt - ok = [1, 0 | 1]: mean 2/3; cluster residuals S_t - mean*n_t = 1 - 4/3, 1 - 2/3 = -1/3, +1/3
    # se^2 = G/(G-1) * (1/9 + 1/9) / n^2 = 2 * (2/9) / 9
    assert (d["a"], d["b"], d["n_rollouts"], d["n_tasks"], d["n_lacking"]) == ("fmt", "ok", 3, 2, 1)
    assert d["mean"] == pytest.approx(2 / 3) and d["se"] == pytest.approx(math.sqrt(4 / 81))
    # both 0/1: MOVER. fmt is 1 on every row: its interval is the one-sided [0.05^(1/2), 1] and its SE 0, so
    # r = 0; ok = [0, 1 | 0] has the Korn-Graubard interval (se 2/9, 2 tasks). The t interval, 2/3 -+ 12.7 *
    # 2/9, would leave [-1, 1] on both sides.
    ok = korn_graubard_scipy(1 / 3, 2 / 9, 2, 3, carrying_by_hand([0.5, 0.0], 1 / 3))
    fmt = (0.05**0.5, 1.0)
    low, high = 2 / 3 - math.hypot(1 - fmt[0], ok[1] - 1 / 3), 2 / 3 + math.hypot(0.0, 1 / 3 - ok[0])
    assert d["ci_method"] == "mover"
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(max(-1, low)), pytest.approx(min(1, high)))
    assert -1 <= d["ci_low"] < 2 / 3 - T_975_1 * 2 / 9 + 10 and d["ci_high"] <= 1


def _cluster_rows(seed: int, draw):
    rng = np.random.default_rng(seed)
    rows, tasks, xs, ys = [], [], [], []
    for task in range(40):
        hard = rng.random()
        for r in range(int(rng.integers(2, 9))):  # unequal cluster sizes
            x, y = draw(rng, hard)
            rows.append(_row(task, r, {"format": x, "correct": y}))
            tasks.append(task)
            xs.append(x)
            ys.append(y)
    return rows, tasks, xs, ys


def _ols(sm, values, tasks):
    return sm.OLS(np.array(values), np.ones(len(values))).fit(
        cov_type="cluster", cov_kwds={"groups": np.array(tasks)}, use_t=True
    )


def test_difference_matches_statsmodels_cluster_robust_ols():
    """Fractional components: the CR1 t interval, equal to statsmodels' cluster-robust OLS on a constant."""
    sm = pytest.importorskip("statsmodels.api")
    rows, tasks, xs, ys = _cluster_rows(
        4, lambda rng, hard: (0.5 + 0.5 * rng.random(), rng.random() * (1 - hard))
    )
    diffs = [x - y for x, y in zip(xs, ys, strict=True)]
    (d,) = component_stats(read_components("", rows=rows))["differences"]
    fit = _ols(sm, diffs, tasks)
    low, high = fit.conf_int(0.05)[0]
    assert d["mean"] == pytest.approx(fit.params[0])
    assert d["se"] == pytest.approx(fit.bse[0], rel=1e-9)
    assert d["ci_method"] == "t"
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert d["n_tasks"] == 40 and d["n_rollouts"] == len(diffs)


def test_zero_one_difference_is_mover_from_the_components_intervals():
    """0/1 components: MOVER from the two components' bounded intervals (the ones stats prints beside the
    difference) and the correlation of their means. The SE is statsmodels' cluster-robust one, and so
    are the three variances the correlation stands on: var(X - Y) = var(X) + var(Y) - 2 cov."""
    sm = pytest.importorskip("statsmodels.api")
    rows, tasks, xs, ys = _cluster_rows(
        4, lambda rng, hard: (float(rng.random() < 0.9), float(rng.random() < 1 - hard))
    )
    diffs = [x - y for x, y in zip(xs, ys, strict=True)]
    summary = component_stats(read_components("", rows=rows))
    (d,) = summary["differences"]
    fmt, correct = summary["components"]
    assert d["se"] == pytest.approx(_ols(sm, diffs, tasks).bse[0], rel=1e-9)
    vx, vy, vd = (_ols(sm, v, tasks).bse[0] ** 2 for v in (xs, ys, diffs))
    r = (vx + vy - vd) / 2 / np.sqrt(vx * vy)
    mx, my = np.mean(xs), np.mean(ys)
    bx, by = (fmt["ci_low"], fmt["ci_high"]), (correct["ci_low"], correct["ci_high"])
    low = mx - my - np.sqrt((mx - bx[0]) ** 2 + (by[1] - my) ** 2 - 2 * r * (mx - bx[0]) * (by[1] - my))
    high = mx - my + np.sqrt((bx[1] - mx) ** 2 + (my - by[0]) ** 2 - 2 * r * (bx[1] - mx) * (my - by[0]))
    assert d["ci_method"] == "mover" and fmt["ci_method"] == correct["ci_method"] == "korn_graubard"
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert (d["ci_low"], d["ci_high"]) == pytest.approx(clustered_mover_by_hand(tasks, xs, ys), rel=1e-6)


def test_every_difference_the_same_is_never_a_zero_width_interval():
    """Replay 2026-12-05 W5: Gym's multi-reward example rows, correctness 1 and format 0 on 5 rollouts of 5
    tasks: t gave +1.000 [+1.000, +1.000]. Each mean alone is bounded (correctness [0.05^(1/5), 1], format
    [0, 1 - 0.05^(1/5)]); the difference is bounded as they are: [2 * 0.05^(1/5) - 1, 1], the lower end
    exactly correctness's lower bound minus format's upper one."""
    rows = [_row(t, 0, {"correctness": 1, "format": 0}) for t in range(5)]
    summary = component_stats(read_components("", rows=rows))
    (d,) = summary["differences"]
    correct, fmt = summary["components"]
    q = 0.05 ** (1 / 5)
    assert (correct["ci_low"], fmt["ci_high"]) == (pytest.approx(q), pytest.approx(1 - q))
    assert d["mean"] == 1 and d["ci_method"] == "constant_difference"
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(2 * q - 1), 1.0)
    assert d["ci_low"] == pytest.approx(correct["ci_low"] - fmt["ci_high"])
    text = "\n".join(components_text(summary))
    assert (
        "correctness - format: +1.000 const [+0.099, +1.000], n 5 rollouts / 5 tasks; format is lower" in text
    )
    same = component_stats(read_components("", rows=[_row(t, 0, {"a": t % 2, "b": t % 2}) for t in range(5)]))
    (tie,) = same["differences"]
    assert (tie["ci_low"], tie["ci_high"]) == (pytest.approx(-(1 - q)), pytest.approx(1 - q))
    assert "no difference detectable" in "\n".join(components_text(same))


def test_pairs_default_and_asked():
    rows = [_row(0, 0, {"a": 1, "b": 0, "c": 1}), _row(1, 0, {"a": 0, "b": 0, "c": 1})]
    found = read_components("", rows=rows)
    assert component_pairs(found) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert component_pairs(found, [("c", "a")]) == [("c", "a")]
    with pytest.raises(UsageError, match="no reward component 'z'.*components: a, b, c"):
        component_pairs(found, [("a", "z")])
    with pytest.raises(UsageError, match="two different"):
        component_pairs(found, [("a", "a")])
    many = read_components("", rows=[_row(0, 0, {k: 1 for k in "abcde"})])
    assert component_pairs(many) == [], "five components: 10 pairs only when asked"


def test_stats_cli_component_diff(components_run, run_ngrp):
    profile, rollouts = components_run / "rollouts_reward_profiling.jsonl", components_run / "rollouts.jsonl"
    rows = [orjson.loads(line) for line in rollouts.read_bytes().splitlines()]
    args = ["stats", str(profile), "--rollouts", str(rollouts)]
    res = run_ngrp(*args, "--component-diff", "correctness", "format", "--json")
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    schemas.validator("stats_result").validate(payload)
    (d,) = payload["reward_components"]["differences"]
    both = [r["reward_components"] for r in rows if "format" in r["reward_components"]]
    assert d["n_rollouts"] == len(both) == 15 and d["n_lacking"] == 1
    assert d["mean"] == pytest.approx(sum(c["correctness"] - c["format"] for c in both) / len(both))
    text = run_ngrp(*args).stdout  # two components: their pair without being asked
    assert "paired differences between components" in text and "correctness - format:" in text
    bad = run_ngrp(*args, "--component-diff", "correctness", "nope")
    assert bad.returncode == 2 and "no reward component 'nope'" in bad.stderr
    no_rollouts = run_ngrp("stats", str(profile), "--component-diff", "a", "b")
    assert no_rollouts.returncode == 2 and "--rollouts" in no_rollouts.stderr
