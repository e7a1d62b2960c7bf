"""Seeded random runs in NeMo Gym's shapes for profile tests: materialized inputs + shuffled rollouts.

Shapes: partial (missing rollouts), masked rollouts, null / absent / bool rewards, fan-out across two
agents with continued rollout indices, one agent behind two environment servers, rows without
agent_ref, usage/result name clashes, fields present in only some rollouts, ints and floats.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import orjson

SHAPES = ("plain", "fan_out", "env_servers", "no_agent")


@dataclass
class Run:
    inputs: list[dict]
    rollouts: list[dict]
    partial: bool


def make_run(
    seed: int, shape: str = "plain", tasks: int = 4, repeats: int = 3, p_missing: float = 0.0
) -> Run:
    rng = random.Random(seed)
    inputs: list[dict] = []
    agents = {
        "plain": ["math_agent"],
        "fan_out": ["agent_a", "agent_b"],
        "env_servers": ["solo"],
        "no_agent": [None],
    }
    for task in range(tasks):
        rollout = 0
        for agent in agents[shape]:
            for _ in range(repeats):
                row: dict = {
                    "responses_create_params": {"input": [{"role": "user", "content": f"q{task}"}]},
                    "expected_answer": str(task),
                }
                if agent is not None:
                    row["agent_ref"] = {"name": agent}
                if shape == "env_servers":
                    row["_ng_environment_server"] = f"env_{rollout % 2}"
                row["_ng_task_index"] = task
                row["_ng_rollout_index"] = rollout
                inputs.append(row)
                rollout += 1
    rollouts = [_rollout(rng, row) for row in inputs if rng.random() >= p_missing]
    rng.shuffle(rollouts)
    return Run(inputs, rollouts, partial=len(rollouts) < len(inputs))


def _reward(rng: random.Random):
    roll = rng.random()
    if roll < 0.08:
        return "null"
    if roll < 0.12:
        return "absent"
    if roll < 0.2:
        return rng.random() < 0.5  # bool
    if roll < 0.35:
        return rng.choice([0.25, 0.5, 0.75])
    return float(rng.random() < 0.5)


def _rollout(rng: random.Random, row: dict) -> dict:
    out_tokens = rng.randint(50, 400)
    usage: dict = {
        "input_tokens": 40 + row["_ng_task_index"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out_tokens,
        "output_tokens_details": {"reasoning_tokens": out_tokens // 2},
        "total_tokens": 40 + row["_ng_task_index"] + out_tokens,
    }
    result: dict = {
        "responses_create_params": row["responses_create_params"],
        "response": {"id": "r", "usage": usage},
    }
    reward = _reward(rng)
    if reward != "absent":
        result["reward"] = None if reward == "null" else reward
    result["is_correct"] = rng.random() < 0.5
    result["judge_score"] = rng.choice([0, 2.5, 5, 10])  # ints and floats mixed
    result["extracted_answer"] = rng.choice(["4", None])
    if rng.random() < 0.3:
        result["latency_s"] = round(rng.uniform(0.1, 9.0), 3)  # only in some rollouts
    if rng.random() < 0.15:
        result["output_tokens"] = 7  # clash: usage wins in stats, the result in rollout_infos
    if rng.random() < 0.1:
        result["mask_sample"] = True
    if rng.random() < 0.1:
        result["total_tokens"] = "n/a"  # clash with a non-number in the result
    if rng.random() < 0.05:
        usage["judge_score"] = "x"  # clash: a non-number in usage hides the result's number from stats
    result["_ng_task_index"] = row["_ng_task_index"]
    result["_ng_rollout_index"] = row["_ng_rollout_index"]
    if "agent_ref" in row:
        result["agent_ref"] = row["agent_ref"]
    return result


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def write_run(run: Run, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return (
        write_jsonl(folder / "rollouts_materialized_inputs.jsonl", run.inputs),
        write_jsonl(folder / "rollouts.jsonl", run.rollouts),
    )


def with_float_noise(run: Run, seed: int) -> Run:
    """The same run with full-precision floats (rewards, a latency in most rollouts, a score over seven
    orders of magnitude): their sums depend on the order and the loop that adds them, to the last bit."""
    rng = random.Random(seed)
    for row in run.rollouts:
        if isinstance(row.get("reward"), float) and rng.random() < 0.7:
            row["reward"] = rng.random()
        if rng.random() < 0.8:
            row["latency_s"] = rng.random() * 10
        row["score_f"] = rng.gauss(0, 1) * 10 ** rng.randint(-3, 3)
    return run
