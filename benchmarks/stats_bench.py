"""Time `ngrp stats` on a synthetic profile of 10,000 tasks x 16 repeats (generated in a temp dir).

Usage: python3 benchmarks/stats_bench.py [--tasks 10000] [--repeats 16] [--bootstrap 2000]
Prints one line per configuration: wall and CPU time of the whole CLI process (`python3 scripts/ngrp.py stats
... --json`), so imports, JSONL parsing, estimators, bootstrap and JSON output are all counted.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"


def write_inputs(folder: Path, tasks: int, repeats: int, seed: int = 0) -> tuple[Path, Path]:
    """A Gym-shaped profile (rollout_infos with reward and usage counts) and a matching rollouts file."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.8, tasks)
    rewards = (rng.random((tasks, repeats)) < p[:, None]).astype(int)
    lengths = rng.integers(50, 2000, (tasks, repeats))
    answers = np.where(rewards == 1, 0, rng.integers(1, 4, (tasks, repeats)))
    profile, rollouts = folder / "rollouts_reward_profiling.jsonl", folder / "rollouts.jsonl"
    with open(profile, "w") as prof, open(rollouts, "w") as roll:
        for t in range(tasks):
            infos = []
            for r in range(repeats):
                reward, length = float(rewards[t, r]), int(lengths[t, r])
                infos.append(
                    {
                        "rollout_id": f"{t}:{r}",
                        "_ng_task_index": t,
                        "_ng_rollout_index": r,
                        "reward": reward,
                        "input_tokens": 40,
                        "output_tokens": length,
                        "total_tokens": 40 + length,
                    }
                )
                status = "incomplete" if length > 1900 else "completed"
                roll.write(
                    json.dumps(
                        {
                            "_ng_task_index": t,
                            "_ng_rollout_index": r,
                            "reward": reward,
                            "extracted_answer": str(answers[t, r]),
                            "response": {"status": status},
                        }
                    )
                    + "\n"
                )
            row = {
                "_ng_task_index": t,
                "mean/reward": float(rewards[t].mean()),
                "sample": {"difficulty": ["easy", "medium", "hard"][t % 3]},
                "num_rollouts": repeats,
                "expected_num_rollouts": repeats,
                "missing_num_rollouts": 0,
                "reward_profile_completion_pct": 100.0,
                "rollout_infos": infos,
            }
            prof.write(json.dumps(row) + "\n")
    return profile, rollouts


def timed(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is steadier on a shared, loaded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, str(SCRIPT), *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=16)
    parser.add_argument("--bootstrap", type=int, default=2000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        profile, rollouts = write_inputs(Path(tmp), opts.tasks, opts.repeats)
        size = profile.stat().st_size / 1e6
        print(
            f"generated {opts.tasks} tasks x {opts.repeats} repeats ({size:.1f} MB profile) "
            f"in {time.perf_counter() - start:.1f} s"
        )
        b = str(opts.bootstrap)
        configs = {
            "stats --json --bootstrap 0": ["stats", str(profile), "--json", "--bootstrap", "0"],
            f"stats --json (default, bootstrap {b})": ["stats", str(profile), "--json", "--bootstrap", b],
            f"stats --json --group-by difficulty (bootstrap {b})": [
                "stats",
                str(profile),
                "--json",
                "--bootstrap",
                b,
                "--group-by",
                "difficulty",
            ],
            f"stats --json --rollouts --answer-key (maj@k, truncation; bootstrap {b})": [
                "stats",
                str(profile),
                "--json",
                "--bootstrap",
                b,
                "--rollouts",
                str(rollouts),
                "--answer-key",
                "extracted_answer",
            ],
        }
        for label, args in configs.items():
            wall, cpu = timed(args)
            print(f"{label}: {wall:.2f} s wall, {cpu:.2f} s CPU")


if __name__ == "__main__":
    main()
