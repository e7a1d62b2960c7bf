"""`ngrp reverify`: re-score stored rollouts with another verifier (no generation)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..artifacts.terminal import say
from ._common import (
    DURATION,
    INPUT_FILE,
    OUTPUT_FILE,
    class_counts,
    count,
    emit,
    json_option,
    overwrite_option,
    repaired_line,
    verifier_options,
)


@click.command(
    "reverify",
    epilog="""\b
Example:
  ngrp reverify --rollouts results/rollouts.jsonl --output results/rollouts_v2.jsonl --verifier math
  ngrp reverify --rollouts results/rollouts.jsonl --output /tmp/rescored.jsonl   # the run's own verifier
  ngrp reverify --rollouts r.jsonl --output r_judge.jsonl --inputs r_materialized_inputs.jsonl \\
      --verify-url http://127.0.0.1:8001/verify --concurrency 16 --resume
  ngrp profile --inputs r_materialized_inputs.jsonl --rollouts r_judge.jsonl   # then compare:
  ngrp compare r_reward_profiling.jsonl r_judge_reward_profiling.jsonl

\b
Files, next to OUTPUT: <stem>_failures.jsonl (rows that could not be re-scored, with a failure class:
verify_failed, no_response), <stem>_reverify_manifest.json (checked by --resume), OUTPUT.lock.
Each output row is the stored row with the new verifier's fields over it: identity, response and
everything else are kept, `reward` is new, `ngrp/previous_reward` holds the old one and
`ngrp/reverified_with` names the verifier. Rows are written in completion order.

