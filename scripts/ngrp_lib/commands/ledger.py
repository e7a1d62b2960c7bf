"""`ngrp ledger`: the research ledger (init, record, status)."""

from __future__ import annotations

from pathlib import Path

import click

from ..artifacts.terminal import say
from ..ledger import (
    CampaignSpec,
    MetricSource,
    RunInfo,
    init_campaign,
    ledger_status,
    record_run,
    resolve_dir,
)
from ..ledger.campaign import now_utc
from ..ledger.gitinfo import read_git, warnings_for
from ._common import FINITE, FOLDER, INPUT_FILE, NON_NEGATIVE, count, emit, json_option
from .ledger_common import campaign_option, dir_option, render_record
from .ledger_text import render as render_status


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """The research ledger (TSV): record runs, check stop rules.

    One folder per campaign holds `results.tsv` (one row per attempted run, the nemo-rl-auto-research
    columns plus ci_low, ci_high, n_tasks, profile_path, compared_to) and `campaign.json` (metric,
    direction, stop rules). Keep the folder untracked by git.

    \b
    Example:
      ngrp ledger init --campaign dapo-qwen --metric mean_reward --direction max \\
          --max-experiments 20 --deadline 10h --per-run-timeout 90m
      ngrp ledger record --campaign dapo-qwen --profile runs/base/rollouts_reward_profiling.jsonl \\
          --command "uv run examples/run_grpo.py ..." --log runs/base/run.log --description baseline
      ngrp ledger status --campaign dapo-qwen --json   # exit 1 = stop

    \b
    Exit codes: 0 ok (status: continue), 1 status: a stop rule is met, 2 bad option or existing
    ledger, 3 missing or malformed ledger, campaign file or metric input.
    """


@command.command("init")
@click.option("--campaign", required=True, help="Campaign name (letters, digits, . _ -).")
@click.option("--metric", required=True, help="Name of the authoritative metric, e.g. mean_reward.")
@click.option(
    "--direction", required=True, type=click.Choice(["max", "min"]), help="Is bigger or smaller better."
)
@click.option("--target", type=FINITE, help="Stop when the best kept run reaches this value.")
@click.option(
    "--max-experiments",
    type=count(maximum=2**31),
    help="Stop after this many attempted runs. The baseline counts, and so do crashes: "
    "--max-experiments 5 is the baseline plus 4 experiments.",
)
@click.option("--deadline", help="ISO 8601 instant (no offset = UTC), or a budget from now such as 10h.")
@click.option("--per-run-timeout", help="Longest a run may take, e.g. 90m, 2h; overruns count as failures.")
@click.option(
    "--compare-metric",
    default="reward",
    show_default=True,
    help="rollout_infos field compared between two runs' profiles for the keep/discard suggestion.",
)
@click.option(
    "--compare-direction",
    type=click.Choice(["max", "min"]),
    help="Which way --compare-metric improves. Default: --direction (set it when the metric is a loss).",
)
@click.option(
    "--branch-prefix",
    help="Git branch prefix for `ledger branch` (<prefix>/<index>-<slug>). "
    "Default: autoresearch/<today>-<campaign>.",
)
@dir_option
@json_option
def init_cmd(
    campaign,
    metric,
    direction,
    target,
    max_experiments,
    deadline,
    per_run_timeout,
    compare_metric,
    compare_direction,
    branch_prefix,
    directory,
    as_json,
):
    """Create a campaign: an empty ledger and its stop rules. Never overwrites.

    Every attempted run counts toward --max-experiments, the baseline included: "a 5-experiment
    campaign" that means five experiments besides the baseline is --max-experiments 6. With no
    --target, --max-experiments or --deadline, the default rule applies: the baseline plus 3
    experiments (max 4 attempted), then summarise and ask the user. Warns when the current folder is
    not in a git repository or the repository has no commit yet, and says how to start one.

    \b
    Example:
      ngrp ledger init --campaign prompt-v2 --metric mean_reward --direction max --target 0.62 \\
          --deadline 2026-03-24T18:00:00Z --per-run-timeout 90m

    \b
    Exit codes: 0 created, 2 bad option or the ledger already exists.
    """
    paths = resolve_dir(directory, campaign)
    spec = CampaignSpec(
        campaign=campaign,
        metric=metric,
        direction=direction,
        target=target,
        max_experiments=max_experiments,
        deadline=deadline,
        per_run_timeout=per_run_timeout,
        compare_metric=compare_metric,
        compare_direction=compare_direction,
        branch_prefix=branch_prefix,
    )
    result = init_campaign(paths, spec)
    for warning in warnings_for(read_git(Path(".")), Path(".")):
        say(f"warning: {warning}", err=True)
    deadline_at = result.deadline_at()
    if deadline_at is not None and deadline_at <= now_utc():
        say(
            f"warning: --deadline {result.deadline} has already passed: `ngrp ledger status` will say STOP"
            " at once",
            err=True,
        )
    payload = {
        "ledger": str(paths.ledger),
        "campaign_file": str(paths.campaign),
        "campaign": result.to_json(),
    }
    emit(payload, as_json, lambda p: f"created {p['ledger']} and {p['campaign_file']}\n{_rules_text(result)}")


