"""`ngrp inspect`: the rollouts behind a number, in the terminal or as JSON lines for an agent."""

from __future__ import annotations

from pathlib import Path

import click

from ..artifacts.terminal import say
from ..errors import UsageError
from ._common import FINITE, INPUT_FILE, OUTPUT_FILE, count, overwrite_option, pass_threshold_option

FILE = INPUT_FILE

HELP = """Show the rollouts behind a number: each selected rollout joined with its materialized input and
profile row by (_ng_task_index, _ng_rollout_index), under a header per task with its pass rate, n and
Wilson interval. Per rollout: key, agent, reward, output tokens, finish status (completed, or
incomplete and why), the prompt's last user message, the reasoning apart from the final answer, and
the verifier's extracted answer next to the expected one. A rollout with tool calls or several turns
also shows its items in order by turn: reasoning, assistant text, each call with its name and
pretty-printed JSON arguments, and each tool output (--json: `items`, and `input` for the input
conversation). Streams: works on a run still being
collected (a cut-off last line is skipped).

\b
Example:
  ngrp inspect results/rollouts.jsonl --task 412
  ngrp inspect results/rollouts.jsonl --failed --band mixed --sort tokens --limit 5
  ngrp inspect results/rollouts.jsonl --where level=hard --grep 'boxed\\{\\}' --json > why.jsonl
  ngrp inspect results/rollouts.jsonl --finding ngrp/truncated_at_token_cap   # after ngrp health
  ngrp inspect results/rollouts.jsonl --finding ngrp/truncated_at_token_cap --failed \
      --tasks-out capped.jsonl   # then collect those tasks alone at a larger cap (it prints how)

With --tasks-out FILE the selected rollouts are not shown: the task lines behind them are written (every
selected rollout's task, not only --limit's), from the run's tasks file when its run manifest names it
and it is unchanged, else rebuilt from the materialized inputs, each with its _ng_task_index so a new
run keeps the numbering; then the `ngrp collect` command that runs those tasks alone (the run's own
options, at 4x the cap for capped rollouts) and the compare that reads the answer.

\b
Exit codes: 0 ok (also when nothing matched), 2 bad options or --tasks-out exists (use --overwrite),
3 unreadable or malformed input.
"""


