"""`ngrp merge` on NeMo Gym's own sharded outputs, checked against Gym's own `gym eval aggregate`.

Each chunk is a real `gym eval run --no-serve ... +disable_aggregation=true` on a real Gym stack, named
`rollouts-rs0-chunk<id>.jsonl` as Gym's aggregate docs and NeMo-Skills name them, with global task
indices stamped in the task rows (Gym keeps an existing `_ng_task_index`). Needs NGRP_GYM_VENV and
NGRP_VLLM_VENV (see tests/gym_stack_fixture.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profile_compare import compare_outputs

pytestmark = [pytest.mark.gym, pytest.mark.vllm, pytest.mark.slow]

AGENT = "string_match_simple_agent"
CHUNKS, TASKS, REPEATS = 2, 6, 2


def lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def test_merge_of_gym_chunks_gives_gym_aggregates_rows(gym_stack, golden, tmp_path, run_ngrp):
    source = (golden.parent / "gym-stack" / "tasks.jsonl").read_text().splitlines()[:TASKS]
    chunks = tmp_path / "chunks"
    chunks.mkdir()
    for c in range(CHUNKS):
        rows = [dict(json.loads(line), _ng_task_index=t) for t, line in enumerate(source) if t % CHUNKS == c]
        task_file = tmp_path / f"tasks-chunk{c}.jsonl"
        task_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
        gym = gym_stack.gym("eval", "run", "--no-serve", "--agent", AGENT, "--input", str(task_file),
                            "--output", f"chunks/rollouts-rs0-chunk{c}.jsonl", "--num-repeats", str(REPEATS),
                            "--concurrency", "4", "+disable_aggregation=true", cwd=tmp_path)  # fmt: skip
        assert gym.returncode == 0, gym.stdout[-2000:] + gym.stderr[-2000:]
        assert not (chunks / f"rollouts-rs0-chunk{c}_aggregate_metrics.json").exists()
    theirs = tmp_path / "gym-aggregate" / "rollouts.jsonl"
    aggregate = gym_stack.gym("eval", "aggregate", "--input-glob", "chunks/rollouts-rs*-chunk*.jsonl",
                              "--output", str(theirs.relative_to(tmp_path)), "--no-health-check",
                              cwd=tmp_path)  # fmt: skip
    assert aggregate.returncode == 0, aggregate.stdout[-2000:] + aggregate.stderr[-2000:]

    ours = tmp_path / "ours" / "rollouts.jsonl"
    shard_files = sorted(chunks.glob("rollouts-rs*-chunk*.jsonl"))  # the same glob, sidecars included
    merged = run_ngrp("merge", *shard_files, "--output", ours, "--json")
    assert merged.returncode == 0, merged.stderr
    summary = json.loads(merged.stdout)
    assert summary["rollouts"]["written"] == TASKS * REPEATS and len(summary["rollouts"]["files"]) == CHUNKS
    # The rows Gym's aggregate writes, byte for byte (Gym sorts them by key; merge keeps shard order).
    assert sorted(lines(ours)) == sorted(lines(theirs)) and len(lines(ours)) == TASKS * REPEATS
    inputs = ours.with_name("rollouts_materialized_inputs.jsonl")
    keys = sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, lines(inputs)))
    assert keys == [(t, r) for t in range(TASKS) for r in range(REPEATS)]

    # Strict profiles: ours on the merge, Gym's on its own aggregate with the merged inputs, equal.
    profile = run_ngrp("profile", "--inputs", inputs, "--rollouts", ours)
    assert profile.returncode == 0, profile.stderr
    shutil.copy(inputs, theirs.with_name(inputs.name))
    gym_profile = gym_stack.gym("eval", "profile", "--inputs", inputs.name, "--rollouts", theirs.name,
                                cwd=theirs.parent)  # fmt: skip
    assert gym_profile.returncode == 0, gym_profile.stdout[-2000:] + gym_profile.stderr[-2000:]
    assert compare_outputs(ours, theirs, allow_extras=True) == []
