"""Everything profiling needs of a run, as flat arrays: the rollouts (`records.ResultStore`), the materialized
inputs (identity, run key, agent, matched rollout) and one sample per (task, run key). About 100 bytes per
rollout plus its numbers, whatever the size of the rows."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

from .records import ResultStore

Key = tuple[int, int]
NONE = -1  # the code of a missing run key or agent name
FIRST_KEYS = 10  # keys quoted in a message (and kept per shard for one)


@dataclass
class Codes:
    """Strings (run keys, agent names) as small ints, in order of first appearance; None is NONE."""

    values: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def code(self, value: str | None) -> int:
        if value is None:
            return NONE
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found

    def value(self, code: int) -> str | None:
        return None if code == NONE else self.values[code]


@dataclass
class InputStore:
    """The materialized inputs in file order: identity, run key and agent codes, matched rollout position."""

    task: array = field(default_factory=lambda: array("q"))
    rollout: array = field(default_factory=lambda: array("q"))
    result: array = field(default_factory=lambda: array("q"))  # position in the ResultStore, or -1
    run_key: array = field(default_factory=lambda: array("i"))  # Gym's rollout_run_key (server, else agent)
    agent: array = field(default_factory=lambda: array("i"))  # agent_ref.name (coverage is keyed by it)
    run_keys: Codes = field(default_factory=Codes)
    agents: Codes = field(default_factory=Codes)

    def __len__(self) -> int:
        return len(self.task)

    def add(self, task: int, rollout: int, result: int, run_key: str | None, agent: str | None) -> None:
        self.task.append(task)
        self.rollout.append(rollout)
        self.result.append(result)
        self.run_key.append(self.run_keys.code(run_key))
        self.agent.append(self.agents.code(agent))


@dataclass
class Dataset:
    """One run, or the union of shards."""

    results: ResultStore
    inputs: InputStore = field(default_factory=InputStore)
    # (task, run key code) -> (rollout index, serialized sample row): the lowest matched, unmasked rollout
    samples: dict[tuple[int, int], tuple[int, bytes]] = field(default_factory=dict)

    def link(self) -> None:
        """Point every input at its rollout (the first of its key), in one vectorised pass."""
        import numpy as np

        index = KeyIndex(self.results)
        found = index.find(
            np.frombuffer(self.inputs.task, np.int64), np.frombuffer(self.inputs.rollout, np.int64)
        )
        self.inputs.result = array("q", found.astype(np.int64).tobytes())


def numbers(store: Any, name: str, dtype: str = "int64") -> Any:
    """A store's array as numpy, without a copy (empty arrays give an empty numpy array)."""
    import numpy as np

    data = getattr(store, name)
    return np.frombuffer(data, dtype=dtype) if len(data) else np.zeros(0, dtype=dtype)


def plan_ids(results: ResultStore) -> Any:
    """Each rollout's plan id (a view of the store's array)."""
    return numbers(results, "plan", "uint32")


def offsets(results: ResultStore) -> tuple[Any, Any]:
    """Where each rollout's floats and ints start in the store's arrays."""
    import numpy as np

    plans = plan_ids(results)
    out = []
    for sizes in ([p.n_floats for p in results.plans], [p.n_ints for p in results.plans]):
        count = np.asarray(sizes, dtype=np.int64)[plans]
        start = np.cumsum(count)
        start -= count  # in place: one array per offset
        out.append(start)
    return out[0], out[1]


_BLOCK = 8192


class KeyIndex:
    """(task, rollout) -> position of the first rollout with that key, or -1.

    Dense keys (tasks on a lattice t0 + g*k, rollouts 0..w-1, filling at least a quarter of it; shards by
    `task % N` are on one) use one int64 slot per lattice point; anything else a dict."""

    def __init__(self, results: ResultStore) -> None:
        import numpy as np

        tasks, rollouts = numbers(results, "task"), numbers(results, "rollout")
        n = len(tasks)
        self.dense = False
        if n:
            t0 = int(tasks.min())
            step = 0
            for lo in range(0, n, _BLOCK):  # in blocks, as below
                step = int(np.gcd.reduce(np.append(tasks[lo : lo + _BLOCK] - t0, step)))
            step = step or 1
            width = int(rollouts.max()) + 1
            height = (int(tasks.max()) - t0) // step + 1
            self.dense = height * width <= 4 * n + 4096
        if self.dense:
            self.t0, self.step, self.width, self.height = t0, step, width, height
            slots = np.full(height * width, n, dtype=np.int64)
            # in blocks: temporaries this small are given back to the system when freed, so the arrays
            # that grow next (the inputs) do not fragment the heap around them
            for lo in range(0, n, _BLOCK):
                at = tasks[lo : lo + _BLOCK] - t0  # the lattice point of each key
                at //= step
                at *= width
                at += rollouts[lo : lo + _BLOCK]
                # the first of each key wins (a repeated key is an error reported later; lookups agree)
                np.minimum.at(slots, at, np.arange(lo, lo + len(at), dtype=np.int64))
            for lo in range(0, len(slots), _BLOCK):
                part = slots[lo : lo + _BLOCK]
                part[part == n] = -1
            self._slots_np = slots
            self.slots = slots.data  # a memoryview: indexing it gives plain ints, fast, without a copy
        else:
            keys = zip(tasks.tolist()[::-1], rollouts.tolist()[::-1], strict=True)
            self.table = dict(zip(keys, range(n - 1, -1, -1), strict=True))  # the first position is kept

    def lookup(self, task: int, rollout: int) -> int:
        if not self.dense:
            return self.table.get((task, rollout), -1)
        offset = task - self.t0
        if offset < 0 or rollout >= self.width or offset % self.step:
            return -1
        row = offset // self.step
        return self.slots[row * self.width + rollout] if row < self.height else -1

    def find(self, tasks: Any, rollouts: Any) -> Any:
        """`lookup` for arrays of keys."""
        import numpy as np

        if not self.dense:
            get = self.table.get
            return np.fromiter(
                (get(key, -1) for key in zip(tasks.tolist(), rollouts.tolist(), strict=True)),
                dtype=np.int64,
                count=len(tasks),
            )
        offset = tasks - self.t0
        row = offset // self.step
        ok = (offset >= 0) & (rollouts < self.width) & (offset % self.step == 0) & (row < self.height)
        out = np.full(len(tasks), -1, dtype=np.int64)
        out[ok] = self._slots_np[row[ok] * self.width + rollouts[ok]]
        return out


def keys_increasing(tasks: Any, rollouts: Any) -> bool:
    """(task, rollout) keys strictly increasing (the usual materialized file): no repeat, no sort needed."""
    step_task = tasks[1:] - tasks[:-1]  # int64: keys are < 2^63 and >= 0, so no overflow
    return bool(((step_task > 0) | ((step_task == 0) & (rollouts[1:] > rollouts[:-1]))).all())