@click.command("inspect", help=HELP)
@click.argument("rollouts", type=FILE)
@click.option(
    "--inputs", type=FILE, help="Materialized inputs (default: <stem>_materialized_inputs.jsonl beside)."
)
@click.option("--profile", type=FILE, help="Reward profile (default: <stem>_reward_profiling.jsonl beside).")
@click.option("--task", "tasks", type=count(), multiple=True, metavar="N", help="Only task N (repeatable).")
@click.option("--agent", metavar="NAME", help="Only rollouts of this agent (agent_ref.name).")
@click.option("--failed", is_flag=True, help="Only scored rollouts with reward below the pass threshold.")
@click.option(
    "--passed", is_flag=True, help="Only scored rollouts with reward at or above the pass threshold."
)
@pass_threshold_option("Pass means reward >= X (default 1.0, as ngrp profile).")
@click.option("--reward-min", type=FINITE, metavar="X", help="Only rollouts with reward >= X.")
@click.option("--reward-max", type=FINITE, metavar="X", help="Only rollouts with reward <= X.")
@click.option(
    "--grep",
    metavar="REGEX",
    help="Only rollouts whose final text, reasoning, tool names, tool arguments or tool outputs match REGEX.",
)
@click.option(
    "--where",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Only tasks whose materialized input has FIELD (a.b for nested) equal to VALUE (repeatable).",
)
@click.option("--band", type=click.Choice(["all-fail", "mixed", "all-pass"]), help="Only tasks in this band.")
@click.option(
    "--truncated",
    is_flag=True,
    help="Only rollouts stopped at the token limit (said, or output tokens reached max_output_tokens).",
)
@click.option(
    "--finding",
    "findings",
    multiple=True,
    metavar="CHECK",
    help="Only rollouts `ngrp health` flagged with this check id (repeatable), read from the verdicts file.",
)
@click.option(
    "--verdicts",
    type=INPUT_FILE,
    help="rollout_verdicts.jsonl for --finding (default: ngrp health's, next to the rollouts).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Show at most N rollouts (0: all).",
)
@click.option(
    "--sort",
    type=click.Choice(["task", "reward", "tokens"]),
    default="task",
    show_default=True,
    help="task (then rollout), reward (lowest first) or tokens (most first).",
)
@click.option(
    "--max-chars",
    type=click.IntRange(min=20),
    default=600,
    show_default=True,
    help="Cut each text to about N characters (the cut is marked; the end is kept).",
)
@click.option("--full", is_flag=True, help="Do not cut texts.")
@click.option(
    "--answer-key",
    default="expected_answer",
    show_default=True,
    metavar="K",
    help="Input field holding the expected answer.",
)
@click.option(
    "--tasks-out",
    type=OUTPUT_FILE,
    metavar="FILE",
    help="Write the task lines behind the selected rollouts (for `ngrp collect --input FILE`) instead of"
    " showing them.",
)
@overwrite_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per rollout on stdout (schemas/inspect_rollout.schema.json); notes on stderr."
    " With --tasks-out: one summary object (schemas/inspect_tasks_out.schema.json).",
)
def command(
    rollouts: Path,
    inputs: Path | None,
    profile: Path | None,
    tasks: tuple[int, ...],
    agent: str | None,
    failed: bool,
    passed: bool,
    pass_threshold: float | None,
    reward_min: float | None,
    reward_max: float | None,
    grep: str | None,
    where: tuple[str, ...],
    band: str | None,
    truncated: bool,
    findings: tuple[str, ...],
    verdicts: Path | None,
    limit: int,
    sort: str,
    max_chars: int,
    full: bool,
    answer_key: str,
    tasks_out: Path | None,
    overwrite: bool,
    as_json: bool,
) -> int:
    from ..inspect.join import resolve
    from ..inspect.run import inspect_run
    from ..inspect.select import Filters, make_selection

    selection = make_selection(
        Filters(
            tasks=tasks,
            agent=agent,
            passed=passed,
            failed=failed,
            threshold=pass_threshold,
            reward_min=reward_min,
            reward_max=reward_max,
            grep=grep,
            where=where,
            band=band,
            truncated=truncated,
        )
    )
    if findings:
        selection = with_findings(selection, rollouts, verdicts, findings)
    elif verdicts is not None:
        raise UsageError("--verdicts is read for --finding; give --finding CHECK")
    if overwrite and tasks_out is None:
        raise UsageError("--overwrite replaces a --tasks-out file; give --tasks-out FILE")
    paths = resolve(rollouts, inputs, profile)
    if tasks_out is not None:
        from ..inspect.tasks_out import render, write_tasks_out
        from ._common import emit

        every = inspect_run(paths, selection, sort="task", limit=None, answer_key=answer_key)
        written = write_tasks_out(every, tasks_out, overwrite=overwrite)
        for note in every.notes:
            say(f"note: {note}", err=True)
        emit(written, as_json, lambda w: "\n".join(render(w)))
        return 0
    result = inspect_run(paths, selection, sort=sort, limit=limit or None, answer_key=answer_key)
    show(result, None if full else max_chars, as_json)
    return 0


def show(result, cut: int | None, as_json: bool) -> None:
    """The rollouts as text, or as JSON lines on stdout with the footer on stderr."""
    import orjson

    from .inspect_text import footer, render_lines

    if as_json:
        for shown in result.rollouts():
            click.echo(orjson.dumps(shown.to_json(cut)).decode())
        say(footer(result), err=True)
        return
    for line in render_lines(result, cut):
        say(line)
    say(footer(result))


def with_findings(selection, rollouts: Path, verdicts: Path | None, findings: tuple[str, ...]):
    """The selection narrowed to the rollouts the verdicts file flags with any of `findings`."""
    import dataclasses

    from ..inspect.findings import keys_with_finding, verdicts_beside

    found = keys_with_finding(verdicts_beside(rollouts, verdicts), findings)
    return dataclasses.replace(selection, finding=found.checks, finding_keys=found.keys)
