"""Which rollout rows a benchmark-level number counts: the one rule every reader of a run's rows applies
(reward components, the denominators block, the cost per rollout and per informative task).

- A masked rollout (`mask_sample` true, as Gym's profiler reads it) is out of every statistic, and counted
  as masked: never as a rollout with a value, never as a missing one. So is a rollout left out with
  `--exclude-unhealthy` (`excluded`: its packed key), as masked rows are.
- In an adaptive run (`collect --adaptive`) every benchmark-level number stands on the first round alone
  (rollout index < R: the same R repeats of every task, a fixed design); later rounds went only to the
  tasks the rule had not settled, so a mean over them is biased. They are counted as later-round rows.
- A row that counts but lacks a value is counted missing wherever it falls, never read as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, is_index, pack_key

MASK_FIELD = "mask_sample"  # Gym's per-row mask (profile/records.py reads the same key)
COUNTED, MASKED, LATER_ROUND = "counted", "masked", "later_round"


@dataclass(frozen=True)
class RowRule:
    """`first_round`: an adaptive run's R (rows with a rollout index >= R are later rounds); None for a
    fixed-N run, where every unmasked row counts."""

    first_round: int | None = None
    excluded: frozenset = field(default_factory=frozenset)  # packed keys left out as unhealthy

    def status(self, row: dict) -> str:
        """COUNTED, MASKED or LATER_ROUND (a masked or excluded row is MASKED in any round)."""
        if row.get(MASK_FIELD):
            return MASKED
        index, task = row.get(ROLLOUT_KEY), row.get(TASK_KEY)
        if self.excluded and is_index(task) and is_index(index) and pack_key((task, index)) in self.excluded:
            return MASKED
        if (
            self.first_round is not None
            and isinstance(index, int)
            and not isinstance(index, bool)
            and index >= self.first_round
        ):
            return LATER_ROUND
        return COUNTED

    def counted_indices(self, rollout_index: Any) -> Any:
        """The same rule on a profile's (tasks x repeats) rollout-index matrix (-1 = padding; the profile
        lists no masked rollout): True where the entry counts."""
        keep = rollout_index >= 0
        return keep if self.first_round is None else keep & (rollout_index < self.first_round)
