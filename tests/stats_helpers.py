"""Tiny writers for synthetic reward profiles and rollouts files (the shapes Gym 0.7.0 writes)."""

from __future__ import annotations

import json
from pathlib import Path


def profile_row(task: int, rewards: list, *, agent: str | None = None, lengths: list | None = None,
                sample: dict | None = None, first_rollout: int = 0) -> dict:  # fmt: skip
    infos = []
    for j, reward in enumerate(rewards):
        r = first_rollout + j
        info = {"rollout_id": f"{task}:{r}", "_ng_task_index": task, "_ng_rollout_index": r, "reward": reward}
        if lengths is not None:
            info["output_tokens"] = lengths[j]
        infos.append(info)
    row = {"_ng_task_index": task}
    if agent is not None:
        row["agent_ref"] = {"name": agent}
    row.update({"sample": sample or {}, "num_rollouts": len(rewards), "rollout_infos": infos})
    return row


def write_profile(path: Path, tasks: list[list], **kwargs) -> Path:
    """tasks[i] is the reward list of task i. Extra per-task options via kwargs lists (lengths, sample)."""
    lines = []
    for i, rewards in enumerate(tasks):
        opts = {k: v[i] for k, v in kwargs.items()}
        lines.append(json.dumps(profile_row(i, rewards, **opts)))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_rollouts(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rollout(task: int, rollout_index: int, reward: float, *, answer=None, incomplete: bool = False) -> dict:
    response = {"status": "incomplete" if incomplete else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None}  # fmt: skip
    row = {"_ng_task_index": task, "_ng_rollout_index": rollout_index, "reward": reward, "response": response}
    if answer is not None:
        row["extracted_answer"] = answer
    return row
