"""What the profiler keeps from each row, extracted the way NeMo Gym 0.7.0's `reward_profile.py` reads it.

Inputs keep their identity, run key and agent name; results keep their identity, the mask flag, the
numeric fields Gym profiles (`result | response.usage`, usage winning a name clash) and the compact
`rollout_info` (result winning a clash there), pre-serialized. Nothing else of a row is held.
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson

from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name

MASK_FIELD = "mask_sample"
ENV_SERVER_KEY = "_ng_environment_server"
NULL_POLICIES = ("exclude", "zero", "error")
NO_REWARD = ("null", "absent")  # what --null-reward decides about; a non-numeric reward is a verifier bug
UNHEALTHY = "unhealthy"  # reward_state of a rollout left out by --exclude-unhealthy (masked as well)

Key = tuple[int, int]


@dataclass(slots=True)
class InputRec:
    task: int
    rollout: int
    run_key: str | None  # Gym's rollout_run_key: the environment server stamp, else agent_ref.name
    agent: str | None  # agent_ref.name (coverage is keyed by it)
    result: ResultRec | None = None  # the rollout with this key, linked once so no pass looks it up again


@dataclass(slots=True)
class ResultRec:
    masked: bool
    names: tuple[str, ...] = ()  # numeric fields in Gym's column order for this row
    values: tuple[float, ...] = ()
    info: bytes = b"{}"  # orjson of Gym's rollout_info
    reward_state: str = "ok"  # "ok", "null" (reward: null), "absent" (no reward key), "non_numeric",
    # or UNHEALTHY (masked because --exclude-unhealthy named it)
    offset: int = -1  # where `values` start in Dataset.numeric as float64 (-1: not stored there)


@dataclass
class Dataset:
    """Everything profiling needs, for one run or a union of shards (inputs in file order)."""

    inputs: list[InputRec] = field(default_factory=list)  # unique keys, each linked to its result
    results: dict[Key, ResultRec] = field(default_factory=dict)
    # (task, run_key) -> (rollout index, serialized sample row): the lowest matched, unmasked rollout
    samples: dict[tuple[int, str | None], tuple[int, bytes]] = field(default_factory=dict)
    # every result's `values` as float64, appended while the row is still in cache, so the table is built
    # without visiting 10 scattered number objects per rollout again
    numeric: array = field(default_factory=lambda: array("d"))


def input_record(row: Mapping[str, Any], task: int, rollout: int, result: ResultRec | None) -> InputRec:
    agent = agent_name(row)
    server = row.get(ENV_SERVER_KEY)
    return InputRec(task, rollout, server if isinstance(server, str) else agent, agent, result)


def _usage(result: Mapping[str, Any]) -> Mapping[str, Any]:
    response = result.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    return usage if isinstance(usage, dict) else {}


def _getter(names: tuple[Any, ...]) -> Callable[[Any], tuple]:
    """itemgetter that always returns a tuple (keys of a row, or positions in a tuple of values)."""
    if len(names) >= 2:
        return itemgetter(*names)
    if len(names) == 1:
        name = names[0]
        return lambda row: (row[name],)
    return lambda row: ()


@dataclass(frozen=True, slots=True)
class _Layout:
    """One key layout of (result, usage): the candidate fields, read in two C calls, and where each goes.

    `values` = result candidates + every usage value. Gym's stats path reads `result | usage` (usage wins a
    clash); its rollout_info reads usage, then result fields (result wins). Which candidates are numbers is
    decided per row by a `_Plan`, cached by the tuple of value types."""

    get_result: Callable[[Mapping[str, Any]], tuple]
    get_usage: Callable[[Mapping[str, Any]], tuple]
    stats: tuple[tuple[str, int], ...]  # (name, position in values), in `result | usage` order
    info: tuple[tuple[str, int], ...]  # (name, position), usage keys first, then result fields
    reward_pos: int | None  # position of the result's `reward` in values (None: no reward key)
    plans: dict[tuple[type, ...], _Plan]


@dataclass(frozen=True, slots=True)
class _Plan:
    stats_names: tuple[str, ...]
    stats_values: Callable[[tuple], tuple]
    info_keys: tuple[str, ...]  # rollout_info keys: the identity, `reward` when present, then the numbers
    info_values: Callable[[tuple], tuple]  # the reward (when present) and the numbers, from `values`
    info_bools: tuple[int, ...]  # positions in info_values of bool numbers: Gym writes them as 0/1
    reward_state: str
    # rollout_info as a bytes %-template (task, rollout, task, rollout, then each value's JSON), when its
    # keys are distinct and every value is a number; else None and a dict is serialized
    info_template: bytes | None


_LAYOUTS: dict[tuple[tuple[str, ...], tuple[str, ...]], _Layout] = {}
_NUMERIC_TYPES = (int, float, bool)


def _layout(result_keys: tuple[str, ...], usage_keys: tuple[str, ...]) -> _Layout:
    layout = _LAYOUTS.get((result_keys, usage_keys))
    if layout is not None:
        return layout
    in_usage = set(usage_keys)
    skip_info = ("reward", "response", MASK_FIELD)
    candidates = tuple(n for n in result_keys if not n.startswith("_") and n != MASK_FIELD)
    pos = {name: i for i, name in enumerate(candidates)}
    upos = {name: len(candidates) + i for i, name in enumerate(usage_keys)}
    merged = dict.fromkeys(result_keys) | dict.fromkeys(usage_keys)
    stats = tuple(
        (name, upos[name] if name in in_usage else pos[name])
        for name in merged
        # Gym strips the mask flag from the result before merging usage in
        if not name.startswith("_") and (name in in_usage or name in pos)
    )
    info = tuple((name, upos[name]) for name in usage_keys) + tuple(
        (name, pos[name]) for name in candidates if name not in skip_info
    )
    layout = _Layout(_getter(candidates), _getter(usage_keys), stats, info, pos.get("reward"), {})
    if len(_LAYOUTS) > 10_000:  # pathological input: every row its own layout
        _LAYOUTS.clear()
    _LAYOUTS[(result_keys, usage_keys)] = layout
    return layout


def _plan(layout: _Layout, types: tuple[type, ...]) -> _Plan:
    stats = tuple((n, i) for n, i in layout.stats if types[i] in _NUMERIC_TYPES)
    info: dict[str, int] = {}
    for name, i in layout.info:  # later (result) numbers overwrite earlier (usage) ones, keeping the position
        if types[i] in _NUMERIC_TYPES:
            info[name] = i
    reward_pos = layout.reward_pos
    head: tuple[int, ...] = ()
    if reward_pos is None:
        state = "absent"
    else:
        kind = types[reward_pos]
        state = "ok" if kind in _NUMERIC_TYPES else "null" if kind is type(None) else "non_numeric"
        head = (reward_pos,)
    plan = _Plan(
        tuple(n for n, _ in stats),
        _getter(tuple(i for _, i in stats)),
        (*_IDENTITY, *(("reward",) if head else ()), *info),
        _getter((*head, *info.values())),
        # the reward itself (first when present) stays as it is
        tuple(k + len(head) for k, i in enumerate(info.values()) if types[i] is bool),
        state,
        _info_template((*_IDENTITY, *(("reward",) if head else ()), *info), state in ("ok", "absent")),
    )
    layout.plans[types] = plan
    return plan


_IDENTITY = ("rollout_id", TASK_KEY, ROLLOUT_KEY)


def _info_template(keys: tuple[str, ...], numbers_only: bool) -> bytes | None:
    if not numbers_only or len(set(keys)) != len(keys) or len(keys) == len(_IDENTITY):
        return None
    fields = b"".join(
        b"," + orjson.dumps(key).replace(b"%", b"%%") + b":%b" for key in keys[len(_IDENTITY) :]
    )
    return (
        b'{"rollout_id":"%d:%d",'
        + orjson.dumps(TASK_KEY)
        + b":%d,"
        + orjson.dumps(ROLLOUT_KEY)
        + b":%d"
        + fields
        + b"}"
    )


_NO_USAGE: dict[str, Any] = {}
_LAST: list[Any] = [None, None, None, None]  # last (keys, layout, types, plan)


def result_record(
    result: dict[str, Any], task: int, rollout: int, null_policy: str, numeric: array | None = None
) -> ResultRec:
    """Per row: two key tuples find the cached layout, the value types find the cached plan; the rest is
    C-level getters, one dict and one orjson call."""
    if result.get(MASK_FIELD):
        return ResultRec(masked=True)
    response = result.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        usage = _NO_USAGE
    keys = (tuple(result), tuple(usage))
    last = _LAST
    if keys == last[0]:  # rows mostly share one layout and plan: compare, do not hash
        layout = last[1]
    else:
        layout = _LAYOUTS.get(keys) or _layout(*keys)
        last[0], last[1], last[2] = keys, layout, None
    values = layout.get_result(result) + layout.get_usage(usage)
    types = tuple(map(type, values))
    if types == last[2]:
        plan = last[3]
    else:
        plan = layout.plans.get(types) or _plan(layout, types)
        last[2], last[3] = types, plan
    names, numbers = plan.stats_names, plan.stats_values(values)  # bools stay bools: numpy reads them as 0/1
    state = plan.reward_state
    if state in NO_REWARD and null_policy == "zero" and "reward" not in names:  # a string stays out
        names, numbers = (*names, "reward"), (*numbers, 0.0)
    info_values = plan.info_values(values)
    if plan.info_bools:
        info_values = list(info_values)
        for k in plan.info_bools:
            info_values[k] = int(info_values[k])
    template = plan.info_template
    if template is not None:  # orjson's JSON for each number, spliced between the plan's keys
        info = template % (task, rollout, task, rollout, *orjson.dumps(info_values)[1:-1].split(b","))
    else:
        # dict(zip) keeps a repeated key at its first position with its last value, like dict.update
        pairs = zip(plan.info_keys, (f"{task}:{rollout}", task, rollout, *info_values), strict=False)
        info = compact_dumps(dict(pairs))
    if numeric is None:
        return ResultRec(False, names, numbers, info, state)
    offset = len(numeric)
    numeric.extend(numbers)  # bools become 0.0/1.0, as numpy makes them
    return ResultRec(False, names, numbers, info, state, offset)


def compact_dumps(value: Any) -> bytes:
    """orjson (3.8) hands back a bytes object that still owns its ~1 KB output buffer; an exact-size copy
    of each kept one saves ~1 KB per rollout (80 MB on 80,000 rollouts), and the page faults with it."""
    return bytes(memoryview(orjson.dumps(value)))


def sample_bytes(row: Mapping[str, Any]) -> bytes:
    return compact_dumps({k: v for k, v in row.items() if k not in (TASK_KEY, ROLLOUT_KEY)})


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
