"""`ngrp check`: a thin shell over `ngrp_lib.audit.check.check_run`."""

from __future__ import annotations

import click

from ..audit.check import check_run
from ..audit.check_result import CheckResult
from ._common import AnyPath, emit, failure_lines, json_option, require_inputs


@click.command("check")
@click.option(
    "--inputs", type=AnyPath(str), help="Materialized inputs JSONL (rows without one: assign-keys)."
)
@click.option("--rollouts", required=True, type=AnyPath(str), help="Rollouts JSONL.")
@click.option(
    "--failures",
    type=AnyPath(str),
    help="Failures sidecar JSONL; default <rollouts stem>_failures.jsonl when it exists.",
)
@click.argument("others", nargs=-1, type=AnyPath(str), metavar="[OTHER_FILES]...")
@json_option
def command(
    inputs: str | None, rollouts: str, failures: str | None, others: tuple[str, ...], as_json: bool
) -> int:
    """Account for every (_ng_task_index, _ng_rollout_index) key of a run: expected, completed,
    missing (tasks complete / partial / with none), extra, duplicate on either side, failed
    attempts by class, masked rollouts, null or absent rewards, blank lines and a torn tail.
    Streams both files; each finding names the command that fixes it. On an adaptive run (collect
    --adaptive) it replays each decided task's rule on the stored rewards and says whether the run
    manifest's decisions (which curriculum and stats read) agree.

    OTHER_FILES (a *_reward_profiling.jsonl, *_profile_summary.json, *_repeat_level_metrics.json,
    quality_summary.json, rollout_verdicts.jsonl; told by content, so a renamed one is read too) are each
    held against the inputs: a task, key, repeat or rollout count the inputs do not have is an error
    naming both files and both numbers (files of two runs in one folder); fewer is a warning (a
    partial run).

    \b
    Example:
      ngrp check --inputs results/rollouts_materialized_inputs.jsonl --rollouts results/rollouts.jsonl
      ngrp check --json --inputs m.jsonl --rollouts r.jsonl --failures r_failures.jsonl
      ngrp check --inputs m.jsonl --rollouts r.jsonl r_reward_profiling.jsonl quality_summary.json

    \b
    Exit codes: 0 complete and consistent (notes and warnings allowed), 1 findings
    (missing, extra or duplicate keys, unreadable lines, torn tail, an adaptive run's decisions that
    do not follow from its stored rewards) or the run is in progress (a
    collector holds its lock: a status line with rows written, rate and ETA), 2 usage error,
    3 a file cannot be read.
    """
    inputs = require_inputs(inputs, rollouts)
    result = check_run(inputs, rollouts, failures, others)
    emit(result, as_json, render_text)
    return result.exit_code


def _file_line(role: str, stats) -> str:
    text = f"{role:<9}{stats.path}: {stats.lines} lines, {stats.rows} rows"
    extras = [
        f"{n} {label}"
        for n, label in (
            (stats.blank_lines, "blank"),
            (stats.invalid_lines, "invalid"),
            (stats.rows_without_key, "without key"),
            (stats.duplicates, "duplicate"),
        )
        if n
    ]
    if stats.torn_tail:
        extras.append("torn last line")
    return text + (f" ({', '.join(extras)})" if extras else "")


def render_text(r: CheckResult) -> str:
    c, t = r.counts, r.tasks
    lines = [_file_line("inputs", r.inputs), _file_line("rollouts", r.rollouts)]
    if r.failures is not None:
        lines.append(_file_line("failures", r.failures))
    lines.append(
        f"rollouts: {c.completed}/{c.expected} completed, {c.missing} missing, {c.extra} extra, "
        f"{c.masked} masked, {c.null_reward + c.absent_reward} without reward"
    )
    unit = "task-agent groups" if r.grouping == "task_and_agent" else "tasks"
    lines.append(f"{unit}: {t.total} ({t.complete} complete, {t.partial} partial, {t.none} with none)")
    if len(r.agents) > 1 or (r.agents and r.agents[0].agent is not None):
        for a in r.agents:
            at, name = a.tasks, "(no agent_ref)" if a.agent is None else a.agent
            lines.append(
                f"  agent {name}: {a.completed}/{a.expected} completed, {a.missing} missing, "
                f"tasks {at.complete}/{at.total} complete, {at.partial} partial, "
                f"{at.none} with none"
            )
    from ..artifacts.collector_retries import retries_line
    from ..artifacts.prefix_cache import prefix_cache_line

    if (retried := retries_line(r.retries)) is not None:
        lines.append(retried)
    if (cache := prefix_cache_line(r.prefix_cache)) is not None:
        lines.append(cache)
    if r.adaptive is not None and (decided := r.adaptive.line()) is not None:
        lines.append(decided)
    for f in r.findings:
        label = "status" if f.code == "run_in_progress" else f.severity  # a normal state, not a problem
        lines.append(f"{label}: {f.message}" + (f"; e.g. {_examples(f.examples)}" if f.examples else ""))
        if f.code == "failed_attempts":
            lines += ["  " + line for line in failure_lines(r.top_failures)]
        if f.fix:
            lines.append(f"  fix: {f.fix}")
    lines.append(
        "result: complete and consistent"
        if r.exit_code == 0
        else "result: in progress, not complete yet (exit 1)"
        if r.in_progress
        else "result: NOT complete or consistent (exit 1)"
    )
    return "\n".join(lines)


def _examples(examples: list) -> str:
    shown = []
    for e in examples[:5]:
        if isinstance(e, dict):
            shown.append(f"({e['key'][0]}, {e['key'][1]}) at lines {e['first_line']} and {e['line']}")
        elif isinstance(e, list):
            shown.append(f"({e[0]}, {e[1]})")
        else:
            shown.append(f"line {e}")
    more = f" and {len(examples) - 5} more" if len(examples) > 5 else ""
    return ", ".join(shown) + more
