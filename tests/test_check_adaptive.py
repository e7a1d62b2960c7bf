"""`check` on an adaptive run replays each decided task's rule on its stored rewards and compares the
decision and the repeats with the run manifest's (which curriculum and stats read). No server: the runs
are written by hand, and the expected decisions are worked out by hand below, not by the code under test.
The same against a real adaptive run on vLLM: tests/test_collect_adaptive_vllm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import SCRIPT
from test_agent_path import BLOCKER
from test_live_run import HOLD, SCRIPTS

from ngrp_lib.artifacts import schemas

ABSENT = object()  # a rollout row without a reward key

# learnable, --rounds 1,1,2, N=8 (a task has 1, 2, 4, 6, 8 repeats after its rounds), pass = reward >= 0.5
TASKS = {
    # F F | T F: not mixed after 1 or 2 repeats, mixed after 4
    0: [0.2, 0.0, 0.7, 0.1],
    # no reward (skipped) | T | T (a bool: 1.0) F: one outcome after 2 repeats, mixed after 4; read as a
    # fail, the null would have mixed it after 2
    1: [None, 0.9, True, 0.0],
    # never mixed: all 8, all pass
    2: [1.0] * 8,
}
STATES = {
    "0": {"repeats": 4, "reason": "settled", "decision": "mixed"},
    "1": {"repeats": 4, "reason": "settled", "decision": "mixed"},
    "2": {"repeats": 8, "reason": "reached_n", "decision": "all_pass"},
}
# a task waiting on its second repeat, and one whose first repeat ran out of attempts: no decision
UNDECIDED = {
    3: ([0.0], {"repeats": 2, "reason": "pending", "decision": None}),
    4: ([], {"repeats": 1, "reason": "out_of_attempts", "decision": None}),
}


def write_run(folder: Path, tasks: dict, states: dict, undecided: dict | None = None) -> tuple[Path, Path]:
    """The files of an adaptive run: materialized rows for every repeat assigned, a rollout for every
    reward given, and the manifest's settings and task states."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs, rollouts = folder / "r_materialized_inputs.jsonl", folder / "r.jsonl"
    assigned = {int(t): s["repeats"] for t, s in states.items()}
    rewards = dict(tasks)
    for task, (stored, state) in (undecided or {}).items():
        rewards[task], assigned[task] = stored, state["repeats"]
        states = {**states, str(task): state}

    def row(task: int, index: int) -> dict:
        return {"responses_create_params": {"input": f"task {task}"}, "_ng_task_index": task,
                "_ng_rollout_index": index}  # fmt: skip

    inputs.write_text("".join(json.dumps(row(t, i)) + "\n" for t, n in assigned.items() for i in range(n)))
    lines = []
    for task, values in rewards.items():
        for index, reward in enumerate(values):
            lines.append(row(task, index) | ({} if reward is ABSENT else {"reward": reward}))
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in lines))
    block = {"rule": "learnable", "interval": None, "first_round": 1, "round_size": 2, "rounds": [1, 1, 2],
             "pass_threshold": 0.5}  # fmt: skip
    manifest = {"identity": {"adaptive": block, "materialize": {"num_repeats": 8}},
                "adaptive": {"task_states": states}}  # fmt: skip
    (folder / "r_run_manifest.json").write_text(json.dumps(manifest))
    return inputs, rollouts


def edit_manifest(folder: Path, edit) -> Path:
    """Apply `edit` to the run manifest in `folder` (a dict changed in place); returns its path."""
    path = folder / "r_run_manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return path


def check(run_ngrp, inputs: Path, rollouts: Path) -> tuple[subprocess.CompletedProcess, dict]:
    text = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts)
    as_json = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert text.returncode == as_json.returncode, text.stderr + as_json.stderr
    data = json.loads(as_json.stdout)
    schemas.validator("check_output").validate(data)
    return text, data


def test_the_decisions_replayed_by_hand_agree_and_undecided_tasks_are_counted_apart(tmp_path, run_ngrp):
    inputs, rollouts = write_run(tmp_path, TASKS, STATES, UNDECIDED)
    text, data = check(run_ngrp, inputs, rollouts)
    adaptive = data["adaptive"]
    assert adaptive == {
        "manifest": str(tmp_path / "r_run_manifest.json"), "rule": "learnable",
        "schedule": "--rounds 1,1,2", "pass_threshold": 0.5, "compared": True,
        "not_compared_because": None, "tasks": 5, "tasks_compared": 3, "agree": 3, "differ": 0,
        "not_compared": {"out_of_attempts": 1, "pending": 1}, "decisions": {"mixed": 2, "all_pass": 1},
        "differing": [], "past_stop_tasks": 0, "past_stop_rollouts": 0,
    }  # fmt: skip
    assert (
        "adaptive: learnable, --rounds 1,1,2: the decisions of 3 tasks, replayed from the stored rewards,"
        " agree with the run's manifest (2 mixed, 1 all pass); not compared, without a decision: 1 out of"
        " attempts, 1 pending"
    ) in text.stdout
    # the undecided tasks' rollouts are missing (exit 1 for that), nothing about the decisions
    assert {f["code"] for f in data["findings"] if f["severity"] == "error"} == {"missing_rollouts"}


