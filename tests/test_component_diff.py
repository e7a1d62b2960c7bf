"""Issue 36 #14: which reward component drags? `stats --rollouts R` differences two components of one
run, X - Y per rollout, with a task-clustered interval; checked by hand and against statsmodels'
cluster-robust OLS (an independent implementation)."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest

from ngrp_lib.artifacts import schemas
from ngrp_lib.errors import UsageError
from ngrp_lib.stats.components import component_pairs, component_stats, read_components

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
    assert d["ci_low"] == pytest.approx(2 / 3 - T_975_1 * 2 / 9)
    assert d["ci_method"] == "t"


def test_difference_matches_statsmodels_cluster_robust_ols():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(4)
    rows, tasks, diffs = [], [], []
    for task in range(40):
        hard = rng.random()
        for r in range(int(rng.integers(2, 9))):  # unequal cluster sizes
            x = float(rng.random() < 0.9)
            y = float(rng.random() < 1 - hard)
            rows.append(_row(task, r, {"format": x, "correct": y}))
            tasks.append(task)
            diffs.append(x - y)
    (d,) = component_stats(read_components("", rows=rows))["differences"]
    fit = sm.OLS(np.array(diffs), np.ones(len(diffs))).fit(
        cov_type="cluster", cov_kwds={"groups": np.array(tasks)}, use_t=True
    )
    low, high = fit.conf_int(0.05)[0]
    assert d["mean"] == pytest.approx(fit.params[0])
    assert d["se"] == pytest.approx(fit.bse[0], rel=1e-9)
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert d["n_tasks"] == 40 and d["n_rollouts"] == len(diffs)


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