def _rules_text(c) -> str:
    parts = [f"target {c.target:g}" if c.target is not None else None]
    parts.append(
        f"max {c.max_experiments} runs, the baseline included" if c.max_experiments is not None else None
    )
    parts.append(f"deadline {c.deadline}" if c.deadline else None)
    parts.append(f"per-run timeout {c.per_run_timeout_min:g} min" if c.per_run_timeout_min else None)
    text = "stop rules: " + ", ".join(p for p in parts if p)
    text += " (default: baseline + 3 experiments, then ask)" if c.default_rule else ""
    return text + f"\nbranches: {c.prefix()}/<index>-<slug> (ngrp ledger branch)"


RECORD_HELP = """Append one run to the ledger, with a suggested keep/discard from a paired comparison.

The suggestion compares this run with the best kept run (or --compare-to): with both profiles,
`ngrp compare`'s paired 95% interval of the per-task difference (t; the exact constant-difference
bound when every task's difference is the same); keep only when it excludes zero in the
campaign's compare direction. Without profiles, only non-overlapping intervals count; without any
interval the suggestion is discard. A --status that disagrees is recorded with a note.
Crash rows carry metric 0.000000, memory 0.0 and no interval.

\b
Example:
  ngrp ledger record --campaign prompt-v2 --from-json stats.json \\
      --metric-key overall.mean_reward.task_weighted --profile run/rollouts_reward_profiling.jsonl \\
      --command "uv run run_grpo.py --config c.yaml" --log run/run.log --elapsed-min 71
  ngrp ledger record --campaign prompt-v2 --status crash --log run/run.log --description "OOM at step 3"

\b
Exit codes: 0 recorded, 2 bad option, 3 malformed ledger or campaign file, unreadable input,
or a metric that cannot be found (nothing is written then).
"""


