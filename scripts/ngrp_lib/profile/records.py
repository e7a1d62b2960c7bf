"""What the profiler keeps from each row, extracted the way NeMo Gym 0.7.0's `reward_profile.py` reads it.

Inputs keep their identity, run key and agent name; results keep their identity, the mask flag, the
numeric fields Gym profiles (`result | response.usage`, usage winning a name clash) and the compact
`rollout_info` (result winning a clash there), pre-serialized. Nothing else of a row is held.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..artifacts import ROLLOUT_KEY, TASK_KEY

MASK_FIELD = "mask_sample"
ENV_SERVER_KEY = "_ng_environment_server"
NULL_POLICIES = ("exclude", "zero", "error")

Key = tuple[int, int]


@dataclass(slots=True)
class InputRec:
    task: int
    rollout: int
    run_key: str | None  # Gym's rollout_run_key: the environment server stamp, else agent_ref.name
    agent: str | None  # agent_ref.name (coverage is keyed by it)


@dataclass(slots=True)
class ResultRec:
    masked: bool
    names: tuple[str, ...] = ()  # numeric fields in Gym's column order for this row
    values: tuple[float, ...] = ()
    info: bytes = b"{}"  # orjson of Gym's rollout_info
    reward_state: str = "ok"  # "ok", "null" (reward: null) or "absent" (no reward key)


@dataclass
class Dataset:
    """Everything profiling needs, for one run or a union of shards (inputs in file order)."""

    inputs: list[InputRec] = field(default_factory=list)
    results: dict[Key, ResultRec] = field(default_factory=dict)
    # (task, run_key) -> (rollout index, serialized sample row): the lowest matched, unmasked rollout
    samples: dict[tuple[int, str | None], tuple[int, bytes]] = field(default_factory=dict)


def agent_of(row: Mapping[str, Any]) -> str | None:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) else None


def run_key_of(row: Mapping[str, Any]) -> str | None:
    server = row.get(ENV_SERVER_KEY)
    return server if isinstance(server, str) else agent_of(row)


def input_record(row: Mapping[str, Any], task: int, rollout: int) -> InputRec:
    return InputRec(task, rollout, run_key_of(row), agent_of(row))


def _numeric(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return None


def _usage(result: Mapping[str, Any]) -> Mapping[str, Any]:
    response = result.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    return usage if isinstance(usage, dict) else {}


def result_record(result: dict[str, Any], task: int, rollout: int, null_policy: str) -> ResultRec:
    if result.get(MASK_FIELD):
        return ResultRec(masked=True)
    usage = _usage(result)
    merged = result | usage  # usage wins a clash in the stats path, as in Gym
    names: list[str] = []
    values: list[float] = []
    for name, value in merged.items():
        if name.startswith("_") or (name == MASK_FIELD and name not in usage):
            continue  # Gym strips the mask flag from the result before merging usage in
        number = _numeric(value)
        if number is not None:
            names.append(name)
            values.append(number)
    state = "ok"
    if "reward" not in result:
        state = "absent"
    elif _numeric(result["reward"]) is None:
        state = "null"
    if state != "ok" and null_policy == "zero" and "reward" not in names:
        names.append("reward")
        values.append(0.0)
    return ResultRec(False, tuple(names), tuple(values), orjson.dumps(rollout_info(result, task, rollout, usage)), state)


def rollout_info(result: Mapping[str, Any], task: int, rollout: int, usage: Mapping[str, Any]) -> dict[str, Any]:
    """Gym's `rollout_info_from_result`: reward as written (even null), then numeric usage, then numeric fields."""
    info: dict[str, Any] = {"rollout_id": f"{task}:{rollout}", TASK_KEY: task, ROLLOUT_KEY: rollout}
    if "reward" in result:
        info["reward"] = result.get("reward")
    for name, value in usage.items():
        number = _numeric(value)
        if number is not None:
            info[name] = number
    for name, value in result.items():
        if name.startswith("_") or name in ("reward", "response", MASK_FIELD):
            continue
        number = _numeric(value)
        if number is not None:
            info[name] = number
    return info


def sample_bytes(row: Mapping[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in row.items() if k not in (TASK_KEY, ROLLOUT_KEY)})


def run_labels(inputs: Iterable[InputRec]) -> dict[str, str]:
    """Gym's `rollout_run_labels`: an agent's name when it fronts one run key, else the run key itself."""
    agent_by_key: dict[str, str | None] = {}
    for rec in inputs:
        if rec.run_key is not None and rec.run_key not in agent_by_key:
            agent_by_key[rec.run_key] = rec.agent
    keys_by_agent: dict[str, set[str]] = defaultdict(set)
    for key, agent in agent_by_key.items():
        if agent is not None:
            keys_by_agent[agent].add(key)
    labels = {
        key: agent if agent is not None and len(keys_by_agent[agent]) == 1 else key
        for key, agent in agent_by_key.items()
    }
    while True:
        counts = Counter(labels.values())
        clashing = [key for key, label in labels.items() if counts[label] > 1 and label != key]
        if not clashing:
            return labels
        for key in clashing:
            labels[key] = key
