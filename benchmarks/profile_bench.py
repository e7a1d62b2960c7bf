#!/usr/bin/env python3
"""Benchmark `ngrp profile` against the parsing floor and NeMo Gym's `gym eval profile`.

Generates N tasks x K repeats of realistic rows (seeded; Gym-sized: ~1.5 KB rollouts with a reasoning
item, a message and usage; ~0.4 KB materialized inputs), then, in one run, times in fresh subprocesses:
  floor  parse both files with orjson, line by line, and nothing else
  bound  a lower bound for any profiler: the least work that yields Gym's per-task statistics on these
         exact rows (field names hard-coded; see BOUND)
  ngrp   `ngrp profile` (all four outputs)
  gym    `gym eval profile` when NGRP_GYM_VENV points at a venv from .ci/install_gym.sh (up to --gym-max
         rollouts)
  baseline  `ngrp profile` of another checkout (--baseline DIR), for before/after figures in one run
  merge  with --merge-shards N: the run split into N task shards (as `collect --shard i/N` splits it), each
         profiled with --save-state, then `profile --merge` of the N states (only the merge is measured)
and reports wall time, CPU time and peak RSS (/usr/bin/time's "Maximum resident set size") for each.
`--sizes` sweeps several run sizes, one folder each.

Usage: python3 benchmarks/profile_bench.py [--tasks 10000] [--repeats 8] [--seed 0] [--runs 1] [--json]
       python3 benchmarks/profile_bench.py --sizes 80000,320000,640000 --merge-shards 64 [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
GYM_FILES = (
    "rollouts_reward_profiling.jsonl",
    "rollouts_agent_metrics.json",
    "rollouts_repeat_level_metrics.json",
)
FLOOR = """
import sys, orjson
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        for line in handle:
            orjson.loads(line)
"""

# The bound: sha256 both files (the summary records them), parse every line with orjson, take the six
# profiled fields of this benchmark's row shape by name, join rollouts to inputs by key, compute Gym's five
# per-task statistics with numpy and write one JSON line per task. It knows the fields in advance, so it skips
# what a real profiler cannot: discovering fields per row, Gym's key-order and type rules, rollout_infos,
# samples, agent and repeat-level metrics, the completion summary, validation and the CLI.
BOUND = """
import gc, hashlib, sys
from operator import itemgetter
import numpy as np, orjson
gc.disable()
inputs, rollouts, out = sys.argv[1:]
loads = orjson.loads
get = itemgetter("_ng_task_index", "_ng_rollout_index", "reward", "is_correct", "judge_score", "response")
get_usage = itemgetter("input_tokens", "output_tokens", "total_tokens")
keys, values = [], []
hasher = hashlib.sha256()
with open(rollouts, "rb") as handle:
    for line in handle:
        hasher.update(line)
        task, rollout, reward, correct, judge, response = get(loads(line))
        keys.append((task, rollout))
        values.append((reward, correct, judge, *get_usage(response["usage"])))
position = dict(zip(keys, range(len(keys))))
hasher, order = hashlib.sha256(), []
with open(inputs, "rb") as handle:
    for line in handle:
        hasher.update(line)
        row = loads(line)
        order.append(position[row["_ng_task_index"], row["_ng_rollout_index"]])
