"""Turn the tallies `check.py` collected into counts, per-agent rows and findings (each with its fix)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from ..artifacts.failures import TOP
from ..artifacts.live import LiveRun, Pace
from ..artifacts.names import manifest_path_for, unpack_key
from .check_result import (
    AGENT_BITS,
    ERROR,
    EXAMPLES,
    NOTE,
    WARNING,
    AgentCheck,
    CheckCounts,
    CheckResult,
    FileStats,
    Finding,
    TaskCounts,
)

_MASK = (1 << AGENT_BITS) - 1


def _groups(expected: dict[Any, int], completed: dict[Any, int]) -> tuple[Counter, Counter, bool, list]:
    """Expected and completed counts per (task, agent), whether any task fans out, first missing keys."""
    exp: Counter = Counter()
    done: Counter = Counter()
    first_agent: dict[int, int] = {}
    fan_out = False
    missing: list[tuple[int, int]] = []
    for packed, slot in expected.items():
        task, agent = unpack_key(packed)[0], slot & _MASK
        group = (task, agent)
        exp[group] += 1
        if packed in completed:
            done[group] += 1
        elif len(missing) < EXAMPLES:
            missing.append(unpack_key(packed))
        if first_agent.setdefault(task, agent) != agent:
            fan_out = True
    return exp, done, fan_out, missing


def completion_of(expected: int, completed: int) -> str:
    """A task group's completion: 'complete', 'partial' or 'none' (the one rule check uses)."""
    return "complete" if completed == expected else "partial" if completed else "none"


def _task_counts(exp: Counter, done: Counter, agent: int | None = None) -> TaskCounts:
    out = TaskCounts()
    for group, n in exp.items():
        if agent is not None and group[1] != agent:
            continue
        state = completion_of(n, done.get(group, 0))
        out.total += 1
        setattr(out, state, getattr(out, state) + 1)
    return out


@dataclass(frozen=True)
class OutOfAttempts:
    """The run's --max-attempts, and how many missing keys have that many failed attempts: a plain
    `collect --resume` skips those keys."""

    limit: int
    keys: int

    def flag(self) -> str:
        return f" --max-attempts <more than {self.limit}>"

    def note(self) -> str:
        return f"{self.keys} of the failed keys reached the run's --max-attempts {self.limit}"


@dataclass(frozen=True)
class CollectedBy:
    """How a run was collected, from its ngrp manifest, for the fixes of its failures: the variable it read
    its API key from, `failures.MODES` and its --max-attempts (None when unknown)."""

    api_key_env: str = "OPENAI_API_KEY"
    fix_mode: str = "gym"
    max_attempts: int | None = None


def summarize(
    inputs: FileStats,
    rollouts: FileStats,
    failures: FileStats | None,
    expected: dict[Any, int],
    tally: Any,
    fail: Any,
    agent_names: list[str | None],
    collected: CollectedBy = CollectedBy(),
) -> CheckResult:
    """Every key accounted for, with the findings; `collected` chooses the fixes of the run's failures."""
    exp, done, fan_out, missing_keys = _groups(expected, tally.completed)
    result = CheckResult(
        inputs=inputs,
        rollouts=rollouts,
        failures=failures,
        counts=_counts(inputs, rollouts, expected, tally, fail, sum(done.values())),
        tasks=_task_counts(exp, done),
        grouping="task_and_agent" if fan_out else "task",
        order="sorted_by_key" if tally.sorted_by_key else "completion_order",
        failures_by_class=dict(fail.by_class.most_common()),
        agents=[_agent_row(i, name, exp, done, tally) for i, name in enumerate(agent_names)],
        findings=[],
        top_failures=fail.digest.top(TOP, collected.api_key_env, collected.fix_mode),
    )
    digest = fail.digest
    retry_helps = bool(digest.other) or any(
        e.failure.retry_helps for e in digest.entries.values() if e.still_missing
    )
    spent = _out_of_attempts(collected.max_attempts, expected, tally, fail)
    result.findings = findings(result, missing_keys, tally.extra, retry_helps, spent)
    return result


