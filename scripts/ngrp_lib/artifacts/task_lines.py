"""Each task's source line numbers (1-based, as editors show them), beside `_ng_task_index`.

Task indices are what Gym's files carry; users think in lines of their task file, and the two differ
once a file has blank lines, byte-identical lines (one index for several lines) or its own indices.
`collect --input` knows the lines as it materializes, and records them in the run manifest
(`input.task_lines`); `stats`, `inspect`, the viewer and `curriculum` read them from the manifest beside
the rollouts. A run collected from a materialized file (`--materialized`, Gym's own collector) has no
such record: its tasks' lines are unknown there (`null`), never guessed from row order.

The record is compact, for files of many tasks: `ranges` holds `[first task, its line, count]` runs
where consecutive tasks sit on consecutive lines (a plain file is one range), and `more` lists every
line of a task that several lines share.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .names import rollouts_path_of_profile

KEY = "task_lines"  # in the manifest's `input` block
_BIG = 1 << 64


def encode(lines: dict[int, list[int]]) -> dict[str, Any]:
    """The manifest's record of {task: its lines}: ranges of first lines, and the tasks of several lines."""
    ranges: list[list[int]] = []
    for task, numbers in sorted(lines.items()):
        last = ranges[-1] if ranges else None
        if last is not None and task == last[0] + last[2] and numbers[0] == last[1] + last[2]:
            last[2] += 1
        else:
            ranges.append([task, numbers[0], 1])
    more = {str(task): numbers for task, numbers in sorted(lines.items()) if len(numbers) > 1}
    return {"ranges": ranges, "more": more}


@dataclass(frozen=True)
class TaskLines:
    ranges: tuple[tuple[int, int, int], ...]
    more: dict[int, list[int]]

    def of(self, task: int) -> list[int] | None:
        """The task's line numbers in file order, or None when the record does not hold the task."""
        if task in self.more:
            return list(self.more[task])
        at = bisect.bisect_right(self.ranges, (task, _BIG, _BIG)) - 1
        if at < 0:
            return None
        first, line, count = self.ranges[at]
        return [line + task - first] if task < first + count else None


def decode(block: Any) -> TaskLines | None:
    """The record as written by `encode`, or None when it is absent or not that shape."""
    if not isinstance(block, dict):
        return None
    ranges, more = block.get("ranges"), block.get("more")
    if not isinstance(ranges, list) or not isinstance(more, dict):
        return None
    try:
        parsed = tuple((int(a), int(b), int(c)) for a, b, c in ranges)
        several = {int(k): [int(x) for x in v] for k, v in more.items()}
    except (TypeError, ValueError):
        return None
    return TaskLines(tuple(sorted(parsed)), several)


def for_rollouts(rollouts: Path | str | None) -> TaskLines | None:
    """The task lines recorded in the run manifest beside a rollouts file, or None."""
    from .manifest import manifest_beside

    manifest = None if rollouts is None else manifest_beside(rollouts)
    block = manifest.get("input") if manifest is not None else None
    return decode(block.get(KEY)) if isinstance(block, dict) else None


def for_profile(profile: Path | str | None) -> TaskLines | None:
    """The task lines of the run a reward profile was made from (the rollouts file it is named after)."""
    return None if profile is None else for_rollouts(rollouts_path_of_profile(profile))


def lines_text(lines: list[int] | None) -> str:
    """`line 5`, `lines 4, 8` or '' (unknown): what a text report puts beside a task index."""
    if not lines:
        return ""
    shown = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
    return f"{'line' if len(lines) == 1 else 'lines'} {shown}"
