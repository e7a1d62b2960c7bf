#!/usr/bin/env python3
"""Benchmark `ngrp check` on 100,000 rollouts (12,500 tasks x 8) against the floor: orjson parsing both files.

The rollouts file is the one `validate_bench.py` generates (completion order); the materialized file holds the
matching input rows. 1% of keys are dropped from the rollouts so the accounting has findings to report.

    python3 benchmarks/check_bench.py [--rows 100000] [--repeat 3] [--json] [--adaptive]

--adaptive writes a run manifest beside the rollouts that makes the run adaptive (learnable, one round of
all 8 repeats, every task's state replayed from its rewards): check then reads the rollouts a second time
to replay each task's decision (`audit/adaptive_check.py`); a fixed-N run reads them once.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from validate_bench import best_of, floor, write_rows  # noqa: E402

from ngrp_lib.audit.check import check_run  # noqa: E402


def write_inputs(rollouts: Path, inputs: Path, drop_every: int = 100) -> None:
    """Materialized rows for every key in `rollouts`; then drop every `drop_every`-th rollout row."""
    kept = []
    with open(rollouts, "rb") as handle, open(inputs, "wb") as out:
        for i, line in enumerate(handle):
            row = orjson.loads(line)
            task, rollout = row["_ng_task_index"], row["_ng_rollout_index"]
            material = {
                "responses_create_params": row["responses_create_params"],
                "expected_answer": "4",
                "agent_ref": row["agent_ref"],
                "_ng_task_index": task,
                "_ng_rollout_index": rollout,
            }
            out.write(orjson.dumps(material, option=orjson.OPT_APPEND_NEWLINE))
            if i % drop_every:
                kept.append(line)
    rollouts.write_bytes(b"".join(kept))


def write_adaptive_manifest(rollouts: Path, repeats: int = 8) -> None:
    """A run manifest holding what `collect --adaptive learnable --first-round 8 --num-repeats 8` records:
    the settings and each task's state, replayed from the rewards stored (so every decision agrees)."""
    from ngrp_lib.artifacts.names import manifest_path_for
    from ngrp_lib.stats.adaptive import Schedule, outcome_of, parse_rule, replay

    outcomes: dict[int, dict[int, bool | None]] = {}
    with open(rollouts, "rb") as handle:
        for line in handle:
            row = orjson.loads(line)
            outcomes.setdefault(row["_ng_task_index"], {})[row["_ng_rollout_index"]] = outcome_of(
                row["reward"], 1.0
            )
    rule, schedule = parse_rule("learnable"), Schedule(repeats, repeats)
    states = {}
    for task, seen in outcomes.items():
        state = replay(rule, schedule, seen)
        states[str(task)] = {"repeats": state.size, "reason": state.reason, "decision": state.decision}
    block = {"rule": "learnable", "first_round": repeats, "rounds": [repeats], "pass_threshold": 1.0}
    manifest = {
        "identity": {"adaptive": block, "materialize": {"num_repeats": repeats}},
        "adaptive": {"task_states": states},
    }
    manifest_path_for(rollouts).write_bytes(orjson.dumps(manifest))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--adaptive", action="store_true", help="an adaptive run: decisions replayed too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rollouts, inputs = Path(tmp) / "rollouts.jsonl", Path(tmp) / "rollouts_materialized_inputs.jsonl"
        write_rows(rollouts, args.rows)
        write_inputs(rollouts, inputs)
        if args.adaptive:
            write_adaptive_manifest(rollouts)
        result = check_run(inputs, rollouts)
        assert result.counts.missing == args.rows - result.counts.completed > 0
        assert (result.adaptive is not None) == args.adaptive
        if args.adaptive:  # the dropped rollouts leave their tasks pending
            assert result.adaptive.differ == 0 and result.adaptive.tasks_compared > 0
        t_floor = best_of(lambda: (floor(inputs), floor(rollouts)), args.repeat)
        t_check = best_of(lambda: check_run(inputs, rollouts), args.repeat)
        tracemalloc.start()
        check_run(inputs, rollouts)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    rows = args.rows * 2 - result.counts.missing
    figures = {
        "input_rows": args.rows,
        "rollout_rows": result.counts.completed,
        "floor_rows_per_s": round(rows / t_floor),
        "check_rows_per_s": round(rows / t_check),
        "ratio": round(t_check / t_floor, 2),
        "peak_python_mb": round(peak / 1e6, 1),
        "adaptive": args.adaptive,
        "python": sys.version.split()[0],
    }
    if args.json:
        print(orjson.dumps(figures).decode())
    else:
        kind = " (adaptive: decisions replayed)" if args.adaptive else ""
        head = f"{args.rows} input rows + {result.counts.completed} rollout rows{kind}"
        print(f"{head}, Python {figures['python']}")
        print(f"floor (orjson parse of both): {figures['floor_rows_per_s']:>9,} rows/s  ({t_floor:.3f} s)")
        print(f"ngrp check:                   {figures['check_rows_per_s']:>9,} rows/s  ({t_check:.3f} s)")
        print(f"ratio check / floor:          {figures['ratio']:.2f}x")
        print(f"peak Python memory in check:  {figures['peak_python_mb']} MB (tracemalloc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
