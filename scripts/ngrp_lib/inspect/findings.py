"""Rollouts by health finding: the keys `rollout_verdicts.jsonl` flags with a check id (`inspect --finding`).

The verdicts file is `ngrp health`'s (or `gym eval health-check`'s): one row per judged rollout with its
`findings`, each `{check, locator, detail}`. An id that is no health check and that the file never names
is refused with the ids it does name, so a typo does not read as "no rollout has it"; a real check that
flagged nothing selects no rollout (exit 0, as any empty selection).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..artifacts import jsonl
from ..artifacts.names import health_paths_for
from ..errors import UsageError


@dataclass(frozen=True)
class FindingKeys:
    checks: tuple[str, ...]
    verdicts: Path
    keys: frozenset[tuple[int, int]]  # (task, rollout) of every rollout flagged by any of `checks`


def verdicts_beside(rollouts: Path | str, verdicts: Path | str | None) -> Path:
    """The verdicts file to read: the one given, else `ngrp health`'s name next to the rollouts."""
    path = Path(verdicts) if verdicts is not None else health_paths_for(rollouts)["rollout_verdicts"]
    if not path.exists():
        raise UsageError(
            f"no verdicts file at {path}",
            hint="run ngrp health --inputs ... --rollouts ... first, or pass --verdicts FILE",
        )
    return path


def keys_with_finding(verdicts: Path, checks: tuple[str, ...]) -> FindingKeys:
    """The rollout keys the verdicts file flags with any of `checks`; refuses a check id it never names."""
    wanted = set(checks)
    keys: set[tuple[int, int]] = set()
    named: set[str] = set()
    for row in jsonl.iter_rows(verdicts):
        data = row.data
        found = data.get("findings")
        if not isinstance(found, list):
            continue
        ids = {f.get("check") for f in found if isinstance(f, dict) and isinstance(f.get("check"), str)}
        named |= ids  # type: ignore[arg-type]
        task, rollout = data.get("_ng_task_index"), data.get("_ng_rollout_index")
        if ids & wanted and type(task) is int and type(rollout) is int:
            keys.add((task, rollout))
    from ..audit.health_checks import CHECK_IDS

    unknown = sorted(c for c in wanted - named if c not in CHECK_IDS)  # a known check with none: 0 selected
    if unknown:
        listed = ", ".join(sorted(named)) or "none"
        raise UsageError(
            f"no rollout in {verdicts} has the finding {', '.join(unknown)}",
            hint=f"checks with findings in that file: {listed}",
        )
    return FindingKeys(tuple(checks), verdicts, frozenset(keys))
