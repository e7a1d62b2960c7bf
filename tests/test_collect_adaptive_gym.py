"""`collect --adaptive` in NeMo Gym /run mode against a real Gym 0.7.0 stack: rounds of single /run
requests, the rows Gym's own expansion gives, and Gym's profiler on the result. Needs NGRP_GYM_VENV and
NGRP_VLLM_VENV (see tests/gym_stack_fixture.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_collect_gym import AGENT, keyed, profile_both_ways, tasks_file

pytestmark = [pytest.mark.gym, pytest.mark.vllm, pytest.mark.slow]


def by_key(path: Path) -> dict:
    rows = (json.loads(line) for line in path.read_text().splitlines())
    return {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows}


def test_adaptive_rounds_in_gym_mode(gym_stack, golden, tmp_path, run_ngrp):
    tasks = tasks_file(golden, tmp_path, 3)
    out = tmp_path / "ours" / "rollouts.jsonl"
    proc = run_ngrp("collect", "--input", tasks, "--agent", AGENT, "--num-repeats", "3", "--gym-url",
                    gym_stack.head_url, "--output", out, "--concurrency", "4", "--adaptive", "learnable",
                    "--first-round", "1", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    rows = keyed(out)
    # Gym's string_match rewards: whatever they are, each task stopped where learnable says it stops
    per_task: dict[int, list[bool]] = {}
    for (task, _), row in sorted(rows.items()):
        per_task.setdefault(task, []).append(row["reward"] >= 1)
    for task, outcomes in per_task.items():
        mixed_at = next((i + 1 for i in range(len(outcomes)) if 0 < sum(outcomes[: i + 1]) < i + 1), None)
        assert len(outcomes) == (mixed_at or 3), (task, outcomes)
    assert summary["completed"] == summary["expected"] == len(rows)
    assert summary["adaptive"]["rollouts_fixed_n"] == 9 and summary["adaptive"]["runner_calls"] >= 1
    # the materialized rows are those of Gym's own N=3 expansion, each task's first repeats
    gym = gym_stack.gym("eval", "run", "--no-serve", "--agent", AGENT, "--input", str(tasks),
                        "--output", "gym/rollouts.jsonl", "--num-repeats", "3", "--concurrency", "4",
                        cwd=tmp_path)  # fmt: skip
    assert gym.returncode == 0, gym.stdout[-2000:] + gym.stderr[-2000:]
    theirs = by_key(tmp_path / "gym" / "rollouts_materialized_inputs.jsonl")
    ours = by_key(out.with_name("rollouts_materialized_inputs.jsonl"))
    assert set(ours) == set(rows) and all(ours[key] == theirs[key] for key in ours)
    profile_both_ways(gym_stack, run_ngrp, out)
