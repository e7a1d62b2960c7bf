"""`ngrp inspect ... --tasks-out FILE`: the task lines behind a selection, for `ngrp collect --input FILE`
(fresh replay 2026-12-05, wrong turn 9). The end-to-end flow against a real server is in
test_tasks_out_vllm.py; here: where the lines come from (the run's tasks file when its manifest names it
unchanged, else the materialized inputs), that every selected rollout's task is written and nothing else,
that `--limit` does not cut it, that collect's own reader takes the file with the numbering kept, and the
refusals."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
from run_helpers import input_row, write_run

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "schemas" / "inspect_tasks_out.schema.json").read_text()
)
CAP = 64


def _capped_run(folder: Path) -> tuple[Path, Path]:
    """A run whose every third rollout stopped at the cap (64, in its materialized inputs)."""
    rollouts, inputs = write_run(folder, tasks=10, repeats=4, truncate_every=3)
    rows = [json.loads(line) for line in inputs.read_text().splitlines()]
    for row in rows:
        row["responses_create_params"]["max_output_tokens"] = CAP
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rollouts, inputs


def _capped_failed(folder: Path, rollouts: Path) -> set[int]:
    flagged = {
        (v["_ng_task_index"], v["_ng_rollout_index"])
        for v in map(json.loads, (folder / "rollout_verdicts.jsonl").read_text().splitlines())
        if any(f["check"] == "ngrp/truncated_at_token_cap" for f in v["findings"])
    }
    return {
        r["_ng_task_index"]
        for r in map(json.loads, rollouts.read_text().splitlines())
        if (r["_ng_task_index"], r["_ng_rollout_index"]) in flagged and r["reward"] < 1
    }


def test_the_tasks_behind_capped_zeros_from_the_materialized_inputs(tmp_path, run_ngrp):
    rollouts, inputs = _capped_run(tmp_path)
    assert run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts).returncode in (0, 1)
    expected = _capped_failed(tmp_path, rollouts)
    assert 1 < len(expected) < 10
    out = tmp_path / "capped.jsonl"
    select = ("inspect", rollouts, "--finding", "ngrp/truncated_at_token_cap", "--failed")
    done = run_ngrp(*select, "--tasks-out", out, "--limit", "1", "--json")  # --limit limits what is shown
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    jsonschema.validate(said, SCHEMA)
    assert said["tasks"] == sorted(expected) and said["n_tasks"] == said["n_lines"] == len(expected)
    assert said["source_kind"] == "materialized" and said["source"] == str(inputs)
    assert (said["max_output_tokens"], said["raise_cap_to"]) == ([CAP], 4 * CAP)
    assert said["next"] == (
        f"ngrp collect --input {out} --output {tmp_path / 'capped' / 'rollouts.jsonl'} --num-repeats 4 "
        f"--max-output-tokens {4 * CAP}"
    )
    assert said["next_is_complete"] is False  # no run manifest: the server and options are the user's
    assert [c.split()[1] for c in said["then"]] == ["profile", "profile", "compare"]
    materialized = {}
    for row in map(json.loads, inputs.read_text().splitlines()):
        materialized.setdefault(
            row["_ng_task_index"], {k: v for k, v in row.items() if k != "_ng_rollout_index"}
        )
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == [materialized[t] for t in sorted(expected)]  # one row per task, its index kept
    # collect's own reader takes the file, and the tasks keep their numbers
    made = tmp_path / "m.jsonl"
    done = run_ngrp("materialize", "--input", out, "--output", made, "--num-repeats", "2")
    assert done.returncode == 0, done.stderr
    keys = [
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, made.read_text().splitlines())
    ]
    assert keys == [(t, k) for t in sorted(expected) for k in range(2)]
    # the text names the route's next step; an existing file is refused, --overwrite replaces it
    text = run_ngrp(*select, "--tasks-out", out, "--overwrite")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(
        f"wrote {out}: {len(expected)} tasks ({len(expected)} rows rebuilt from {inputs}"
    )
    assert lines[1] == (
        f"next: collect those tasks alone at 4x the cap (max_output_tokens {CAP} -> {4 * CAP}; keep it "
        "within the server's context window):"
    )
    assert lines[2].startswith(f"  ngrp collect --input {out} ") and lines[2].endswith(
        "(add the run's server and options)"
    )
    refused = run_ngrp(*select, "--tasks-out", out)
    assert refused.returncode == 2 and "already exists" in refused.stderr
    alone = run_ngrp("inspect", rollouts, "--overwrite")
    assert alone.returncode == 2 and "--tasks-out" in alone.stderr


def _tasks_file(path: Path, tasks: int) -> list[bytes]:
    """The tasks file the run was made from, as Gym numbers it: task t is the t-th distinct line. A blank
    line and a second copy of task 3's line (the same task, Gym's rule) make its line numbers its own."""
    lines = []
    for t in range(tasks):
        row = {k: v for k, v in input_row(t, 0, "policy_agent").items() if not k.startswith("_ng_")}
        lines.append(json.dumps(row).encode())
    body = [*lines[:2], b"", *lines[2:], lines[3]]
    path.write_bytes(b"\n".join(body) + b"\n")
    return lines


def test_the_runs_own_tasks_file_when_its_manifest_names_it_unchanged(tmp_path, run_ngrp):
    rollouts, inputs = write_run(tmp_path, tasks=6, repeats=2)
    tasks = tmp_path / "tasks.jsonl"
    lines = _tasks_file(tasks, 6)
    manifest = tmp_path / "rollouts_run_manifest.json"

    def name_it() -> None:
        sha = hashlib.sha256(tasks.read_bytes()).hexdigest()
        manifest.write_text(json.dumps({"input": {"path": str(tasks), "sha256": sha}}))

    name_it()
    out = tmp_path / "picked.jsonl"
    pick = ("inspect", rollouts, "--task", "3", "--task", "1", "--tasks-out", out, "--overwrite", "--json")
    said = json.loads(run_ngrp(*pick).stdout)
    assert (said["source_kind"], said["source"], said["source_note"]) == ("tasks", str(tasks), None)
    assert said["tasks"] == [1, 3] and said["n_lines"] == 3  # task 3 is two lines of the file: both kept
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == [
        {**json.loads(lines[1]), "_ng_task_index": 1},
        {**json.loads(lines[3]), "_ng_task_index": 3},
        {**json.loads(lines[3]), "_ng_task_index": 3},
    ]
    assert said["next_is_complete"] is False  # this manifest holds no command to rebuild
    # the tasks file changed since the run: its lines may not be the run's tasks, the inputs are used
    tasks.write_bytes(tasks.read_bytes() + lines[0] + b"\n")
    said = json.loads(run_ngrp(*pick).stdout)
    assert said["source_kind"] == "materialized" and "changed since the run" in said["source_note"]
    tasks.unlink()
    said = json.loads(run_ngrp(*pick).stdout)
    assert said["source_kind"] == "materialized" and "not found from here" in said["source_note"]
    inputs.unlink()  # and no inputs either: nothing to write the lines from
    gone = run_ngrp(*pick)
    assert gone.returncode == 3 and "needs the run's task lines" in gone.stdout + gone.stderr
