"""`ngrp merge`: merge rollout shards into one run (thin shell over `ngrp_lib.merge.shards`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..merge.shards import MergeResult, merge_shards
from ._common import OUTPUT_FILE, AnyPath, emit, json_option, overwrite_option


@click.command(name="merge")
@click.argument("shards", nargs=-1, required=True, type=AnyPath(Path))
@click.option("--output", "-o", required=True, type=OUTPUT_FILE, help="Merged rollouts file.")
@click.option(
    "--inputs",
    "inputs",
    multiple=True,
    type=AnyPath(Path),
    help="Materialized inputs to merge (repeatable). Default: each shard's"
    " <stem>_materialized_inputs.jsonl, if present.",
)
@click.option(
    "--allow-missing-shards",
    is_flag=True,
    help="Merge what is there when shards of a run are absent or lack a .done marker (listed as such).",
)
@click.option(
    "--allow-torn",
    is_flag=True,
    help="Drop a shard's cut-off last line (listed in the summary) instead of refusing.",
)
@overwrite_option
@json_option
def command(
    shards: tuple[Path, ...],
    output: Path,
    inputs: tuple[Path, ...],
    allow_missing_shards: bool,
    allow_torn: bool,
    overwrite: bool,
    as_json: bool,
) -> int:
    """Merge rollout shards (e.g. from a Slurm array run with --shard i/N) into one rollouts file.

    Writes OUTPUT, plus <stem>_failures.jsonl when any shard has a failures sidecar and
    <stem>_materialized_inputs.jsonl when inputs are given or found next to the shards. Rows are keyed by
    (_ng_task_index, _ng_rollout_index): identical duplicates are kept once, conflicting duplicates are
    refused naming both file:line, and rollouts with no materialized input row are refused. Nothing is
    written unless everything merged; an existing output is never replaced without --overwrite.

    Shards are counted per run by their names, whatever folder each is in: <base>-shard-i-of-N (ngrp
    collect --shard) and NeMo Gym / NeMo-Skills chunks <base>-rs<seed>-chunk<id> (gym eval run
    +disable_aggregation=true per chunk; merged, they are the rows gym eval aggregate writes). A shard
    of the run that is absent, or without the <file>.done marker its siblings have, is refused unless
    --allow-missing-shards; a key found in two seeds is refused.

    \b
    Example:
      ngrp merge out/rollouts-shard-*-of-8.jsonl --output out/rollouts.jsonl
      ngrp merge out/task-*/rollouts-shard-*-of-8.jsonl --output out/rollouts.jsonl   # a folder per task
      ngrp merge results/rollouts-rs0-chunk*.jsonl --output results/rollouts.jsonl    # NeMo Gym chunks
      ngrp profile --inputs out/rollouts_materialized_inputs.jsonl --rollouts out/rollouts.jsonl

    \b
    Exit codes: 0 merged; 1 conflicting duplicates, a key in two seeds, rollouts without inputs, shards
    of different runs, or shards missing or unfinished (see --allow-missing-shards); 2 usage or refused
    overwrite; 3 unreadable or malformed shard (names file:line).
    """
    result = merge_shards(
        list(shards),
        output,
        inputs=list(inputs) or None,
        overwrite=overwrite,
        allow_torn=allow_torn,
        allow_missing_shards=allow_missing_shards,
    )
    emit(result, as_json, _render)
    return 0


def _render(result: MergeResult) -> str:
    lines = [
        f"merged {len(result.rollouts.files)} shard(s): {result.rollouts.written} rollouts -> {result.output}"
        f" ({result.rollouts.duplicates_dropped} identical duplicate(s) dropped)"
    ]
    if result.inputs_output:
        lines.append(
            f"materialized inputs: {result.inputs.written} rows from {len(result.inputs.files)} file(s) -> "
            f"{result.inputs_output} ({result.inputs.duplicates_dropped} duplicate(s) dropped)"
        )
    if result.failures_output:
        lines.append(f"failures: {result.failures.written} attempt(s) -> {result.failures_output}")
    if result.missing_shards:
        lines.append(
            f"warning: {len(result.missing_shards)} shard(s) missing: {', '.join(result.missing_shards[:5])}"
        )
    if result.unfinished_shards:
        lines.append(
            f"warning: {len(result.unfinished_shards)} shard(s) without a .done marker merged: "
            + ", ".join(result.unfinished_shards[:5])
        )
    if result.sidecars_skipped:
        lines.append(
            f"note: {len(result.sidecars_skipped)} sidecar file(s) named as shards were merged as sidecars of"
            f" their shard: {', '.join(result.sidecars_skipped[:3])}"
        )
    for where in result.torn_tails:
        lines.append(f"warning: dropped a cut-off last line at {where}")
    return "\n".join(lines)
