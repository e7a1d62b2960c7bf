"""`merge_profiles` on shard states: shards split by task are streamed (their rows are final) and give the
bytes of one pass; shards split otherwise are rebuilt exactly, with a note; broken or foreign states are
refused naming the line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from profile_data import make_run, write_jsonl, write_run

from ngrp_lib.errors import InputError
from ngrp_lib.profile import ProfileOptions, merge_profiles, run_profile
from ngrp_lib.profile.merge import SLOW_NOTE

GYM = ("_reward_profiling.jsonl", "_agent_metrics.json", "_repeat_level_metrics.json")


def _outputs(rollouts: Path) -> dict[str, bytes]:
    return {s: rollouts.with_name(rollouts.stem + s).read_bytes() for s in GYM}


def _shards(run, root: Path, shard_of, count: int, **options) -> list[Path]:
    profiles = []
    for s in range(count):
        part = root / f"shard{s}"
        part.mkdir(parents=True)
        write_jsonl(part / "r_materialized_inputs.jsonl", [r for r in run.inputs if shard_of(r) == s])
        write_jsonl(part / "r.jsonl", [r for r in run.rollouts if shard_of(r) == s])
        run_profile(
            part / "r_materialized_inputs.jsonl",
            part / "r.jsonl",
            ProfileOptions(allow_partial=True, save_state=True, **options),
        )
        profiles.append(part / "r_reward_profiling.jsonl")
    return profiles


def _one_pass(run, root: Path, shard_of, count: int) -> Path:
    """One pass over the inputs in shard order (the order a merge concatenates them in)."""
    inputs, rollouts = write_run(run, root / "all")
    write_jsonl(inputs, [row for s in range(count) for row in run.inputs if shard_of(row) == s])
    run_profile(inputs, rollouts, ProfileOptions(allow_partial=True))
    return rollouts


def _one_layout(run):
    """The fields one environment writes, in one order; each task's first rollout has a numeric reward,
    so every shard meets the columns in the union's order (a layout change is tested below)."""
    first: dict = {}
    for row in sorted(run.rollouts, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"])):
        for name in ("latency_s", "total_tokens", "mask_sample", "output_tokens"):
            row.pop(name, None)
        row["response"]["usage"].pop("judge_score", None)
        if first.setdefault(row["_ng_task_index"], row) is row:
            row["reward"] = 0.5
    rows = {id(r): r for r in run.rollouts}
    for row in rows.values():  # keep the key order of the others: reward after the request fields
        row["reward"] = row.pop("reward") if "reward" in row else None
        for name in ("is_correct", "judge_score", "extracted_answer", "_ng_task_index", "_ng_rollout_index"):
            row[name] = row.pop(name)
        if "agent_ref" in row:
            row["agent_ref"] = row.pop("agent_ref")


@pytest.mark.parametrize(
    ("shape", "p_missing"), [("plain", 0.0), ("plain", 0.2), ("fan_out", 0.0), ("env_servers", 0.1)]
)
def test_task_shards_are_streamed_and_equal_one_pass(tmp_path, shape, p_missing):
    run = make_run(11, shape, tasks=9, repeats=3, p_missing=p_missing)
    _one_layout(run)

    def by_task(row):
        return row["_ng_task_index"] % 3  # what `collect --shard i/3` keeps

    shards = _shards(run, tmp_path, by_task, 3, gym_only=True)  # the merge writes the extras anyway
    merged = tmp_path / "merged" / "rollouts.jsonl"
    result = merge_profiles(shards, merged, ProfileOptions(allow_partial=True))
    assert not [w for w in result.warnings if SLOW_NOTE in w]
    assert _outputs(merged) == _outputs(_one_pass(run, tmp_path, by_task, 3))
    summary = orjson.loads(merged.with_name("rollouts_profile_summary.json").read_bytes())
    assert summary["counts"]["expected"] == len(run.inputs)
    assert sorted(summary["inputs"]) == ["shard_0", "shard_1", "shard_2"]


@pytest.mark.parametrize("split", ["rollout", "layout"])
def test_other_shards_are_rebuilt_exactly_with_a_note(tmp_path, split):
    run = make_run(12, "plain", tasks=6, repeats=4)
    if split == "rollout":  # each task spread over the shards: no shard's rows are final

        def shard_of(row):
            return row["_ng_rollout_index"] % 2

        reason = "not split by task"
    else:  # split by task, but the odd tasks' verifier writes two fields the other way round
        _one_layout(run)
        for row in run.rollouts:
            order = ("a", "b") if row["_ng_task_index"] % 2 == 0 else ("b", "a")
            for name in order:
                row[name] = 1.0

        def shard_of(row):
            return row["_ng_task_index"] % 2

        reason = "orders its columns differently"
    shards = _shards(run, tmp_path, shard_of, 2)
    merged = tmp_path / "merged" / "rollouts.jsonl"
    result = merge_profiles(shards, merged, ProfileOptions(allow_partial=True))
    notes = [w for w in result.warnings if SLOW_NOTE in w]
    assert len(notes) == 1 and reason in notes[0]
    assert _outputs(merged) == _outputs(_one_pass(run, tmp_path, shard_of, 2))


def test_a_state_from_another_version_is_refused(tmp_path):
    inputs, rollouts = write_run(make_run(3, "plain", tasks=2, repeats=2), tmp_path)
    run_profile(inputs, rollouts, ProfileOptions(save_state=True))
    state = tmp_path / "rollouts_profile_state.jsonl"
    lines = state.read_bytes().splitlines(keepends=True)
    header = orjson.loads(lines[0])
    state.write_bytes(orjson.dumps({**header, "ngrp_profile_state": 1}) + b"\n" + b"".join(lines[1:]))
    with pytest.raises(InputError) as caught:
        merge_profiles([state], tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert (
        caught.value.line == 1 and "version 1" in caught.value.message and "--save-state" in caught.value.hint
    )


@pytest.mark.parametrize("where", ["group", "row"])
def test_an_edited_group_is_named(tmp_path, where):
    inputs, rollouts = write_run(make_run(4, "plain", tasks=3, repeats=2), tmp_path)
    run_profile(inputs, rollouts, ProfileOptions(save_state=True))
    state = tmp_path / "rollouts_profile_state.jsonl"
    lines = state.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'["g"')) + (where == "row")
    if where == "group":
        meta = orjson.loads(lines[at])
        meta[6] = meta[6][:-1]  # a column short
        lines[at] = orjson.dumps(meta) + b"\n"
    else:
        lines[at] = lines[at].replace(b'"_ng_task_index":0', b'"_ng_task_index":5', 1)
    state.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as caught:
        merge_profiles([state], tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert caught.value.line == at + 1 and "edited" in caught.value.message


@pytest.mark.parametrize("split", ["task", "rollout"])
def test_reward_components_merge_as_one_pass_writes_them(tmp_path, split):
    """The `ngrp/component_*` keys a one-pass profile writes (profile.components) come out of a merge of
    shard states byte for byte, whether the shards are streamed (split by task) or rebuilt."""
    run = make_run(13, "plain", tasks=6, repeats=4)
    _one_layout(run)
    for row in run.rollouts:
        t, r = row["_ng_task_index"], row["_ng_rollout_index"]
        row["reward_components"] = {"format": (t + r) % 2 * 1.0, "accuracy": r / 4}
        if (t, r) == (2, 1):
            del row["reward_components"]["accuracy"]  # counted as missing, never zero

    def shard_of(row):
        return row["_ng_task_index" if split == "task" else "_ng_rollout_index"] % 2

    shards = _shards(run, tmp_path, shard_of, 2)
    merged = tmp_path / "merged" / "rollouts.jsonl"
    merge_profiles(shards, merged, ProfileOptions(allow_partial=True))
    one = _one_pass(run, tmp_path, shard_of, 2)
    assert b"ngrp/component_mean/accuracy" in _outputs(one)["_reward_profiling.jsonl"]
    assert b"ngrp/component_missing/accuracy" in _outputs(one)["_reward_profiling.jsonl"]
    assert _outputs(merged) == _outputs(one)
