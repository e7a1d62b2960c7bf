"""Sharded profiling: profile each shard with `save_state`, then merge the states into the outputs one
pass over all shards' files (in shard order) would give, byte for byte.

Shards collected with `--shard` split the run by task, so each shard's profile rows are already final: the
merge streams them in task order and rebuilds only what spans shards, from per-shard sufficient statistics
(accounting, coverage, missing keys add up) and, per labelled rollout, its rollout index and one value per
column (the exact pooled and per-repeat statistics need them; they are kept in the smallest float type that
holds them exactly). Shards that do not split by task (or whose agent labels, fan-out or column order
differ from the union's) are merged by rebuilding every rollout's numbers, as one pass would hold them.

What is merged is checked first: the shards of each run are counted by name as `ngrp merge` counts them (a
missing one is refused unless allowed), every state is read against the counts its header declares (a
state cut short or edited is refused at its line), and two shards holding one rollout key are refused
naming both.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import atomic_outputs, gc_paused, refuse_existing
from ..artifacts.opening import real_path
from ..errors import FindingsError, InputError, UsageError
from .align import missing_error
from .api import (
    STATE_SUFFIX,
    ProfileOptions,
    ProfileResult,
    RowPass,
    check_options,
    finish,
    output_paths,
    profile_dataset,
    write_rows,
)
from .compact import CompactFloats, CompactInts
from .dataset import Dataset, numbers
from .group_rows import GroupRow
from .reader import ReadStats
from .records import ResultStore, run_labels
from .state import ShardHeader, StateGroup, iter_groups, load_exact, read_header
from .summary import Facts

REWARD_PROFILE_SUFFIX = "_reward_profiling"
SLOW_NOTE = "merged by rebuilding every rollout's numbers in memory"
MAX_LISTED = 10


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


def merge_profiles(
    shards: list[Path | str],
    rollouts: Path | str,
    options: ProfileOptions,
    *,
    allow_missing_shards: bool = False,
) -> ProfileResult:
    """Merge shard states into the profile of their union; outputs are named from `rollouts`' stem.

    Shards are counted per run by their names, as `ngrp merge` counts them (`<base>-shard-i-of-N`, or
    NeMo Gym's `-rs<seed>-chunk<id>`): a shard of the run that is not among them is refused (a
    `FindingsError`) unless `allow_missing_shards`, since its rows would be absent from the completion
    counts too, not counted as missing."""
    if not shards:
        raise UsageError(
            "--merge needs at least one shard", hint="list the shards' *_reward_profiling.jsonl files"
        )
    check_options(options)
    if options.save_state or options.exclude_unhealthy is not None:
        raise UsageError(
            f"{'--save-state' if options.save_state else '--exclude-unhealthy'} applies when profiling"
            " rollouts, not to --merge",
            hint="profile each shard with it (and --save-state), then merge the shards",
        )
    paths = output_paths(Path(rollouts), options)
    refuse_existing(list(paths.values()), options.overwrite)
    states = _states([Path(shard) for shard in shards])
    notes = _missing_shards(states, allow_missing_shards)
    headers = [_header(path, options) for path in states]
    sources = {f"shard_{i}": {"path": str(h.path), "sources": h.sources} for i, h in enumerate(headers)}
    with gc_paused():
        union = _union(headers)
        if isinstance(union, str):
            return _merge_exact(headers, options, paths, sources, union, notes)
        return _merge_rows(headers, union, options, paths, sources, notes)


def _states(shards: list[Path]) -> list[Path]:
    """Each shard's state file; one file named twice (as its profile and its state, say) is refused."""
    states = [state_path_for(shard) for shard in shards]
    seen: dict[Path, Path] = {}
    for shard, state in zip(shards, states, strict=True):
        first = seen.setdefault(real_path(state), shard)
        if first is not shard:
            raise UsageError(
                f"{first} and {shard} overlap: both are {state} (the same shard given twice)",
                hint="list each shard of the run once",
            )
    return states


def _missing_shards(states: list[Path], allow: bool) -> list[str]:
    """Shards of the states' runs (by name, as `ngrp merge` counts them) that are not among them: refused,
    or with `allow` a warning."""
    from ..artifacts.shard_runs import group_runs

    suffix = STATE_SUFFIX + ".jsonl"
    names = [path.with_name(path.name[: -len(suffix)] + ".jsonl") for path in states]
    missing = [
        name + REWARD_PROFILE_SUFFIX + ".jsonl"
        for run in group_runs(names).values()
        for name in run.missing()
    ]
    if not missing:
        return []
    listed = f"{len(missing)} shard(s) of the run are not among the files: {', '.join(missing[:MAX_LISTED])}"
    if not allow:
        raise FindingsError(
            listed,
            hint="profile those shards with --save-state and list them too (rerun their array tasks if they"
            " never finished), or merge what is there with --allow-missing-shards",
        )
    return [
        f"{listed}; merged without them (--allow-missing-shards): the completion counts and every statistic"
        " cover the shards given only"
    ]


def _header(path: Path, options: ProfileOptions) -> ShardHeader:
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
    headers: list[ShardHeader],
    options: ProfileOptions,
    paths: dict,
    sources: dict,
    reason: str,
    notes: list[str],
) -> ProfileResult:
    """The union's arrays rebuilt from every shard's exact section, then profiled as one pass would."""
    data = Dataset(ResultStore(options.null_reward))
    starts = []
    for header in headers:
        starts.append(len(data.inputs))
        load_exact(header, data)
    _refuse_overlap(headers, starts, data)
    data.link()
    note = f"{SLOW_NOTE}: {reason}"
    return profile_dataset(data, ReadStats(), options, paths, sources, notes=[*notes, note])


def _refuse_overlap(headers: list[ShardHeader], starts: list[int], data: Dataset) -> None:
    """Two shards holding one rollout key: the same shard given twice (as a copy), or shards of two runs.
    (A key twice within one shard is left to the alignment, which names it as one pass would.)"""
    import numpy as np

    tasks, rollouts = numbers(data.inputs, "task"), numbers(data.inputs, "rollout")
    order = np.lexsort((rollouts, tasks))
    tasks_o, rollouts_o = tasks[order], rollouts[order]
    twice = (tasks_o[1:] == tasks_o[:-1]) & (rollouts_o[1:] == rollouts_o[:-1])
    shard = np.searchsorted(np.asarray(starts), order, side="right") - 1
    across = np.nonzero(twice & (shard[1:] != shard[:-1]))[0]
    if not len(across):
        return
    at = int(across[0])
    a, b = sorted((int(shard[at]), int(shard[at + 1])))
    key = f"(task {int(tasks_o[at])}, rollout {int(rollouts_o[at])})"
    raise FindingsError(
        f"{headers[a].path} and {headers[b].path} overlap: both hold rollout key {key} ({len(across)} key(s)"
        " in two shards): the same shard given twice, or shards of different runs",
        hint="list each shard of one run once (the --shard i/N profiles of one collection)",
    )


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
    headers: list[ShardHeader],
    union: ShardUnion,
    options: ProfileOptions,
    paths: dict,
    sources: dict,
    notes: list[str],
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
        found = RowPass(facts, labels, _coverage(headers), n_rows, task_means)
        return finish(out, found, options, sources, notes, paths)


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
            group.task, group.label, group.gym, len(group.rollouts), group.rewards, group.null, None, None,
            group.components,
        )  # fmt: skip


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