@command.command("record", help=RECORD_HELP)
@campaign_option
@dir_option
@click.option(
    "--status",
    type=click.Choice(["auto", "keep", "discard", "crash"]),
    default="auto",
    show_default=True,
    help="auto takes the suggestion; keep/discard against it is recorded as an override.",
)
@click.option(
    "--from-json",
    "json_path",
    type=INPUT_FILE,
    help="A stats JSON (`ngrp stats --json`) or profile summary JSON holding the metric.",
)
@click.option(
    "--metric-key",
    help="Key path in --from-json: a.b.0.c, a list item by field (pass_at_k.k=4), or a JSON pointer /a/b.",
)
@click.option(
    "--ci-key", help="Key path of the metric's [low, high] interval (found next to the value if omitted)."
)
@click.option("--n-tasks-key", help="Key path of the number of tasks behind the metric.")
@click.option(
    "--profile",
    type=INPUT_FILE,
    help="This run's *_reward_profiling.jsonl: used for the paired comparison (and as the metric "
    "when no other source is given).",
)
@click.option(
    "--compare-metric",
    help="rollout_infos field compared between profiles (default: the campaign's, usually reward).",
)
@click.option("--compare-to", default="best", show_default=True, help="best, baseline, or a ledger index.")
@click.option("--log", "log_path", type=INPUT_FILE, help="The run's log file.")
@click.option(
    "--metric-regex", help="Regex for the metric in --log: group `value` (or group 1); last match wins."
)
@click.option(
    "--repo",
    type=FOLDER,
    default=Path("."),
    help="Git checkout of the run (read only).  [default: .]",
)
@click.option(
    "--parent-ref",
    help="Branch or commit the experiment forked from (parent_commit = merge-base; "
    "default: HEAD's first parent).",
)
@click.option("--branch", help="Override the branch read from git.")
@click.option("--commit", help="Override the commit read from git.")
@click.option("--recipe", default="", help="Recipe or config file of the run.")
@click.option("--command", "run_command", default="", help="The command that ran (secrets are scrubbed).")
@click.option("--description", default="", help="The hypothesis, in a few words (secrets are scrubbed).")
@click.option("--memory-gb", type=NON_NEGATIVE, help="Peak GPU memory.")
@click.option("--elapsed-min", type=NON_NEGATIVE, help="Wall-clock minutes of the run.")
@click.option(
    "--launcher", default="local", show_default=True, type=click.Choice(["local", "slurm", "nrl-k8s"])
)
@click.option("--job-id", default="none", show_default=True, help="Slurm or Ray job id.")
@click.option("--dry-run", is_flag=True, help="Show the row and the suggestion; write nothing.")
@json_option
def record_cmd(
    campaign,
    directory,
    status,
    json_path,
    metric_key,
    ci_key,
    n_tasks_key,
    profile,
    compare_metric,
    compare_to,
    log_path,
    metric_regex,
    repo,
    parent_ref,
    branch,
    commit,
    recipe,
    run_command,
    description,
    memory_gb,
    elapsed_min,
    launcher,
    job_id,
    dry_run,
    as_json,
):
    paths = resolve_dir(directory, campaign)
    source = MetricSource(
        json_path,
        metric_key,
        ci_key,
        n_tasks_key,
        log_path if metric_regex else None,
        metric_regex,
        profile,
        compare_metric,
    )
    run = RunInfo(
        status=status,
        repo=repo,
        parent_ref=parent_ref,
        recipe=recipe,
        command=run_command,
        description=description,
        memory_gb=memory_gb,
        elapsed_min=elapsed_min,
        launcher=launcher,
        job_id=job_id,
        log_path="" if log_path is None else str(log_path),
        compare_to=compare_to,
        branch=branch,
        commit=commit,
    )
    result = record_run(paths, run, source, dry_run=dry_run)
    for warning in result.warnings:
        say(f"warning: {warning}", err=True)
    emit(result, as_json, render_record)


@command.command("status")
@campaign_option
@dir_option
@json_option
def status_cmd(campaign, directory, as_json):
    """Attempted and remaining runs, time left, best so far, and whether a stop rule is met.

    Run it after every recorded run; loop while it exits 0.

    \b
    Example:
      ngrp ledger status --campaign prompt-v2
      while ngrp ledger status --campaign prompt-v2 --json > status.json; do run_next_experiment; done

    \b
    Exit codes: 0 no stop rule met (continue), 1 a stop rule is met (stop, summarise, hand over),
    2 bad option, 3 missing or malformed ledger or campaign file.
    """
    result = ledger_status(resolve_dir(directory, campaign))
    emit(result, as_json, render_status)
    return 1 if result.stop else 0


def _register() -> None:
    """The subcommands that live in their own modules."""
    from .ledger_amend import amend_cmd
    from .ledger_branch import branch_cmd
    from .ledger_run import run_cmd
    from .ledger_session import checkpoint_cmd, handoff_cmd

    for sub in (run_cmd, branch_cmd, checkpoint_cmd, handoff_cmd, amend_cmd):
        command.add_command(sub)


_register()
