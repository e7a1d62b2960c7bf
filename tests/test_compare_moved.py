"""`ngrp compare` names the tasks that moved most, each way, with their pass counts and source lines, and
prints the commands that show their rollouts; the viewer's compare mode pairs tasks by the same key and
reports the same `agent` as `compare --json` (one rule: `stats.compare.pair_keys`)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from run_helpers import reward_of, write_run

from ngrp_lib.artifacts import task_lines
from ngrp_lib.inspect.join import resolve
from ngrp_lib.stats.compare import pair_keys
from ngrp_lib.view.compare import Pairs
from ngrp_lib.view.index import open_index
from ngrp_lib.view.queries import Views, parse_params

TASKS, REPEATS = 12, 8


def _profile(run_ngrp, rollouts: Path) -> Path:
    res = run_ngrp(
        "profile",
        "--inputs",
        rollouts.with_name("rollouts_materialized_inputs.jsonl"),
        "--rollouts",
        rollouts,
    )
    assert res.returncode == 0, res.stderr
    return rollouts.with_name("rollouts_reward_profiling.jsonl")


def _passes(task: int, flip: int) -> int:
    return int(sum(reward_of(task, r, flip) for r in range(REPEATS)))


@pytest.fixture
def two_runs(tmp_path, run_ngrp):
    """A and B on the same 12 tasks; B's task file has a blank line before each task (task t on line
    2t + 2), recorded in B's run manifest as collect records it."""
    a, _ = write_run(tmp_path / "a", tasks=TASKS, repeats=REPEATS, flipped_task=5)
    b, _ = write_run(tmp_path / "b", tasks=TASKS, repeats=REPEATS, flip=1, flipped_task=5)
    record = task_lines.encode({t: [2 * t + 2] for t in range(TASKS)})
    (tmp_path / "b" / "rollouts_run_manifest.json").write_text(json.dumps({"input": {"task_lines": record}}))
    return a, b, _profile(run_ngrp, a), _profile(run_ngrp, b)


def _counts(task: int) -> tuple[int, int]:
    if task == 5:  # planted: all fail in A, all pass in B
        return 0, REPEATS
    return _passes(task, 0), _passes(task, 1)


def test_compare_names_the_tasks_that_moved_most_with_counts_lines_and_commands(two_runs, run_ngrp):
    a, b, pa, pb = two_runs
    res = run_ngrp("compare", pa, pb, "--bootstrap", "0")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    counts = {t: _counts(t) for t in range(TASKS)}
    rate = {t: (cb - ca) / REPEATS for t, (ca, cb) in counts.items()}
    lower = sorted((t for t in rate if rate[t] < 0), key=lambda t: (rate[t], t))
    higher = sorted((t for t in rate if rate[t] > 0), key=lambda t: (-rate[t], t))
    assert lower and higher, "the fixture moves tasks both ways"

    def named(tasks):
        return ", ".join(
            f"task {t} (line {2 * t + 2}) {counts[t][0]}/{REPEATS} -> {counts[t][1]}/{REPEATS}"
            for t in tasks[:5]
        )

    assert f"  lower in B ({len(lower)}): {named(lower)}" in lines
    assert (
        f"  higher in B ({len(higher)}): {named(higher)}"
        + (f", and {len(higher) - 5} more" if len(higher) > 5 else "")
        in lines
    )
    commands = {line.split(": ", 1)[0].strip(): line.split(": ", 1)[1] for line in lines if "ngrp " in line}
    assert commands["B's failures on the tasks B lowered"] == (
        f"ngrp inspect {b} " + " ".join(f"--task {t}" for t in lower[:5]) + " --failed"
    )
    assert commands["A's failures on the tasks B raised"].startswith(f"ngrp inspect {a} --task {higher[0]}")
    assert commands["A and B side by side, flipped tasks first"] == f"ngrp view {b} --compare {a}"
    # each inspect command runs and shows the failed rollouts of exactly the tasks it names
    for key, run, flip in (
        ("B's failures on the tasks B lowered", b, 1),
        ("A's failures on the tasks B raised", a, 0),
    ):
        argv = shlex.split(commands[key])[1:]
        assert argv[1] == str(run)
        tasks = {int(argv[i + 1]) for i, word in enumerate(argv) if word == "--task"}
        shown = [json.loads(line) for line in run_ngrp(*argv, "--json").stdout.splitlines()]
        want = {
            (t, r) for t in tasks for r in range(REPEATS) if (0.0 if t == 5 else reward_of(t, r, flip)) < 1
        }
        assert {(row["_ng_task_index"], row["_ng_rollout_index"]) for row in shown} == want