matrix = np.array(values, dtype=np.float64)[order]
groups = matrix.reshape(-1, len(order) // len(set(k[0] for k in keys)), matrix.shape[1])
stats = np.concatenate([groups.mean(1), groups.max(1), groups.min(1), np.median(groups, 1),
                        groups.std(1, ddof=1)], axis=1)
names = [f"{s}/{c}" for s in ("mean", "max", "min", "median", "std") for c in range(matrix.shape[1])]
with open(out, "wb") as handle:
    for task, row in enumerate(stats.tolist()):
        handle.write(orjson.dumps({"_ng_task_index": task, **dict(zip(names, row))}) + b"\\n")
"""


def generate(folder: Path, tasks: int, repeats: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    inputs, rollouts = folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl"
    order = []
    with open(inputs, "wb") as handle:
        for task in range(tasks):
            prompt = f"Problem {task}: " + " ".join(
                rng.choice(["find", "x", "sum", "prime", "of"]) for _ in range(40)
            )
            for rollout in range(repeats):
                row = {
                    "responses_create_params": {
                        "input": [{"role": "user", "content": prompt}],
                        "temperature": 1.0,
                    },
                    "expected_answer": str(rng.randint(0, 9999)),
                    "difficulty": rng.choice(["easy", "medium", "hard"]),
                    "agent_ref": {"name": "math_simple_agent"},
                    "_ng_task_index": task,
                    "_ng_rollout_index": rollout,
                }
                handle.write(orjson.dumps(row) + b"\n")
                order.append((task, rollout, prompt))
    rng.shuffle(order)  # completion order
    with open(rollouts, "wb") as handle:
        for task, rollout, prompt in order:
            handle.write(orjson.dumps(_rollout(rng, task, rollout, prompt)) + b"\n")
    return inputs, rollouts


def _rollout(rng: random.Random, task: int, rollout: int, prompt: str) -> dict:
    correct = rng.random() < 0.5
    out = rng.randint(80, 900)
    text = "Let me think. " + " ".join(rng.choice(["so", "then", "we", "add", "carry"]) for _ in range(60))
    return {
        "responses_create_params": {"input": [{"role": "user", "content": prompt}], "temperature": 1.0},
        "response": {
            "id": f"resp_{task}_{rollout}",
            "created_at": 1760000000.0 + task,
            "model": "my-policy",
            "object": "response",
            "output": [
                {
                    "id": f"rs_{task}_{rollout}",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": text}],
                },
                {
                    "id": f"msg_{task}_{rollout}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "The answer is \\boxed{42}", "annotations": []}
                    ],
                },
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
            "incomplete_details": None,
            "usage": {
                "input_tokens": 60,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": out - 20},
                "total_tokens": 60 + out,
            },
        },
        "reward": 1.0 if correct else 0.0,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": "42",
        "difficulty": "medium",
        "extracted_answer": "42" if correct else "0",
        "is_correct": correct,
        "judge_score": 10.0 if correct else 0.0,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "math_simple_agent"},
        "_ng_environment_server": "math_environment_server",
        "_ng_result_type": "legacy_agent",
    }


TIME = shutil.which("time", path="/usr/bin:/bin")


def measure(args: list[str], cwd: Path) -> dict:
    """Wall time, CPU time and peak RSS of one child process (a fresh interpreter each time).

    The peak RSS comes from /usr/bin/time (`%M`): Linux carries a process's peak RSS across fork and exec,
    so the rusage of a child forked straight from this process (large, after generating the data) would
    report at least this process's own peak. /usr/bin/time's child is forked from a small process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        wrapped = [TIME, "-f", "%M %U %S", "-o", out.name, *args] if TIME else args
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        cpu, rss_mb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
        if TIME:
            rss_kb, user, system = out.read().split()[-3:]
            cpu, rss_mb = float(user) + float(system), int(rss_kb) / 1024
    return {
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "peak_rss_mb": round(rss_mb, 1),
        "returncode": os.waitstatus_to_exitcode(status),
        "stderr_tail": stderr[-500:],
    }


def _median_run(runs: list[dict]) -> dict:
    """The run with the median CPU time (wall and RSS from that same run)."""
    return sorted(runs, key=lambda r: r["cpu_seconds"])[len(runs) // 2]


def split_shards(inputs: Path, rollouts: Path, folder: Path, count: int) -> list[Path]:
    """Shard folders as `ngrp collect --shard i/N` makes them: shard i holds the tasks with task % N == i."""
    folders = [folder / f"shard{i}" for i in range(count)]
    for path in (inputs, rollouts):
        handles = []
        for shard in folders:
            shard.mkdir(parents=True, exist_ok=True)
            handles.append(open(shard / path.name, "wb"))  # noqa: SIM115 - closed below
        with open(path, "rb") as source:
            for line in source:
                handles[orjson.loads(line)["_ng_task_index"] % count].write(line)
        for handle in handles:
            handle.close()
    return folders


def _ngrp(root: Path) -> list[str]:
    return [sys.executable, str(root / "scripts" / "ngrp.py"), "profile"]


def _profile_args(inputs: Path, rollouts: Path) -> list[str]:
    return ["--inputs", inputs.name, "--rollouts", rollouts.name, "--overwrite"]


def run_size(folder: Path, tasks: int, opts: argparse.Namespace) -> dict:
    """Generate one size and time every contender on it (fresh subprocesses, alternating over runs)."""
    inputs, rollouts = generate(folder, tasks, opts.repeats, opts.seed)
    n = tasks * opts.repeats
    report: dict = {
        "tasks": tasks,
        "repeats": opts.repeats,
        "rollouts": n,
        "runs": opts.runs,
        "rollouts_mb": round(rollouts.stat().st_size / 2**20, 1),
        "inputs_mb": round(inputs.stat().st_size / 2**20, 1),
    }
    contenders = {
        "floor": [sys.executable, "-c", FLOOR, str(inputs), str(rollouts)],
        "bound": [sys.executable, "-c", BOUND, str(inputs), str(rollouts), str(folder / "bound.jsonl")],
        "baseline": [*_ngrp(opts.baseline.resolve()), *_profile_args(inputs, rollouts)]
        if opts.baseline
        else [],
        "ngrp": [*_ngrp(REPO), *_profile_args(inputs, rollouts)],
    }
    if opts.no_bound:
        del contenders["bound"]
    if not opts.baseline:
        del contenders["baseline"]
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    for _ in range(opts.runs):  # alternate, so load changes hit all alike
        for name, args in contenders.items():
            runs[name].append(measure(args, folder))
    for name in contenders:
        report[name] = _median_run(runs[name])
    floor_cpu = report["floor"]["cpu_seconds"]
    for name in ("bound", "ngrp", "baseline"):
        if name in report:
            report[name]["cpu_ratio_to_floor"] = round(report[name]["cpu_seconds"] / floor_cpu, 2)
            report[name]["wall_ratio_to_floor"] = round(
                report[name]["seconds"] / report["floor"]["seconds"], 2
            )
            report[name]["cpu_us_per_rollout"] = round(report[name]["cpu_seconds"] / n * 1e6, 2)
    report["ngrp"]["rss_goal_mb"] = round(100 + 250 * n / 2**20, 1)
    venv = os.environ.get("NGRP_GYM_VENV")
    if venv and (Path(venv) / "bin" / "gym").exists() and n <= opts.gym_max:
        gym_dir = folder / "gym"
        gym_dir.mkdir(exist_ok=True)
        for path in (inputs, rollouts):
            shutil.copy(path, gym_dir / path.name)
        gym = [str(Path(venv) / "bin" / "gym"), "eval", "profile", "--inputs", inputs.name]
        report["gym"] = measure([*gym, "--rollouts", rollouts.name], gym_dir)
        report["gym"]["cpu_ratio_to_ngrp"] = round(
            report["gym"]["cpu_seconds"] / report["ngrp"]["cpu_seconds"], 1
        )
        shutil.rmtree(gym_dir)
    if opts.merge_shards:
        report["merge"] = _merge(folder, inputs, rollouts, n, opts.merge_shards)
    for name in ("floor", "bound", "ngrp", "baseline", "gym", "merge"):
        if name in report and not report[name].get("stderr_tail", "").strip():
            report[name].pop("stderr_tail", None)
    return report


def _merge(folder: Path, inputs: Path, rollouts: Path, n: int, count: int) -> dict:
    """Profile `count` task shards with --save-state (not timed), then time `profile --merge` of them."""
    shards = split_shards(inputs, rollouts, folder / "shards", count)
    for shard in shards:
        done = measure([*_ngrp(REPO), *_profile_args(inputs, rollouts), "--save-state"], shard)
        if done["returncode"] != 0:
            raise SystemExit(f"shard profile failed: {done['stderr_tail']}")
    states = [str(shard / "rollouts_profile_state.jsonl") for shard in shards]
    merged = measure(
        [*_ngrp(REPO), "--merge", "--rollouts", "merged/rollouts.jsonl", "--overwrite", *states], folder
    )
    merged["identical_to_one_pass"] = all(  # the one pass's files: ngrp runs last of the contenders
        (folder / name).read_bytes() == (folder / "merged" / name).read_bytes() for name in GYM_FILES
    )
    summary = json.loads((folder / "merged" / "rollouts_profile_summary.json").read_text())
    merged["streamed"] = not any("rebuilding every rollout" in w for w in summary["warnings"])
    merged["shards"] = count
    merged["rss_goal_mb"] = round(100 + 50 * n / 2**20, 1)
    shutil.rmtree(folder / "shards")
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument(
        "--sizes",
        help="a sweep: comma-separated rollout counts (tasks = size / repeats), e.g. 80000,320000,640000",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    parser.add_argument(
        "--runs", type=int, default=1, help="time floor and ngrp this many times, alternating; report medians"
    )
    parser.add_argument(
        "--baseline", type=Path, help="also time the `ngrp profile` of this checkout (before/after)"
    )
    parser.add_argument("--no-bound", action="store_true", help="skip the hard-coded lower bound")
    parser.add_argument(
        "--merge-shards", type=int, default=0, help="also time `profile --merge` of this many task shards"
    )
    parser.add_argument(
        "--gym-max", type=int, default=320_000, help="time `gym eval profile` up to this many rollouts"
    )
    opts = parser.parse_args()
    sizes = [int(x) // opts.repeats for x in opts.sizes.split(",")] if opts.sizes else [opts.tasks]
    root = opts.keep or Path(tempfile.mkdtemp(prefix="ngrp-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    reports = []
    try:
        for tasks in sizes:
            folder = root / f"n{tasks * opts.repeats}" if len(sizes) > 1 else root
            folder.mkdir(parents=True, exist_ok=True)
            reports.append(run_size(folder, tasks, opts))
            if opts.keep is None and len(sizes) > 1:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    _scaling(reports)
    if opts.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    else:
        for report in reports:
            _print(report)
    return 0


def _scaling(reports: list[dict]) -> None:
    """CPU time per rollout of each size against the first (smallest) size's."""
    base = reports[0]["ngrp"]["cpu_us_per_rollout"]
    for report in reports:
        report["ngrp"]["per_rollout_vs_first"] = round(report["ngrp"]["cpu_us_per_rollout"] / base, 2)


def _print(r: dict) -> None:
    print(
        f"{r['tasks']} tasks x {r['repeats']} repeats = {r['rollouts']} rollouts: "
        f"rollouts {r['rollouts_mb']} MB, inputs {r['inputs_mb']} MB"
    )
    for name in ("floor", "bound", "baseline", "ngrp", "gym", "merge"):
        if name in r:
            x = r[name]
            line = (
                f"  {name:<9}{x['seconds']:>8.2f} s wall {x['cpu_seconds']:>8.2f} s CPU  "
                f"peak RSS {x['peak_rss_mb']:>7.1f} MB"
            )
            if "cpu_ratio_to_floor" in x:
                line += f"  {x['cpu_ratio_to_floor']}x floor CPU, {x['cpu_us_per_rollout']} us/rollout"
            if "rss_goal_mb" in x:
                line += f"  (RSS goal {x['rss_goal_mb']} MB)"
            if name == "merge":
                line += (
                    f"  {x['shards']} shards, Gym's files identical to one pass: "
                    f"{x['identical_to_one_pass']}, "
                    f"streamed: {x['streamed']}"
                )
            print(line)
    if "per_rollout_vs_first" in r["ngrp"]:
        print(f"  ngrp CPU per rollout vs the first size: {r['ngrp']['per_rollout_vs_first']}x")


if __name__ == "__main__":
    sys.exit(main())
