"""`ngrp materialize`: expand tasks into Gym-style materialized inputs."""

from __future__ import annotations

import click

from ..artifacts.sampling import overrides_from_options
from ..collect.materialize import MaterializeOptions, MaterializeResult, materialize
from ..errors import UsageError
from ._common import (
    INPUT_FILE,
    MAX_REPEATS,
    OUTPUT_FILE,
    FiniteFloat,
    count,
    emit,
    json_option,
    overwrite_option,
)


def sampling_options(f):
    """Gym's sampling flags: fields written into every row's responses_create_params when materializing."""
    f = click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="PATH=JSON",
        help="Set responses_create_params.PATH to a JSON value in every row (repeatable), "
        "e.g. --set top_k=20 or --set reasoning.effort='\"low\"'. PATH cannot be input.",
    )(f)
    f = click.option(
        "--max-output-tokens",
        type=int,
        default=None,
        help="responses_create_params.max_output_tokens for every row (a whole number, 1 to 2**31-1).",
    )(f)
    f = click.option(
        "--top-p",
        type=FiniteFloat(0, strict_minimum=True),
        default=None,
        help="responses_create_params.top_p for every row, in (0, 1].",
    )(f)
    f = click.option(
        "--temperature",
        type=FiniteFloat(0),
        default=None,
        help="responses_create_params.temperature for every row (>= 0).",
    )(f)
    return f


def materialize_options(f):
    """Options shared with `collect` (which materializes raw tasks first)."""
    f = sampling_options(f)
    f = click.option("--limit", type=count(), default=None, help="Read only the first N input lines.")(f)
    f = click.option("--interleave", is_flag=True, help='Order rows round by round ("abcabc").')(f)
    f = click.option(
        "--seed-per-repeat",
        is_flag=True,
        help='Set metadata.extra_body to {"seed": <rollout index>} (Gym\'s num_repeats_add_seed).',
    )(f)
    f = click.option("--agent", default=None, help="Route every row to this agent (agent_ref.name).")(f)
    f = click.option(
        "--num-repeats",
        type=count(maximum=MAX_REPEATS),
        default=1,
        show_default=True,
        help="Rollouts per task.",
    )(f)
    return f


@click.command(
    epilog="""\b
Example:
  ngrp materialize --input tasks.jsonl --output rollouts_materialized_inputs.jsonl \\
      --num-repeats 8 --agent math_simple_agent --seed-per-repeat
  ngrp materialize --input tasks.jsonl --output m.jsonl --num-repeats 2 \\
      --fan-out math_source=agent_a,agent_b   # rows whose agent_ref.name (or task_source) is math_source
  ngrp materialize --input tasks.jsonl --output m.jsonl --num-repeats 8 --temperature 0.2 --set top_k=20

\b
Exit codes: 0 written, 2 bad options or output exists, 3 malformed task row (file:line named).
"""
)
@click.option("--input", "input_path", required=True, type=INPUT_FILE, help="Task rows (JSONL).")
@click.option("--output", "output_path", required=True, type=OUTPUT_FILE, help="Materialized file.")
@materialize_options
@click.option(
    "--fan-out",
    "fan_out",
    multiple=True,
    metavar="KEY=AGENT,AGENT...",
    help="Run rows whose routing key (their own agent_ref.name as written, else task_source) is KEY once "
    "per listed agent (Gym's fan_out; --agent does not change the key). Repeatable.",
)
@overwrite_option
@json_option
def command(
    input_path,
    output_path,
    num_repeats,
    agent,
    seed_per_repeat,
    interleave,
    limit,
    temperature,
    top_p,
    max_output_tokens,
    sets,
    fan_out,
    overwrite,
    as_json,
):
    """Expand tasks into materialized inputs with NeMo Gym 0.7.0's rules.

    One row per (task, repeat), all repeats of a task together; byte-identical input lines share a task
    index; an existing _ng_task_index is kept; agent_ref routes the row.
    """
    options = MaterializeOptions(
        num_repeats=num_repeats,
        agent=agent,
        seed_per_repeat=seed_per_repeat,
        interleave=interleave,
        limit=limit,
        overrides=overrides_from_options(temperature, top_p, max_output_tokens, sets),
        fan_out=parse_fan_out(fan_out),
    )
    result = materialize(input_path, output_path, options, overwrite=overwrite)
    emit(result, as_json, _render)


def parse_fan_out(specs: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`KEY=a,b` strings to {KEY: (a, b)}; a malformed or repeated KEY is a usage error (exit 2)."""
    fan_out: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        key, sep, names = spec.partition("=")
        agents = tuple(name.strip() for name in names.split(",") if name.strip())
        if not sep or not key.strip() or not agents:
            raise UsageError(f"--fan-out {spec!r}: expected KEY=AGENT[,AGENT...]")
        if key.strip() in fan_out:
            raise UsageError(f"--fan-out names {key.strip()!r} twice")
        fan_out[key.strip()] = agents
    return fan_out


def _render(result: MaterializeResult) -> str:
    """The count line; its arithmetic holds in every case: rows in x repeats = rows out, with --fan-out
    rows in -> task-agent rows x repeats = rows out; the tasks are counted apart (lines that are byte
    for byte the same, or share a preset _ng_task_index, are one task)."""
    fanned = result.rows // result.num_repeats
    line = f"materialized {result.input_rows} input rows ({result.tasks} tasks)"
    if fanned != result.input_rows:
        line += f" -> {fanned} task-agent rows (--fan-out)"
    return line + f" x {result.num_repeats} repeats = {result.rows} rows: {result.output}"
