"""Properties of `run_profile` / `merge_profiles`: rollout order does not matter, and profiling shards
then merging gives the bytes of one pass over all files."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profile_data import SHAPES, make_run, write_jsonl, write_run

from ngrp_lib.profile import ProfileOptions, merge_profiles, run_profile

GYM = ("_reward_profiling.jsonl", "_agent_metrics.json", "_repeat_level_metrics.json")
runs = st.builds(
    make_run,
    seed=st.integers(0, 10_000),
    shape=st.sampled_from(SHAPES),
    tasks=st.integers(1, 6),
    repeats=st.integers(1, 4),
    p_missing=st.sampled_from([0.0, 0.0, 0.2]),
)
fast = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _outputs(rollouts: Path) -> dict[str, bytes]:
    return {s: rollouts.with_name(rollouts.stem + s).read_bytes() for s in GYM}


@fast
@given(run=runs, seed=st.integers(0, 1000))
def test_rollout_order_does_not_matter(run, seed):
    with tempfile.TemporaryDirectory() as tmp:
        inputs, rollouts = write_run(run, Path(tmp) / "a")
        run_profile(inputs, rollouts, ProfileOptions(allow_partial=True))
        shuffled = list(run.rollouts)
        random.Random(seed).shuffle(shuffled)
        other = Path(tmp) / "b"
        other.mkdir()
        write_jsonl(other / "rollouts.jsonl", shuffled)
        run_profile(inputs, other / "rollouts.jsonl", ProfileOptions(allow_partial=True))
        assert _outputs(rollouts) == _outputs(other / "rollouts.jsonl")


@fast
@given(run=runs, n_shards=st.integers(1, 3), seed=st.integers(0, 1000))
def test_shards_then_merge_equal_one_pass(run, n_shards, seed):
    rng = random.Random(seed)
    tasks = sorted({row["_ng_task_index"] for row in run.inputs})
    shard_of = {task: rng.randrange(n_shards) for task in tasks}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs, rollouts = write_run(run, root / "all")
        # the single pass sees the inputs in shard order, as the merge concatenates them
        ordered = [row for s in range(n_shards) for row in run.inputs if shard_of[row["_ng_task_index"]] == s]
        write_jsonl(inputs, ordered)
        run_profile(inputs, rollouts, ProfileOptions(allow_partial=True))
        shard_profiles = []
        for s in range(n_shards):
            part = root / f"shard{s}"
            part.mkdir()
            shard_inputs = [row for row in run.inputs if shard_of[row["_ng_task_index"]] == s]
            shard_rollouts = [row for row in run.rollouts if shard_of[row["_ng_task_index"]] == s]
            write_jsonl(part / "r_materialized_inputs.jsonl", shard_inputs)
            write_jsonl(part / "r.jsonl", shard_rollouts)
            run_profile(
                part / "r_materialized_inputs.jsonl",
                part / "r.jsonl",
                ProfileOptions(allow_partial=True, save_state=True),
            )
            shard_profiles.append(part / "r_reward_profiling.jsonl")
        merged = root / "merged" / "rollouts.jsonl"
        merge_profiles(shard_profiles, merged, ProfileOptions(allow_partial=True))
        assert _outputs(merged) == _outputs(rollouts)
