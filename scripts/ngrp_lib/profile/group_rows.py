"""`<stem>_reward_profiling.jsonl` rows: Gym's per-task (or per task and agent) statistics, byte-compatible,
plus our `ngrp/*` extras after Gym's keys. Groups are written a chunk at a time (about 8k rollouts), so
memory stays flat however many rollouts there are."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..artifacts.names import TASK_KEY
from .components import component_bytes
from .dataset import NONE, Dataset
from .extras import task_extras
from .infos import rollout_infos
from .kernels import STATS, describe_groups
from .table import Table

# Rollouts per chunk. A chunk's temporaries (numpy columns, the rollout_infos, Python floats) are freed before
# the next: with 32k rollouts they were ~20 MB that the allocators returned to the system and faulted in again
# for every chunk (17,000 page faults over 80,000 rollouts, ~0.03 s); with 8k they are reused.
CHUNK_ROWS = 8192


@dataclass
class GroupRow:
    """One profile row, and what a merge needs of it (`gym`: the row without the ngrp/* keys)."""

    task: int
    label: str | None  # the group's agent label (None: no agent_ref)
    gym: bytes  # the row's bytes up to, not including, its closing brace
    num_rollouts: int
    rewards: list[float]  # the scored rewards, in rollout order
    null: int  # rollouts with a null, absent or non-numeric reward
    rollouts: Any  # the group's rollout indices, and its (rollouts x columns) values
    values: Any
    components: bytes = b""  # the ngrp/component_* keys (profile.components), when rows carry them

    def line(self, extras: bool, pass_threshold: float) -> bytes:
        if not extras:
            return self.gym + b"}\n"
        passed = sum(1 for r in self.rewards if r >= pass_threshold)
        extra = extras_bytes(len(self.rewards), passed, self.null, pass_threshold)
        return self.gym + extra + self.components + b"}\n"


def group_order(table: Table) -> tuple[Any, Any]:
    """Permutation of table rows into groups (sorted like pandas groupby) and the group starts."""
    import numpy as np

    n = len(table)
    if table.per_agent:
        idx = np.nonzero(table.labels >= 0)[0]  # groupby drops rows without a label
        perm = idx[np.lexsort((table.labels[idx], table.tasks[idx]))]  # stable: rollout order kept in a group
        change = np.ones(len(perm), dtype=bool)
        change[1:] = (table.tasks[perm][1:] != table.tasks[perm][:-1]) | (
            table.labels[perm][1:] != table.labels[perm][:-1]
        )
        return perm, np.nonzero(change)[0]
    perm = np.arange(n)
    change = np.ones(n, dtype=bool)
    change[1:] = table.tasks[1:] != table.tasks[:-1]
    return perm, np.nonzero(change)[0]


def median_shape(table: Table, perm: Any, starts: Any) -> int | None:
    """The size of every group when all groups have one size and no value is missing: then medians are
    taken by one sort. Chosen over all groups at once, so a row does not depend on its chunk."""
    import numpy as np

    if len(starts) == 0:
        return None
    sizes = np.diff(np.append(starts, len(perm)))
    uniform = bool((sizes == sizes[0]).all()) and table.complete(perm)
    return int(sizes[0]) if uniform else None


@functools.lru_cache(maxsize=65536)
def extras_bytes(n: int, passed: int, num_null: int, threshold: float) -> bytes:
    """The `ngrp/*` keys depend only on these counts: most tasks share them, so serialize once."""
    return b"," + orjson.dumps(task_extras(n, passed, num_null, threshold))[1:-1]


def group_rows(data: Dataset, table: Table) -> Iterator[GroupRow]:
    """Every group's row, in Gym's row order. Everything that can be is computed for a chunk of groups at
    once; the loop over groups only slices lists and serializes."""
    import numpy as np

    if len(table) == 0:
        return
    perm, starts = group_order(table)
    if len(perm) == 0:  # fan-out where no row has a label: pandas' groupby drops them all
        return
    uniform = median_shape(table, perm, starts) is not None
    samples = data.samples
    ok = np.array([p.reward_state == "ok" for p in table.store.plans], dtype=bool)
    g0 = 0
    while g0 < len(starts):
        g1 = max(g0 + 1, int(np.searchsorted(starts, starts[g0] + CHUNK_ROWS)))
        hi = int(starts[g1]) if g1 < len(starts) else len(perm)
        yield from _chunk(table, perm[starts[g0] : hi], starts[g0:g1] - starts[g0], uniform, samples, ok)
        g0 = g1


def _chunk(table: Table, rows: Any, starts: Any, uniform: bool, samples: dict, ok: Any) -> Iterator[GroupRow]:
    import numpy as np

    matrix = table.matrix(rows)
    described = describe_groups(matrix, starts, uniform=uniform)
    stat_keys = [f"{stat}/{col}" for stat in STATS for col in table.columns]
    stats = np.concatenate([described[stat] for stat in STATS], axis=1)
    has_nan = np.isnan(stats).any(axis=1).tolist()
    stat_rows = stats.tolist()
    bounds = [*starts.tolist(), len(rows)]
    infos = rollout_infos(table.store, table.offsets, table.results[rows])
    nulls = np.add.reduceat((~ok[table.plans[rows]]).astype(np.int64), starts).tolist()
    firsts = rows[starts]
    tasks = table.tasks[firsts].tolist()
    labels = table.labels[firsts].tolist()
    expected = table.group_sizes[
        np.searchsorted(table.group_ids, table.group_id(table.tasks[firsts], table.labels[firsts]))
    ]
    expected = expected.tolist()
    reward_col = table.columns.index("reward") if "reward" in table.columns else None
    reward_values = matrix[:, reward_col].tolist() if reward_col is not None else None
    rollouts = table.rollouts[rows]
    kept = table.store.components
    positions = table.results[rows].tolist() if kept else []
    per_agent, names = table.per_agent, table.label_names
    run_keys = [NONE, *table.run_key_of_label]  # label code + 1 -> run key code
    for g, task in enumerate(tasks):
        label = names[labels[g]] if labels[g] >= 0 else None
        head = _head(task, zip(stat_keys, stat_rows[g], strict=True), has_nan[g], label, per_agent)
        lo, hi = bounds[g], bounds[g + 1]
        num = hi - lo
        tail = {
            "num_rollouts": num,
            "expected_num_rollouts": expected[g],
            "missing_num_rollouts": expected[g] - num,
            "reward_profile_completion_pct": 100.0 if expected[g] == 0 else 100.0 * num / expected[g],
        }
        gym = b"".join(
            [
                orjson.dumps(head)[:-1],
                b',"sample":',
                # each group has one run key (labels are unique per run key), hence one sample
                samples[(task, run_keys[labels[g] + 1])][1],
                b",",
                orjson.dumps(tail)[1:-1],
                b',"rollout_infos":[',
                b",".join(infos[lo:hi]),
                b"]",
            ]
        )
        rewards = [] if reward_values is None else [r for r in reward_values[lo:hi] if r == r]
        extra = component_bytes(kept, positions[lo:hi]) if kept else b""
        yield GroupRow(task, label, gym, num, rewards, nulls[g], rollouts[lo:hi], matrix[lo:hi], extra)


def _head(
    task: int, stats: Iterable[tuple[str, float]], has_nan: bool, label: str | None, per_agent: bool
) -> dict:
    """A profile row's first fields: the task, its stats (pandas drops NaN ones), fanned out its agent."""
    head: dict[str, Any] = {TASK_KEY: task}
    if has_nan:
        for name, value in stats:
            if value == value:  # not NaN: pandas drops NaN stats from the row
                head[name] = value
    else:
        head.update(stats)
    if per_agent:
        head["agent_ref"] = {"name": label}
    return head
