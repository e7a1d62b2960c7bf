"""`profile --merge` checks what it streams against each shard state's header: a state cut short (at a line
boundary too), with a task group dropped, added or from another shard, or with edited counts is refused
naming the file and line (exit 3), and nothing is written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from profile_data import make_run, write_jsonl
from test_profile_merge import _one_layout

from ngrp_lib.errors import FindingsError, InputError
from ngrp_lib.profile import ProfileOptions, merge_profiles, run_profile
from ngrp_lib.profile.merge import SLOW_NOTE

TASK = "_ng_task_index"


def collected(run, root: Path, count: int, shard_of=None) -> list[Path]:
    """Shards named as `collect --shard i/N` names them, in one folder, each profiled with --save-state;
    returns their reward profiles. `shard_of` splits the rows otherwise (default: by task, as collect)."""
    shard_of = shard_of or (lambda row: row[TASK] % count)
    root.mkdir(parents=True, exist_ok=True)
    profiles = []
    for s in range(count):
        stem = f"r-shard-{s}-of-{count}"
        inputs = write_jsonl(
            root / f"{stem}_materialized_inputs.jsonl", [r for r in run.inputs if shard_of(r) == s]
        )
        rollouts = write_jsonl(root / f"{stem}.jsonl", [r for r in run.rollouts if shard_of(r) == s])
        run_profile(inputs, rollouts, ProfileOptions(save_state=True))
        profiles.append(root / f"{stem}_reward_profiling.jsonl")
    return profiles


def state_of(profile: Path) -> Path:
    return profile.with_name(profile.name.replace("_reward_profiling", "_profile_state"))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _groups(lines: list[bytes]) -> list[int]:
    """Where each `g` line is (its profile row follows it)."""
    return [i for i, line in enumerate(lines) if line.startswith(b'["g"')]


def _run(streamed: bool):
    run = make_run(21, "plain", tasks=10, repeats=3)
    if streamed:
        _one_layout(run)  # every shard meets the columns in the union's order: the rows are streamed
    return run


def test_the_shards_merge_streamed_before_any_edit(tmp_path):
    """The edits below are refused; unedited, the same shards merge on the streaming path, complete."""
    profiles = collected(_run(True), tmp_path, 3)
    result = merge_profiles(profiles, tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert not [w for w in result.warnings if SLOW_NOTE in w]
    assert result.completion.complete_input_rows == 10 and result.profile_rows == 10


def _edit(profiles: list[Path], edit: str) -> tuple[Path, str]:
    """Edit shard 1's state (tasks 1, 4, 7); return it and the words its refusal must have."""
    state = state_of(profiles[1])
    lines = _lines(state)
    at = _groups(lines)
    header = orjson.loads(lines[0])
    groups, samples = len(at), sum(line.startswith(b'["s"') for line in lines)  # as written
    if edit == "cut_last_group":  # cut at a line boundary: the last task group and its row are gone
        lines = lines[: at[-1]]
        words = f"cut short: it ends at line {{n}} with {groups - 1} of the {groups} task groups"
    elif edit == "drop_middle_group":
        del lines[at[1] : at[1] + 2]
        words = f"cut short: it ends at line {{n}} with {groups - 1} of the {groups} task groups"
    elif edit == "drop_a_sample":  # section 2 is skipped unread by the streaming merge, but counted
        first = next(i for i, line in enumerate(lines) if line.startswith(b'["s"'))
        del lines[first]
        words = f"cut short: it ends at line {{n}} with {samples - 1} of the {samples} samples"
    elif edit == "group_twice":
        lines += lines[at[-1] : at[-1] + 2]
        words = f"one task group more than the {groups} its header (line 1) declares"
    elif (
        edit == "group_of_another_shard"
    ):  # task 7's group swapped for shard 2's task 8: order and counts fit
        other = _lines(state_of(profiles[2]))
        theirs = _groups(other)[-1]
        lines[at[-1] : at[-1] + 2] = other[theirs : theirs + 2]
        words = "task group for task 8, not one of the tasks its header lists"
    elif edit == "groups_swapped":
        lines[at[0] : at[0] + 2], lines[at[1] : at[1] + 2] = (
            lines[at[1] : at[1] + 2],
            lines[at[0] : at[0] + 2],
        )
        words = "task group for task 1 out of order"
    else:  # the header's rollout count edited
        rows = header["facts"]["table_rows"]
        header["facts"]["table_rows"] += 1
        header["facts"]["labelled_rows"] += 1
        lines[0] = orjson.dumps(header) + b"\n"
        words = f"its task groups hold {rows} rollouts; its header counts {rows + 1}"
    state.write_bytes(b"".join(lines))
    return state, words


