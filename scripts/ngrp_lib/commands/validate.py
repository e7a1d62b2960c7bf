"""`ngrp validate`: a thin shell over `ngrp_lib.audit.validate.validate_files`."""

from __future__ import annotations

import click

from ..audit.validate import KINDS, ValidationResult, validate_files
from ._common import AnyPath, emit, json_option


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=AnyPath(str))
@click.option(
    "--kind", type=click.Choice(KINDS), help="Artifact kind; default: from the file name, else the first row."
)
@click.option(
    "--max-errors",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Problems listed per file (0 = all); the rest are counted.",
)
@json_option
def command(files: tuple[str, ...], kind: str | None, max_errors: int, as_json: bool) -> int:
    """Check artifacts against their JSON Schemas, streaming, and list every problem as
    FILE:LINE: /json/pointer: message.

    Kinds come from Gym's file names (*_materialized_inputs.jsonl, *_failures.jsonl,
    *_reward_profiling.jsonl, *_agent_metrics.json, *_repeat_level_metrics.json, and ngrp's
    *_profile_summary.json, *_run_manifest.json); any other JSONL file is a rollouts file when
    its first row has a `response` object, materialized inputs when it has both identity keys,
    else a task file. Blank lines, a torn last line, invalid UTF-8, NaN/Infinity, rows that are
    not objects, duplicate (_ng_task_index, _ng_rollout_index) keys and identity keys written
    as 1.0 instead of 1 are all reported.

    \b
    Example:
      ngrp validate results/rollouts.jsonl results/rollouts_materialized_inputs.jsonl
      ngrp validate --json --max-errors 5 results/*.jsonl
      ngrp validate --kind tasks data/my_tasks.jsonl

    \b
    Exit codes: 0 all valid, 1 problems found, 2 usage error,
    3 a file is unreadable (missing, not a regular file, a .json file that is not JSON).
    """
    result = validate_files(list(files), kind=kind, max_errors=max_errors or None)
    emit(result, as_json, render_text)
    return result.exit_code


def render_text(result: ValidationResult) -> str:
    lines: list[str] = []
    for report in result.files:
        lines.extend(p.render(report.path) for p in report.problems)
        more = _more(report)
        if more:
            lines.append(f"{report.path}: ... and {more} (use --max-errors 0 to list all)")
        summary = f"{report.path}: {report.status}"
        if report.status != "unreadable":
            summary += f" ({report.kind or 'empty'}, {_plural(report.rows, 'row')}"
            if report.problem_count:
                summary += f", {_plural(report.problem_count, 'problem')}"
            if report.lines_not_itemized:
                summary += f" + {_plural(report.lines_not_itemized, 'more bad line')}"
            summary += ")"
        lines.append(summary)
    return "\n".join(lines)


def _more(report) -> str:
    parts = []
    if report.not_shown:
        parts.append(_plural(report.not_shown, "more problem"))
    if report.lines_not_itemized:
        parts.append(f"problems on {_plural(report.lines_not_itemized, 'more line')}")
    return " and ".join(parts)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
