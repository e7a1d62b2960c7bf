"""Names and identity rules shared by every artifact (NeMo Gym 0.7.0's conventions)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
RCP = "responses_create_params"  # the request a row sends to the model
USAGE_MISSING = "_ngrp_usage_missing"  # ours: the token counts the server did not give (stored as 0)
SHARED_PREFILL = "_ngrp_shared_prefill"  # ours: {"request": id, "rows": n} on rows of one grouped request

RolloutKey = tuple[int, int]

# Suffixes added to the rollouts file's stem, as Gym names them (plus ours, marked).
MATERIALIZED_SUFFIX = "_materialized_inputs"
FAILURES_SUFFIX = "_failures"
REWARD_PROFILE_SUFFIX = "_reward_profiling"
AGENT_METRICS_SUFFIX = "_agent_metrics"
REPEAT_METRICS_SUFFIX = "_repeat_level_metrics"
PROFILE_SUMMARY_SUFFIX = "_profile_summary"  # ours
MANIFEST_SUFFIX = "_run_manifest"  # ours
REVERIFY_MANIFEST_SUFFIX = "_reverify_manifest"  # ours: what `ngrp reverify --resume` checks
LOCK_SUFFIX = ".lock"  # ours
# `gym eval health-check` writes these two names into the run folder; we prefix them with the rollouts
# file's stem unless that stem is Gym's default `rollouts`, so two runs in one folder do not collide.
QUALITY_SUMMARY_NAME = "quality_summary.json"
VERDICTS_NAME = "rollout_verdicts.jsonl"


def sibling(path: Path | str, suffix: str, extension: str) -> Path:
    """`results/rollouts.jsonl` + `_failures`, `.jsonl` -> `results/rollouts_failures.jsonl`."""
    path = Path(path)
    return path.with_name(path.stem + suffix + extension)


def materialized_path_for(rollouts: Path | str) -> Path:
    return sibling(rollouts, MATERIALIZED_SUFFIX, ".jsonl")


def failures_path_for(rollouts: Path | str) -> Path:
    return sibling(rollouts, FAILURES_SUFFIX, ".jsonl")


def failures_beside(rollouts: Path | str, given: Path | str | None = None) -> Path | None:
    """The failures sidecar a reader of `rollouts` takes: `given`, else the sibling when anything stands
    there (a folder or FIFO there is for the reader to refuse, not to pass over silently)."""
    if given is not None:
        return Path(given)
    default = failures_path_for(rollouts)
    return default if os.path.lexists(default) else None


def manifest_path_for(rollouts: Path | str) -> Path:
    return sibling(rollouts, MANIFEST_SUFFIX, ".json")


def lock_path_for(rollouts: Path | str) -> Path:
    path = Path(rollouts)
    return path.with_name(path.name + LOCK_SUFFIX)


def profile_paths_for(rollouts: Path | str, output_dir: Path | str | None = None) -> dict[str, Path]:
    """The profile outputs for a rollouts file, next to it or under `output_dir`."""
    base = Path(rollouts)
    if output_dir is not None:
        base = Path(output_dir) / base.name
    return {
        "reward_profiling": sibling(base, REWARD_PROFILE_SUFFIX, ".jsonl"),
        "agent_metrics": sibling(base, AGENT_METRICS_SUFFIX, ".json"),
        "repeat_level_metrics": sibling(base, REPEAT_METRICS_SUFFIX, ".json"),
        "profile_summary": sibling(base, PROFILE_SUMMARY_SUFFIX, ".json"),
    }


def health_paths_for(rollouts: Path | str) -> dict[str, Path]:
    """`ngrp health` outputs: Gym's names next to `rollouts.jsonl`, `<stem>_<name>` next to any other."""
    path = Path(rollouts)
    prefix = "" if path.stem == "rollouts" else path.stem + "_"
    return {
        "quality_summary": path.with_name(prefix + QUALITY_SUMMARY_NAME),
        "rollout_verdicts": path.with_name(prefix + VERDICTS_NAME),
    }


def rollouts_path_of_profile(profile: Path | str) -> Path | None:
    """`out/run_reward_profiling.jsonl` -> `out/run.jsonl` (the rollouts file it was named from), or None."""
    path = Path(profile)
    if not path.stem.endswith(REWARD_PROFILE_SUFFIX):
        return None
    return path.with_name(path.stem.removesuffix(REWARD_PROFILE_SUFFIX) + ".jsonl")


MAX_INDEX = 2**63 - 1  # numpy and pandas (so Gym's profiler) hold identity keys as int64


def is_index(value: object) -> TypeGuard[int]:
    """Identity keys are integers in [0, 2^63) (bools are not integers here)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INDEX


def index_problem(value: object) -> str:
    """Why `value` is not an identity key, in a few words (for error messages)."""
    if value is None:
        return "is missing"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"is {value}: negative" if value < 0 else f"is {value}: 2^63 or more"
    return f"is {value!r}, not an integer"


def key_problem(row: dict, role: str = "materialized") -> str:
    """Why a row has no identity key, naming the key and its value (for an error naming file:line)."""
    task = row.get(TASK_KEY)
    name, value = (TASK_KEY, task) if not is_index(task) else (ROLLOUT_KEY, row.get(ROLLOUT_KEY))
    return (
        f"{role} row's `{name}` {index_problem(value)}; every row needs integer {TASK_KEY} and {ROLLOUT_KEY}"
    )


def rollout_key(row: dict) -> RolloutKey | None:
    """The (task, rollout) identity of a row, or None when either key is absent or not an index."""
    task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
    if is_index(task) and is_index(rollout):
        return task, rollout
    return None


def profile_key(row: Mapping[str, Any]) -> tuple[int, str | None] | None:
    """A reward profile row's identity: (task index, agent name); None when the task index is not one.
    Two rows with one key make a profile that stats, compare, curriculum, ledger and validate refuse."""
    task = row.get(TASK_KEY)
    return (task, agent_name(row)) if is_index(task) else None


def agent_name(row: Mapping[str, Any]) -> str | None:
    ref = row.get("agent_ref")
    if isinstance(ref, dict) and isinstance(ref.get("name"), str):
        return ref["name"]
    return None


def task_label(task: Any, agent: str | None) -> str:
    """`task 10 agent "math"`, or `task 10` for a task without an agent (never `agent None`)."""
    import json

    return f"task {task}" if agent is None else f"task {task} agent {json.dumps(agent, ensure_ascii=False)}"


_SHIFT = 32
_LOW = (1 << _SHIFT) - 1


def pack_key(key: RolloutKey) -> int | RolloutKey:
    """(task, rollout) -> one int, so a set or dict of millions of keys stays small; the int order is the
    tuple order. Rollout indices beyond 2**32 (never seen in practice) stay tuples."""
    task, rollout = key
    return (task << _SHIFT) | rollout if rollout <= _LOW else key


def unpack_key(packed: int | RolloutKey) -> RolloutKey:
    return packed if isinstance(packed, tuple) else (packed >> _SHIFT, packed & _LOW)
