"""`ngrp curriculum`: select tasks by pass-rate band or GRPO learnability; write original task rows."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import (
    FINITE,
    INPUT_FILE,
    OUTPUT_FILE,
    count,
    emit,
    exclude_unhealthy_option,
    json_option,
    overwrite_option,
    pass_threshold_option,
    profile_argument,
)


def _render(result) -> str:
    s = result.selection
    rule = (
        f"{s['min_rate'] or 0.0} <= pass rate <= {1.0 if s['max_rate'] is None else s['max_rate']}"
        if s["mode"] == "band"
        else f"P(group of {s['group_size']} informative) >= {s['min_informative']}"
    )
    if result.adaptive and result.adaptive["selected_by"].startswith("the run's"):
        rule = "the adaptive run's decision: " + ("mixed" if s["mode"] == "learnable" else "inside the band")
    lines = [
        f"selected {result.n_selected} of {result.n_profiled} profiled tasks ({rule}); "
        f"wrote {result.n_written_lines} original rows to {result.output}",
        f"  bands: all fail {result.bands['all_fail']}, mixed {result.bands['mixed']}, "
        f"all pass {result.bands['all_pass']}; pass rate written as '{result.key}' and '{result.key}_n'",
        f"  tasks file: {result.n_task_lines} rows, {result.n_tasks_in_file} tasks, "
        f"{result.n_duplicate_lines} duplicate lines; {result.n_not_profiled} tasks not in the profile",
    ]
    if result.selected_tasks:
        lines.append("  selected: " + _selected_words(result.selected_tasks, result.tasks))
    if result.pass_at_1:
        lines.append("  " + _pass_at_1_words(result.pass_at_1))
    if result.adaptive:
        a = result.adaptive
        lines.append(
            f"  adaptive run (rule {a['rule']}, {a['schedule']}, N={a['num_repeats']}):"
            f" selected by {a['selected_by']}"
        )
    by_decision = result.adaptive and result.adaptive["selected_by"].startswith("the run's")
    if result.n_undetermined:
        why = (
            "have no decision yet (pending or out of attempts)"
            if by_decision
            else "have fewer rollouts than the group size"
        )
        lines.append(f"  {result.n_undetermined} tasks {why}: not selected")
    if result.n_unscored:
        lines.append(f"  {result.n_unscored} tasks have no scored rollout (all rewards null): not selected")
    if result.exclude_unhealthy:
        lines.append(
            f"  {result.n_unhealthy_excluded} unhealthy rollouts left out ({result.exclude_unhealthy}): "
            "pass rates stand on the healthy ones"
        )
    if result.denominators is not None and result.denominators.partial:
        lines.append(f"  note: {result.denominators.lines()[0]}")
    if result.n_key_replaced:
        lines.append(f"  note: {result.n_key_replaced} rows already had '{result.key}'; replaced")
    if result.tasks_kind == "materialized":
        dropped = ", ".join(result.dropped_fields) or "none"
        lines.append(
            "  note: --tasks is a materialized inputs file: wrote one row per task (its first repeat, "
            f"without _ng_rollout_index; fields that vary by repeat left out: {dropped})"
        )
    return "\n".join(lines)


def _pass_at_1_words(p: dict) -> str:
    """The benchmark-level number beside the selection: what it is, its interval and what it stands on."""
    return (
        f"pass@1 (mean pass rate over all {p['n_tasks']} profiled tasks, kept or not): {p['value']:.4f},"
        f" 95% CI [{p['ci_low']:.4f}, {p['ci_high']:.4f}] ({p['ci_method']}, clustered by task;"
        f" {p['n_rollouts']} rollouts) from {p['stands_on']} (--json: pass_at_1)"
    )


SHOWN = 10  # selected tasks named in the text (--json lists them all)


def _selected_words(selected, tasks) -> str:
    """`task 2 (lines 4, 8), task 3 (line 5) ... of tasks.jsonl`: which lines of --tasks were kept."""
    from ..artifacts.task_lines import lines_text

    named = ", ".join(f"task {t['task']} ({lines_text(t['source_lines'])})" for t in selected[:SHOWN])
    more = (
        f" and {len(selected) - SHOWN} more (--json: selected_lines, selected_tasks)"
        if len(selected) > SHOWN
        else ""
    )
    return f"{named}{more}, lines of {tasks}"


HELP = """Select training tasks from a profile; write their original rows with the pass rate added.

