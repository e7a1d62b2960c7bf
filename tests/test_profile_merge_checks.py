"""`profile --merge` checks what it streams against each shard state's header: a state cut short (at a line
boundary too), with a task group dropped, added or from another shard, or with edited counts is refused
naming the file and line (exit 3), and nothing is written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from profile_data import make_run, write_jsonl
from test_profile_merge import _one_layout

from ngrp_lib.errors import InputError
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
