"""The Slurm recipe of references/collection-slurm.md, run as written on a real one-node Slurm cluster.

The array script and the submit block are read from the document and changed only where a test must:
paths under tmp_path, 3 array tasks instead of 8, few repeats and tokens, no `--gpus-per-node`, and no
`ngrp serve`: each task's endpoints file points at the real vLLM CPU server, which runs outside Slurm as a
GPU pool would. Each edit must match the document exactly once, so a recipe that changes fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_fixture import FINISHED

pytestmark = [pytest.mark.slurm, pytest.mark.vllm]

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "references" / "collection-slurm.md"
SCRIPT = REPO / "scripts" / "ngrp.py"
SHARDS = 3
PER_TASK = '--output "$RUN/task-$SLURM_ARRAY_TASK_ID/rollouts.jsonl"'  # the document's per-folder variant
PER_TASK_GLOB = "$RUN/task-*/rollouts-shard-*-of-8.jsonl"


def doc_block(marker: str) -> str:
    """The one ```bash block of the document that contains `marker`."""
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S) if marker in b]
    assert len(blocks) == 1, f"{DOC.name}: expected one bash block with {marker!r}, found {len(blocks)}"
    return blocks[0]


def adapt(text: str, edits: list[tuple[str, str]]) -> str:
    """Apply regex edits, each of which must match exactly once."""
    for pattern, replacement in edits:
        text, count = re.subn(pattern, lambda _m, r=replacement: r, text, flags=re.M)
        assert count == 1, f"{DOC.name} changed: {pattern!r} matched {count} times"
    return text


def array_script(run: Path, tasks: Path, repeats: int, concurrency: int, per_task: bool) -> str:
    edits = [
        (r"^#SBATCH --array=0-7\b", f"#SBATCH --array=0-{SHARDS - 1}"),
        (r"^#SBATCH --gpus-per-node=8\n", ""),  # no GPUs: the server runs outside Slurm
        (r"^RUN=/shared/runs/qwen3-8b-math", f"RUN={run}"),
        # no `ngrp serve`: the endpoints file $EP is written by the test, pointing at the CPU server
        (r"^ngrp serve .*\\\n.*--detach\n", ""),
        (r"^trap 'ngrp serve stop .*\n", ""),
        (re.escape("/shared/data/math_tasks.jsonl"), str(tasks)),
        (re.escape("--num-repeats 16"), f"--num-repeats {repeats}"),
        (re.escape("--concurrency 2048"), f"--concurrency {concurrency}"),
    ]
    if per_task:
        edits.append((re.escape('--output "$RUN/rollouts.jsonl"'), PER_TASK))
    return adapt(doc_block("#SBATCH --job-name=ngrp-collect"), edits)


def submit_block(run: Path, per_task: bool) -> str:
    edits = [(r"^  RUN=/shared/runs/qwen3-8b-math", f"  RUN={run}")]
    glob = PER_TASK_GLOB if per_task else "$RUN/rollouts-shard-*-of-8.jsonl"
    edits.append((re.escape("$RUN/rollouts-shard-*-of-8.jsonl"), glob.replace("-of-8", f"-of-{SHARDS}")))
    return adapt(doc_block("ARRAY_JOB_ID=$(sbatch"), edits)


def write_tasks(path: Path, count: int, max_tokens: int) -> Path:
    rows = [
        {"responses_create_params": {"input": f"Count to {t}.", "max_output_tokens": max_tokens},
         "expected_answer": str(t)}
        for t in range(count)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def setup_run(tmp_path: Path, server, tasks: int, max_tokens: int) -> tuple[Path, Path, dict]:
    """The run folder with one endpoints file per array task, the task file, and an env whose PATH has
    an `ngrp` (this checkout, this interpreter) for the jobs, which inherit the submitting environment."""
    run = tmp_path / "run"
    run.mkdir()
    for i in range(SHARDS):
        endpoints = {"endpoints": [{"base_url": server.base_url, "model": server.model}]}
        (run / f"endpoints-{i}.json").write_text(json.dumps(endpoints))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ngrp").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SCRIPT}" "$@"\n')
    (bin_dir / "ngrp").chmod(0o755)
    return run, write_tasks(tmp_path / "tasks.jsonl", tasks, max_tokens), {"bin": str(bin_dir)}


def submit(cluster, tmp_path: Path, block: str, bin_dir: str) -> str:
    """Run the document's submit block in tmp_path (where collect.sbatch is); return the merge job id."""
    env = {**cluster.env, "PATH": f"{bin_dir}:{cluster.env.get('PATH', '')}"}
    proc = subprocess.run(
        ["bash", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return re.findall(r"Submitted batch job (\d+)", proc.stdout)[-1]


def wait_merge(cluster, job: str, timeout: float = 600) -> dict:
    """Until the merge job ended, or can never start (its dependency failed)."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.state(job)
        if state["JobState"] in FINISHED or state.get("Reason") == "DependencyNeverSatisfied":
            return state
        assert time.monotonic() < deadline, f"merge job {job} still {state['JobState']} after {timeout} s"
        time.sleep(0.5)


def array_of(cluster, merge_job: str) -> str:
    return re.match(r"afterok:(\d+)", cluster.state(merge_job)["Dependency"]).group(1)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((tmp_path / "logs").glob("*")))


def check_whole_run(run: Path, run_ngrp, tasks: int, repeats: int) -> None:
    """Every key exactly once in the merged run, and the strict profile's outputs written."""
    merged = rows(run / "rollouts.jsonl")
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in merged]
    assert sorted(keys) == [(t, r) for t in range(tasks) for r in range(repeats)]
    inputs = run / "rollouts_materialized_inputs.jsonl"
    check = run_ngrp("check", "--inputs", inputs, "--rollouts", run / "rollouts.jsonl")
    assert check.returncode == 0, check.stdout + check.stderr
    summary = json.loads((run / "merge.json").read_text())
    assert summary["missing_shards"] == [] and summary["rollouts"]["written"] == tasks * repeats
    assert len(summary["rollouts"]["files"]) == SHARDS
    assert len(rows(run / "rollouts_reward_profiling.jsonl")) == tasks


def test_array_shards_in_one_folder_merge_and_profile(slurm_cluster, vllm_server, tmp_path, run_ngrp):
    tasks, repeats = 6, 2
    run, task_file, paths = setup_run(tmp_path, vllm_server, tasks, max_tokens=2)
    (tmp_path / "collect.sbatch").write_text(array_script(run, task_file, repeats, 4, per_task=False))
    merge_job = submit(slurm_cluster, tmp_path, submit_block(run, per_task=False), paths["bin"])
    state = wait_merge(slurm_cluster, merge_job)
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", f"{state}\n{logs(tmp_path)}"
    for i in range(SHARDS):
        summary = json.loads((run / f"collect-{i}.json").read_text())
        assert summary["complete"] and summary["expected"] == repeats * len(range(i, tasks, SHARDS))
        assert (run / f"rollouts-shard-{i}-of-{SHARDS}.jsonl").exists()
    check_whole_run(run, run_ngrp, tasks, repeats)


def test_array_task_cancelled_mid_run_and_requeued_per_task_folders(
    slurm_cluster, vllm_server, tmp_path, run_ngrp
):
    """One folder per array task; task 1 is killed with scancel mid-run and requeued: --resume finishes
    it, the afterok merge job can never start (as the document says), and the merge submitted again
    without the dependency gives every key exactly once and a strict profile."""
    tasks, repeats = 24, 3  # 24 rollouts per shard, one at a time: seconds to cancel it mid-run
    assert PER_TASK in DOC.read_text() and PER_TASK_GLOB in DOC.read_text()
    run, task_file, paths = setup_run(tmp_path, vllm_server, tasks, max_tokens=32)
    (tmp_path / "collect.sbatch").write_text(array_script(run, task_file, repeats, 1, per_task=True))
    block = submit_block(run, per_task=True)
    merge_job = submit(slurm_cluster, tmp_path, block, paths["bin"])
    array = array_of(slurm_cluster, merge_job)
    shard = run / "task-1" / f"rollouts-shard-1-of-{SHARDS}.jsonl"
    deadline = time.monotonic() + 300
    while not (shard.exists() and shard.read_bytes().count(b"\n") >= 1):
        assert time.monotonic() < deadline, f"task 1 wrote no rollout\n{logs(tmp_path)}"
        time.sleep(0.05)
    slurm_cluster.run("scancel", f"{array}_1")
    while slurm_cluster.state(f"{array}_1")["JobState"] != "CANCELLED":
        time.sleep(0.2)
    own = repeats * len(range(1, tasks, SHARDS))
    written = shard.read_bytes().count(b"\n")
    assert 1 <= written < own, f"task 1 was not cancelled mid-run ({written} of {own} rows)"
    slurm_cluster.requeue(f"{array}_1")
    slurm_cluster.wait(array)
    task1 = slurm_cluster.state(f"{array}_1")
    assert task1["JobState"] == "COMPLETED" and task1["Restarts"] == "1", f"{task1}\n{logs(tmp_path)}"
    resumed = json.loads((run / "collect-1.json").read_text())
    assert resumed["resumed"] and resumed["complete"] and resumed["skipped_completed"] >= written - 1
    assert "CANCELLED" in (tmp_path / "logs" / f"ngrp-collect-{array}_1.out").read_text()  # one log, appended

    state = wait_merge(slurm_cluster, merge_job)
    assert state["Reason"] == "DependencyNeverSatisfied", state  # what the document warns about
    slurm_cluster.run("scancel", merge_job)
    again = [line for line in block.splitlines() if not line.startswith(("mkdir ", "ARRAY_JOB_ID="))]
    again_block = "\n".join(again).replace("--dependency=afterok:$ARRAY_JOB_ID ", "")
    assert again_block != "\n".join(again)
    state = wait_merge(slurm_cluster, submit(slurm_cluster, tmp_path, again_block, paths["bin"]))
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", f"{state}\n{logs(tmp_path)}"
    for i in range(SHARDS):
        assert (run / f"task-{i}" / f"rollouts-shard-{i}-of-{SHARDS}.jsonl").exists()
    check_whole_run(run, run_ngrp, tasks, repeats)
