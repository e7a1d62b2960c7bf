#!/usr/bin/env python3
"""Benchmark `ngrp profile` against the parsing floor and NeMo Gym's `gym eval profile`.

Generates N tasks x K repeats of realistic rows (seeded; Gym-sized: ~1.5 KB rollouts with a reasoning
item, a message and usage; ~0.4 KB materialized inputs), then, in one run, times in fresh subprocesses:
  floor  parse both files with orjson, line by line, and nothing else
  bound  a lower bound for any profiler: the least work that yields Gym's per-task statistics on these
         exact rows (field names hard-coded; see BOUND)
  ngrp   `ngrp profile` (all four outputs)
  gym    `gym eval profile` when NGRP_GYM_VENV points at a venv from .ci/install_gym.sh
and reports wall time and peak RSS (ru_maxrss of the child) for each.

Usage: python3 benchmarks/profile_bench.py [--tasks 10000] [--repeats 8] [--seed 0] [--runs 1] [--json]
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


def measure(args: list[str], cwd: Path) -> dict:
    """Wall time and peak RSS of one child process (a fresh interpreter each time)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, rusage = os.wait4(proc.pid, 0)[1:]
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    cpu = rusage.ru_utime + rusage.ru_stime
    return {
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "peak_rss_mb": round(rusage.ru_maxrss / 1024, 1),
        "stderr_tail": stderr[-500:],
    }


def _median_run(runs: list[dict]) -> dict:
    """The run with the median CPU time (wall and RSS from that same run)."""
    return sorted(runs, key=lambda r: r["cpu_seconds"])[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    parser.add_argument(
        "--runs", type=int, default=1, help="time floor and ngrp this many times, alternating; report medians"
    )
    opts = parser.parse_args()
    folder = opts.keep or Path(tempfile.mkdtemp(prefix="ngrp-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        inputs, rollouts = generate(folder, opts.tasks, opts.repeats, opts.seed)
        report = {
            "tasks": opts.tasks,
            "repeats": opts.repeats,
            "runs": opts.runs,
            "rollouts_mb": round(rollouts.stat().st_size / 2**20, 1),
            "inputs_mb": round(inputs.stat().st_size / 2**20, 1),
        }
        floor = [sys.executable, "-c", FLOOR, str(inputs), str(rollouts)]
        ngrp = [sys.executable, str(REPO / "scripts" / "ngrp.py"), "profile", "--inputs", inputs.name]
        ngrp += ["--rollouts", rollouts.name, "--overwrite"]
        bound = [sys.executable, "-c", BOUND, str(inputs), str(rollouts), str(folder / "bound.jsonl")]
        contenders = {"floor": floor, "bound": bound, "ngrp": ngrp}
        runs: dict[str, list[dict]] = {name: [] for name in contenders}
        for _ in range(opts.runs):  # alternate, so load changes hit all alike
            for name, args in contenders.items():
                runs[name].append(measure(args, folder))
        for name in contenders:
            report[name] = _median_run(runs[name])
        report["bound_cpu_ratio_to_floor"] = round(
            report["bound"]["cpu_seconds"] / report["floor"]["cpu_seconds"], 2
        )
        report["ratio_to_floor"] = round(report["ngrp"]["seconds"] / report["floor"]["seconds"], 2)
        report["cpu_ratio_to_floor"] = round(
            report["ngrp"]["cpu_seconds"] / report["floor"]["cpu_seconds"], 2
        )
        venv = os.environ.get("NGRP_GYM_VENV")
        if venv and (Path(venv) / "bin" / "gym").exists():
            gym_dir = folder / "gym"
            gym_dir.mkdir(exist_ok=True)
            for path in (inputs, rollouts):
                shutil.copy(path, gym_dir / path.name)
            gym = [str(Path(venv) / "bin" / "gym"), "eval", "profile", "--inputs", inputs.name]
            report["gym"] = measure([*gym, "--rollouts", rollouts.name], gym_dir)
            report["speedup_vs_gym"] = round(report["gym"]["seconds"] / report["ngrp"]["seconds"], 1)
            report["cpu_speedup_vs_gym"] = round(
                report["gym"]["cpu_seconds"] / report["ngrp"]["cpu_seconds"], 1
            )
        for name in ("floor", "bound", "ngrp", "gym"):
            if name in report and not report[name]["stderr_tail"].strip():
                report[name].pop("stderr_tail")
        if opts.json:
            print(json.dumps(report, indent=2))
        else:
            _print(report)
    finally:
        if opts.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def _print(r: dict) -> None:
    print(
        f"{r['tasks']} tasks x {r['repeats']} repeats: "
        f"rollouts {r['rollouts_mb']} MB, inputs {r['inputs_mb']} MB"
    )
    for name in ("floor", "bound", "ngrp", "gym"):
        if name in r:
            x = r[name]
            print(
                f"  {name:<6}{x['seconds']:>8.2f} s wall {x['cpu_seconds']:>8.2f} s CPU  "
                f"peak RSS {x['peak_rss_mb']:>7.1f} MB"
            )
    print(f"  bound / floor: {r['bound_cpu_ratio_to_floor']}x CPU")
    print(f"  ngrp / floor: {r['ratio_to_floor']}x wall, {r['cpu_ratio_to_floor']}x CPU")
    if "speedup_vs_gym" in r:
        print(f"  gym / ngrp:   {r['speedup_vs_gym']}x wall, {r['cpu_speedup_vs_gym']}x CPU")


if __name__ == "__main__":
    sys.exit(main())