def _counts(
    inputs: FileStats, rollouts: FileStats, expected: dict[Any, int], tally: Any, fail: Any, completed: int
) -> CheckCounts:
    return CheckCounts(
        expected=len(expected),
        completed=completed,
        missing=len(expected) - completed,
        extra=tally.extra_count,
        duplicate_inputs=inputs.duplicates,
        duplicate_rollouts=rollouts.duplicates,
        masked=sum(tally.masked.values()),
        null_reward=sum(tally.null_reward.values()),
        absent_reward=sum(tally.absent_reward.values()),
        failed_attempts=sum(fail.by_class.values()),
        failed_keys=len(fail.keys),
        failed_keys_still_missing=sum(1 for k in fail.keys if k in expected and k not in tally.completed),
        failed_keys_recovered=sum(1 for k in fail.keys if k in tally.completed),
        failure_keys_not_in_inputs=fail.unknown_keys,
        zero_completion_tokens=tally.zero_tokens,
        stopped_at_token_cap=tally.capped,
    )


def _out_of_attempts(
    limit: int | None, expected: dict[Any, int], tally: Any, fail: Any
) -> OutOfAttempts | None:
    """How many still-missing keys used up the run's --max-attempts (None when the limit is unknown)."""
    if limit is None:
        return None
    missing = (k for k, n in fail.attempts.items() if k in expected and k not in tally.completed)
    return OutOfAttempts(limit, sum(1 for k in missing if fail.attempts[k] >= limit))


def _agent_row(agent: int, name: str | None, exp: Counter, done: Counter, tally: Any) -> AgentCheck:
    expected = sum(n for g, n in exp.items() if g[1] == agent)
    completed = sum(n for g, n in done.items() if g[1] == agent)
    return AgentCheck(
        agent=name,
        expected=expected,
        completed=completed,
        missing=expected - completed,
        extra=tally.extra_by_agent.get(agent, 0),
        masked=tally.masked.get(agent, 0),
        null_reward=tally.null_reward.get(agent, 0),
        absent_reward=tally.absent_reward.get(agent, 0),
        tasks=_task_counts(exp, done, agent),
    )


def findings(
    result: CheckResult,
    missing_keys: list,
    extra_keys: list,
    retry_helps: bool = True,
    spent: OutOfAttempts | None = None,
) -> list[Finding]:
    """`retry_helps`: some failed key still missing failed in a way another attempt may cure; `spent`:
    how many of them used up the run's --max-attempts (None: a run without an ngrp manifest)."""
    out: list[Finding] = []
    for role, stats in (
        ("inputs", result.inputs),
        ("rollouts", result.rollouts),
        ("failures", result.failures),
    ):
        if stats is not None:
            out.extend(_file_findings(role, stats, result.inputs.path, result.counts.completed))
    out.extend(_key_findings(result, missing_keys, extra_keys, retry_helps, spent))
    out.extend(_reward_findings(result))
    out.extend(_notes(result, retry_helps, spent))
    return out


def _resume(rollouts: str, extra: str = "", why: str = "") -> str:
    """ngrp's resume command, rebuilt from the run manifest (`artifacts.resume`) when there is one; for a
    run ngrp did not collect (no run manifest), its owner's."""
    manifest = manifest_path_for(rollouts)
    if not manifest.exists():
        return (
            f"ngrp collect --output {rollouts} --resume <the run's other options>{extra}{why}; no ngrp"
            " manifest here: resume with the tool that collected it (gym eval run --resume)"
        )
    command = _rebuilt(manifest, tuple(f for f in ("--max-attempts",) if f in extra), rollouts)
    if command is None:
        return f"ngrp collect --output {rollouts} --resume <the options of {manifest}>{extra}{why}"
    return f"{command}{extra}{why}"


def _rebuilt(manifest: Any, without: tuple[str, ...], rollouts: str) -> str | None:
    from ..artifacts.jsonl import read_json
    from ..artifacts.resume import resume_command
    from ..errors import InputError

    try:
        return resume_command(read_json(manifest), without, rollouts)
    except (InputError, OSError):
        return None


def _rewrite(rollouts: str) -> str:
    return f"ngrp merge {rollouts} --output <new file>"


