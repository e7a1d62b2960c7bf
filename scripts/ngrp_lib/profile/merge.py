"""Sharded profiling: profile each shard with `save_state`, then merge the states into the outputs one
pass over all shards' files (in shard order) would give, byte for byte.

Shards collected with `--shard` split the run by task, so each shard's profile rows are already final: the
merge streams them in task order and rebuilds only what spans shards, from per-shard sufficient statistics
(accounting, coverage, missing keys add up) and, per labelled rollout, its rollout index and one value per
column (the exact pooled and per-repeat statistics need them; they are kept in the smallest float type that
holds them exactly). Shards that do not split by task (or whose agent labels, fan-out or column order
differ from the union's) are merged by rebuilding every rollout's numbers, as one pass would hold them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import atomic_outputs, gc_paused, refuse_existing
from ..errors import InputError, UsageError
from .align import missing_error
from .api import (
    STATE_SUFFIX,
    ProfileOptions,
    ProfileResult,
    check_options,
    finish,
    output_paths,
    profile_dataset,
    write_rows,
)
from .compact import CompactFloats, CompactInts
from .dataset import Dataset
from .group_rows import GroupRow
from .reader import ReadStats
from .records import ResultStore, run_labels
from .state import ShardHeader, StateGroup, iter_groups, load_exact, read_header
from .summary import Facts

REWARD_PROFILE_SUFFIX = "_reward_profiling"
SLOW_NOTE = "merged by rebuilding every rollout's numbers in memory"


def state_path_for(shard: Path) -> Path:
    """Accept a state file, or a shard's `<stem>_reward_profiling.jsonl` next to its state file."""
    name = shard.name
    if name.endswith(STATE_SUFFIX + ".jsonl"):
        return shard
    if name.endswith(REWARD_PROFILE_SUFFIX + ".jsonl"):
        stem = name[: -len(REWARD_PROFILE_SUFFIX + ".jsonl")]
        return shard.with_name(stem + STATE_SUFFIX + ".jsonl")
    raise UsageError(
        f"{shard}: not a profile state (`*{STATE_SUFFIX}.jsonl`) "
        f"or reward profile (`*{REWARD_PROFILE_SUFFIX}.jsonl`)",
        hint="profile each shard with `ngrp profile --save-state`, then merge their outputs",
    )


def merge_profiles(shards: list[Path | str], rollouts: Path | str, options: ProfileOptions) -> ProfileResult:
    """Merge shard states into the profile of their union; outputs are named from `rollouts`' stem."""
    if not shards:
        raise UsageError(
            "--merge needs at least one shard", hint="list the shards' *_reward_profiling.jsonl files"
        )
    check_options(options)
    options = replace(options, save_state=False)
    paths = output_paths(Path(rollouts), options)
    refuse_existing(list(paths.values()), options.overwrite)
    headers = [_header(Path(shard), options) for shard in shards]
    sources = {f"shard_{i}": {"path": str(h.path), "sources": h.sources} for i, h in enumerate(headers)}
    with gc_paused():
        union = _union(headers)
        if isinstance(union, str):
            return _merge_exact(headers, options, paths, sources, union)
        return _merge_rows(headers, union, options, paths, sources)


def _header(shard: Path, options: ProfileOptions) -> ShardHeader:
    path = state_path_for(shard)
    if not path.exists():
        raise InputError("profile state not found", path=path, hint="profile the shard with --save-state")
    header = read_header(path)
    if header.null_reward != options.null_reward:
        raise UsageError(
            f"{path} was profiled with --null-reward {header.null_reward}, not {options.null_reward}",
            hint=f"merge with --null-reward {header.null_reward}, or re-profile the shard",
        )
    return header


def _merge_exact(
    headers: list[ShardHeader], options: ProfileOptions, paths: dict, sources: dict, reason: str
) -> ProfileResult:
    """The union's arrays rebuilt from every shard's exact section, then profiled as one pass would."""
    data = Dataset(ResultStore(options.null_reward))
    for header in headers:
        load_exact(header, data)
    data.link()
    note = f"{SLOW_NOTE}: {reason}"
    return profile_dataset(data, ReadStats(), options, paths, sources, notes=[note])


@dataclass
class ShardUnion:
    """How the shards' rows fit together: the union's columns, each shard's columns in them, fan-out."""

    columns: list[str]
    column_maps: list[list[int]]  # per shard: union index of each shard column
    per_agent: bool


def _union(headers: list[ShardHeader]) -> ShardUnion | str:
    """The union, when every shard's rows are final in it; else why not (for the note)."""
    import numpy as np

    tasks = np.concatenate([h.tasks for h in headers] or [np.zeros(0, np.int64)])
    unique, counts = np.unique(tasks, return_counts=True)
    if (counts > 1).any():
        task = int(unique[np.argmax(counts > 1)])
        holders = [str(h.path) for h in headers if (h.tasks == task).any()][:2]
        return f"the shards are not split by task (task {task} is in {' and '.join(holders)})"
    agent_by_key: dict[str, str | None] = {}
    for header in headers:
        for key, agent in header.agent_by_key.items():
            agent_by_key.setdefault(key, agent)
    labels = run_labels(agent_by_key)
    per_agent = any(h.per_agent for h in headers)
    for header in headers:
        if run_labels(header.agent_by_key) != {key: labels[key] for key in header.agent_by_key}:
            return f"{header.path} labels its agents differently from the union"
        if header.facts.table_rows and header.per_agent != per_agent:
            return (
                f"{header.path} has {'no ' if per_agent else ''}task run under two agents, unlike the union"
            )
    first: dict[str, tuple[int, int, int]] = {}
    for header in headers:
        for name, task, rollout, rank in header.columns:
            if name not in first or (task, rollout, rank) < first[name]:
                first[name] = (task, rollout, rank)
    columns = sorted(first, key=first.__getitem__)
    index = {name: i for i, name in enumerate(columns)}
    maps = [[index[c[0]] for c in h.columns] for h in headers]
    for header, mapping in zip(headers, maps, strict=True):
        if mapping != sorted(mapping):
            return f"{header.path} orders its columns differently from the union"
    medians = _median_method_agrees(headers)
    if medians is not None:
        return medians
    return ShardUnion(columns, maps, per_agent)