Band mode (--min/--max, inclusive) filters on the raw binary outcome, not a shaped reward. Learnability
mode (--learnable-for G) keeps tasks whose unbiased probability that a group of G rollouts has both a
success and a failure is at least --min-informative. Profile rows map to task lines as NeMo Gym
numbers them (an existing _ng_task_index is kept, byte-identical lines share an index); ambiguous
files are refused.

The profile of an adaptive run (`collect --adaptive`, found by the run manifest beside its rollouts)
is selected by the run's per-task decisions when its rule answers the question: `learnable` for
--learnable-for G (the tasks found mixed; --min-informative is not applied), `band:LOW,HIGH` for the
same --min LOW --max HIGH (the tasks decided inside). Otherwise by rates over all repeats, which an
adaptive run biases: the summary says which.

\b
Example:
  ngrp curriculum results/rollouts_reward_profiling.jsonl --tasks data/train.jsonl \\
      --output data/train_band.jsonl --min 0.1 --max 0.9
  ngrp curriculum profile.jsonl --tasks train.jsonl -o learnable.jsonl --learnable-for 8

\b
Exit codes: 0 ok, 1 tasks file does not match the profile or the mapping is ambiguous,
2 bad options or output exists (use --overwrite), 3 unreadable or malformed input.
"""


@click.command("curriculum", help=HELP)
@profile_argument
@click.option(
    "--tasks",
    "tasks",
    required=True,
    type=INPUT_FILE,
    help="The ORIGINAL tasks JSONL the run was materialized from, or the run's materialized inputs "
    "(one row per task is written back).",
)
@click.option(
    "--output",
    "-o",
    required=True,
    type=OUTPUT_FILE,
    help="Where to write the selected task rows (JSONL).",
)
@click.option("--min", "min_rate", type=FINITE, help="Band mode: keep tasks with pass rate >= this.")
@click.option("--max", "max_rate", type=FINITE, help="Band mode: keep tasks with pass rate <= this.")
@click.option(
    "--learnable-for",
    "group_size",
    type=count(maximum=2**31),
    metavar="G",
    help="Learnability mode: keep tasks where a GRPO group of G rollouts is likely informative.",
)
@click.option(
    "--min-informative",
    type=FINITE,
    default=0.5,
    show_default=True,
    metavar="P",
    help="Learnability mode: minimum unbiased P(group has a success and a failure).",
)
@click.option(
    "--key",
    default="pass_rate",
    show_default=True,
    help="Field name for the pass rate written into each row ('<key>_n' holds its n).",
)
@pass_threshold_option()
@click.option("--agent", help="With fan-out profiles (several agents per task): whose pass rates to use.")
@exclude_unhealthy_option
@overwrite_option
@json_option
def command(
    profile: Path,
    tasks: Path,
    output: Path,
    min_rate: float | None,
    max_rate: float | None,
    group_size: int | None,
    min_informative: float,
    key: str,
    pass_threshold: float | None,
    agent: str | None,
    exclude_unhealthy: Path | None,
    overwrite: bool,
    as_json: bool,
) -> int:
    from ..errors import UsageError
    from ..stats.curriculum import RateOptions, Selection, export_curriculum

    if group_size is not None and (min_rate is not None or max_rate is not None):
        raise UsageError("choose one mode: --min/--max (band) or --learnable-for (learnability)")
    if group_size is None and min_rate is None and max_rate is None:
        raise UsageError(
            "choose a selection: --min/--max (for example --min 0.1 --max 0.9) or --learnable-for G"
        )
    selection = Selection(
        "learnable" if group_size is not None else "band", min_rate, max_rate, group_size, min_informative
    )
    result = export_curriculum(
        profile,
        tasks,
        output,
        selection,
        RateOptions(key, pass_threshold, agent, exclude_unhealthy),
        overwrite=overwrite,
    )
    emit(result, as_json, _render)
    return 0
