"""Agent runs for the benchmarks: Gym-shaped simple-agent rows (tests/agent_rows.py's shape), many turns
with tool outputs of a set size, and their materialized inputs. Every 50th rollout gets a planted defect
(invalid arguments, a tool error, a loop, no final answer), so health has findings to write."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from agent_rows import agent_row, materialized  # noqa: E402

DEFECTS = ("bad_args", "tool_error", "loop", "no_answer")


def write_agent_run(folder: Path, rows: int, turns: int, chars: int, repeats: int = 8) -> tuple[Path, Path]:
    """rollouts.jsonl (completion order, shuffled) and its materialized inputs; returns both paths."""
    rng = random.Random(0)
    rollouts, inputs = folder / "rollouts.jsonl", folder / "rollouts_materialized_inputs.jsonl"
    tasks = rows // repeats
    keys = [(t, r) for t in range(tasks) for r in range(repeats)]
    with open(inputs, "wb") as out:
        for task, rollout in keys:
            out.write(orjson.dumps(materialized(task, rollout), option=orjson.OPT_APPEND_NEWLINE))
    rng.shuffle(keys)
    with open(rollouts, "wb") as out:
        for i, (task, rollout) in enumerate(keys):
            defect = DEFECTS[(i // 50) % len(DEFECTS)] if i % 50 == 0 else None
            row = agent_row(task, rollout, turns=turns, chars=chars, defect=defect)
            out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    return rollouts, inputs
