"""`collect --adaptive` against the real vLLM server on CPU: the file round by round, kill -9 and resume,
shards, and Gym's profiler on an adaptive run.

Rewards come from a user verifier that scores by identity key alone (`KEYED_VERIFIER`), so two runs get
the same rewards whatever the model wrote, and "the same files as a run never killed" can be compared
byte for byte. The generations themselves still come from the real server.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from profile_compare import compare_outputs, gym_profile
from test_collect_vllm import keys_of, ngrp, validate_rows, write_tasks

from ngrp_lib.adaptive import rounds as adaptive_module
from ngrp_lib.artifacts import jsonl, schemas
from ngrp_lib.stats.adaptive import Rule, Schedule, play

pytestmark = pytest.mark.vllm

# task % 4: 0 never passes, 1 always passes, 2 passes from its 6th repeat on, 3 alternates (mixed at once)
KEYED_VERIFIER = """
def outcome(task, rollout):
    kind = task % 4
    return kind == 1 or (kind == 2 and rollout >= 5) or (kind == 3 and rollout % 2 == 0)

def score(row, response):
    return {"reward": 1.0 if outcome(row["_ng_task_index"], row["_ng_rollout_index"]) else 0.0}
"""


def outcome(task: int, rollout: int) -> bool:
    kind = task % 4
    return kind == 1 or (kind == 2 and rollout >= 5) or (kind == 3 and rollout % 2 == 0)


def adaptive_args(tasks, out, base_url, *extra):
    return ["collect", "--input", tasks, "--output", out, "--base-url", base_url, "--model", "tiny",
            "--verifier-fn", "keyed_verifier:score", "--num-repeats", "12", "--seed-per-repeat",
            "--adaptive", "learnable", "--first-round", "3", *extra]  # fmt: skip


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "keyed_verifier.py").write_text(KEYED_VERIFIER)
    return tmp_path


def expected_sizes(tasks: int) -> dict[int, int]:
    """What learnable with R=3, N=12 gives each task on KEYED_VERIFIER's outcomes, worked out by the rule."""
    schedule = Schedule(3, 12)
    return {
        t: play(Rule("learnable"), schedule, [outcome(t, r) for r in range(12)]).size for t in range(tasks)
    }


def test_expected_sizes_by_hand():
    # never / always: all 12; passes from the 6th: mixed in round 2 (6 repeats); alternating: round 1
    assert expected_sizes(4) == {0: 12, 1: 12, 2: 6, 3: 3}


def _keys_in_order(path: Path) -> list[tuple[int, int]]:
    return [(r.data["_ng_task_index"], r.data["_ng_rollout_index"]) for r in jsonl.iter_rows(path)]


