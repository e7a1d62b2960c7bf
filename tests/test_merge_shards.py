"""`ngrp merge` and `--shard i/N`: shards of a run merge back to exactly the unsharded rows."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import orjson
import pytest
from cli_helpers import validated

from ngrp_lib.artifacts import jsonl
from ngrp_lib.collect.shards import Shard, parse_shard, select_shard, shard_output_path
from ngrp_lib.errors import FindingsError, InputError, OutputExistsError, UsageError
from ngrp_lib.merge.shards import canonical_digest, merge_shards


def rows_of(path):
    return [r.data for r in jsonl.iter_rows(path)]


def keyed(rows):
    return {(r["_ng_task_index"], r["_ng_rollout_index"]): canonical_digest(r) for r in rows}


def write_rows(path, rows):
    path.write_bytes(b"".join(jsonl.dumps(r) for r in rows))
    return path


def shard_rows(rows, shard):
    """The rows `collect --shard` runs: Shard.owns on the task index (runner.pending does the same)."""
    return [r for r in rows if shard.owns(r["_ng_task_index"])]


def make_shards(golden_case, tmp_path, n):
    """Split a real run (inputs + rollouts) into n shard runs the way `collect --shard i/n` would."""
    inputs = rows_of(golden_case / "rollouts_materialized_inputs.jsonl")
    rollouts = rows_of(golden_case / "rollouts.jsonl")
    paths = []
    for i in range(n):
        shard = Shard(i, n)
        out = shard_output_path(tmp_path / "rollouts.jsonl", shard)
        write_rows(out, shard_rows(rollouts, shard))
        write_rows(out.with_name(out.stem + "_materialized_inputs.jsonl"), shard_rows(inputs, shard))
        paths.append(out)
    return inputs, rollouts, paths


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_merged_shards_equal_unsharded_run(golden, tmp_path, n):
    inputs, rollouts, shards = make_shards(golden / "case_complete", tmp_path, n)
    result = merge_shards(shards, tmp_path / "merged.jsonl")
    assert keyed(rows_of(tmp_path / "merged.jsonl")) == keyed(rollouts)
    assert keyed(rows_of(tmp_path / "merged_materialized_inputs.jsonl")) == keyed(inputs)
    assert result.rollouts.written == len(rollouts) == 12 and result.rollouts.duplicates_dropped == 0
    assert result.failures_output is None


def test_shard_selection_is_by_task_and_covers_every_task_once():
    owners = {t: [i for i in range(4) if select_shard(t, i, 4)] for t in range(50)}
    assert all(len(v) == 1 for v in owners.values())
    rows = [{"_ng_task_index": t, "_ng_rollout_index": r} for r in range(3) for t in (7, 2, 9)]
    picked = shard_rows(rows, Shard(1, 4))  # 9 % 4 == 1: every repeat of task 9, no other
    assert [(x["_ng_task_index"], x["_ng_rollout_index"]) for x in picked] == [(9, 0), (9, 1), (9, 2)]


def test_parse_shard_specs_and_slurm():
    assert parse_shard("0/4") == Shard(0, 4) and parse_shard(" 3 / 4 ") == Shard(3, 4)
    for bad in ("4/4", "1/0", "-1/4", "1", "a/b"):
        with pytest.raises(UsageError):
            parse_shard(bad)
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "1"}
    assert parse_shard("auto", env) == Shard(4, 8)
    assert parse_shard("auto", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}) == Shard(0, 2)
    with pytest.raises(UsageError, match="SLURM_ARRAY_TASK_ID"):
        parse_shard("auto", {})
    assert shard_output_path("o/r.jsonl", Shard(2, 12)).name == "r-shard-02-of-12.jsonl"


def slurm_env(ids: list[int], task: int, step: int = 1) -> dict[str, str]:
    """The array variables sbatch sets for a task of `--array=<ids>`."""
    return {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(len(ids)),
            "SLURM_ARRAY_TASK_MIN": str(min(ids)), "SLURM_ARRAY_TASK_MAX": str(max(ids)),
            "SLURM_ARRAY_TASK_STEP": str(step)}  # fmt: skip


def test_shard_auto_numbers_arrays_and_refuses_reruns():
    assert [parse_shard("auto", slurm_env(list(range(8)), t)) for t in (0, 7)] == [Shard(0, 8), Shard(7, 8)]
    assert parse_shard("auto", slurm_env(list(range(1, 9)), 8)) == Shard(7, 8)  # --array=1-8
    assert parse_shard("auto", slurm_env([0, 2, 4, 6], 4, step=2)) == Shard(2, 4)  # --array=0-6:2
    assert parse_shard("auto", slurm_env([0], 0)) == Shard(0, 1)
    # What a rerun of some tasks of --array=0-7 looks like: its ids are not shards 0..N-1.
    for ids, task in (([3], 3), ([1], 1), ([3, 4, 5], 4), ([3, 5], 5), ([0, 5], 5)):
        with pytest.raises(UsageError, match="--shard auto") as err:
            parse_shard("auto", slurm_env(ids, task))
        assert "--shard i/N" in err.value.hint


def test_identical_duplicates_dropped_even_with_other_key_order(golden, tmp_path):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    # The same row again, serialized with another key order and spacing: still identical content.
    again = tmp_path / "again.jsonl"
    row = rollouts[0]
    again.write_text(json.dumps(dict(reversed(list(row.items()))), indent=None) + "\n")
    result = merge_shards([*shards, again], tmp_path / "m.jsonl", inputs=[])
    assert result.rollouts.duplicates_dropped == 1 and result.rollouts.written == 12
    assert keyed(rows_of(tmp_path / "m.jsonl")) == keyed(rollouts)


def test_conflicting_duplicate_refused_naming_both_lines(golden, tmp_path, run_ngrp):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    clash = dict(rollouts[3], reward=0.5 if rollouts[3]["reward"] != 0.5 else 0.25)
    other = write_rows(tmp_path / "other.jsonl", [rollouts[5], clash])
    with pytest.raises(FindingsError) as err:
        merge_shards([*shards, other], tmp_path / "m.jsonl")
    key = (clash["_ng_task_index"], clash["_ng_rollout_index"])
    first = next(p for p in shards if key in keyed(rows_of(p)))
    line = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows_of(first)].index(key) + 1
    assert f"{first}:{line}" in err.value.message and f"{other}:2" in err.value.message
    assert not (tmp_path / "m.jsonl").exists() and not (tmp_path / "m_materialized_inputs.jsonl").exists()
    proc = run_ngrp("merge", *shards, other, "--output", tmp_path / "m.jsonl")
    assert proc.returncode == 1 and "conflicting rows" in proc.stderr


def test_torn_shard_tail_reported(golden, tmp_path, run_ngrp):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    lost = rows_of(shards[1])[-1]
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[: -len(orjson.dumps(lost)) // 2 - 1])  # cut the last row in half
    line = len(data.splitlines())
    proc = run_ngrp("merge", *shards, "--output", tmp_path / "m.jsonl")
    assert proc.returncode == 3 and f"{shards[1]}:{line}" in proc.stderr and "--allow-torn" in proc.stderr
    assert not (tmp_path / "m.jsonl").exists()
    proc = run_ngrp("merge", *shards, "--output", tmp_path / "m.jsonl", "--allow-torn", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    validated(summary, "merge_result")
    assert summary["torn_tails"] == [f"{shards[1]}:{line}"] and summary["rollouts"]["written"] == 11
    lost_key = (lost["_ng_task_index"], lost["_ng_rollout_index"])
    assert set(keyed(rows_of(tmp_path / "m.jsonl"))) == set(keyed(rollouts)) - {lost_key}


def test_rows_validated_and_extra_keys_refused(golden, tmp_path):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    bad = write_rows(tmp_path / "bad.jsonl", [rollouts[0] | {"_ng_rollout_index": -1}])
    with pytest.raises(InputError) as err:
        merge_shards([bad], tmp_path / "m.jsonl", inputs=[])
    assert err.value.line == 1 and err.value.pointer == "/_ng_rollout_index" and err.value.exit_code == 3
    missing = write_rows(
        tmp_path / "missing.jsonl", [{k: v for k, v in rollouts[0].items() if k != "_ng_task_index"}]
    )
    with pytest.raises(InputError, match="_ng_task_index is missing"):
        merge_shards([missing], tmp_path / "m.jsonl", inputs=[])
    extra = write_rows(tmp_path / "extra.jsonl", [rollouts[0] | {"_ng_task_index": 99}])
    with pytest.raises(FindingsError, match=r"\(99, "):
        merge_shards(
            [*shards, extra],
            tmp_path / "m.jsonl",
            inputs=[s.with_name(s.stem + "_materialized_inputs.jsonl") for s in shards],
        )


def test_failures_sidecars_merged_and_overwrite_refused(golden, tmp_path, run_ngrp):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    attempt = {"_ng_task_index": 0, "_ng_rollout_index": 1, "_ng_failure_class": "agent_request_failed"}
    for shard in shards:  # the same attempt recorded twice (shard re-merged) and one distinct attempt
        write_rows(shard.with_name(shard.stem + "_failures.jsonl"), [attempt])
    write_rows(
        shards[0].with_name(shards[0].stem + "_failures.jsonl"), [attempt, attempt | {"_ng_attempt_index": 1}]
    )
    out = tmp_path / "m.jsonl"
    result = merge_shards(shards, out)
    assert rows_of(tmp_path / "m_failures.jsonl") == [attempt, attempt | {"_ng_attempt_index": 1}]
    assert result.failures.read == 3 and result.failures.duplicates_dropped == 1
    before = out.read_bytes()
    with pytest.raises(OutputExistsError):
        merge_shards(shards, out)
    proc = run_ngrp("merge", *shards, "--output", out)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr and out.read_bytes() == before
    proc = run_ngrp("merge", *shards, "--output", out, "--overwrite")
    assert proc.returncode == 0 and "12 rollouts" in proc.stdout
    with pytest.raises(UsageError, match="both an input and an output"):
        merge_shards([*shards, out], out, overwrite=True)


def test_merge_streams_without_holding_rows(golden, tmp_path):
    """Smoke: a shard copied many times merges with every copy dropped as an identical duplicate."""
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 1)
    copies = []
    for i in range(20):
        copies.append(shutil.copy(shards[0], tmp_path / f"copy{i}.jsonl"))
    result = merge_shards(copies, tmp_path / "m.jsonl", inputs=[])
    assert result.rollouts.written == 12 and result.rollouts.duplicates_dropped == 12 * 19


@pytest.mark.vllm
def test_collect_shards_then_merge_equals_one_run(vllm_server, tmp_path, run_ngrp):
    """`collect --shard i/N` on a real server, `ngrp merge`, then a strict profile of the merged run."""
    tasks = tmp_path / "tasks.jsonl"
    params = [{"input": f"Say {t}", "max_output_tokens": 8} for t in range(5)]
    task_rows = [{"responses_create_params": p, "expected_answer": str(t)} for t, p in enumerate(params)]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in task_rows))
    common = ["--input", tasks, "--num-repeats", "3", "--base-url", vllm_server.base_url, "--model",
              vllm_server.model, "--verifier", "exact", "--output", tmp_path / "out" / "rollouts.jsonl",
              "--json"]  # fmt: skip
    slurm = {**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}
    zero, one = (
        run_ngrp("collect", "--shard", "0/2", *common),
        run_ngrp("collect", "--shard", "auto", *common, env=slurm),
    )
    assert zero.returncode == 0 and one.returncode == 0, zero.stderr + one.stderr
    shards = [tmp_path / "out" / f"rollouts-shard-{i}-of-2.jsonl" for i in range(2)]
    assert [json.loads(p.stdout)["expected"] for p in (zero, one)] == [9, 6]  # tasks 0,2,4 and 1,3
    for i, shard in enumerate(shards):
        owned = {
            r["_ng_task_index"] for r in rows_of(shard.with_name(shard.stem + "_materialized_inputs.jsonl"))
        }
        assert owned == {t for t in range(5) if t % 2 == i}
    merged = tmp_path / "out" / "rollouts.jsonl"
    proc = run_ngrp("merge", *shards, "--output", merged, "--json")
    assert proc.returncode == 0, proc.stderr
    assert run_ngrp("materialize", "--input", tasks, "--num-repeats", "3", "--agent", vllm_server.model,
                    "--output", tmp_path / "whole.jsonl").returncode == 0  # fmt: skip
    whole = rows_of(tmp_path / "whole.jsonl")
    assert keyed(rows_of(tmp_path / "out" / "rollouts_materialized_inputs.jsonl")) == keyed(whole)
    assert set(keyed(rows_of(merged))) == set(keyed(whole))
    profile = run_ngrp("profile", "--inputs", tmp_path / "out" / "rollouts_materialized_inputs.jsonl",
                       "--rollouts", merged)  # fmt: skip
    assert profile.returncode == 0, profile.stderr
    assert len(rows_of(tmp_path / "out" / "rollouts_reward_profiling.jsonl")) == 5


def test_a_glob_that_catches_sidecars_merges_them_as_sidecars(golden, tmp_path):
    """`rollouts-shard-*.jsonl` also matches each shard's _failures and _materialized_inputs files: they
    are merged as the sidecars they are, never as rollouts (a failure row would otherwise pass as one)."""
    inputs, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    failed = {**rollouts[0], "_ng_failure_class": "agent_request_failed"}
    failed.pop("reward", None)
    write_rows(shards[0].with_name(shards[0].stem + "_failures.jsonl"), [failed])
    globbed = sorted(tmp_path.glob("rollouts-shard-*.jsonl"))
    assert len(globbed) == 5  # 2 shards, 2 materialized inputs sidecars, 1 failures sidecar
    result = merge_shards(globbed, tmp_path / "merged.jsonl")
    assert keyed(rows_of(tmp_path / "merged.jsonl")) == keyed(rollouts)
    assert rows_of(tmp_path / "merged_failures.jsonl") == [failed]
    assert sorted(result.sidecars_skipped) == sorted(str(p) for p in globbed if p not in shards)
    validated(result.to_json(), "merge_result")


@pytest.mark.parametrize("name", ["rollouts-shard-0-of-2_failures.jsonl", "rollouts_reward_profiling.jsonl"])
def test_a_sidecar_or_profile_output_without_its_shard_is_refused(golden, tmp_path, name):
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 2)
    stray = write_rows(tmp_path / name, rollouts[:1])
    with pytest.raises(UsageError, match="not a rollouts shard"):
        merge_shards([shards[1], stray], tmp_path / "merged.jsonl")
    assert not (tmp_path / "merged.jsonl").exists()


def test_a_shard_never_written_is_not_merged_away_silently(golden, tmp_path):
    """A glob over -shard-i-of-N files cannot see an array task that wrote nothing: the names can."""
    _, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 3)
    present = [shards[0], shards[2]]
    with pytest.raises(FindingsError, match=r"1 shard\(s\) of the run are not among .*-shard-1-of-3"):
        merge_shards(present, tmp_path / "merged.jsonl")
    assert not (tmp_path / "merged.jsonl").exists()
    result = merge_shards(present, tmp_path / "merged.jsonl", allow_missing_shards=True)
    assert result.missing_shards == [str(tmp_path / "rollouts-shard-1-of-3")]
    assert result.rollouts.written == len(rows_of(shards[0])) + len(rows_of(shards[2])) < len(rollouts)


def test_cli_missing_shards_exit_1_unless_allowed(golden, tmp_path, run_ngrp):
    _, _, shards = make_shards(golden / "case_complete", tmp_path, 3)
    args = ["merge", shards[0], shards[2], "--output", tmp_path / "m.jsonl"]
    refused = run_ngrp(*args)
    assert refused.returncode == 1 and "--allow-missing-shards" in refused.stderr
    merged = run_ngrp(*args, "--allow-missing-shards")
    assert merged.returncode == 0 and "warning: 1 shard(s) missing" in merged.stdout


def spread_over_folders(shards: list[Path]) -> list[Path]:
    """One folder per array task: shard i (and its sidecars) moved to task-i/."""
    moved = []
    for i, shard in enumerate(shards):
        folder = shard.parent / f"task-{i}"
        folder.mkdir()
        for path in shard.parent.glob(shard.stem + "*"):
            path.rename(folder / path.name)
        moved.append(folder / shard.name)
    return moved


def test_shards_in_one_folder_per_task_are_one_run(golden, tmp_path, run_ngrp):
    """The bug of issue 20: shards in separate folders were counted per folder, so each looked like a
    run missing all the other shards."""
    inputs, rollouts, shards = make_shards(golden / "case_complete", tmp_path, 3)
    shards = spread_over_folders(shards)
    proc = run_ngrp("merge", *shards, "-o", tmp_path / "all" / "rollouts.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["missing_shards"] == []
    assert keyed(rows_of(tmp_path / "all" / "rollouts.jsonl")) == keyed(rollouts)
    assert keyed(rows_of(tmp_path / "all" / "rollouts_materialized_inputs.jsonl")) == keyed(inputs)
    # A shard missing from a spread-out run is named once, not once per folder.
    with pytest.raises(FindingsError) as err:
        merge_shards([shards[0], shards[2]], tmp_path / "m.jsonl")
    assert "1 shard(s)" in err.value.message and err.value.message.endswith(": rollouts-shard-1-of-3")


def test_shards_of_one_name_from_different_runs_are_refused(golden, tmp_path):
    _, _, shards = make_shards(golden / "case_complete", tmp_path, 2)
    shards = spread_over_folders(shards)
    identity = {"input_sha256": "a" * 64, "materialized_sha256": "x", "model": "m1", "shard": "0/2"}
    for i, shard in enumerate(shards):
        manifest = shard.with_name(shard.stem + "_run_manifest.json")
        # Per-shard fields (shard, materialized digest) differ by design; the model must not.
        identity = {**identity, "shard": f"{i}/2", "materialized_sha256": f"x{i}"}
        manifest.write_text(json.dumps({"identity": identity}))
    merge_shards(shards, tmp_path / "ok.jsonl")
    manifest.write_text(json.dumps({"identity": {**identity, "model": "m2"}}))
    with pytest.raises(
        FindingsError, match=r'rollouts-shard-\*-of-2 come from different runs: model is "m1"'
    ):
        merge_shards(shards, tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()


def gym_chunks(golden_case: Path, folder: Path, chunks: int, seed: int = 0, sep: str = "-chunk") -> list:
    """A run split the NeMo Gym / NeMo-Skills way: chunk c holds the tasks t with t % chunks == c under
    their global task index, each chunk a Gym run of its own (rollouts + _materialized_inputs)."""
    inputs = rows_of(golden_case / "rollouts_materialized_inputs.jsonl")
    rollouts = rows_of(golden_case / "rollouts.jsonl")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in range(chunks):
        out = folder / f"rollouts-rs{seed}{sep}{c}.jsonl"
        write_rows(out, [r for r in rollouts if r["_ng_task_index"] % chunks == c])
        write_rows(out.with_name(out.stem + "_materialized_inputs.jsonl"),
                   [r for r in inputs if r["_ng_task_index"] % chunks == c])  # fmt: skip
        paths.append(out)
    return paths


@pytest.mark.parametrize("sep", ["-chunk", "_chunk_"])
def test_gym_chunks_merge_to_the_whole_run(golden, tmp_path, sep):
    inputs = rows_of(golden / "case_complete" / "rollouts_materialized_inputs.jsonl")
    rollouts = rows_of(golden / "case_complete" / "rollouts.jsonl")
    chunks = gym_chunks(golden / "case_complete", tmp_path, 3, sep=sep)
    result = merge_shards(chunks, tmp_path / "merged.jsonl")
    assert keyed(rows_of(tmp_path / "merged.jsonl")) == keyed(rollouts)
    assert keyed(rows_of(tmp_path / "merged_materialized_inputs.jsonl")) == keyed(inputs)
    assert result.rollouts.written == len(rollouts) and result.missing_shards == []
    with pytest.raises(
        FindingsError, match=rf"1 shard\(s\) .*: {re.escape(str(tmp_path))}/rollouts-rs0{sep}1$"
    ):
        merge_shards([chunks[0], chunks[2]], tmp_path / "m.jsonl")  # a gap in the chunk ids


def test_done_markers_mark_unfinished_chunks(golden, tmp_path, run_ngrp):
    chunks = gym_chunks(golden / "case_complete", tmp_path, 3)
    merge_shards(chunks, tmp_path / "no-markers.jsonl")  # no marker at all: nothing to go by
    for chunk in chunks[:2]:
        chunk.with_name(chunk.name + ".done").touch()
    with pytest.raises(
        FindingsError, match=r"1 shard\(s\) have no \.done marker .*rollouts-rs0-chunk2\.jsonl"
    ):
        merge_shards(chunks, tmp_path / "m.jsonl")
    proc = run_ngrp("merge", *chunks, "-o", tmp_path / "m.jsonl", "--allow-missing-shards", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["unfinished_shards"] == [str(chunks[2])]
    chunks[2].with_name(chunks[2].name + ".done").touch()
    merge_shards(chunks, tmp_path / "m2.jsonl")


def test_a_key_in_two_seeds_is_refused_even_when_identical(golden, tmp_path):
    seed0 = gym_chunks(golden / "case_complete", tmp_path, 2, seed=0)
    seed1 = gym_chunks(golden / "case_complete", tmp_path, 2, seed=1)
    with pytest.raises(FindingsError) as err:
        merge_shards(seed0 + seed1, tmp_path / "m.jsonl")
    assert "two seeds, rollouts-rs0-chunk* and rollouts-rs1-chunk*" in err.value.message
    assert "one seed at a time" in err.value.hint
    merge_shards(seed1, tmp_path / "rs1.jsonl")  # one seed is one run


def test_chunks_numbered_from_zero_each_get_the_hint(golden, tmp_path):
    chunks = gym_chunks(golden / "case_complete", tmp_path, 2)
    rows = rows_of(chunks[1])
    shift = min(r["_ng_task_index"] for r in rows)
    write_rows(chunks[1], [r | {"_ng_task_index": r["_ng_task_index"] - shift} for r in rows])
    with pytest.raises(FindingsError) as err:
        merge_shards(chunks, tmp_path / "m.jsonl", inputs=[])
    assert "conflicting rows" in err.value.message and "global _ng_task_index" in err.value.hint