\b
Exit codes: 0 every row re-scored (with the run's own verifier: and every stored reward is what it
gives), 1 some rows still missing (rerun with --resume), with the run's own verifier some stored
rewards differ from what it gives (the answer: line counts them), or --rollouts repeats a rollout key
(both lines named; nothing is re-scored: deduplicate it first, as `ngrp profile` asks), 2 bad options,
--output is the input, the --verify-url server does not answer, outputs exist without
--resume/--overwrite, or changed configuration on --resume, 3 unreadable or malformed input
(file:line named; in --inputs also a row without integer keys or a repeated key).
""",
)
@click.option("--rollouts", required=True, type=INPUT_FILE, help="Rollouts to re-score.")
@click.option("--output", required=True, type=OUTPUT_FILE, help="New rollouts file.")
@click.option(
    "--inputs",
    type=INPUT_FILE,
    help="Materialized inputs: the verifier gets each key's input row (as Gym's reverify), not the rollout.",
)
@verifier_options
@click.option(
    "--concurrency", type=count(maximum=10_000), default=32, show_default=True, help="Rows in flight."
)
@click.option(
    "--timeout", type=DURATION, default=120.0, show_default=True, help="Seconds per /verify request."
)
@click.option(
    "--max-retries",
    type=count(maximum=1000),
    default=3,
    show_default=True,
    help="Retries per /verify request on connection errors, timeouts, 429 and 5xx.",
)
@click.option(
    "--max-attempts",
    type=count(maximum=1000),
    default=3,
    show_default=True,
    help="--resume retries a failed row until it has this many failed attempts.",
)
@click.option("--resume", is_flag=True, help="Continue an earlier reverify (checked against its manifest).")
@overwrite_option
@json_option
def command(
    rollouts: Path,
    output: Path,
    inputs: Path | None,
    verifier: str | None,
    verifier_pattern: str | None,
    answer_key: str,
    verify_url: str | None,
    verifier_fn: str | None,
    concurrency: int,
    timeout: float,
    max_retries: int,
    max_attempts: int,
    resume: bool,
    overwrite: bool,
    as_json: bool,
) -> int:
    """Re-score stored rollouts with another verifier, or the run's own; nothing is sent to the model.

    Uses collect's verifier options (--verifier, --verify-url, --verifier-fn) and its retry policy.
    With none of them, the run's own verifier from the run manifest beside --rollouts: "0 of N changed"
    then says every stored reward is what that verifier gives on the stored reply. Options that name
    the very verifier the manifest records (same pattern and answer key) are the same audit.
    Kill it at any moment: --resume finishes with every key exactly once. Prints how many rewards
    changed, and in which direction.
    """
    import dataclasses

    from ..collect.http import RetryPolicy
    from ..reverify.run import ReverifyOptions, reverify, run_verifier

    options = ReverifyOptions(
        rollouts=rollouts,
        output=output,
        inputs=inputs,
        verifier=verifier,
        verifier_pattern=verifier_pattern,
        answer_key=answer_key,
        verify_url=verify_url,
        verifier_fn=verifier_fn,
        concurrency=concurrency,
        retry=RetryPolicy(timeout=timeout, max_retries=max_retries),
        max_attempts=max_attempts,
        resume=resume,
        overwrite=overwrite,
        progress=not as_json and sys.stderr.isatty(),
    )
    if not (verifier or verify_url or verifier_fn):  # the run's own: are the stored rewards right?
        found, manifest = run_verifier(rollouts)
        options = dataclasses.replace(options, **found, verifier_from=str(manifest))
    else:  # the options may name the run's own verifier: the same audit, not a verifier change
        options = dataclasses.replace(options, verifier_from=_same_as_run(options, run_verifier))
    result = reverify(options)
    emit(result, as_json, render_text)
    if not result.complete:
        say(next_step(result, max_attempts), err=True)
    return result.exit_code


def _same_as_run(options, run_verifier) -> str | None:
    """The run manifest's path when the verifier options name the verifier it records (every field
    alike, the pattern and answer key too), else None: none recorded, another one, or no manifest."""
    from ..errors import NgrpError
    from ..reverify.run import RUN_VERIFIER_FIELDS

    try:
        found, manifest = run_verifier(options.rollouts)
    except NgrpError:  # no manifest, or one that names no verifier: the options choose another
        return None
    same = all(getattr(options, k) == found.get(k) for k in RUN_VERIFIER_FIELDS)
    return str(manifest) if same else None


def next_step(r, max_attempts: int) -> str:
    """What to run next for an incomplete reverify: a plain --resume skips the rows out of attempts."""
    again = "rerun the same command with --resume"
    more = f"{again} --max-attempts N (N > {max_attempts})"
    if r.exhausted >= r.missing:
        return f"incomplete: {r.exhausted} rows reached --max-attempts {max_attempts}; {more} to retry them"
    out = (
        f"; {r.exhausted} rows reached --max-attempts {max_attempts}: {more} retries them"
        if r.exhausted
        else ""
    )
    return f"incomplete: {again} to retry the rows that failed{out}"


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render_text(r) -> str:
    c = r.changes
    own = f", the run's own verifier from {r.verifier_from}" if r.verifier_from else ""
    lines = [
        f"reverify ({r.verifier}{own}): {r.completed}/{r.source_rows} rows re-scored into {r.output}, "
        f"{r.missing} missing",
        f"this run: {r.rescored} re-scored, {r.failed} failed attempts"
        + class_counts(r.failures_by_class)
        + f", {r.skipped_completed} already done, {r.exhausted} out of attempts",
        f"rewards: {c.changed} of {c.rows} changed ({c.increased} up, {c.decreased} down, "
        f"{c.newly_scored} newly scored, {c.no_longer_scored} no longer scored), {c.unchanged} unchanged"
        + (f", {c.unscored} unscored before and after" if c.unscored else ""),
        f"mean reward over the rows scored both times: {_mean(c.mean_before)} -> {_mean(c.mean_after)}",
    ]
    if r.repaired:
        lines.append(repaired_line(r.repaired))
    if r.failed or r.missing:
        lines.append(f"failed rows: {r.failures}")
    if r.verifier_from and not r.missing:
        lines.append(
            f"answer: every stored reward ({c.rows}) is what the run's verifier gives on the stored reply"
            if not c.changed
            else f"answer: {c.changed} of {c.rows} stored rewards differ from what the run's verifier gives"
            " on the stored reply: the run's rewards are not its verifier's; compare the rows"
            " (`ngrp/previous_reward` beside `reward` in the output)"
        )
    elif not r.verifier_from:
        lines.append(
            "next: profile both files, then `ngrp compare OLD_reward_profiling.jsonl"
            " NEW_reward_profiling.jsonl` lists the tasks the verifier change flipped"
        )
    return "\n".join(lines)