EDITS = [
    "cut_last_group",
    "drop_middle_group",
    "drop_a_sample",
    "group_twice",
    "group_of_another_shard",
    "groups_swapped",
    "header_count",
]
LINE_OF = {  # the line each refusal names: where the file ends, or the offending line
    "group_twice": lambda lines: len(lines) - 1,
    "group_of_another_shard": lambda lines: _groups(lines)[-1] + 1,
    "groups_swapped": lambda lines: _groups(lines)[1] + 1,
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_state_that_does_not_match_its_header_is_refused(tmp_path, edit):
    profiles = collected(_run(True), tmp_path, 3)
    state, words = _edit(profiles, edit)
    lines = _lines(state)
    line = LINE_OF.get(edit, len)(lines)
    merged = tmp_path / "m" / "r.jsonl"
    with pytest.raises(InputError) as caught:
        merge_profiles(profiles, merged, ProfileOptions(allow_partial=True))
    assert caught.value.path == state and caught.value.line == line, (caught.value.message, line)
    assert words.format(n=line) in caught.value.message
    assert "--save-state" in caught.value.hint
    assert not merged.parent.exists() or not list(merged.parent.iterdir())  # nothing written


@pytest.mark.parametrize("edit", ["cut_last_group", "drop_a_sample"])
def test_the_exact_merge_checks_the_counts_too(tmp_path, edit):
    """Shards split by rollout are rebuilt from their exact sections; a cut state is refused there too."""
    run = _run(False)
    profiles = collected(run, tmp_path, 3, shard_of=lambda row: row["_ng_rollout_index"] % 3)
    state = state_of(profiles[1])
    lines = _lines(state)
    if edit == "cut_last_group":
        lines = lines[: _groups(lines)[-1]]
        words = "task groups"
    else:
        del lines[next(i for i, line in enumerate(lines) if line.startswith(b'["s"'))]
        words = "samples"
    state.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as caught:
        merge_profiles(profiles, tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert caught.value.path == state and caught.value.line == len(lines)
    assert "cut short" in caught.value.message and words in caught.value.message


@pytest.mark.parametrize("key", ["lines", "table_rows", "inputs"])
def test_a_header_whose_counts_do_not_add_up_is_refused(tmp_path, key):
    profiles = collected(_run(True), tmp_path, 2)
    state = state_of(profiles[0])
    lines = _lines(state)
    header = orjson.loads(lines[0])
    if key == "lines":
        del header["lines"]["g"]
    elif key == "table_rows":
        header["facts"]["table_rows"] = -1
    else:
        header["lines"]["i"] += 1
    state.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]))
    with pytest.raises(InputError) as caught:
        merge_profiles(profiles, tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert caught.value.path == state and caught.value.line == 1 and "edited?" in caught.value.message


def test_the_cut_shard_of_three_is_exit_3_naming_file_and_line(tmp_path, run_ngrp):
    """The reviewer's case: shard 1's state cut after its second task group, merged with shards 0 and 2,
    used to print '30/30 rollout rows ... 10 complete' and write 9 rows."""
    profiles = collected(_run(True), tmp_path, 3)
    state, _ = _edit(profiles, "cut_last_group")
    proc = run_ngrp(
        "profile", "--merge", "--rollouts", "m/r.jsonl", *[p.name for p in profiles], cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    assert f"{state.name}:{len(_lines(state))}" in proc.stderr and "cut short" in proc.stderr
    assert "Traceback" not in proc.stderr and not list((tmp_path / "m").glob("*"))


def _profile_set(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*"))} if folder.exists() else {}


@pytest.mark.parametrize("layout", ["one_folder", "folder_per_task"])
def test_a_missing_shard_is_refused_unless_allowed(tmp_path, run_ngrp, layout):
    """The reviewer's case: 2 of 3 shards merged said '21/21 ... complete', exit 0."""
    profiles = collected(_run(True), tmp_path, 3)
    if layout == "folder_per_task":  # Slurm's one folder per array task: shards are counted by name only
        for s in range(3):
            (tmp_path / f"task-{s}").mkdir()
            for made in tmp_path.glob(f"r-shard-{s}-of-3*"):
                made.rename(tmp_path / f"task-{s}" / made.name)
        given = [f"task-{s}/{p.name}" for s, p in enumerate(profiles)][:2]
    else:
        given = [p.name for p in profiles[:2]]
    named = "r-shard-2-of-3_reward_profiling.jsonl"  # in two folders, by name only (as `ngrp merge` does)
    proc = run_ngrp("profile", "--merge", "--rollouts", "m/r.jsonl", *given, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"1 shard(s) of the run are not among the files: {named}" in proc.stderr
    assert "--allow-missing-shards" in proc.stderr and not _profile_set(tmp_path / "m")
    partial = run_ngrp(
        "profile", "--merge", "--allow-partial", "--rollouts", "m/r.jsonl", *given, cwd=tmp_path
    )
    assert partial.returncode == 1, "--allow-partial is about rollouts of the known inputs, not shards"
    ok = run_ngrp(
        "profile",
        "--merge",
        "--allow-missing-shards",
        "--json",
        "--rollouts",
        "m/r.jsonl",
        *given,
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    warning = next(w for w in orjson.loads(ok.stdout)["warnings"] if "not among the files" in w)
    assert named in warning and "cover the shards given only" in warning and named in ok.stderr
    summary = orjson.loads((tmp_path / "m" / "r_profile_summary.json").read_bytes())
    assert warning in summary["warnings"]
    assert summary["counts"]["expected"] == sum(
        orjson.loads(state_of(tmp_path / g).read_bytes().splitlines()[0])["facts"]["accounting"]["inputs"]
        for g in given
    )


def test_a_gap_in_gym_chunks_is_a_missing_shard(tmp_path):
    profiles = collected(_run(True), tmp_path, 3)
    chunks = []
    for s in range(len(profiles)):  # rename as NeMo Gym chunks: rollouts-rs0-chunk<id>
        for made in tmp_path.glob(f"r-shard-{s}-of-3*"):
            made.rename(tmp_path / made.name.replace(f"r-shard-{s}-of-3", f"rollouts-rs0-chunk{s}"))
        chunks.append(tmp_path / f"rollouts-rs0-chunk{s}_reward_profiling.jsonl")
    with pytest.raises(FindingsError) as caught:
        merge_profiles([chunks[0], chunks[2]], tmp_path / "m" / "r.jsonl", ProfileOptions())
    assert (
        f"not among the files: {tmp_path / 'rollouts-rs0-chunk1_reward_profiling.jsonl'}"
        in caught.value.message
    )
    assert merge_profiles(chunks, tmp_path / "m" / "r.jsonl", ProfileOptions()).profile_rows == 10


def test_the_same_shard_given_twice_is_named(tmp_path, run_ngrp):
    profiles = collected(_run(True), tmp_path, 2)
    state = state_of(profiles[0])
    proc = run_ngrp(
        "profile", "--merge", "--rollouts", "m/r.jsonl", profiles[0].name, profiles[1].name, state.name,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        f"{profiles[0].name} and {state.name} overlap" in proc.stderr
        and "the same shard given twice" in proc.stderr
    )
    assert "materialized input" not in proc.stderr


@pytest.mark.parametrize("how", ["copy", "other_run"])
def test_shards_holding_one_key_are_named(tmp_path, how):
    """A copy of a shard (another path), or shards of two runs of the same tasks: both state files named."""
    profiles = collected(_run(True), tmp_path / "a", 2)
    if how == "copy":
        (tmp_path / "copy").mkdir()
        for made in (tmp_path / "a").glob("r-shard-0-of-2*"):
            (tmp_path / "copy" / made.name).write_bytes(made.read_bytes())
        other = tmp_path / "copy" / profiles[0].name
        key = "(task 0, rollout 0)"
    else:
        other = collected(make_run(22, "plain", tasks=10, repeats=3), tmp_path / "b", 2)[1]
        key = "(task 1, rollout 0)"
    with pytest.raises(FindingsError) as caught:
        merge_profiles([*profiles, other], tmp_path / "m" / "r.jsonl", ProfileOptions())
    message = caught.value.message
    first = state_of(profiles[0] if how == "copy" else profiles[1])
    assert f"{first} and {state_of(other)} overlap: both hold rollout key {key}" in message
    assert "the same shard given twice, or shards of different runs" in message


@pytest.mark.parametrize(
    "extra",
    [
        ["--inputs", "r-shard-0-of-2_materialized_inputs.jsonl"],
        ["++materialized_inputs_jsonl_fpath=r-shard-0-of-2_materialized_inputs.jsonl"],
        ["--save-state"],
        ["--exclude-unhealthy", "v.jsonl"],
    ],
)
def test_merge_refuses_the_options_of_profiling_rollouts(tmp_path, run_ngrp, extra):
    profiles = [p.name for p in collected(_run(True), tmp_path, 2)]
    (tmp_path / "v.jsonl").write_text("")
    proc = run_ngrp("profile", "--merge", "--rollouts", "m/r.jsonl", *extra, *profiles, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert (
        f"{extra[0].split('=')[0].replace('++materialized_inputs_jsonl_fpath', '--inputs')} applies"
        in proc.stderr
    )
    assert not _profile_set(tmp_path / "m")


def test_allow_missing_shards_goes_with_merge(tmp_path, run_ngrp):
    collected(_run(True), tmp_path, 1)
    inputs, rollouts = "r-shard-0-of-1_materialized_inputs.jsonl", "r-shard-0-of-1.jsonl"
    proc = run_ngrp(
        "profile",
        "--inputs",
        inputs,
        "--rollouts",
        rollouts,
        "--allow-missing-shards",
        "--overwrite",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "--allow-missing-shards goes with --merge" in proc.stderr