def test_a_complete_run_whose_decisions_agree_exits_0(tmp_path, run_ngrp):
    text, data = check(run_ngrp, *write_run(tmp_path, TASKS, STATES))
    assert text.returncode == 0 and data["ok"], text.stdout
    assert data["adaptive"]["agree"] == 3 and "result: complete and consistent" in text.stdout


# each edit changes one task's decision; manifest and replayed values by hand (rounds end at 1, 2, 4, 6, 8)
EDITS = [
    # task 1's null becomes a fail: F T after 2 repeats, mixed there; 2 rollouts stored past that stop
    pytest.param(1, 0, 0.0, ("settled", "mixed", 2), 4, 2, id="null-to-fail-stops-earlier"),
    # task 2's last repeat fails: mixed at the 8th, the same repeats, another decision
    pytest.param(2, 7, 0.0, ("settled", "mixed", 8), 8, 0, id="all-pass-to-mixed"),
    # task 0's only pass fails: F F F F is not mixed, its next round (to 6) is not stored
    pytest.param(0, 2, 0.3, ("pending", None, 6), 4, 0, id="mixed-to-unsettled"),
    # a reward that is not a number is no outcome: F F F, as above
    pytest.param(0, 2, "0.7", ("pending", None, 6), 4, 0, id="text-reward-is-no-outcome"),
]


@pytest.mark.parametrize(("task", "index", "reward", "replayed", "stored", "past"), EDITS)
def test_an_edited_reward_is_named_with_the_manifests_and_the_replayed_decision(
    tmp_path, run_ngrp, task, index, reward, replayed, stored, past
):
    tasks = {t: list(v) for t, v in TASKS.items()}
    tasks[task][index] = reward
    inputs, rollouts = write_run(tmp_path, tasks, STATES)
    text, data = check(run_ngrp, inputs, rollouts)
    assert text.returncode == 1 and data["exit_code"] == 1
    adaptive = data["adaptive"]
    assert (adaptive["tasks_compared"], adaptive["agree"], adaptive["differ"]) == (3, 2, 1)
    manifest = STATES[str(task)]
    reason, decision, repeats = replayed
    assert adaptive["differing"] == [{
        "task": task, "manifest": manifest, "stored": stored, "past_stop": past,
        "replayed": {"reason": reason, "decision": decision, "repeats": repeats},
    }]  # fmt: skip
    assert (adaptive["past_stop_tasks"], adaptive["past_stop_rollouts"]) == (int(past > 0), past)
    finding = next(f for f in data["findings"] if f["code"] == "adaptive_decisions_differ")
    assert finding["severity"] == "error" and finding["count"] == 1
    says = "unsettled, its next round ending at repeat 6" if decision is None else f"{decision} at {repeats}"
    assert (
        f"task {task}: the manifest says {manifest['decision']} at {manifest['repeats']} repeats, the stored"
        f" rewards say {says} ({stored} stored)"
    ) in finding["message"]
    assert "learnable, --rounds 1,1,2, pass = reward >= 0.5" in finding["message"]
    assert "--resume" in finding["fix"] and "put back the rollouts it wrote" in finding["fix"]
    assert ("the resume refuses them" in finding["fix"]) == (past > 0)
    if past:
        assert f"delete the {past} rollouts" in finding["fix"]
        assert f"task {task}: rollout indices {repeats} and up" in finding["fix"]
    assert "error: 1 of 3 tasks' decisions in the run manifest do not follow" in text.stdout
    assert "adaptive: learnable" not in text.stdout  # the finding says it, not the agreement line


def test_a_live_run_is_not_compared(tmp_path, run_ngrp):
    """A collector holding the lock rewrites the decisions when its call ends: its manifest lags by design."""
    tasks = {t: list(v) for t, v in TASKS.items()}
    tasks[2][7] = 0.0  # would differ
    inputs, rollouts = write_run(tmp_path, tasks, STATES)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(SCRIPTS), str(rollouts)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        text, data = check(run_ngrp, inputs, rollouts)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    adaptive = data["adaptive"]
    assert adaptive["compared"] is False and adaptive["tasks_compared"] == 0
    assert "in progress" in adaptive["not_compared_because"]
    assert "adaptive_decisions_differ" not in {f["code"] for f in data["findings"]}
    assert "the run's decisions are not compared: the run is in progress" in text.stdout


