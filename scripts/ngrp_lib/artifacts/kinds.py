"""What kind of artifact a JSONL file is, from its first rows; the refusal when a command got another kind.

`kind_from_row` is the rule `ngrp validate` uses for a file whose name does not tell. `sniff` applies it to
the first `SNIFF_ROWS` rows only (never the whole file) and keeps the most specific kind it saw, so a run
whose first rollout failed still reads as rollouts. `refuse_wrong_kind` is what a command calls on each input
it reads: when the sniff finds a different kind of artifact than the option asks for, it raises an
`InputError` (exit 3) that names the file, says what it looks like and what to pass instead. A file it cannot
tell (no rows, unreadable, rows that match no artifact) is left to the command's own reader and errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from .jsonl import Row, iter_records
from .names import RCP, ROLLOUT_KEY, TASK_KEY

SNIFF_ROWS = 16  # rows looked at
SNIFF_LINES = 64  # lines looked at, rows or not (blank, malformed)

TASKS = "tasks"
MATERIALIZED = "materialized"
ROLLOUTS = "rollouts"
FAILURES = "failures"
PROFILE = "reward_profile"
VERDICTS = "rollout_verdicts"

# Most specific first: one row of a kind higher up decides (a failed rollout among good ones, ...).
_PRECEDENCE = (FAILURES, VERDICTS, PROFILE, ROLLOUTS, MATERIALIZED, TASKS)

DESCRIPTION = {
    TASKS: "a raw tasks file",
    MATERIALIZED: "a materialized inputs file",
    ROLLOUTS: "a rollouts file",
    FAILURES: "a failures sidecar (*_failures.jsonl)",
    PROFILE: "a profile (*_reward_profiling.jsonl)",
    VERDICTS: "a health verdicts file (*rollout_verdicts.jsonl)",
}

# What to pass instead, by the kind the option wants.
_ADVICE = {
    TASKS: "pass the raw tasks file",
    MATERIALIZED: "pass the run's *_materialized_inputs.jsonl (or make one with ngrp materialize)",
    ROLLOUTS: "pass the rollouts file",
    PROFILE: "pass a *_reward_profiling.jsonl written by ngrp profile",
    FAILURES: "pass the run's *_failures.jsonl",
    VERDICTS: "pass the *rollout_verdicts.jsonl written by ngrp health",
}


ALREADY_MATERIALIZED = (
    "use it as it is (`ngrp collect --materialized FILE`, `ngrp profile --inputs FILE`), "
    "or pass the raw tasks file to expand"
)


def kind_from_row(row: dict[str, Any]) -> str:
    """One row's kind (`ngrp validate`'s rule for a file whose name does not tell); "tasks" when no other
    kind fits."""
    if "_ng_failure_class" in row:
        return FAILURES
    if isinstance(row.get("response"), dict):
        return ROLLOUTS
    failed_rollout = "reward" in row or ("response" in row and row["response"] is None)
    if TASK_KEY in row and ROLLOUT_KEY in row and failed_rollout:
        return ROLLOUTS  # a failed first rollout (response null); a task's reference `response` is text
    if "num_rollouts" in row and ("rollout_infos" in row or "expected_num_rollouts" in row):
        return PROFILE  # Gym writes expected_num_rollouts always, rollout_infos unless told not to
    if "verdict" in row and "findings" in row and ROLLOUT_KEY in row:
        return VERDICTS
    if TASK_KEY in row and ROLLOUT_KEY in row:
        return MATERIALIZED
    return TASKS


def sniff(path: Path | str) -> str | None:
    """The kind of the JSONL file at `path` from its first rows; None when it cannot tell (no row among the
    first lines, the file cannot be opened, or only rows that look like no artifact at all)."""
    seen: set[str] = set()
    rows = 0
    try:
        for record in iter_records(path):
            if record.line > SNIFF_LINES or rows >= SNIFF_ROWS:
                break
            if not isinstance(record, Row):
                continue
            rows += 1
            kind = kind_from_row(record.data)
            if kind not in (TASKS, MATERIALIZED) or isinstance(record.data.get(RCP), dict):
                seen.add(kind)  # a task or materialized row sends a request: without one it is no telling
    except (InputError, OSError):
        return None  # the command's own reader says what is wrong with the file
    return next((kind for kind in _PRECEDENCE if kind in seen), None)


def refuse_swapped(inputs: Path | str, rollouts: Path | str) -> None:
    """For a command taking `--inputs` (materialized) and `--rollouts`: refuse either of the wrong kind."""
    refuse_wrong_kind(inputs, MATERIALIZED, option="--inputs", swap="--rollouts")
    refuse_wrong_kind(rollouts, ROLLOUTS, option="--rollouts", swap="--inputs")


def refuse_wrong_kind(
    path: Path | str, wanted: str | tuple[str, ...], *, option: str | None = None, swap: str | None = None
) -> None:
    """Raise InputError (exit 3) when `path` is clearly another kind of artifact than `wanted` (one kind, or
    several accepted ones, the first being what to advise). `option` names the option that took it
    (`--rollouts`); `swap` the command's other file option, for the "are they swapped?" question."""
    wanted_kinds = (wanted,) if isinstance(wanted, str) else wanted
    found = sniff(path)
    if found is None or found in wanted_kinds:
        return
    raise InputError(wrong_kind_message(found, wanted_kinds[0], option=option, swap=swap), path=path)


def wrong_kind_message(found: str, wanted: str, *, option: str | None = None, swap: str | None = None) -> str:
    """The words for a file of kind `found` given where `wanted` was expected."""
    swappable = {(MATERIALIZED, ROLLOUTS), (ROLLOUTS, MATERIALIZED)}
    if swap is not None and option is not None and (found, wanted) in swappable:
        return f"looks like {DESCRIPTION[found]}, not {_noun(wanted)}: are {_pair(option, swap)} swapped?"
    if (found, wanted) == (ROLLOUTS, PROFILE):
        return "this is a rollouts file: run `ngrp profile` first and pass its *_reward_profiling.jsonl"
    if (found, wanted) == (TASKS, MATERIALIZED) and option == "--materialized":
        return "this is a raw tasks file: pass it with --input instead (collect materializes it first)"
    if (found, wanted) == (MATERIALIZED, TASKS):
        return f"this is already materialized (its rows carry {ROLLOUT_KEY}): {ALREADY_MATERIALIZED}"
    return f"this is {DESCRIPTION[found]}: {_ADVICE.get(wanted, 'check the path')}"


def _noun(kind: str) -> str:
    return {
        TASKS: "raw tasks",
        MATERIALIZED: "materialized inputs",
        ROLLOUTS: "rollouts",
        PROFILE: "a profile",
        FAILURES: "a failures sidecar",
        VERDICTS: "health verdicts",
    }[kind]


def _pair(option: str, swap: str) -> str:
    """`--inputs and --rollouts` in the order the user knows them: inputs first."""
    first, second = sorted((option, swap), key=lambda name: name != "--inputs")
    return f"{first} and {second}"
