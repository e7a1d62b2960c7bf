"""`ngrp health`: a thin shell over `ngrp_lib.audit.health.run_health`, with its text rendering."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from ._common import INPUT_FILE, count, emit, json_option, overwrite_option, require_inputs


def _check_list() -> str:
    from ..audit.health_checks import REGISTRY

    return "\n".join(
        f"  {check.id}  [{check.cause or 'its rollouts'}]\n      {check.summary}" for check in REGISTRY
    )


@click.command(
    "health",
    epilog="""\b
Example:
  ngrp health --inputs results/rollouts_materialized_inputs.jsonl --rollouts results/rollouts.jsonl
  ngrp health --inputs m.jsonl --rollouts r.jsonl --ignore-checks ngrp/answer_not_extracted --json
  ngrp profile --inputs m.jsonl --rollouts r.jsonl --exclude-unhealthy r_rollout_verdicts.jsonl
  ngrp health --inputs m.jsonl --rollouts r.jsonl --no-write --json   # ask again: a read, nothing written

\b
Outputs, next to --rollouts: quality_summary.json and rollout_verdicts.jsonl (Gym's names) when the
file is rollouts.jsonl, else <stem>_quality_summary.json and <stem>_rollout_verdicts.jsonl.
Asked again about the same, unchanged run, it answers the same and writes nothing (the files already
hold this judgement); files of an earlier, shorter state of the same run (same files and options, fewer
rows) are replaced; any other output that would change is refused. While a collector holds the run's
lock it answers and writes nothing. With --no-write nothing is written and nothing refused.

\b
Exit codes: 0 every rollout healthy, 1 some rollout unhealthy or unobserved, or none to judge, 2 bad
options or an output exists that this judgement would change (use --overwrite), 3 a file cannot be read
or the inputs hold a malformed line.
""",
)
@click.option("--inputs", type=INPUT_FILE, help="Materialized inputs JSONL (rows without one: assign-keys).")
@click.option("--rollouts", required=True, type=INPUT_FILE, help="Rollouts JSONL.")
@click.option(
    "--failures",
    type=INPUT_FILE,
    help="Failures sidecar; default <rollouts stem>_failures.jsonl when it exists.",
)
@click.option(
    "--ignore-checks",
    "--ignore",
    "ignore_checks",
    multiple=True,
    metavar="CHECK[,CHECK...]",
    help="Check ids to leave out of the verdicts (comma-separated, repeatable; Gym's option).",
)
@click.option(
    "--loop-min-repeats",
    type=count(maximum=2**31),
    default=10,
    show_default=True,
    help="ngrp/repetition_loop: back-to-back copies of one unit that make a loop.",
)
@click.option(
    "--loop-min-chars",
    type=count(maximum=2**31),
    default=200,
    show_default=True,
    help="ngrp/repetition_loop: characters the copies must cover.",
)
@click.option(
    "--tool-loop-min-repeats",
    type=count(maximum=2**31),
    default=3,
    show_default=True,
    help="ngrp/tool_call_loop: copies of one tool call (same name and arguments) that make a loop.",
)
@click.option(
    "--no-write",
    is_flag=True,
    help="Judge and report only: write nothing, refuse nothing (ask again about a run already judged).",
)
@overwrite_option
@json_option
def command(
    inputs: Path | None,
    rollouts: Path,
    failures: Path | None,
    ignore_checks: tuple[str, ...],
    loop_min_repeats: int,
    loop_min_chars: int,
    tool_loop_min_repeats: int,
    no_write: bool,
    overwrite: bool,
    as_json: bool,
) -> int:
    """Is a zero the policy's fault? Judge every rollout from its row (response usage, status,
    incomplete_details and output items; reward and verifier fields), the failures sidecar and the
    materialized max_output_tokens, with NeMo Gym's health-check ids where the meaning is Gym's and
    ngrp/ ids for ours. Writes Gym's two files (verdict healthy, unhealthy, or unobserved where a
    check cannot be judged) and prints counts per check, tasks where every repeat is unhealthy, the
    share of zero rewards that are unhealthy, and last an `answer:` line: whose fault each zero and
    each missing score is, with counts per cause.

    \b
    Causes (each check's is in [brackets] below; --json: checks[].cause, causes):
      record          the row cannot be used (unreadable, duplicated, without identity)
      infrastructure  the model call failed, or returned no tokens or no token counts
      setting         the run's own limits cut the reply: token cap, context window, agent steps
      verifier        the scoring: an error, no numeric reward, no answer it could read, or the
                      expected answer stated in the reply but another one taken (read those replies)
      policy          the policy's own behaviour (empty answer, loops, tool misuse), and every zero
                      with no finding (a clean wrong answer)
    A rollout with several findings counts once, under the first cause in that order.

    \b
    Checks:
    {checks}
    """
    from ..audit.health import run_health
    from ..audit.health_checks import Settings, parse_ignored

    inputs = require_inputs(inputs, rollouts)
    settings = Settings(parse_ignored(ignore_checks), loop_min_repeats, loop_min_chars, tool_loop_min_repeats)
    result = run_health(inputs, rollouts, failures, settings, overwrite=overwrite, write=not no_write)
    emit(result, as_json, render_text)
    return result.exit_code


command.help = (command.help or "").replace("{checks}", _check_list().replace("\n", "\n    "))


def render_text(result) -> str:
    from ..audit.health_checks import REGISTRY, TASK

    data = result.to_json()
    keys, v = data["keys"], data["verdicts"]
    lines = [
        f"health: {keys['judged']} rollouts judged ({keys['rollout_rows']} rows, {keys['unreadable_lines']} "
        f"unreadable lines, {keys['failure_only']} keys only in the failures sidecar); "
        f"{v['healthy']} healthy, {v['unhealthy']} unhealthy, {v['unobserved']} unobserved",
    ]
    if not keys["judged"]:
        lines.append(
            f"  nothing to judge: {data['files']['rollouts']} holds no rollout rows (exit 1: not healthy)"
        )
    if keys["missing"] or keys["not_in_inputs"]:
        lines.append(
            f"  keys: {keys['missing']} of {keys['expected']} expected {_missing_words(data)}, "
            f"{keys['not_in_inputs']} not in the inputs (ngrp check accounts for them)"
        )
    if data["ignored_checks"]:
        lines.append(f"  ignored: {', '.join(data['ignored_checks'])}")
    found = [c for c in data["checks"] if c["findings"]]
    if found:
        lines.append("findings by check (findings / rollouts or tasks affected):")
        scope = {check.id: check.scope for check in REGISTRY}
        width = max(len(c["id"]) for c in found)
        for c in found:
            unit = "tasks" if scope[c["id"]] == TASK else "rollouts"
            lines.append(f"  {c['id']:<{width}}  {c['findings']} / {c['affected']} {unit}")
    tasks = data["flagged_tasks"]["task_consistently_unhealthy"]
    n_tasks = next(c["affected"] for c in data["checks"] if c["id"] == "task_consistently_unhealthy")
    if n_tasks:
        more = f" and {n_tasks - len(tasks)} more" if n_tasks > len(tasks) else ""
        shown = sorted(tasks, key=lambda t: (type(t) is not int, t if type(t) is int else 0, str(t)))
        lines.append(f"tasks where every repeat is unhealthy: {n_tasks} (task {_list(shown)}{more})")
    zero = data["zero_rewards"]
    if zero["total"]:
        why = ", ".join(f"{check} {n}" for check, n in zero.get("by_check", {}).items())
        meaning = (
            "those zeros may not be the policy's fault"
            if zero["unhealthy"]
            else "no check found a cause outside the policy for them"
        )
        lines.append(
            f"zero rewards: {zero['total']}, of which {zero['unhealthy']} unhealthy "
            f"({100 * zero['share_unhealthy']:.1f}%): {meaning}" + (f"; why: {why}" if why else "")
        )
    from ..audit.tool_breakdown import render as render_tools

    lines += render_tools(data["tools"])
    outputs = data["outputs"]
    live = data["causes"]["unscored"]["in_progress"]
    if outputs is None and live:
        lines.append(
            f"nothing written: the run is in progress (a collector, pid {live['pid']}, holds "
            f"{live['lock']}); this answer is of the rows so far; asked when it has finished, health "
            "writes its two files"
        )
    elif outputs is None:
        lines.append("nothing written (--no-write)")
    else:
        lines.append(f"wrote {outputs['quality_summary']} and {outputs['rollout_verdicts']}")
    if v["unhealthy"] and outputs is not None:
        lines.append(
            "next: look at the verdicts, fix what is fixable (ngrp reverify for a verifier problem), or "
            "leave them out: ngrp profile ... --exclude-unhealthy "
            + shlex.quote(data["outputs"]["rollout_verdicts"])
        )
    from ..artifacts.collector_retries import retries_line
    from ..audit.identical import render as render_identical

    if data["identical_replies"].get("replies"):
        lines.append(render_identical(data["identical_replies"]))
    if (retried := retries_line(data["collector_retries"])) is not None:
        lines.append(retried)
    lines.append(f"answer: {data['causes']['answer']}")
    return "\n".join(lines)


def _list(values: list) -> str:
    return ", ".join(str(v) for v in values)


def _missing_words(data: dict) -> str:
    """What an expected key with no rollout row is: never attempted only when a failures sidecar was read
    (it would list the attempts that failed); without one, whether it was attempted is unknown."""
    live = data["in_progress"]
    if live:
        from ..artifacts.live import progress_words

        expected = data["keys"]["expected"]
        written = progress_words(live, expected - data["keys"]["missing"], expected)
        return f"not written yet ({written}; ask again when it has finished)"
    if data["files"]["failures"] is None:
        return "without a rollout (no failures file was read, so whether they were attempted is unknown)"
    return "never attempted"
