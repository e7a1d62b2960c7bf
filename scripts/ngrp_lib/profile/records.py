"""What the profiler keeps from each rollout, extracted the way NeMo Gym 0.7.0's `reward_profile.py` reads it.

A rollout is kept as numbers only: its identity, a plan id and the values its plan names, appended to flat
arrays (`ResultStore`). The plan (one per key layout and value types, cached per run) knows Gym's rules:
the numeric fields profiled (`result | response.usage`, usage winning a name clash), the compact
`rollout_info` (result winning a clash there, bools as 0/1, the reward as it is) and where each of those
numbers sits in the arrays. `rollout_info` is written from the arrays when the profile rows are; only a
rollout whose info holds something other than numbers (a string reward) keeps its info bytes.
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson

from ..artifacts.names import ROLLOUT_KEY, TASK_KEY

MASK_FIELD = "mask_sample"
ENV_SERVER_KEY = "_ng_environment_server"
NULL_POLICIES = ("exclude", "zero", "error")
NO_REWARD = ("null", "absent")  # what --null-reward decides about; a non-numeric reward is a verifier bug
UNHEALTHY = "unhealthy"  # reward_state of a rollout left out by --exclude-unhealthy (masked as well)
FLOAT, INT, BOOL, ZERO = "f", "i", "b", "z"  # where a number is stored: floats, ints (bools as 0/1), a 0.0
_NUMERIC_TYPES = (int, float, bool)
TYPE_NAMES = {
    int: "int",
    float: "float",
    bool: "bool",
    type(None): "null",
    str: "str",
    list: "list",
    dict: "dict",
}
TYPES_BY_NAME = {name: kind for kind, name in TYPE_NAMES.items()}
_IDENTITY = ("rollout_id", TASK_KEY, ROLLOUT_KEY)


def _getter(positions: tuple[Any, ...]) -> Callable[[Any], tuple]:
    if len(positions) >= 2:
        return itemgetter(*positions)
    if len(positions) == 1:
        pos = positions[0]
        return lambda row: (row[pos],)
    return lambda row: ()


@dataclass(frozen=True, slots=True)
class _Layout:
    """One key layout of (result, usage): the candidate fields, read in two C calls.

    `values` = result candidates + every usage value. Gym's stats path reads `result | usage` (usage wins a
    clash); its rollout_info reads usage, then result fields (result wins)."""

    result_keys: tuple[str, ...]
    usage_keys: tuple[str, ...]
    get_result: Callable[[Mapping[str, Any]], tuple]
    get_usage: Callable[[Mapping[str, Any]], tuple]
    stats: tuple[tuple[str, int], ...]  # (name, position in values), in `result | usage` order
    info: tuple[tuple[str, int], ...]  # (name, position), usage keys first, then result fields
    reward_pos: int | None  # position of the result's `reward` in values (None: no reward key)
    plans: dict[tuple[type, ...], Plan]


@dataclass(slots=True)
class Plan:
    """How the rollouts of one layout and one tuple of value types are kept, profiled and written back.

    `stats` and `info_args` point into the row's slice of the store: (FLOAT, k) is its k-th float, (INT, k)
    its k-th int, (BOOL, k) its k-th int written as true/false, (ZERO, 0) a 0.0 (a null reward under
    --null-reward zero). `info_template` is the rollout_info as a bytes %-template (task, rollout, task,
    rollout, then each argument's JSON); None when the info cannot be written from numbers alone."""

    id: int
    masked: bool
    reward_state: str  # "ok", "null" (reward: null), "absent" (no reward key) or "non_numeric"
    stats: tuple[tuple[str, str, int], ...]
    n_floats: int
    n_ints: int
    get_floats: Callable[[tuple], tuple]
    get_ints: Callable[[tuple], tuple]
    info_template: bytes | None
    info_args: tuple[tuple[str, int], ...]
    descriptor: tuple[Any, ...]  # (result keys, usage keys, type names, wide): recreates the plan
    info_keys: tuple[str, ...] = ()  # for rows without a template: the keys, and the values' getter
    info_values: Callable[[tuple], tuple] = lambda values: ()
    info_bools: tuple[int, ...] = ()  # positions in info_values of bools written as 0/1
    wide: Plan | None = None  # the variant for rows with an int outside int64 (kept as floats)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.stats)


MASKED_ID, UNHEALTHY_ID = 0, 1  # the plans of masked rollouts: mask_sample, or --exclude-unhealthy
LAST_MASKED_ID = UNHEALTHY_ID  # plan ids up to this one are masked


def _masked_plans() -> list[Plan]:
    none = _getter(())
    return [
        Plan(plan_id, True, state, (), 0, 0, none, none, None, (), ((), (), (), False))
        for plan_id, state in ((MASKED_ID, "ok"), (UNHEALTHY_ID, UNHEALTHY))
    ]


@dataclass
class ResultStore:
    """The rollouts of a run (or a union of shards), in file order, as flat arrays of numbers."""

    null_policy: str = "exclude"
    task: array = field(default_factory=lambda: array("q"))
    rollout: array = field(default_factory=lambda: array("q"))
    plan: array = field(default_factory=lambda: array("I"))  # plan id per rollout
    floats: array = field(default_factory=lambda: array("d"))
    ints: array = field(default_factory=lambda: array("q"))
    odd_infos: dict[int, bytes] = field(default_factory=dict)  # rollout position -> info (no template)
    components: dict[int, Any] = field(default_factory=dict)  # rollout position -> reward_components
    plans: list[Plan] = field(default_factory=_masked_plans)
    _layouts: dict[tuple[tuple[str, ...], tuple[str, ...]], _Layout] = field(default_factory=dict)
    _last: list[Any] = field(default_factory=lambda: [None, None, None, None])  # keys, layout, types, plan

    def __len__(self) -> int:
        return len(self.task)

    def add(self, result: dict[str, Any], task: int, rollout: int) -> None:
        """Keep one rollout. Per row: two key tuples find the cached layout, the value types the cached
        plan; the rest is C-level getters and array appends."""
        self.task.append(task)
        self.rollout.append(rollout)
        if result.get(MASK_FIELD):
            self.plan.append(MASKED_ID)
            return
        response = result.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None  # usage_of(response), inlined
        if not isinstance(usage, dict):
            usage = _NO_USAGE
        keys = (tuple(result), tuple(usage))
        last = self._last
        if keys == last[0]:  # rows mostly share one layout and plan: compare, do not hash
            layout = last[1]
        else:
            layout = self._layouts.get(keys) or self._layout(*keys)
            last[0], last[1], last[2] = keys, layout, None
        values = layout.get_result(result) + layout.get_usage(usage)
        types = tuple(map(type, values))
        if types == last[2]:
            plan = last[3]
        else:
            plan = layout.plans.get(types) or self._plan(layout, types)
            last[2], last[3] = types, plan
        ints = self.ints
        size = len(ints)
        try:
            ints.extend(plan.get_ints(values))
        except OverflowError:  # an int in [2^63, 2^64): orjson reads it, int64 cannot hold it
            del ints[size:]
            plan = self._wide(plan, layout, types)
        self.floats.extend(plan.get_floats(values))
        self.plan.append(plan.id)
        if plan.info_template is None:
            self.odd_infos[len(self.task) - 1] = _dict_info(plan, values, task, rollout)
        components = result.get("reward_components")
        if components is not None:  # kept as written: profile.components reads it (ngrp/ keys only)
            self.components[len(self.task) - 1] = components

    def add_unhealthy(self, task: int, rollout: int) -> None:
        """Keep a rollout that --exclude-unhealthy leaves out: masked, and counted as unhealthy."""
        self.task.append(task)
        self.rollout.append(rollout)
        self.plan.append(UNHEALTHY_ID)

    def add_numbers(
        self, task: int, rollout: int, plan: Plan, floats: list, ints: list, info: bytes | None
    ) -> None:
        """Keep one rollout given as its plan's numbers (a shard's saved state)."""
        self.task.append(task)
        self.rollout.append(rollout)
        self.plan.append(plan.id)
        self.floats.extend(floats)
        self.ints.extend(ints)
        if plan.info_template is None:
            self.odd_infos[len(self.task) - 1] = info if info is not None else b"{}"

    def plan_from(self, descriptor: list[Any]) -> Plan:
        """The plan of a saved `Plan.descriptor`, in this store's own numbering."""
        result_keys, usage_keys, type_names, wide = descriptor
        layout = self._layouts.get((tuple(result_keys), tuple(usage_keys))) or self._layout(
            tuple(result_keys), tuple(usage_keys)
        )
        types = tuple(TYPES_BY_NAME[name] for name in type_names)
        plan = layout.plans.get(types) or self._plan(layout, types)
        return self._wide(plan, layout, types) if wide else plan

    def _layout(self, result_keys: tuple[str, ...], usage_keys: tuple[str, ...]) -> _Layout:
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
        layout = _Layout(
            result_keys,
            usage_keys,
            _getter(candidates),
            _getter(usage_keys),
            stats,
            info,
            pos.get("reward"),
            {},
        )
        if len(self._layouts) > 10_000:  # pathological input: every row its own layout
            self._layouts.clear()
        self._layouts[(result_keys, usage_keys)] = layout
        return layout

    def _plan(self, layout: _Layout, types: tuple[type, ...], wide: bool = False) -> Plan:
        plan = _build_plan(len(self.plans), layout, types, self.null_policy, wide)
        self.plans.append(plan)
        if not wide:
            layout.plans[types] = plan
        return plan

    def _wide(self, plan: Plan, layout: _Layout, types: tuple[type, ...]) -> Plan:
        if plan.wide is None:
            plan.wide = self._plan(layout, types, wide=True)
        return plan.wide


_NO_USAGE: dict[str, Any] = {}


def _build_plan(plan_id: int, layout: _Layout, types: tuple[type, ...], null_policy: str, wide: bool) -> Plan:
    stats = tuple((n, i) for n, i in layout.stats if types[i] in _NUMERIC_TYPES)
    # later (result) numbers overwrite earlier (usage) ones, keeping the position
    info = {name: i for name, i in layout.info if types[i] in _NUMERIC_TYPES}
    reward_pos = layout.reward_pos
    state = _reward_state(reward_pos, types)
    scored = reward_pos if state == "ok" else None  # the reward's position when it is a number
    float_pos, int_pos, where = _places(stats, scored, info, types, wide)
    stat_refs = tuple((name, *where[i]) for name, i in stats)
    if state in NO_REWARD and null_policy == "zero" and "reward" not in {n for n, _ in stats}:
        stat_refs += (("reward", ZERO, 0),)
    keys = (*_IDENTITY, *(("reward",) if reward_pos is not None else ()), *info)
    head = (reward_pos,) if reward_pos is not None else ()
    template: bytes | None = None
    args: tuple[tuple[str, int], ...] = ()
    if not wide and state != "non_numeric" and len(set(keys)) == len(keys):
        template = _info_template(keys, null_reward=state == "null")
        args = _info_args(scored, info, where, types)
    return Plan(
        id=plan_id,
        masked=False,
        reward_state=state,
        stats=stat_refs,
        n_floats=len(float_pos),
        n_ints=len(int_pos),
        get_floats=_getter(tuple(float_pos)),
        get_ints=_getter(tuple(int_pos)),
        info_template=template,
        info_args=args,
        descriptor=(layout.result_keys, layout.usage_keys, tuple(TYPE_NAMES[t] for t in types), wide),
        info_keys=keys,
        info_values=_getter((*head, *info.values())),
        # the reward itself (first when present) stays as it is
        info_bools=tuple(k + len(head) for k, i in enumerate(info.values()) if types[i] is bool),
    )


def _info_args(
    scored: int | None, info: dict[str, int], where: dict[int, tuple[str, int]], types: tuple[type, ...]
) -> tuple[tuple[str, int], ...]:
    """The values `_info_template` takes, in its order: the reward when it is a number, then the info."""
    reward_arg = () if scored is None else (_bool_or(where[scored], types[scored]),)
    return reward_arg + tuple(where[i] for i in info.values())


def _reward_state(reward_pos: int | None, types: tuple[type, ...]) -> str:
    """'absent', 'ok' (a number), 'null' or 'non_numeric': what the rows of one layout hold as reward."""
    if reward_pos is None:
        return "absent"
    kind = types[reward_pos]
    return "ok" if kind in _NUMERIC_TYPES else "null" if kind is type(None) else "non_numeric"


def _places(
    stats: tuple[tuple[str, int], ...],
    scored: int | None,
    info: dict[str, int],
    types: tuple[type, ...],
    wide: bool,
) -> tuple[list[int], list[int], dict[int, tuple[str, int]]]:
    """Where each kept value goes: floats, or ints (bools as 0/1); `wide` keeps ints as floats too.
    Returns the float positions, the int positions and, by position, (FLOAT or INT, index)."""
    kept = dict.fromkeys([i for _, i in stats] + ([] if scored is None else [scored]) + list(info.values()))
    float_pos = [i for i in kept if types[i] is float or wide]
    int_pos = [i for i in kept if i not in float_pos]
    where = {i: (FLOAT, k) for k, i in enumerate(float_pos)} | {i: (INT, k) for k, i in enumerate(int_pos)}
    return float_pos, int_pos, where


def _bool_or(ref: tuple[str, int], kind: type) -> tuple[str, int]:
    """The reward is written as it is: a bool reward stays true/false (other bools become 0/1)."""
    return (BOOL, ref[1]) if kind is bool else ref


def _info_template(keys: tuple[str, ...], null_reward: bool) -> bytes:
    fields = b"".join(
        b","
        + orjson.dumps(key).replace(b"%", b"%%")
        + (b":null" if key == "reward" and null_reward else b":%b")
        for key in keys[len(_IDENTITY) :]
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


def _dict_info(plan: Plan, values: tuple, task: int, rollout: int) -> bytes:
    info_values = list(plan.info_values(values))
    for k in plan.info_bools:
        info_values[k] = int(info_values[k])
    # dict(zip) keeps a repeated key at its first position with its last value, like dict.update
    pairs = zip(plan.info_keys, (f"{task}:{rollout}", task, rollout, *info_values), strict=False)
    return compact_dumps(dict(pairs))


def compact_dumps(value: Any) -> bytes:
    """orjson (3.8) hands back a bytes object that still owns its ~1 KB output buffer; an exact-size copy
    of each kept one saves ~1 KB per kept object, and the page faults with it."""
    return bytes(memoryview(orjson.dumps(value)))


def sample_bytes(row: Mapping[str, Any]) -> bytes:
    return compact_dumps({k: v for k, v in row.items() if k not in (TASK_KEY, ROLLOUT_KEY)})


def run_labels(agent_by_key: Mapping[str, str | None]) -> dict[str, str]:
    """Gym's `rollout_run_labels`: an agent's name when it fronts one run key, else the run key itself.
    `agent_by_key`: each run key's agent_ref.name (of its first measured row), in order of appearance."""
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