def test_compare_json_carries_source_lines_and_the_rollouts_it_names(two_runs, run_ngrp):
    a, b, pa, pb = two_runs
    out = json.loads(run_ngrp("compare", pa, pb, "--json", "--bootstrap", "0").stdout)
    assert (out["rollouts_a"], out["rollouts_b"]) == (str(a), str(b))
    assert [t["source_lines"] for t in out["per_task"]] == [[2 * t + 2] for t in range(TASKS)]
    assert out["pass_threshold"] is None


def test_without_rollouts_beside_the_profiles_the_commands_say_how_to_name_them(two_runs, run_ngrp, tmp_path):
    _, _, pa, pb = two_runs
    moved = []
    for profile in (pa, pb):
        target = tmp_path / f"only_{profile.parent.name}" / profile.name
        target.parent.mkdir()
        moved.append(target)
        target.write_bytes(profile.read_bytes())
    text = run_ngrp("compare", *moved, "--bootstrap", "0").stdout
    assert "ngrp inspect B_ROLLOUTS.jsonl --task" in text and "name them with --rollouts-b" in text
    assert "ngrp view B_ROLLOUTS.jsonl --compare A_ROLLOUTS.jsonl" in text
    assert "(line " not in text, "no manifest: no source lines, never guessed"


def test_identical_runs_name_no_moved_task(two_runs, run_ngrp):
    _, _, pa, _ = two_runs
    text = run_ngrp("compare", pa, pa, "--bootstrap", "0").stdout
    assert "tasks that moved most" not in text


def test_pair_keys_name_the_agent_only_when_a_run_fans_out():
    assert pair_keys([0, 1, 2], ["m", "m", "n"]) == [(0, None), (1, None), (2, None)]
    assert pair_keys([0, 0, 1], ["x", "y", "x"]) == [(0, "x"), (0, "y"), (1, "x")]
    assert pair_keys([0, 0], [None, "x"]) == [(0, None), (0, "x")]  # no agent counts as one
    assert pair_keys([], []) == []


@pytest.mark.parametrize(
    "agents_a, agents_b",
    [(("smollm2",), ("smollm2",)), (("smollm2",), ("qwen",)), (("x", "y"), ("y", "x"))],
    ids=["one-agent", "two-models", "fan-out"],
)
def test_the_viewer_pairs_and_names_agents_as_compare_does(tmp_path, run_ngrp, agents_a, agents_b):
    """Two models collected directly name each row's agent after the model: compare pairs their profiles
    by task (Gym's profile rows carry no agent without fan-out), and so must the viewer, with the same
    `agent` in its /compare.json as in compare's per_task[]."""
    a, _ = write_run(tmp_path / "a", tasks=4, repeats=4, agents=agents_a)
    b, _ = write_run(tmp_path / "b", tasks=4, repeats=4, agents=agents_b, flip=1)
    compared = json.loads(
        run_ngrp("compare", _profile(run_ngrp, a), _profile(run_ngrp, b), "--json", "--bootstrap", "0").stdout
    )
    cache = tmp_path / "cache"
    pairs = Pairs.build(*(Views(open_index(resolve(p), threshold=1.0, directory=cache)) for p in (a, b)))
    page = pairs.page(parse_params({"per_page": "100"}, 1.0))
    assert page["n_only_a"] == page["n_only_b"] == 0
    assert sorted((p["task"], str(p["agent"])) for p in page["pairs"]) == sorted(
        (t["task"], str(t["agent"])) for t in compared["per_task"]
    )
    assert {(p["task"], p["agent"]): p["q_value"] for p in page["pairs"]} == pytest.approx(
        {(t["task"], t["agent"]): t["q_value"] for t in compared["per_task"]}
    )
    # the run's agent still filters the page, and names a pair on the task page
    assert pairs.page(parse_params({"agent": agents_b[0]}, 1.0))["total"] == len(page["pairs"]) // len(
        agents_b
    )
    assert pairs.task(1, agents_b[0], parse_params({}, 1.0))["pair"]["task"] == 1
