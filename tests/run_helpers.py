"""Generate a run in Gym 0.7.0's shapes for inspect / view tests: materialized inputs and rollouts.

Every value is derived from the task and rollout index, so a test can compute what it expects without
reading the file back: `reward_of(t, r)`, `answer_of(t, r)`, `text_of(t, r)`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned'</script>"
LEVELS = ("easy", "medium", "hard")


def reward_of(task: int, rollout: int, flip: int = 0) -> float:
    """Task 0 all pass, task 1 all fail, then a pattern mixing passes and failures (flip shifts it)."""
    if task == 0:
        return 1.0
    if task == 1:
        return 0.0
    return 1.0 if (task * 7 + rollout * 3 + flip) % 5 < 2 else 0.0


def answer_of(task: int, rollout: int, flip: int = 0) -> str:
    return str(task * 10) if reward_of(task, rollout, flip) == 1.0 else str(task * 10 + rollout + 1)


def text_of(task: int, rollout: int, flip: int = 0) -> str:
    return f"Task {task} try {rollout}: so the answer is \\boxed{{{answer_of(task, rollout, flip)}}}"


def input_row(task: int, rollout: int, agent: str, *, script_task: int | None = None) -> dict:
    prompt = f"Question {task}: what is {task} times 10? Put the answer in \\boxed{{}}."
    if task == script_task:
        prompt += " " + SCRIPT
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
            "temperature": 1.0,
        },
        "expected_answer": str(task * 10),
        "level": LEVELS[task % 3],
        "agent_ref": {"name": agent},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


def rollout_row(inp: dict, *, flip: int = 0, truncate: bool = False, script: bool = False) -> dict:
    task, rollout = inp["_ng_task_index"], inp["_ng_rollout_index"]
    text = text_of(task, rollout, flip) + (" " + SCRIPT if script else "")
    tokens = 50 + 10 * rollout + task
    response = {
        "id": f"resp_{task}_{rollout}",
        "object": "response",
        "model": "policy",
        "output": [
            {
                "id": f"rs_{task}_{rollout}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": f"thinking about task {task} (try {rollout})"}],
            },
            {
                "id": f"msg_{task}_{rollout}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
        ],
        "status": "incomplete" if truncate else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncate else None,
        "usage": {
            "input_tokens": 30,
            "output_tokens": tokens,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": 30 + tokens,
        },
    }
    reward = reward_of(task, rollout, flip)
    row = {
        "responses_create_params": inp["responses_create_params"],
        "response": response,
        "reward": reward,
        "extracted_answer": answer_of(task, rollout, flip),
        "is_correct": reward == 1.0,
    }
    row.update({k: v for k, v in inp.items() if k != "responses_create_params"})
    return row


def write_run(
    folder: Path,
    *,
    tasks: int = 12,
    repeats: int = 4,
    agents: tuple[str, ...] = ("policy_agent",),
    flip: int = 0,
    flipped_task: int | None = None,
    script_task: int | None = None,
    truncate_every: int = 0,
    drop: tuple[tuple[int, int], ...] = (),
    seed: int = 0,
    name: str = "rollouts",
) -> tuple[Path, Path]:
    """Write `<name>_materialized_inputs.jsonl` and `<name>.jsonl` (shuffled: completion order). With several
    agents each task fans out, rollout indices continuing across agents as Gym numbers them. `flipped_task`
    gets all passes (its rewards are inverted from all fail); `drop` leaves keys out (a partial run)."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs = []
    for t in range(tasks):
        for k, agent in enumerate(agents):
            inputs += [input_row(t, k * repeats + r, agent, script_task=script_task) for r in range(repeats)]
    rows = []
    for inp in inputs:
        key = (inp["_ng_task_index"], inp["_ng_rollout_index"])
        if key in drop:
            continue
        truncate = bool(truncate_every) and (key[0] * repeats + key[1]) % truncate_every == 0
        row = rollout_row(inp, flip=flip, truncate=truncate, script=key[0] == script_task)
        if key[0] == flipped_task:
            row["reward"] = 1.0 if flip else 0.0
            row["is_correct"] = bool(flip)
        rows.append(row)
    random.Random(seed).shuffle(rows)
    materialized = folder / f"{name}_materialized_inputs.jsonl"
    rollouts = folder / f"{name}.jsonl"
    materialized.write_text("".join(json.dumps(r) + "\n" for r in inputs))
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rollouts, materialized