def _median_method_agrees(headers: list[ShardHeader]) -> str | None:
    """Medians are taken by one sort when every group has one size and no value is missing, else per
    column; both give the same numbers but may order -0.0 and 0.0 differently. So a shard with a -0.0 must
    have chosen the method the union chooses."""
    shaped = [h for h in headers if h.facts.table_rows]
    sizes = {h.uniform for h in shaped}
    union_uniform = len(sizes) == 1 and None not in sizes
    for header in shaped:
        if header.negative_zero and (header.uniform is not None) != union_uniform:
            return f"{header.path} has a -0.0 and groups shaped unlike the union's"
    return None


def _merge_rows(
    headers: list[ShardHeader], union: ShardUnion, options: ProfileOptions, paths: dict, sources: dict
) -> ProfileResult:
    facts = Facts.from_json(headers[0].facts.to_json())
    for header in headers[1:]:
        facts.add(header.facts)
    if facts.missing_count and not options.allow_partial:
        raise missing_error(facts.missing_count, facts.missing)
    labels = MergedLabels(union.columns)
    with atomic_outputs(paths, overwrite=options.overwrite) as out:
        rows = _rows_in_order(headers, union, labels)
        n_rows, task_means = write_rows(out["reward_profiling"], rows, options)
        return finish(out, facts, labels, _coverage(headers), task_means, n_rows, options, sources, [], paths)


def _rows_in_order(headers: list[ShardHeader], union: ShardUnion, labels: MergedLabels) -> Iterator[GroupRow]:
    """Every shard's rows, merged in Gym's row order (by task, then agent when fanned out); the numbers
    the agent-level statistics need go to `labels` on the way."""

    def key(item: tuple[int, StateGroup]) -> Any:
        group = item[1]
        return (group.task, group.label) if union.per_agent else group.task

    streams = [_numbered(number, iter_groups(h)) for number, h in enumerate(headers)]
    for number, group in heapq.merge(*streams, key=key):
        if group.label is not None:
            labels.add(group, union.column_maps[number])
        yield GroupRow(
            group.task, group.label, group.gym, len(group.rollouts), group.rewards, group.null, None, None
        )


def _numbered(number: int, groups: Iterator[StateGroup]) -> Iterator[tuple[int, StateGroup]]:
    for group in groups:
        yield number, group


def _coverage(headers: list[ShardHeader]) -> dict[str, dict[str, int]]:
    """Per agent, the shards' coverage counts added up, in order of the agent's first rollout key."""
    totals: dict[str, list[int]] = {}
    first: dict[str, tuple[int, int]] = {}
    for header in headers:
        for name, *counts, task, rollout in header.coverage:
            mine = totals.setdefault(name, [0, 0, 0, 0])
            totals[name] = [a + b for a, b in zip(mine, counts, strict=True)]
            first[name] = min(first.get(name, (task, rollout)), (task, rollout))
    names = ("coverage/measured_rollouts", "coverage/masked_rollouts", "coverage/measured_tasks",
             "coverage/fully_masked_tasks")  # fmt: skip
    return {
        name: dict(zip(names, totals[name], strict=True)) for name in sorted(totals, key=first.__getitem__)
    }


class MergedLabels:
    """`agents.LabelRows` built up from the merged rows: per label, each rollout's index and values."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self._rollouts: dict[str, CompactInts] = {}
        self._values: dict[str, list[CompactFloats]] = {}
        self._groups: dict[str, int] = {}
        self._sorted: list[str] = []

    def add(self, group: StateGroup, column_map: list[int]) -> None:
        import numpy as np

        name = group.label
        assert name is not None  # rows without a label are not in the agent-level statistics
        if name not in self._rollouts:
            self._sorted = sorted([*self._rollouts, name])
            self._rollouts[name] = CompactInts()
            self._values[name] = [CompactFloats() for _ in self.columns]
            self._groups[name] = 0
        self._groups[name] += 1
        self._rollouts[name].add(np.asarray(group.rollouts, dtype=np.int64))
        block = np.array(group.values, dtype=np.float64).reshape(len(column_map), len(group.rollouts))
        missing = np.full(len(group.rollouts), np.nan)
        present = dict(zip(column_map, range(len(column_map)), strict=True))
        for j, column in enumerate(self._values[name]):
            k = present.get(j)
            column.add(block[k] if k is not None else missing)

    @property
    def labels(self) -> list[str]:
        return self._sorted

    def size(self, label: int) -> int:
        return len(self._rollouts[self.labels[label]])

    def rollouts(self, label: int) -> Any:
        return self._rollouts[self.labels[label]].values()

    def task_count(self, label: int) -> int:
        return self._groups[self.labels[label]]  # one group per task and label

    def column(self, label: int, j: int) -> Any:
        return self._values[self.labels[label]][j].values()

    def complete(self) -> bool:
        return not any(column.has_nan for columns in self._values.values() for column in columns)
