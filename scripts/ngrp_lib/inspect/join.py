"""The files beside a rollouts file, joined by key: materialized inputs and reward-profile rows.

Both are found next to the rollouts file by its stem (`rollouts_materialized_inputs.jsonl`,
`rollouts_reward_profiling.jsonl`) unless given. Neither is held whole: the inputs index keeps, per
(task, agent), where its first row is and how many rows (expected rollouts) it has; the profile index keeps a
few numbers per row. Rows are read again by offset when a rollout is shown.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import iter_rows
from ..artifacts.kinds import MATERIALIZED, PROFILE, ROLLOUTS, refuse_wrong_kind
from ..artifacts.names import TASK_KEY, agent_name, is_index, materialized_path_for, profile_paths_for
from ..errors import InputError
from .facts import ScanStats, iter_lines, open_regular, parse_row

GroupKey = tuple[int, "str | None"]
PROFILE_FIELDS = (
    "num_rollouts",
    "expected_num_rollouts",
    "mean/reward",
    "ngrp/pass_rate",
    "ngrp/pass_rate_wilson_low_95",
    "ngrp/pass_rate_wilson_high_95",
    "ngrp/pass_threshold",
    "reward_profile_completion_pct",
)


@dataclass(frozen=True)
class RunPaths:
    rollouts: Path
    inputs: Path | None
    profile: Path | None


def _given(path: Path | None, what: str) -> Path | None:
    if path is not None and not Path(path).is_file():
        raise InputError(
            f"cannot read the {what}: " + ("not a regular file" if Path(path).exists() else "no such file"),
            path=path,
        )
    return None if path is None else Path(path)


def resolve(rollouts: Path | str, inputs: Path | None = None, profile: Path | None = None) -> RunPaths:
    """The run's files: given ones must exist; the others are taken from beside ROLLOUTS when present."""
    rollouts = Path(rollouts)
    swap = None if inputs is None else "--inputs"  # the user gave both: they may be the other way round
    if inputs is None and materialized_path_for(rollouts).is_file():
        inputs = materialized_path_for(rollouts)
    guess = profile_paths_for(rollouts)["reward_profiling"]
    if profile is None and guess.is_file():
        profile = guess
    paths = RunPaths(rollouts, _given(inputs, "materialized inputs"), _given(profile, "reward profile"))
    refuse_wrong_kind(paths.rollouts, ROLLOUTS, option="ROLLOUTS", swap=swap)
    if paths.inputs is not None:
        refuse_wrong_kind(paths.inputs, MATERIALIZED, option="--inputs", swap="ROLLOUTS")
    if paths.profile is not None:
        refuse_wrong_kind(paths.profile, PROFILE, option="--profile")
    return paths


@dataclass
class InputsIndex:
    """Per (task, agent): (offset, length) of its first materialized row and its row count."""

    path: Path
    groups: dict[GroupKey, list[int]] = field(default_factory=dict)  # key -> [offset, length, count]
    by_task: dict[int, list[str | None]] = field(default_factory=dict)
    stats: ScanStats | None = None
    _cache: OrderedDict = field(default_factory=OrderedDict)
    _handle: Any = None

    @classmethod
    def build(cls, path: Path) -> InputsIndex:
        stats = ScanStats(str(path))
        index = cls(path, stats=stats)
        groups, by_task = index.groups, index.by_task
        for line, offset, raw in iter_lines(path, stats):
            row = parse_row(raw, line, path)
            task = row.get(TASK_KEY)
            if not is_index(task):
                stats.rows_without_key += 1
                continue
            key = (task, agent_name(row))
            entry = groups.get(key)
            if entry is None:
                groups[key] = [offset, len(raw), 1]
                by_task.setdefault(task, []).append(key[1])
            else:
                entry[2] += 1
        return index

    def key_for(self, task: int, agent: str | None) -> GroupKey | None:
        """The inputs group of a rollout: same task and agent; a rollout without an agent (or inputs
        without one) joins the task's only group."""
        if (task, agent) in self.groups:
            return task, agent
        agents = self.by_task.get(task, [])
        if len(agents) == 1 and (agent is None or agents[0] is None):
            return task, agents[0]
        return None

    def expected(self, task: int, agent: str | None) -> int:
        key = self.key_for(task, agent)
        return -1 if key is None else self.groups[key][2]

    def row(self, task: int, agent: str | None) -> dict | None:
        """The first materialized row of the task (read again from the file, a few kept)."""
        key = self.key_for(task, agent)
        if key is None:
            return None
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if self._handle is None:
            self._handle = open_regular(self.path)
        offset, length, _ = self.groups[key]
        row = parse_row(os.pread(self._handle.fileno(), length, offset), 0, self.path)
        self._cache[key] = row
        if len(self._cache) > 256:
            self._cache.popitem(last=False)
        return row

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


@dataclass
class ProfileIndex:
    """A few numbers of each reward-profile row, by (task, agent)."""

    path: Path
    rows: dict[GroupKey, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, path: Path) -> ProfileIndex:
        index = cls(path)
        for row in iter_rows(path):
            task = row.data.get(TASK_KEY)
            if not is_index(task) or "rollout_infos" not in row.data:
                raise InputError(
                    f"not a reward-profile row (no {TASK_KEY} or rollout_infos)",
                    path=path,
                    line=row.line,
                    hint="--profile takes a *_reward_profiling.jsonl (gym eval profile or ngrp profile)",
                )
            key = (task, agent_name(row.data))
            index.rows.setdefault(key, {k: row.data[k] for k in PROFILE_FIELDS if k in row.data})
        return index

    def get(self, task: int, agent: str | None) -> dict[str, Any] | None:
        return self.rows.get((task, agent)) or self.rows.get((task, None))
