"""`ngrp report`: one self-contained HTML page with the headline numbers and plots."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import (
    INPUT_FILE,
    OUTPUT_FILE,
    answer_key_option,
    bootstrap_option,
    emit,
    exclude_unhealthy_option,
    interval_option,
    json_option,
    overwrite_option,
    pass_threshold_option,
    profile_argument,
    seed_option,
)


@click.command("report")
@profile_argument
@click.option(
    "--rollouts",
    type=INPUT_FILE,
    help="rollouts.jsonl: adds truncation, majority@k (--answer-key) and the failures sidecar next to it.",
)
@click.option(
    "--compare",
    "other",
    type=INPUT_FILE,
    help="The baseline profile A on the same tasks: adds B - A (this profile minus it, as `ngrp compare A "
    "PROFILE`), a per-task scatter and flips.",
)
@click.option(
    "--output",
    "-o",
    type=OUTPUT_FILE,
    help="HTML file to write (default: <profile stem>_report.html next to the profile).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Explorer: example rollouts per task (a pass and a fail where both exist); 0: the task table only.",
)
@pass_threshold_option()
@answer_key_option
@bootstrap_option()
@seed_option()
@interval_option
@exclude_unhealthy_option
@overwrite_option
@json_option
def command(
    profile: Path,
    rollouts: Path | None,
    other: Path | None,
    output: Path | None,
    examples: int,
    pass_threshold: float | None,
    answer_key: str | None,
    n_bootstrap: int,
    seed: int,
    interval: str,
    exclude_unhealthy: Path | None,
    overwrite: bool,
    as_json: bool,
) -> int:
    """Write one self-contained HTML report (inline SVG plots, no external URLs, works offline).

    Headline table with task-clustered intervals and denominators, pass@k curve with bootstrap bands,
    per-task pass-rate histogram, difficulty bands, reward vs length, failures by class, with
    --compare a paired comparison, per-task scatter and the list of tasks that flipped, and an
    offline explorer: the task table and up to --examples rollouts per task (from --rollouts, else the
    rollouts file beside the profile), texts cut so the file stays small; `ngrp view` opens the whole run.
    Needs matplotlib: pip install '<this skill folder>[report]' (or pip install matplotlib).

    \b
    Example:
      ngrp report results/rollouts_reward_profiling.jsonl --rollouts results/rollouts.jsonl \\
          --output report.html
      ngrp report tuned_profile.jsonl --compare base_profile.jsonl -o compare.html --overwrite

    \b
    Exit codes: 0 ok, 1 --compare runs share no tasks, 2 bad options, output exists (use
    --overwrite) or matplotlib missing, 3 unreadable or malformed input.
    """
    from ..report.html import build_report
    from ..stats.summary import StatsSettings

    output = output or profile.with_name(profile.stem + "_report.html")
    settings = StatsSettings(
        pass_threshold=pass_threshold,
        answer_key=answer_key,
        n_bootstrap=n_bootstrap,
        seed=seed,
        interval=interval,
    )
    result = build_report(
        profile,
        output,
        rollouts=rollouts,
        compare=other,
        settings=settings,
        overwrite=overwrite,
        examples=examples,
        exclude_unhealthy=exclude_unhealthy,
    )
    emit(result, as_json, _summary)
    return 0


def _summary(r) -> str:
    text = f"wrote {r.output} ({r.bytes / 1024:,.0f} KB, {r.n_plots} plots, {r.n_tasks} tasks)"
    if r.explorer:
        e = r.explorer
        text += (
            f"; explorer: {e['n_examples']} example rollouts of {e['n_tasks_with_examples']} tasks, "
            f"{e['bytes'] / 1024:,.0f} KB"
        )
    return text
