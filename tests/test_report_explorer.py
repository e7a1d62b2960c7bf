"""The report's offline explorer: task table and example rollouts (a pass and a fail where both exist),
texts cut to a budget, its size stated, run text escaped; and `--examples` through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import validated
from run_helpers import SCRIPT, reward_of, write_run

from ngrp_lib.report.explorer import MIN_CHARS, TEXT_BUDGET, _budget, build_explorer, rollouts_beside

REPO = Path(__file__).resolve().parents[1]
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    rollouts, _ = write_run(tmp_path_factory.mktemp("explore"), tasks=10, repeats=4, script_task=3)
    return rollouts


def cards(html: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for task, rollout in re.findall(r'data-rollout-id="(\d+)-(\d+)"', html):
        found.setdefault(int(task), []).append(f"{task}-{rollout}")
    return found


def test_examples_are_a_pass_and_a_fail_where_both_exist(run):
    ex = build_explorer(run, threshold=1.0, examples=2)
    html = str(ex.html)
    shown = cards(html)
    assert ex.n_tasks == 10 and ex.n_examples == sum(len(v) for v in shown.values()) == 20
    for task, ids in shown.items():
        rewards = [reward_of(task, int(i.split("-")[1])) for i in ids]
        if 0 < sum(reward_of(task, r) for r in range(4)) < 4:
            assert sorted(rewards) == [0.0, 1.0], (task, ids)
            first_pass = min(r for r in range(4) if reward_of(task, r) == 1.0)
            first_fail = min(r for r in range(4) if reward_of(task, r) == 0.0)
            assert sorted(ids) == sorted([f"{task}-{first_pass}", f"{task}-{first_fail}"])
        else:
            assert ids == [f"{task}-0", f"{task}-1"], "one band: the first two rollouts"
    assert html.count("data-task-index=") == 10
    assert "ngrp view " + str(run) in html and "KB of the page" in html


def test_run_text_is_escaped(run):
    html = str(build_explorer(run, threshold=1.0).html)
    assert "&lt;script&gt;window.__pwned" in html and "<script" not in html


def test_examples_zero_keeps_the_table_only(run):
    ex = build_explorer(run, threshold=1.0, examples=0)
    assert ex.n_examples == 0 and not cards(str(ex.html)) and str(ex.html).count("data-task-index=") == 10


def test_budget_cuts_texts_then_examples():
    assert _budget(10) == (1200, None)
    assert _budget(1000) == (TEXT_BUDGET // 3000, None)  # 333 characters a text
    per, fit = _budget(200_000)
    assert per == MIN_CHARS and fit == TEXT_BUDGET // (3 * MIN_CHARS)


def test_many_tasks_stay_small(tmp_path):
    rollouts, _ = write_run(tmp_path, tasks=3000, repeats=2)
    ex = build_explorer(rollouts, threshold=1.0, examples=2)
    assert ex.n_examples == TEXT_BUDGET // (3 * MIN_CHARS) and ex.n_tasks_with_examples < ex.n_tasks
    assert ex.bytes < 4_000_000, ex.bytes
    assert "examples for the first" in str(ex.html)


def test_rollouts_beside_the_profile(tmp_path):
    (tmp_path / "run.jsonl").write_text("")
    assert rollouts_beside(tmp_path / "run_reward_profiling.jsonl") == tmp_path / "run.jsonl"
    assert rollouts_beside(tmp_path / "other_reward_profiling.jsonl") is None
    assert rollouts_beside(tmp_path / "run.jsonl") is None


def test_report_cli_adds_the_explorer_and_states_its_size(run, run_ngrp, tmp_path):
    inputs = run.with_name("rollouts_materialized_inputs.jsonl")
    assert run_ngrp("profile", "--inputs", inputs, "--rollouts", run, "--overwrite").returncode == 0
    profile = run.with_name("rollouts_reward_profiling.jsonl")
    out = tmp_path / "report.html"
    res = run_ngrp("report", profile, "-o", out, "--bootstrap", "50", "--examples", "1", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    validated(summary, "report_result")
    explorer = summary["explorer"]
    assert explorer["rollouts"] == str(run) and explorer["n_examples"] == 10, "found beside the profile"
    html = out.read_text()
    assert "<h2 id='explorer'>Explorer</h2>" in html and len(cards(html)) == 10
    assert explorer["bytes"] < summary["bytes"] == out.stat().st_size
    text = run_ngrp("report", profile, "-o", out, "--overwrite", "--bootstrap", "50")
    assert "explorer: 20 example rollouts of 10 tasks" in text.stdout


def test_report_without_rollouts_says_how_to_add_them(run_ngrp, tmp_path):
    from stats_helpers import write_profile

    profile = write_profile(tmp_path / "lonely_reward_profiling.jsonl", [[1, 0], [0, 0]])
    res = run_ngrp("report", profile, "-o", tmp_path / "r.html", "--bootstrap", "20", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["explorer"] is None
    assert "pass --rollouts" in (tmp_path / "r.html").read_text()
    assert SCRIPT not in (tmp_path / "r.html").read_text()