def test_rounds_run_per_task_and_every_moment_leaves_valid_files(
    vllm_server, folder, run_ngrp, run_ngrp_in_process, monkeypatch
):
    from ngrp_lib.collect.run import Run

    tasks = write_tasks(folder / "tasks.jsonl", 8)
    out = folder / "run" / "rollouts.jsonl"
    materialized = folder / "run" / "rollouts_materialized_inputs.jsonl"
    seen: list[bytes] = []
    real_extend, real_advance = Run.extend, adaptive_module.advance

    def spying_extend(run, rows):
        # a task's next round, added while the runner runs: appended whole, the rows valid, every
        # rollout written so far has its row in the file
        real_extend(run, rows)
        if not rows:  # told a rollout that ends no round
            return
        grown = materialized.read_bytes()
        assert grown.endswith(b"\n") and (not seen or grown.startswith(seen[-1]) and grown != seen[-1])
        seen.append(grown)
        validate_rows(materialized, "materialized_input")
        assert set(keys_of(out)) <= set(keys_of(materialized))

    finals: list[bytes] = []

    def spying_advance(options, settings, plan):
        summary, follow_up = real_advance(options, settings, plan)
        finals.append(materialized.read_bytes())  # after the call: complete, in round order
        check = ngrp("check", "--inputs", materialized, "--rollouts", out, "--json")
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["counts"]["missing"] == 0
        assert validate_rows(materialized, "materialized_input") == validate_rows(out, "rollout")
        return summary, follow_up

    monkeypatch.setattr(Run, "extend", spying_extend)
    monkeypatch.setattr(adaptive_module, "advance", spying_advance)
    # in this process: the spies above must see the run
    proc = run_ngrp_in_process(
        *adaptive_args(tasks, out, vllm_server.base_url, "--concurrency", "2", "--json")
    )
    assert proc.returncode == 0, proc.stderr
    assert len(finals) == 1  # one runner call: the rounds ran inside it, no barrier between them
    summary = json.loads(proc.stdout)
    assert summary["adaptive"]["runner_calls"] == 1
    schemas.validator("collect_result").validate(summary)
    sizes = expected_sizes(8)
    # one append per task round after the first: 4 tasks x 3 more rounds, 2 tasks x 1 more
    assert len(seen) == sum(Schedule(3, 12).round_of(n - 1) - 1 for n in sizes.values()) == 14
    assert keys_of(out) == {(t, r): 1 for t, n in sizes.items() for r in range(n)}
    # pipelined: a task's round 2 reached the output before another task's round 1 did
    order = _keys_in_order(out)
    first_later = min(i for i, (_, r) in enumerate(order) if r >= 3)
    last_first = max(i for i, (_, r) in enumerate(order) if r < 3)
    assert first_later < last_first, order
    # the final file is in round order (every round 1 row, then round 2's...), each round in task order
    final = _keys_in_order(materialized)
    assert final == sorted(final, key=lambda k: (Schedule(3, 12).round_of(k[1]), k[0], k[1]))
    assert finals[-1] == materialized.read_bytes()
    assert summary["completed"] == summary["expected"] == 66
    assert summary["adaptive"]["rollouts_assigned"] == sum(sizes.values()) == 66
    assert summary["adaptive"]["settled_per_round"] == {"1": 2, "2": 2, "3": 0, "4": 0}
    assert summary["adaptive"]["tasks_by_reason"] == {"reached_n": 4, "settled": 4}
    manifest = json.loads((folder / "run" / "rollouts_run_manifest.json").read_text())
    schemas.validator("run_manifest").validate(manifest)
    states = manifest["adaptive"]["task_states"]
    assert {int(t): s["repeats"] for t, s in states.items()} == sizes
    assert states["0"]["decision"] == "all_fail" and states["1"]["decision"] == "all_pass"
    # resuming a finished run sends nothing; a changed rule is refused, naming the field
    again = run_ngrp(*adaptive_args(tasks, out, vllm_server.base_url, "--resume", "--json"))
    assert again.returncode == 0 and json.loads(again.stdout)["succeeded"] == 0, again.stderr
    args = adaptive_args(tasks, out, vllm_server.base_url, "--resume")
    changed = run_ngrp(*["band:0.2,0.8" if a == "learnable" else a for a in args])
    assert changed.returncode == 2 and 'rule: was "learnable", now "band:0.2,0.8"' in changed.stderr