def _file_findings(role: str, s: FileStats, inputs: str, completed: int = 1) -> list[Finding]:
    """Line-level problems of one file. Fixes are named for the rollouts file (the one a run appends to);
    with nothing `completed`, a partial profile would be empty, so it is not offered."""
    rollouts = role == "rollouts"
    out = []
    if s.torn_tail:
        resume = _resume(s.path, why=" (truncates the torn line, then re-runs its key)")
        partial = f"ngrp profile --allow-partial --inputs {inputs} --rollouts {s.path}"
        fix: str | None = None
        if rollouts:
            fix = f"{partial} (skips the torn line and leaves the file as it is), or {resume}"
            fix = fix if completed else resume
        msg = f"{s.path}: the last line is cut off (interrupted write)"
        out.append(Finding(f"{role}_torn_tail", ERROR, 1, msg, fix))
    if s.invalid_lines:
        msg = f"{s.path}: {s.invalid_lines} lines are not JSON objects"
        fix = f"ngrp validate {s.path} (lists them)"
        out.append(Finding(f"{role}_invalid_lines", ERROR, s.invalid_lines, msg, fix, s.invalid_examples))
    if s.blank_lines:
        msg = f"{s.path}: {s.blank_lines} blank lines (Gym's profiler rejects a file with blank lines)"
        fix = f"{_rewrite(s.path)} (writes the rows without them)" if rollouts else None
        out.append(Finding(f"{role}_blank_lines", ERROR, s.blank_lines, msg, fix))
    if s.rows_without_key:
        msg = f"{s.path}: {s.rows_without_key} rows lack a valid (_ng_task_index, _ng_rollout_index)"
        fix = f"ngrp validate {s.path} (names them)"
        if s.rows_without_key == s.rows:  # a file with no keys at all (many of Gym's example files)
            fix = (
                f"ngrp assign-keys {s.path} --output <new file> (numbers every row: a task is a prompt, "
                "repeats in file order; writes the materialized inputs beside it)"
            )
        out.append(Finding(f"{role}_rows_without_key", ERROR, s.rows_without_key, msg, fix))
    if s.duplicates:
        out.append(_duplicates(role, s))
    return out


def _duplicates(role: str, s: FileStats) -> Finding:
    msg = f"{s.path}: {s.duplicates} rows repeat an identity key already seen"
    fixes = {
        "rollouts": f"{_rewrite(s.path)} (keeps identical duplicates once; refuses conflicting ones)",
        "inputs": "re-create the materialized inputs (ngrp materialize): duplicate keys are ambiguous",
    }
    # A key failing several times is normal in a failures sidecar (one row per attempt).
    severity = NOTE if role == "failures" else ERROR
    return Finding(f"duplicate_{role}", severity, s.duplicates, msg, fixes.get(role), s.duplicate_examples)


def _key_findings(
    r: CheckResult, missing_keys: list, extra_keys: list, retry_helps: bool, spent: OutOfAttempts | None
) -> list[Finding]:
    c, t, out = r.counts, r.tasks, []
    if c.expected == 0:
        out.append(
            Finding("no_inputs", ERROR, 0, f"{r.inputs.path}: no materialized rows with identity keys", None)
        )
    if c.missing:
        msg = (
            f"{c.missing} of {c.expected} expected rollouts are missing; "
            f"tasks: {t.complete} complete, {t.partial} partial, {t.none} with none"
        )
        if c.failed_keys_still_missing:
            msg += f" ({c.failed_keys_still_missing} of the missing keys failed, see the failures sidecar)"
        partial = f"ngrp profile --allow-partial --inputs {r.inputs.path} --rollouts {r.rollouts.path}"
        cure = bool(c.failed_keys_still_missing == c.missing and not retry_helps and r.top_failures)
        resume = _resume(r.rollouts.path, why=" (runs only the missing keys)")
        more = ""
        if spent is not None and spent.keys and spent.keys == c.missing:  # a plain --resume runs none
            resume = _resume(r.rollouts.path, spent.flag(), f" (retries them: {spent.note()})")
        elif spent is not None and spent.keys:
            more = f"; {spent.note()}: add{spent.flag()} to retry them too"
        if not c.completed:  # nothing to profile: a partial profile would be empty
            fix = f"{r.top_failures[0].fix}, then {resume}" if cure else f"{resume}{more}"
        elif cure:
            fix = f"{partial} (profiles what exists); a resume fails them again until this is fixed:"
            fix += f" {r.top_failures[0].fix}"
        else:
            fix = f"{partial} (profiles what exists), or {resume}{more}"
        out.append(Finding("missing_rollouts", ERROR, c.missing, msg, fix, [list(k) for k in missing_keys]))
    if c.extra:
        msg = f"{c.extra} rollout keys have no materialized input row (Gym refuses them, even partial)"
        fix = "check that --inputs is this run's materialized file; if so, delete those rows by hand"
        out.append(Finding("extra_rollouts", ERROR, c.extra, msg, fix, extra_keys))
    if c.failure_keys_not_in_inputs:
        msg = f"{c.failure_keys_not_in_inputs} failed keys are not in the materialized inputs"
        out.append(Finding("failures_not_in_inputs", WARNING, c.failure_keys_not_in_inputs, msg, None))
    return out


