"""`ngrp stats`: pass@k, clustered intervals, variance decomposition, difficulty, reward vs length."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ._common import (
    INPUT_FILE,
    FiniteFloat,
    answer_key_option,
    bootstrap_option,
    count,
    emit,
    exclude_unhealthy_option,
    interval_option,
    json_option,
    pass_threshold_option,
    profile_argument,
    seed_option,
)


@click.command("stats")
@profile_argument
@click.option(
    "--rollouts",
    type=INPUT_FILE,
    help="rollouts.jsonl the profile came from: adds answers (majority@k), truncation and reward components.",
)
@click.option(
    "--group-by",
    metavar="agent|FIELD",
    help="Also report per agent, or per value of a dataset field in `sample` (e.g. difficulty).",
)
@pass_threshold_option("Success means reward >= X (needed for pass metrics when rewards are not 0/1).")
@answer_key_option
@click.option("--k", "k_list", metavar="LIST", help="k values such as 1,2,4,8 (default: every k up to n).")
@bootstrap_option("Cluster-bootstrap replicates (tasks resampled whole); 0 turns it off.")
@seed_option()
@interval_option
@click.option(
    "--target-width",
    type=FiniteFloat(0.0, strict_minimum=True),
    default=0.2,
    show_default=True,
    help="Per-task 95% interval width used for 'repeats needed'.",
)
@click.option(
    "--group-size",
    "group_sizes",
    type=count(maximum=2**31),
    multiple=True,
    metavar="G",
    help="GRPO group size for P(informative); repeatable (default: powers of two up to n).",
)
@click.option(
    "--component-diff",
    "component_diffs",
    type=(str, str),
    multiple=True,
    metavar="X Y",
    help="Reward components X and Y (with --rollouts): X - Y per rollout, task-clustered interval; "
    "repeatable (default: every pair when the rows carry 2 to 4 components).",
)
@exclude_unhealthy_option
@json_option
def command(
    profile: Path,
    rollouts: Path | None,
    group_by: str | None,
    pass_threshold: float | None,
    answer_key: str | None,
    k_list: str | None,
    n_bootstrap: int,
    seed: int,
    interval: str,
    target_width: float,
    group_sizes: tuple[int, ...],
    component_diffs: tuple[tuple[str, str], ...],
    exclude_unhealthy: Path | None,
    as_json: bool,
) -> int:
    """Statistics of a reward profile (*_reward_profiling.jsonl), each number with its n.

    Task-weighted and rollout-weighted mean reward; pass rate; unbiased pass@k and pass^k for every k
    (NaN where a task has fewer than k rollouts); exact majority@k (--answer-key); expected best/worst
    of k for continuous rewards; task-clustered intervals (for rates in [0, 1] the headline is
    Korn-Graubard, bounded to [0, 1], with a one-sided bound on the tasks behind an estimate of 0 or 1;
    the t and task-bootstrap intervals beside it); conditional (these tasks)
    and population (new tasks) SE; within/between-task variance, ICC, design effect, effective n,
    repeats needed; difficulty bands and P(GRPO group informative); reward vs length. With --rollouts
    whose rows carry `reward_components`: each component's mean with its task-clustered interval and its
    correlation with the reward; rows lacking a component are counted and named, never read as 0; and
    which component drags: the paired difference X - Y per rollout with its task-clustered interval.

    \b
    Example:
      ngrp stats results/rollouts_reward_profiling.jsonl
      ngrp stats results/rollouts_reward_profiling.jsonl --rollouts results/rollouts.jsonl \\
          --answer-key extracted_answer --group-by difficulty --json > stats.json
      ngrp stats results/rollouts_reward_profiling.jsonl \\
          --exclude-unhealthy results/rollout_verdicts.jsonl     # after `ngrp health`

    Without --exclude-unhealthy, a verdicts file `ngrp health` wrote next to the run is counted in a note.

    \b
    Exit codes: 0 ok, 2 bad options, 3 unreadable or malformed input.
    """
    from ..stats.summary import StatsSettings, compute_stats, parse_int_list
    from .stats_text import render_stats

    settings = StatsSettings(
        pass_threshold=pass_threshold,
        answer_key=answer_key,
        ks=parse_int_list(k_list, "--k"),
        n_bootstrap=n_bootstrap,
        seed=seed,
        target_width=target_width,
        group_sizes=list(group_sizes) or None,
        group_by=group_by,
        interval=interval,
    )
    if component_diffs and rollouts is None:
        raise UsageError("--component-diff reads the rows' reward_components: add --rollouts ROLLOUTS")
    result = compute_stats(profile, rollouts, settings, exclude_unhealthy)
    if rollouts is not None:
        result.reward_components = components_of(rollouts, component_diffs, profile, exclude_unhealthy)
    emit(result, as_json, lambda r: "\n".join([render_stats(r), *components_lines(r.reward_components)]))
    return 0


def components_of(
    rollouts: Path,
    pairs: tuple[tuple[str, str], ...] = (),
    profile: Path | None = None,
    exclude_unhealthy: Path | None = None,
) -> dict | None:
    """Each reward component's statistics when the rows carry `reward_components` (None when none does),
    with the paired differences between components (`pairs`, or every pair of a few), over the rows
    `stats.rows` counts (no masked or excluded row; an adaptive run's first round)."""
    from ..stats.adaptive_run import rule_of
    from ..stats.components import component_pairs, component_stats, read_components

    found = read_components(rollouts, rule=rule_of(profile, rollouts, exclude_unhealthy))
    if not (found.n_with_components or found.malformed):
        component_pairs(found, pairs)  # a pair asked of rows without components names what is there
        return None
    return component_stats(found, diffs=pairs)


def components_lines(summary: dict | None) -> list[str]:
    from ..stats.components import components_text

    return [] if summary is None else ["", *components_text(summary)]