def test_a_growing_schedule_runs_its_rounds_records_them_and_refuses_a_change_on_resume(
    vllm_server, folder, run_ngrp
):
    """`--rounds 1,2`: 1 repeat, then 2 more at a time (1, 3, 5, ... 11, 12) on KEYED_VERIFIER's outcomes:
    never or always passing runs all 12; passing from the 6th repeat mixes at the 6th, the end of the
    round that reaches 7; alternating mixes at the 2nd, the end of the round that reaches 3."""
    tasks = write_tasks(folder / "tasks.jsonl", 8)
    out = folder / "run" / "rollouts.jsonl"
    args = [*adaptive_args(tasks, out, vllm_server.base_url)[:-2], "--rounds", "1,2", "--concurrency", "3"]
    proc = run_ngrp(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    sizes = {t: (12, 12, 7, 3)[t % 4] for t in range(8)}
    assert keys_of(out) == {(t, r): 1 for t, n in sizes.items() for r in range(n)}
    summary = json.loads(proc.stdout)["adaptive"]
    assert (summary["rounds"], summary["first_round"], summary["round_size"]) == ([1, 2], 1, 2)
    assert summary["max_rounds"] == 7 and summary["rollouts_assigned"] == 68
    assert summary["settled_per_round"] == {"1": 0, "2": 2, "3": 0, "4": 2, "5": 0, "6": 0, "7": 0}
    manifest = json.loads((folder / "run" / "rollouts_run_manifest.json").read_text())
    schemas.validator("run_manifest").validate(manifest)
    assert manifest["identity"]["adaptive"]["rounds"] == [1, 2]
    assert summary["rounds_option"] == manifest["adaptive"]["rounds_option"] == "--rounds 1,2"  # as given
    assert "rounds_option" not in manifest["identity"]["adaptive"]  # not part of what --resume compares
    schedule = Schedule(1, 12, (2,))
    final = _keys_in_order(out.with_name("rollouts_materialized_inputs.jsonl"))
    assert final == sorted(final, key=lambda k: (schedule.round_of(k[1]), k[0], k[1]))
    again = run_ngrp(*args, "--resume", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["succeeded"] == 0, again.stderr
    changed = run_ngrp(*[("1,3" if a == "1,2" else a) for a in args], "--resume")
    assert changed.returncode == 2 and "rounds: was [1, 2], now [1, 3]" in changed.stderr, changed.stderr
    spelled = run_ngrp(*[a for a in args if a not in ("--rounds", "1,2")], "--first-round", "1", "--resume")
    assert spelled.returncode == 2 and "rounds: was [1, 2], now [1]" in spelled.stderr, spelled.stderr


def test_growing_rounds_hold_the_limit_while_work_waits(vllm_server, folder, run_ngrp):
    """`--rounds 1,1,2,4,8` (N = 16) under `--concurrency 7`, a limit no round size divides, rows grouped
    (no seed: a round is one request of n while it fits): while a request waited for room the batch held
    all 7 sequences, as rounds that do not fit go in parts. A round waiting whole held as few as 4 (a
    round of 4 in flight, the next waiting for 8 - 4 = 4 more free). The decisions are fixed N's."""
    tasks = write_tasks(folder / "tasks.jsonl", 12, max_tokens=16)
    out = folder / "run" / "rollouts.jsonl"
    args = ["collect", "--input", tasks, "--output", out, "--base-url", vllm_server.base_url,
            "--model", "tiny", "--verifier-fn", "keyed_verifier:score", "--num-repeats", "16",
            "--adaptive", "learnable", "--rounds", "1,1,2,4,8", "--concurrency", "7"]  # fmt: skip
    proc = run_ngrp(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    schedule = Schedule(1, 16, (1, 2, 4, 8))
    sizes = {t: play(Rule("learnable"), schedule, [outcome(t, r) for r in range(16)]).size for t in range(12)}
    assert keys_of(out) == {(t, r): 1 for t, n in sizes.items() for r in range(n)}
    load = summary["load"]
    assert load["limit"] == 7 and load["sequences_peak"] == 7, load
    assert load["waiting_s"] > 0 and load["sequences_mean_waiting"] >= 6.9, load
    manifest = json.loads((folder / "run" / "rollouts_run_manifest.json").read_text())
    assert manifest["runs"][-1]["load"] == load
    again = run_ngrp(*args, "--resume")  # the text summary names the schedule as given
    assert again.returncode == 0 and "adaptive learnable (--rounds 1,1,2,4,8):" in again.stdout, again
    assert "figures above: every round of this invocation (the rounds run in one pass)" in again.stdout


def _rows_in(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_kill_9_mid_round_then_resume_gives_the_files_of_an_unkilled_run(vllm_server, folder):
    tasks = write_tasks(folder / "tasks.jsonl", 24)
    plain = folder / "plain" / "rollouts.jsonl"
    assert ngrp(*adaptive_args(tasks, plain, vllm_server.base_url), cwd=folder).returncode == 0
    out = folder / "killed" / "rollouts.jsonl"
    base = adaptive_args(tasks, out, vllm_server.base_url, "--concurrency", "2")
    rng = random.Random(26)
    killed_mid_run = mid_pipeline = 0
    for attempt in range(6):
        proc = subprocess.Popen(
            [*ENTRY, *map(str, base + (["--resume"] if attempt else []))],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        before, target = _rows_in(out), rng.randint(5, 60)  # often past a round's end, into the next
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and _rows_in(out) < before + target and proc.poll() is None:
            time.sleep(rng.uniform(0, 0.02))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed_mid_run += before < _rows_in(out)
        # mid-pipeline: a task was in a later round while another's first round was not all written
        materialized = out.with_name("rollouts_materialized_inputs.jsonl")
        if materialized.exists() and out.exists():
            rows, done = _keys_in_order(materialized), set(keys_of(out))
            later = any(k[1] >= 3 for k in rows)
            mid_pipeline += later and any(k[1] < 3 and k not in done for k in rows)
    final = ngrp(*base, "--resume", "--json", cwd=folder)
    assert final.returncode == 0, final.stderr
    assert killed_mid_run >= 3 and mid_pipeline >= 1
    for name in ("rollouts_materialized_inputs.jsonl",):
        assert (out.parent / name).read_bytes() == (plain.parent / name).read_bytes()
    killed_manifest = json.loads((out.parent / "rollouts_run_manifest.json").read_text())
    plain_manifest = json.loads((plain.parent / "rollouts_run_manifest.json").read_text())
    assert killed_manifest["adaptive"] == plain_manifest["adaptive"]
    assert (
        killed_manifest["identity"]["materialized_sha256"]
        == plain_manifest["identity"]["materialized_sha256"]
    )

    def rewards(path):
        return {
            (r.data["_ng_task_index"], r.data["_ng_rollout_index"]): r.data["reward"]
            for r in jsonl.iter_rows(path)
        }

    assert rewards(out) == rewards(plain) and max(keys_of(out).values()) == 1
    sizes = expected_sizes(24)
    assert set(rewards(out)) == {(t, r) for t, n in sizes.items() for r in range(n)}


def test_shards_keep_each_task_in_its_shard(vllm_server, folder):
    tasks = write_tasks(folder / "tasks.jsonl", 8)
    out = folder / "rollouts.jsonl"
    for shard in ("0/2", "1/2"):
        proc = ngrp(*adaptive_args(tasks, out, vllm_server.base_url, "--shard", shard), cwd=folder)
        assert proc.returncode == 0, proc.stderr
    sizes = expected_sizes(8)
    for index in (0, 1):
        keys = keys_of(folder / f"rollouts-shard-{index}-of-2.jsonl")
        assert keys == {(t, r): 1 for t, n in sizes.items() if t % 2 == index for r in range(n)}


@pytest.mark.gym
def test_gym_profiler_reads_an_adaptive_run(vllm_server, folder):
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv or not (Path(venv) / "bin" / "gym").exists():
        pytest.skip("no NeMo Gym venv: set NGRP_GYM_VENV")
    tasks = write_tasks(folder / "tasks.jsonl", 8)
    out = folder / "rollouts.jsonl"
    assert ngrp(*adaptive_args(tasks, out, vllm_server.base_url), cwd=folder).returncode == 0
    proc = gym_profile(Path(venv) / "bin" / "gym", folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    profile = [json.loads(x) for x in (folder / "rollouts_reward_profiling.jsonl").read_text().splitlines()]
    sizes = expected_sizes(8)
    assert [(p["_ng_task_index"], p["num_rollouts"], p["expected_num_rollouts"]) for p in profile] == [
        (t, n, n) for t, n in sizes.items()
    ]
    ours = ngrp("profile", "--inputs", folder / "rollouts_materialized_inputs.jsonl", "--rollouts", out,
                "--output-dir", folder / "ours", "--gym-only")  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    assert compare_outputs(folder / "ours" / "rollouts.jsonl", out) == []  # Gym's files, Gym's values


def _with_identical_lines(path: Path) -> tuple[Path, dict[int, list[int]]]:
    """Six tasks and two copies: line 3 repeats line 2 (task 1, always passes) right after it, line 9
    repeats line 4 (task 2, mixed from its 6th repeat on) further down, after a blank line 6. Gym numbers
    the copies as their originals, so the file has six task indices; returns each task's lines (1-based)."""
    write_tasks(path, 6)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], lines[1], *lines[2:4], "\n", *lines[4:], lines[2]]))
    return path, {0: [1], 1: [2, 3], 2: [4, 9], 3: [5], 4: [7], 5: [8]}


def test_identical_lines_are_one_task_sampled_once_decided_as_fixed_n_on_the_same_draws(vllm_server, folder):
    tasks, task_lines = _with_identical_lines(folder / "tasks.jsonl")
    out = folder / "adaptive" / "rollouts.jsonl"
    proc = ngrp(*adaptive_args(tasks, out, vllm_server.base_url, "--json"), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "2 tasks have several identical lines" in proc.stderr
    summary = json.loads(proc.stdout)
    schemas.validator("collect_result").validate(summary)
    manifest = json.loads((out.parent / "rollouts_run_manifest.json").read_text())
    schemas.validator("run_manifest").validate(manifest)
    states = manifest["adaptive"]["task_states"]
    assert manifest["adaptive"]["identical_lines"] == {"1": [2, 3], "2": [4, 9]}
    assert manifest["adaptive"]["tasks"] == 6
    # sampled once: the copies add no rows, each task's rollout indices run 0 .. its size - 1
    sizes = expected_sizes(6)
    assert keys_of(out) == {(t, r): 1 for t, n in sizes.items() for r in range(n)}
    assert {int(t): s["repeats"] for t, s in states.items()} == sizes

    # a fixed-N run on the same file (Gym's expansion: 12 rows per line, so 24 for tasks 1 and 2)
    fixed = folder / "fixed" / "rollouts.jsonl"
    dropped = ("--adaptive", "learnable", "--first-round", "3")
    plain = [a for a in adaptive_args(tasks, fixed, vllm_server.base_url) if a not in dropped]
    assert ngrp(*plain, cwd=folder).returncode == 0
    draws: dict[int, dict[int, bool]] = {}
    for row in jsonl.iter_rows(fixed):
        draws.setdefault(row.data["_ng_task_index"], {})[row.data["_ng_rollout_index"]] = (
            row.data["reward"] == 1
        )
    assert {t: len(d) for t, d in draws.items()} == {0: 12, 1: 24, 2: 24, 3: 12, 4: 12, 5: 12}
    for task, state in states.items():
        sequence = [draws[int(task)][r] for r in range(12)]  # the fixed run's draws, in rollout order
        expected = play(Rule("learnable"), Schedule(3, 12), sequence)
        assert (state["decision"], state["repeats"]) == (expected.decision, expected.size), task

    # curriculum keeps the mixed tasks (2, 3) by the run's decisions and writes every line of each
    materialized = out.parent / "rollouts_materialized_inputs.jsonl"
    made = ngrp("profile", "--inputs", materialized, "--rollouts", out)  # beside the run: its manifest
    assert made.returncode == 0, made.stderr
    kept = folder / "kept.jsonl"
    chosen = ngrp("curriculum", out.parent / "rollouts_reward_profiling.jsonl", "--tasks", tasks,
                  "--output", kept, "--learnable-for", "4", "--json")  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    source = tasks.read_text().splitlines()
    written = kept.read_text().splitlines()
    assert [json.loads(x)["expected_answer"] for x in written] == ["4", "6", "4"]  # lines 4, 5 and 9
    assert [{k: v for k, v in json.loads(x).items() if not k.startswith("pass_rate")} for x in written] == [
        json.loads(source[n - 1]) for n in sorted(task_lines[2] + task_lines[3])
    ]
    result = json.loads(chosen.stdout)
    assert result["adaptive"]["selected_by"].startswith("the run's")
    assert (result["n_selected"], result["n_written_lines"], result["n_duplicate_lines"]) == (2, 3, 2)
    assert [(t["task"], t["source_lines"]) for t in result["selected_tasks"]] == [(2, [4, 9]), (3, [5])]
    assert "selected: task 2 (lines 4, 9), task 3 (line 5)" in ngrp(
        "curriculum", out.parent / "rollouts_reward_profiling.jsonl", "--tasks", tasks, "--output", kept,
        "--learnable-for", "4", "--overwrite").stdout  # fmt: skip

    # line numbers beside task indices: stats, inspect and the viewer, from the run's manifest
    stats = ngrp("stats", out.parent / "rollouts_reward_profiling.jsonl", "--json")
    assert stats.returncode == 0, stats.stderr
    per_task = json.loads(stats.stdout)["per_task"]
    assert {r["task"]: r["source_lines"] for r in per_task} == task_lines
    shown = ngrp("inspect", out, "--json", "--limit", "0")
    assert shown.returncode == 0, shown.stderr
    items = [json.loads(x) for x in shown.stdout.splitlines()]
    schemas.validator("inspect_rollout").validate(items[0])
    assert {i["task"]["task"]: i["task"]["source_lines"] for i in items} == task_lines
    assert "== task 2 (lines 4, 9) (agent tiny): passed 1/6" in ngrp("inspect", out, "--task", "2").stdout
    from view_helpers import Viewer

    with Viewer(out, cache=folder / "cache", cwd=folder) as viewer:
        status, _, body = viewer.get("/tasks.json")
        assert status == 200
        assert {t["task"]: t["source_lines"] for t in json.loads(body)["tasks"]} == task_lines
        status, _, page = viewer.get("/")
        assert status == 200 and b'<td class="num lines">4, 9</td>' in page


def _fix_command(fix: str) -> str:
    """The resume command in check's fix for decisions that differ (after `to keep them, ... then`)."""
    start = fix.index(", then ") + 7 if ", then " in fix else fix.index("to keep them, ") + 14
    return fix[start : fix.index(" (replays the rule")]


def _edit_rewards(path: Path, change) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    kept = [row for row in rows if change(row) is not False]
    path.write_text("".join(json.dumps(row) + "\n" for row in kept))


def test_check_replays_the_decisions_and_its_fix_makes_an_edited_run_agree_again(vllm_server, folder):
    """check on a real adaptive run: the manifest's decisions follow from the stored rewards. In a copy of
    the run one stored reward is flipped: check names that task, with the manifest's and the replayed
    decision and repeats (exit 1), and the resume command it prints, run as printed, collects what the rule
    now asks for the copy (not the original the copied manifest names) and makes check agree again. A flip
    that makes the rule stop before repeats already drawn: the resume refuses them before rewriting any
    file (exit 3); with those rows deleted, as the fix says, it agrees."""
    write_tasks(folder / "tasks.jsonl", 4)
    args = adaptive_args("tasks.jsonl", "run/rollouts.jsonl", vllm_server.base_url)
    assert ngrp(*args, cwd=folder).returncode == 0

    def check(name: str) -> tuple[subprocess.CompletedProcess, dict]:
        files = (
            "--inputs",
            f"{name}/rollouts_materialized_inputs.jsonl",
            "--rollouts",
            f"{name}/rollouts.jsonl",
        )
        text, data = ngrp("check", *files, cwd=folder), ngrp("check", *files, "--json", cwd=folder)
        assert text.returncode == data.returncode, text.stderr
        result = json.loads(data.stdout)
        schemas.validator("check_output").validate(result)
        return text, result

    text, data = check("run")
    assert text.returncode == 0, text.stdout
    assert (
        "adaptive: learnable, --first-round 3: the decisions of 4 tasks, replayed from the stored rewards,"
        " agree with the run's manifest (2 mixed, 1 all fail, 1 all pass)"
    ) in text.stdout
    assert (data["adaptive"]["agree"], data["adaptive"]["differ"]) == (4, 0)

    # task 2 passes from its 6th repeat on: mixed at 6. Its 6th fails now: F x 6 is not mixed, round 3
    shutil.copytree(folder / "run", folder / "copy")
    _edit_rewards(folder / "copy" / "rollouts.jsonl", lambda row: row.update(reward=0.0)
                  if (row["_ng_task_index"], row["_ng_rollout_index"]) == (2, 5) else None)  # fmt: skip
    text, data = check("copy")
    assert text.returncode == 1 and data["exit_code"] == 1
    assert data["adaptive"]["differing"] == [{
        "task": 2, "manifest": {"repeats": 6, "reason": "settled", "decision": "mixed"},
        "replayed": {"reason": "pending", "decision": None, "repeats": 9}, "stored": 6, "past_stop": 0,
    }]  # fmt: skip
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["adaptive_decisions_differ"] and errors[0]["count"] == 1
    assert "task 2: the manifest says mixed at 6 repeats, the stored rewards say unsettled" in text.stdout
    command = _fix_command(errors[0]["fix"])
    assert "--output copy/rollouts.jsonl" in command and "run/rollouts.jsonl" not in command, command
    # as printed: `ngrp ...` when run through the installed entry point, whose folder a user has on PATH
    path = os.pathsep.join([str(Path(ENTRY[0]).parent), os.environ.get("PATH", "")])
    done = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": path})  # fmt: skip
    assert done.returncode == 0, done.stderr
    text, data = check("copy")
    assert text.returncode == 0, text.stdout
    states = json.loads((folder / "copy" / "rollouts_run_manifest.json").read_text())["adaptive"][
        "task_states"
    ]
    assert states["2"] == {"repeats": 9, "reason": "settled", "decision": "mixed"}  # repeats 6-8 pass
    assert keys_of(folder / "copy" / "rollouts.jsonl").keys() >= {(2, 6), (2, 7), (2, 8)}
    original = json.loads((folder / "run" / "rollouts_run_manifest.json").read_text())["adaptive"]
    assert original["task_states"]["2"]["repeats"] == 6  # the fix resumed the copy only

    # task 0 never passes (all 12 drawn); its first repeat passes now: mixed at 3, 9 drawn past that stop
    shutil.copytree(folder / "run", folder / "early")
    _edit_rewards(folder / "early" / "rollouts.jsonl", lambda row: row.update(reward=1.0)
                  if (row["_ng_task_index"], row["_ng_rollout_index"]) == (0, 0) else None)  # fmt: skip
    text, data = check("early")
    assert text.returncode == 1
    assert data["adaptive"]["differing"] == [{
        "task": 0, "manifest": {"repeats": 12, "reason": "reached_n", "decision": "all_fail"},
        "replayed": {"reason": "settled", "decision": "mixed", "repeats": 3}, "stored": 12, "past_stop": 9,
    }]  # fmt: skip
    fix = next(f["fix"] for f in data["findings"] if f["code"] == "adaptive_decisions_differ")
    assert (
        "delete the 9 rollouts drawn past where the rule now stops (1 task; task 0: rollout indices 3" in fix
    )
    command = _fix_command(fix)

    def files() -> dict[str, bytes]:  # the lock file holds the pid of the last collector
        return {p.name: p.read_bytes() for p in (folder / "early").iterdir() if p.suffix != ".lock"}

    before = files()
    refused = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 3 and "task 0: rollout indices 3, 4, 5, 6, 7 ..." in refused.stderr
    assert files() == before  # nothing rewritten
    _edit_rewards(folder / "early" / "rollouts.jsonl",
                  lambda row: not (row["_ng_task_index"] == 0 and row["_ng_rollout_index"] >= 3))  # fmt: skip
    # as printed: `ngrp ...` when run through the installed entry point, whose folder a user has on PATH
    path = os.pathsep.join([str(Path(ENTRY[0]).parent), os.environ.get("PATH", "")])
    done = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": path})  # fmt: skip
    assert done.returncode == 0, done.stderr
    text, data = check("early")
    assert text.returncode == 0 and data["adaptive"]["agree"] == 4, text.stdout
    states = json.loads((folder / "early" / "rollouts_run_manifest.json").read_text())["adaptive"][
        "task_states"
    ]
    assert states["0"] == {"repeats": 3, "reason": "settled", "decision": "mixed"}