def _reward_findings(r: CheckResult) -> list[Finding]:
    c, out = r.counts, []
    if c.null_reward or c.absent_reward:
        n = c.null_reward + c.absent_reward
        msg = (
            _both(f"{c.null_reward} rollouts have reward null", c.null_reward,
                  f"{c.absent_reward} have no reward", c.absent_reward,
                  alone=f"{c.absent_reward} rollouts have no reward")
            + "; Gym counts them in num_rollouts but leaves them out of mean/reward"
        )  # fmt: skip
        fix = "decide explicitly: ngrp profile --null-reward zero|error (default: left out, as Gym does)"
        out.append(Finding("rollouts_without_reward", WARNING, n, msg, fix))
    zero, capped = c.zero_completion_tokens, c.stopped_at_token_cap
    if zero or capped:
        msg = (
            _both(f"{zero} rollouts have 0 completion tokens", zero, f"{capped} stopped at the token cap",
                  capped, alone=f"{capped} rollouts stopped at the token cap")
            + ": their rewards may say nothing about the policy"
        )  # fmt: skip
        fix = (
            f"ngrp health --inputs {r.inputs.path} --rollouts {r.rollouts.path} (judges every rollout; "
            "then profile with --exclude-unhealthy)"
        )
        out.append(Finding("zero_token_or_capped_rollouts", WARNING, zero + capped, msg, fix))
    return out


def _both(first: str, n_first: int, second: str, n_second: int, alone: str) -> str:
    """Two counts in one sentence, leaving out a clause whose count is 0 (`alone`: the second without the
    first, worded to stand on its own): '0 rollouts have 0 completion tokens and 17 ...' read as noise."""
    if n_first and n_second:
        return f"{first} and {second}"
    return first if n_first else alone


def _notes(r: CheckResult, retry_helps: bool, spent: OutOfAttempts | None) -> list[Finding]:
    c, out = r.counts, []
    if c.masked:
        msg = f"{c.masked} rollouts are masked (mask_sample: true): out of quality metrics, in completion"
        out.append(Finding("masked_rollouts", NOTE, c.masked, msg))
    if c.failed_attempts:
        by_class = ", ".join(f"{k} {v}" for k, v in r.failures_by_class.items())
        msg = (
            f"{c.failed_attempts} failed attempts ({by_class}) on {c.failed_keys} keys; "
            f"{c.failed_keys_recovered} of those keys later completed"
        )
        fix = None
        if c.failed_keys_still_missing and retry_helps:  # a plain --resume skips keys out of attempts
            more = (
                " --max-attempts <more than the run's>"
                if spent is None
                else spent.flag()
                if spent.keys
                else ""
            )
            fix = _resume(r.rollouts.path, more, " (retries the failed keys)")
        elif c.failed_keys_still_missing and r.top_failures:  # the same failure again: fix it first
            fix = next((f.fix for f in r.top_failures if f.still_missing), r.top_failures[0].fix)
        out.append(Finding("failed_attempts", NOTE, c.failed_attempts, msg, fix))
    if r.order == "completion_order":
        msg = "rollouts are in completion order, not sorted by key (normal for Gym; every join is by key)"
        out.append(Finding("completion_order", NOTE, 0, msg))
    return out


def while_running(
    result: CheckResult, live: LiveRun, speed: Pace | None = None, up_to: int | None = None
) -> list[Finding]:
    """The findings of a run a collector is still writing: first that it is in progress (who, since when,
    how far, at what rate, and an ETA; a status, not an error: `CheckResult.exit_code` is 1 while it runs),
    then the others, where a key not written yet is a note
    and not missing, a cut-off last line is the one being written, and no fix resumes beside the live
    writer."""
    c, t = result.counts, result.tasks
    again = f"ngrp check --inputs {result.inputs.path} --rollouts {result.rollouts.path}"
    status = live.words(c.completed, c.expected, speed, up_to)
    out = [Finding("run_in_progress", NOTE, 1, status, live.wait(again))]
    expected = f"the {c.expected} rollouts assigned so far" if up_to else f"{c.expected} expected rollouts"
    for f in result.findings:
        if f.code == "missing_rollouts":
            msg = (
                f"{c.missing} of {expected} are not written yet (the run is in "
                "progress); "
                f"tasks so far: {t.complete} complete, {t.partial} partial, {t.none} with none"
            )
            f = replace(f, severity=NOTE, message=msg, fix=None)
        elif f.code.endswith("_torn_tail"):
            writing = f"{f.message}, or the collector is writing it now"
            f = replace(f, severity=NOTE, message=writing, fix=None)
        elif f.fix is not None and "--resume" in f.fix:
            f = replace(f, fix=live.wait(again))
        out.append(f)
    return out
