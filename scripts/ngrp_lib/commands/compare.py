"""`ngrp compare`: paired comparison of two reward profiles on the same tasks."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import (
    FINITE,
    INPUT_FILE,
    PROFILE_PATH,
    FiniteFloat,
    bootstrap_option,
    count,
    emit,
    json_option,
    pass_threshold_option,
    seed_option,
)


@click.command("compare")
@click.argument("profile_a", type=PROFILE_PATH)
@click.argument("profile_b", type=PROFILE_PATH)
@click.option(
    "--intersect", is_flag=True, help="Compare only the tasks both runs have; report how many were dropped."
)
@click.option("--metric", default="reward", show_default=True, help="Per-rollout field to compare.")
@pass_threshold_option("Success means value >= X (for McNemar and flips when the metric is not 0/1).")
@click.option(
    "--alpha",
    type=FiniteFloat(0.0, strict_minimum=True),
    default=0.05,
    show_default=True,
    help="Level for flips (BH) and the MDE.",
)
@click.option(
    "--effect",
    type=FINITE,
    default=0.05,
    show_default=True,
    help="Effect (on the metric's scale) for 'tasks needed to detect it' at 80% power.",
)
@click.option(
    "--rollouts-a",
    type=INPUT_FILE,
    help="Run A's rollouts, for reward components and the commands that show the tasks that moved "
    "(default: X.jsonl beside X_reward_profiling.jsonl).",
)
@click.option("--rollouts-b", type=INPUT_FILE, help="Run B's rollouts, as --rollouts-a.")
@click.option(
    "--group-size",
    "group_sizes",
    type=count(maximum=2**31),
    multiple=True,
    metavar="G",
    help="GRPO group size for B - A of P(informative at G), the share of groups with both a pass and a "
    "fail; repeatable (default: the repeats both runs hold).",
)
@bootstrap_option("Paired bootstrap replicates (tasks resampled).")
@seed_option("Seed for the bootstrap and permutations.")
@json_option
def command(
    profile_a: Path,
    profile_b: Path,
    intersect: bool,
    metric: str,
    pass_threshold: float | None,
    alpha: float,
    effect: float,
    rollouts_a: Path | None,
    rollouts_b: Path | None,
    group_sizes: tuple[int, ...],
    n_bootstrap: int,
    seed: int,
    as_json: bool,
) -> int:
    """Is B better than A on the same tasks? Differences are B - A, matched by (task, agent).

    Per-task differences; the paired mean difference with a t interval and a paired (task) bootstrap
    interval; a sign-flip permutation p-value (exact up to 20 tasks, seeded Monte Carlo above); McNemar
    when each run has one binary rollout per task; tasks that flipped (Fisher's exact test per task,
    Benjamini-Hochberg); the tasks that moved most each way (pass counts A -> B, task-file lines) with the
    `inspect` and `view --compare` commands that show their rollouts; pass@k and pass^k paired by task;
    the correlation of A's and B's per-task means; the minimum detectable effect at 80% power (z and t)
    and the tasks needed to detect --effect; B - A of P(informative at G), the share of GRPO groups of G
    with both a pass and a fail (did B raise the share of GRPO-useful tasks?), paired by task. Identical
    outcomes in both runs (the same rollouts or seed?) are reported as a finding, with the MDE from the
    within-task variance. When both runs' rows carry `reward_components` (--rollouts-a/-b, or the rollouts
    beside each profile): B - A per component, over tasks.

    \b
    Example:
      ngrp compare base/rollouts_reward_profiling.jsonl tuned/rollouts_reward_profiling.jsonl
      ngrp compare a.jsonl b.jsonl --intersect --json > compare.json
      ngrp compare a.jsonl b.jsonl --group-size 8   # did B raise the share of GRPO-informative groups?

    \b
    Exit codes: 0 ok, 1 the runs cover different tasks (use --intersect), 2 bad options,
    3 unreadable or malformed input.
    """
    from ..stats.compare import CompareOptions, compare_profiles
    from .compare_text import render_compare

    result = compare_profiles(
        profile_a,
        profile_b,
        CompareOptions(
            intersect=intersect,
            metric=metric,
            seed=seed,
            n_bootstrap=n_bootstrap,
            pass_threshold=pass_threshold,
            alpha=alpha,
            effect=effect,
            group_sizes=group_sizes,
        ),
        rollouts=(rollouts_a, rollouts_b),
    )
    result.reward_components = paired_components_of(
        rollouts_a or rollouts_beside(profile_a), rollouts_b or rollouts_beside(profile_b)
    )
    emit(result, as_json, lambda r: "\n".join([render_compare(r), *paired_lines(r.reward_components)]))
    return 0


def rollouts_beside(profile: Path) -> Path | None:
    """`X.jsonl` beside `X_reward_profiling.jsonl`, when it exists."""
    name = profile.name.removesuffix("_reward_profiling.jsonl")
    candidate = profile.with_name(name + ".jsonl")
    return candidate if name != profile.name and candidate.is_file() else None


def paired_components_of(a: Path | None, b: Path | None) -> dict | None:
    """B - A per reward component when both runs' rows carry `reward_components` (else None)."""
    if a is None or b is None:
        return None
    from ..stats.adaptive_run import rule_of
    from ..stats.components import paired_components, read_components

    # each side over the rows `stats.rows` counts: no masked row, an adaptive run's first round alone
    ra, rb = read_components(a, rule=rule_of(None, a)), read_components(b, rule=rule_of(None, b))
    if not (ra.n_with_components and rb.n_with_components):
        return None
    return paired_components(ra, rb)


def paired_lines(summary: dict | None) -> list[str]:
    if summary is None:
        return []
    from ..stats import methods

    lines = [
        "",
        f"reward components, B - A of per-task means ({summary['level']:.0%} interval over tasks: MOVER for "
        "0/1 components, t for others; const: every task's difference the same):",
    ]
    for c in summary["components"]:
        diff = "n/a" if c["diff"] is None else f"{c['diff']:+.3f}"
        ci = (
            ""
            if c["ci_low"] is None
            else f" {methods.tag(c['ci_method'])} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
        )
        lines.append(f"  {c['name']}: {diff}{ci} over {c['n_tasks']} tasks")
    return lines
