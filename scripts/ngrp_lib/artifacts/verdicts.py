"""Read a `rollout_verdicts.jsonl` (ours or Gym's) into the set of unhealthy rollout keys.

This is the one place `profile`, `stats`, `report` and `curriculum` learn which rollouts
`--exclude-unhealthy` leaves out, and how `stats` and `report` find a verdicts file next to a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import iter_rows
from ..artifacts.kinds import VERDICTS as VERDICTS_KIND
from ..artifacts.kinds import refuse_wrong_kind
from ..artifacts.names import (
    ROLLOUT_KEY,
    TASK_KEY,
    health_paths_for,
    is_index,
    pack_key,
    rollouts_path_of_profile,
)
from ..errors import InputError

VERDICTS = ("healthy", "unhealthy", "unobserved")


@dataclass
class UnhealthyKeys:
    """The unhealthy rollouts of a verdicts file, as packed (task, rollout) keys."""

    path: str
    keys: set[Any] = field(default_factory=set)
    rows: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    unkeyed: int = 0  # unhealthy rows without integer keys (an unreadable line): they match no rollout

    def __contains__(self, key: tuple[int, int]) -> bool:
        return pack_key(key) in self.keys


def load_unhealthy(path: Path | str) -> UnhealthyKeys:
    """Every row needs both identity keys and a verdict; an unknown verdict or a malformed line is exit 3."""
    path = Path(path)
    refuse_wrong_kind(path, VERDICTS_KIND, option="--exclude-unhealthy")
    out = UnhealthyKeys(str(path))
    for row in iter_rows(path):
        verdict = row.data.get("verdict")
        if verdict not in VERDICTS:
            raise InputError(
                f"verdict is {verdict!r}, not one of {', '.join(VERDICTS)}",
                path=path, line=row.line, pointer="/verdict",
                hint="is this a rollout_verdicts.jsonl written by `ngrp health` or `gym eval health-check`?",
            )  # fmt: skip
        out.rows += 1
        out.counts[verdict] += 1
        if verdict != "unhealthy":
            continue
        task, rollout = row.data.get(TASK_KEY), row.data.get(ROLLOUT_KEY)
        if is_index(task) and is_index(rollout):
            out.keys.add(pack_key((task, rollout)))
        else:
            out.unkeyed += 1
    return out


def verdicts_near(rollouts: Path | str | None = None, profile: Path | str | None = None) -> Path | None:
    """The verdicts file `ngrp health` writes for this run, if one exists: named from the rollouts file,
    else from the rollouts file a profile's name points back to."""
    base = Path(rollouts) if rollouts is not None else None
    if base is None and profile is not None:
        base = rollouts_path_of_profile(profile)
    if base is None:
        return None
    path = health_paths_for(base)["rollout_verdicts"]
    return path if path.is_file() else None


def unhealthy_note(found: Path, unhealthy_in_run: int, measured: int) -> str:
    """What `stats` and `report` say when a verdicts file sits next to the run and was not applied."""
    return (
        f"{unhealthy_in_run} of these {measured} rollouts are unhealthy by {found} "
        f"(their zeros may not be the policy's); add --exclude-unhealthy {found} to leave them out"
    )


@dataclass
class HealthInput:
    """What a profile reader learned from a verdicts file: given, found next to the run, or none."""

    unhealthy: UnhealthyKeys | None = None
    applied: bool = False  # given with --exclude-unhealthy: those rollouts are left out
    problem: str | None = None  # a verdicts file next to the run that could not be read

    def to_json(self, in_profile: int) -> dict[str, Any] | None:
        if self.unhealthy is None:
            return None if self.problem is None else {"problem": self.problem}
        return {
            "verdicts": self.unhealthy.path,
            "applied": self.applied,
            "unhealthy_in_file": self.unhealthy.counts["unhealthy"],
            "unhealthy_in_profile": in_profile,
            "excluded": in_profile if self.applied else 0,
        }

    def notes(self, in_profile: int, measured: int) -> list[str]:
        if self.problem is not None:
            return [self.problem]
        if self.unhealthy is None:
            return []
        if self.applied:
            return [
                f"--exclude-unhealthy {self.unhealthy.path}: {in_profile} unhealthy rollout(s) left out of "
                f"every statistic, as masked rows are; {measured} rollouts remain"
            ]
        return [unhealthy_note(Path(self.unhealthy.path), in_profile, measured)] if in_profile else []


def health_input(
    exclude: Path | str | None, profile: Path | str, rollouts: Path | str | None = None
) -> HealthInput:
    """`--exclude-unhealthy FILE` when given (errors are the user's to fix: exit 3); otherwise the
    verdicts file next to the run, read only to say how many rollouts are unhealthy (a file that cannot
    be read there becomes a note, not an error)."""
    if exclude is not None:
        return HealthInput(load_unhealthy(exclude), applied=True)
    near = verdicts_near(rollouts, profile) or (verdicts_near(None, profile) if rollouts else None)
    if near is None:
        return HealthInput()
    try:
        return HealthInput(load_unhealthy(near))
    except InputError as exc:
        return HealthInput(problem=f"a verdicts file sits next to the run but cannot be read: {exc.message}")
