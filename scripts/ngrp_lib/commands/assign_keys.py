"""`ngrp assign-keys`: a thin shell over `ngrp_lib.artifacts.assign_keys.assign_keys`."""

from __future__ import annotations

import shlex

import click

from ._common import INPUT_FILE, OUTPUT_FILE, emit, json_option, overwrite_option


@click.command("assign-keys")
@click.argument("rollouts", type=INPUT_FILE)
@click.option("--output", "output", required=True, type=OUTPUT_FILE, help="The rows with keys (r.jsonl).")
@click.option(
    "--task-field",
    default=None,
    metavar="FIELD",
    help="Rows with the same value of this top-level field are one task (instead of the same prompt), "
    "e.g. task_idx for an environment that gives the task itself (an empty prompt).",
)
@overwrite_option
@json_option
def command(rollouts, output, task_field, overwrite, as_json):
    """Give rollouts without identity keys (many of NeMo Gym's own example_rollouts.jsonl) their
    (_ng_task_index, _ng_rollout_index) and write the materialized inputs they were run from, so check,
    health, profile, stats and inspect can join them.

    The rule: a task is a prompt (rows with the same responses_create_params.input, compared as JSON,
    are repeats of one task), or with --task-field FIELD the same value of FIELD (an empty prompt, the
    environment giving the task, is refused without it); tasks are numbered from 0 in the order their
    first row appears, a task's repeats from 0 in file order. Rows that all have both keys already (Gym
    example rows without their inputs file) keep them: only the materialized inputs are new (a key twice
    is refused). A file mixing rows with and without keys is refused (exit 3), naming the first row
    that breaks the first row's way. Writes OUTPUT (the rows, unchanged but for the
    keys, in file order) and <OUTPUT stem>_materialized_inputs.jsonl beside it (each key's
    responses_create_params, agent_ref, expected_answer and FIELD when present).

    \b
    Example:
      ngrp assign-keys gym/calendar/data/example_rollouts.jsonl --output runs/cal/rollouts.jsonl
      ngrp health --inputs runs/cal/rollouts_materialized_inputs.jsonl --rollouts runs/cal/rollouts.jsonl
      ngrp assign-keys aviary/data/example_rollouts.jsonl --task-field task_idx --output av/r.jsonl

    \b
    Exit codes: 0 written, 2 usage error or refused overwrite, 3 unreadable input or a row the rule
    cannot number.
    """
    from ..artifacts.assign_keys import assign_keys

    result = assign_keys(rollouts, output, task_field=task_field, overwrite=overwrite)
    emit(result, as_json, _render)


def _render(r) -> str:
    how = "their own keys, kept" if r.kept_keys else "keys"
    return (
        f"wrote {r.output} ({r.rows} rows with {how}: {r.tasks} tasks, up to {r.max_repeats} repeats each) "
        f"and {r.materialized}\n"
        f"next: ngrp check --inputs {shlex.quote(r.materialized)} --rollouts {shlex.quote(r.output)}"
    )