def test_a_malformed_adaptive_block_is_a_finding_and_the_keys_are_still_accounted(tmp_path, run_ngrp):
    inputs, rollouts = write_run(tmp_path, TASKS, STATES)
    path = edit_manifest(tmp_path, lambda m: m["identity"]["adaptive"].update(pass_threshold="high"))
    text, data = check(run_ngrp, inputs, rollouts)
    finding = next(f for f in data["findings"] if f["code"] == "adaptive_manifest_invalid")
    assert finding["severity"] == "error" and str(path) in finding["message"]
    assert "identity.adaptive.pass_threshold is 'high'" in finding["message"]
    assert data["adaptive"] is None and data["counts"]["completed"] == 16 and text.returncode == 1


def test_a_fixed_run_reads_nothing_more(tmp_path, run_ngrp):
    inputs, rollouts = write_run(tmp_path, TASKS, STATES)
    edit_manifest(tmp_path, lambda m: m["identity"].pop("adaptive"))
    text, data = check(run_ngrp, inputs, rollouts)
    assert data["adaptive"] is None and "adaptive" not in text.stdout and text.returncode == 0
    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "from ngrp_lib.cli import main\n"
        f"main(['check', '--inputs', {str(inputs)!r}, '--rollouts', {str(rollouts)!r}])\n"
        "print('LOADED', sorted(m for m in sys.modules if m.endswith(('adaptive_check', 'adaptive_run'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_check_replays_an_adaptive_run_without_the_collection_packages(tmp_path):
    """The replay is the collector's rule (`stats.adaptive`), not the collector: no aiohttp needed."""
    blocker = tmp_path / "no_aiohttp.py"
    blocker.write_text(BLOCKER)
    inputs, rollouts = write_run(tmp_path / "run", TASKS, STATES)
    argv = [
        sys.executable,
        str(blocker),
        str(SCRIPT),
        "check",
        "--inputs",
        str(inputs),
        "--rollouts",
        str(rollouts),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the decisions of 3 tasks, replayed from the stored rewards, agree" in done.stdout


def test_a_manifest_without_num_repeats_is_not_compared_and_says_why(tmp_path, run_ngrp):
    inputs, rollouts = write_run(tmp_path, TASKS, STATES)
    edit_manifest(tmp_path, lambda m: m["identity"].pop("materialize"))
    text, data = check(run_ngrp, inputs, rollouts)
    assert data["adaptive"]["compared"] is False and text.returncode == 0
    assert "does not record identity.materialize.num_repeats" in data["adaptive"]["not_compared_because"]
    assert "the run's decisions are not compared:" in text.stdout


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda m: m["adaptive"].update(task_states=[1]), "adaptive.task_states is [1]"),
        (lambda m: m["adaptive"]["task_states"].update({"0": "x"}), "adaptive.task_states.0 is 'x'"),
        (lambda m: m["identity"]["adaptive"].update(first_round=9, rounds=[9]), "num_repeats is 8, less"),
    ],
)
def test_a_malformed_progress_block_is_a_finding_naming_the_key(tmp_path, run_ngrp, edit, named):
    """A task_states of another shape crashed check (AttributeError), a task state that is not an object
    was skipped without a word, and N below the first round read 'does not record num_repeats'."""
    inputs, rollouts = write_run(tmp_path, TASKS, STATES)
    edit_manifest(tmp_path, edit)
    text, data = check(run_ngrp, inputs, rollouts)
    finding = next(f for f in data["findings"] if f["code"] == "adaptive_manifest_invalid")
    assert named in finding["message"] and "Traceback" not in text.stderr and text.returncode == 1


@pytest.mark.parametrize("kind", ["torn", "directory", "fifo"])
def test_an_unreadable_manifest_is_named_not_taken_for_none(tmp_path, run_ngrp, kind):
    """A manifest that is there but cannot be read made an adaptive run pass as fixed-N without a word:
    check replayed nothing and stats would have used every repeat (biased). check warns, naming it; the
    adaptive readers refuse it (hostile pass 6)."""
    from ngrp_lib.errors import InputError
    from ngrp_lib.stats.adaptive_run import find_adaptive

    inputs, rollouts = write_run(tmp_path, TASKS, STATES)
    path = tmp_path / "r_run_manifest.json"
    path.unlink()
    {"torn": lambda: path.write_text('{"identity": {"adaptive": '), "directory": path.mkdir,
     "fifo": lambda: os.mkfifo(path)}[kind]()  # fmt: skip
    text, data = check(run_ngrp, inputs, rollouts)
    finding = next(f for f in data["findings"] if f["code"] == "run_manifest_unreadable")
    assert finding["severity"] == "warning" and str(path) in finding["message"], finding
    assert f"warning: the run manifest {path} cannot be read" in text.stdout
    with pytest.raises(InputError, match="whether the run is adaptive"):
        find_adaptive(None, rollouts)
