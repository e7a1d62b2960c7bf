"""`inspect_run`: the selected rollouts of a run, joined with their inputs and profile rows, streamed.

Pass 1 reads the rollouts file in chunks: per-task tallies (for the task headers and the band test) and the
positions of the rollouts that pass the rollout tests. Pass 2 reads those rows again by offset, in display
order, digests them, applies the row tests and stops at the limit. Memory: the tasks, about 50 bytes per
rollout that passes the rollout tests, and the rows being shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..artifacts import task_lines
from .digest import DEFAULT_ANSWER_KEY, RolloutDigest, digest
from .facts import Facts, ScanStats, open_regular, parse_row, read_at, scan
from .join import InputsIndex, ProfileIndex, RunPaths
from .select import Selection, rollout_mask, row_ok, sort_order, task_mask
from .tasks import TaskTable, merge, summarize, tally

MERGE_EVERY = 32  # chunk tallies merged every so many chunks, so memory follows the tasks, not the file


@dataclass
class Shown:
    """One rollout to show: its digest, its task's table row and its profile row (None when absent)."""

    digest: RolloutDigest
    task: dict[str, Any]
    profile: dict[str, Any] | None

    def to_json(self, max_chars: int | None) -> dict[str, Any]:
        return {**self.digest.to_json(max_chars), "task": self.task, "profile": self.profile}


@dataclass
class InspectResult:
    paths: RunPaths
    selection: Selection
    scan: ScanStats
    table: TaskTable
    n_candidates: int  # rollouts passing the rollout and task tests (before row tests and the limit)
    limit: int | None
    n_shown: int = 0
    n_row_tested: int = 0
    notes: list[str] = field(default_factory=list)
    _items: Iterator[Shown] | None = None

    def rollouts(self) -> Iterator[Shown]:
        """The selected rollouts in display order (reads them as it goes; iterate once)."""
        assert self._items is not None
        yield from self._items


def expected_counts(table: TaskTable, inputs: InputsIndex | None) -> Any:
    import numpy as np

    if inputs is None:
        return table.expected
    agents = table.agents
    return np.array(
        [inputs.expected(int(t), agents[int(a)]) for t, a in zip(table.task, table.agent, strict=True)],
        dtype=np.int64,
    )


def absent_task_notes(selection: Selection, table: TaskTable) -> list[str]:
    """--task values this run has no rollout of (a typo reads as "0 selected" otherwise)."""
    import numpy as np

    if not selection.tasks:
        return []
    present = set(np.unique(table.task).tolist())
    absent = sorted(t for t in selection.tasks if t not in present)
    if not absent:
        return []
    span = f"{min(present)}-{max(present)}, {len(present)} tasks" if present else "none"
    names = ", ".join(map(str, absent[:10])) + (f" and {len(absent) - 10} more" if len(absent) > 10 else "")
    return [f"--task {names}: not in this run (its tasks: {span})"]


def partial_notes(table: TaskTable, inputs: InputsIndex | None) -> list[str]:
    """What a partial or inconsistent run looks like from here (`ngrp check` accounts for every key)."""
    import numpy as np

    notes = []
    if inputs is None:
        return [
            "no materialized inputs found next to the rollouts (pass --inputs): prompts and expected "
            "answers come from the rollout rows, and expected rollout counts are unknown"
        ]
    known = table.expected >= 0
    short = known & (table.n_rows < table.expected)
    extra = (known & (table.n_rows > table.expected)) | ~known
    missing_tasks = len(inputs.groups) - int(known.sum())
    if short.any() or missing_tasks > 0:
        notes.append(
            f"partial run: {int(short.sum())} task(s) have fewer rollouts than their inputs, "
            f"{max(0, missing_tasks)} task(s) have none yet (rates are over the rollouts present)"
        )
    if extra.any():
        first = int(np.flatnonzero(extra)[0])
        notes.append(
            f"{int(extra.sum())} task(s) have more rollouts than inputs or no input rows (first: task "
            f"{int(table.task[first])}): duplicates or another run's rows; run ngrp check"
        )
    return notes


def inspect_run(
    paths: RunPaths,
    selection: Selection,
    *,
    sort: str = "task",
    limit: int | None = None,
    answer_key: str = DEFAULT_ANSWER_KEY,
) -> InspectResult:
    """Read pass 1 now; the returned result streams pass 2 from `rollouts()`."""
    import numpy as np

    inputs = InputsIndex.build(paths.inputs) if paths.inputs else None
    profile = ProfileIndex.build(paths.profile) if paths.profile else None
    stats = ScanStats(str(paths.rollouts))
    tallies, kept = [], []
    agents: list[str | None] = []
    for facts, builder in scan(paths.rollouts, stats):
        agents = builder.agents
        tallies.append(tally(facts, selection.threshold))
        if len(tallies) >= MERGE_EVERY:
            tallies = [merge(tallies)]
        mask = rollout_mask(selection, facts)
        if mask.any():
            kept.append(facts.subset(mask))
    table = summarize(merge(tallies), agents, selection.threshold)
    table.expected = expected_counts(table, inputs)
    table.lines = task_lines.for_rollouts(paths.rollouts)
    candidates = Facts.concat(kept, agents)
    where = {(int(t), int(a)): i for i, (t, a) in enumerate(zip(table.task, table.agent, strict=True))}
    tmask = task_mask(selection, table)
    group = np.array(
        [where[(int(t), int(a))] for t, a in zip(candidates.task, candidates.agent, strict=True)],
        dtype=np.int64,
    )
    ok = tmask[group] if group.size else np.zeros(0, dtype=bool)
    candidates = candidates.subset(ok)
    group = group[ok]
    order = sort_order(sort, candidates)
    result = InspectResult(paths, selection, stats, table, len(candidates), limit)
    result.notes = stats.notes() + partial_notes(table, inputs) + absent_task_notes(selection, table)
    result._items = _pass2(result, candidates, group[order], order, inputs, profile, answer_key)
    return result


def _pass2(
    result: InspectResult,
    facts: Facts,
    groups: Any,
    order: Any,
    inputs: InputsIndex | None,
    profile: ProfileIndex | None,
    answer_key: str,
) -> Iterator[Shown]:
    sel, table = result.selection, result.table
    needle = sel.raw_needle() if not sel.grep_prompt else None
    handle = open_regular(result.paths.rollouts)
    try:
        for g, i in zip(groups, order, strict=True):
            if result.limit is not None and result.n_shown >= result.limit:
                break
            raw = read_at(handle, int(facts.offset[i]), int(facts.length[i]))
            if needle is not None and not needle.found_in(raw):
                result.n_row_tested += 1
                continue
            row = parse_row(raw, int(facts.line[i]), result.paths.rollouts)
            task, agent = int(facts.task[i]), table.agents[int(facts.agent[i])]
            input_row = inputs.row(task, agent) if inputs else None
            d = digest(
                row, input_row, line=int(facts.line[i]), threshold=sel.threshold, answer_key=answer_key
            )
            if sel.needs_rows:
                result.n_row_tested += 1
                if not row_ok(sel, d, input_row if input_row is not None else row):
                    continue
            result.n_shown += 1
            yield Shown(d, table.row(int(g)), profile.get(task, agent) if profile else None)
    finally:
        handle.close()
        if inputs:
            inputs.close()
