"""`ngrp ledger run`: run one experiment under the campaign's rules and record it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..artifacts.terminal import say
from ..ledger import resolve_dir
from ..ledger.run import RunResult, run_experiment
from ..ledger.run_request import RunRequest
from ._common import DELAY, FOLDER, INPUT_FILE, emit, json_option
from .ledger_common import campaign_option, dir_option, render_record

RUN_HELP = """Run one experiment, classify how it ended, and record it in the ledger.

Refuses to start (exit 1, naming the rule) when a stop rule is met; runs still going count as
attempted. The command runs in its own process group (stdin /dev/null), its stdout and stderr
teed to <ledger>/logs/<index>/run.log (and to stderr unless --quiet). At the timeout the whole group gets
SIGTERM, then SIGKILL after --grace; Ctrl-C does the same and the run is still recorded. The
command sees NGRP_LEDGER_INDEX, NGRP_LEDGER_RUN_DIR (write artifacts there) and
NGRP_LEDGER_CAMPAIGN.

\b
How it ended (run_class):
  ok         exit 0 and the metric was read: recorded with record's rules
             (paired keep/discard against the best run when --profile is given)
  timeout    stopped at the timeout
  oom        out-of-memory text in the log's tail (CUDA OOM...), or SIGKILL /
             exit 137 with no timeout (the kernel's OOM killer)
  nan        a non-finite loss or metric in the log, or a non-finite metric
  killed     ended by a signal, stopped with Ctrl-C, or a cancelled Slurm job
  exit:N     exited with status N
  no_metric  exit 0 but extraction found nothing: read the log's tail (shown)

Every class but ok is a crash row, with the class and its evidence in the description.
memory_gb is the peak GPU memory of the run's processes where nvidia-smi exists, else the
process tree's peak resident memory (both sampled). With --launcher slurm the command is
submitted with `sbatch --wait` (the log must be on a file system the compute node shares) and
classified from the job's state (scontrol) and its log; the timeout counts from when the job
starts running. SLURM_JOB_ID, when set (a run inside an allocation), is recorded as job_id.

\b
Example:
  ngrp ledger run --campaign prompt-v2 --timeout 90m --description "prompt: compact" \\
      --metric-from-json '{run_dir}/stats.json' --metric-key overall.mean_reward.task_weighted \\
      --profile '{run_dir}/rollouts_reward_profiling.jsonl' -- bash run_exp3.sh
  ngrp ledger run --campaign dapo --metric-regex 'val/reward=(?P<value>[0-9.]+)' \\
      --launcher slurm --sbatch-arg=--gres=gpu:8 -- uv run examples/run_grpo.py --config c.yaml

\b
Exit codes: 0 the run was recorded (whatever its class: read run_class), 1 refused because a
stop rule is met (nothing ran), 2 bad option or command not found, 3 missing or malformed
ledger or campaign file, 130 stopped by Ctrl-C or SIGTERM (the run was recorded as killed).
"""


@click.command("run", context_settings={"allow_interspersed_args": False}, help=RUN_HELP)
@campaign_option
@dir_option
@click.option("--timeout", help="Per-run timeout (90m, 2h, 45s). Default: the campaign's --per-run-timeout.")
@click.option(
    "--grace",
    "grace_s",
    type=DELAY,
    default=30.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL at the timeout.",
)
@click.option(
    "--metric-regex",
    help="Regex for the metric in the run's log: group `value` (or group 1); last match wins.",
)
@click.option(
    "--metric-from-json",
    "metric_json",
    type=INPUT_FILE,
    help="A JSON the run writes (e.g. `ngrp stats --json` output), read after it ends. "
    "{run_dir} and {index} stand for the run's folder and index.",
)
@click.option("--metric-key", help="Key path in --metric-from-json, e.g. overall.pass_at_k.k=1.")
@click.option("--ci-key", help="Key path of the metric's [low, high] interval in --metric-from-json.")
@click.option("--n-tasks-key", help="Key path of the number of tasks behind the metric.")
@click.option(
    "--profile",
    type=INPUT_FILE,
    help="The *_reward_profiling.jsonl the run writes: paired keep/discard against the best run "
    "(and the metric when no other source is given). Give each run its own path ({run_dir} helps).",
)
@click.option(
    "--compare-metric", help="rollout_infos field compared between profiles (default: the campaign's)."
)
@click.option("--compare-to", default="best", show_default=True, help="best, baseline, or a ledger index.")
@click.option("--description", default="", help="The hypothesis, in a few words (secrets are scrubbed).")
@click.option("--recipe", default="", help="Recipe or config file of the run.")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True)
@click.option(
    "--sbatch-arg",
    "sbatch_args",
    multiple=True,
    help="An option for sbatch with --launcher slurm (repeatable), e.g. --sbatch-arg=--gres=gpu:8.",
)
@click.option(
    "--repo",
    type=FOLDER,
    default=Path("."),
    help="Git checkout of the run (read only).  [default: .]",
)
@click.option(
    "--parent-ref", help="Branch or commit the experiment forked from (parent_commit = merge-base)."
)
@click.option(
    "--quiet",
    is_flag=True,
    help="Write the output to the log only (no tee to stderr): keeps a long run out of your context.",
)
@json_option
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND [ARGS]...")
def run_cmd(campaign, directory, quiet, as_json, argv, sbatch_args, metric_json, **options) -> int:
    paths = resolve_dir(directory, campaign)
    printed: list[str] = []

    def warn(text: str) -> None:
        if text not in printed:
            printed.append(text)
            say(f"warning: {text}", err=True)

    request = RunRequest(
        argv=list(argv),
        metric_json=metric_json,
        sbatch_args=list(sbatch_args),
        echo=None if quiet else sys.stderr.buffer,
        notify=warn,
        **options,
    )
    result = run_experiment(paths, request)
    for warning in result.warnings:
        warn(warning)
    emit(result, as_json, render_run)
    return 130 if result.interrupted else 0


def render_run(result: RunResult) -> str:
    out = result.outcome
    head = f"run #{result.index}: {result.run_class} ({result.detail})"
    if result.evidence:
        head += f"\n  evidence: {result.evidence}"
    if result.memory_source == "gpu":
        memory = f", peak GPU memory {out['peak_gpu_mib'] / 1024:.2f} GB"
    elif result.memory_source == "host_rss":
        memory = f", peak memory {out['peak_rss_bytes'] / 2**30:.2f} GB (host RSS, sampled)"
    else:
        memory = ", memory not measured"
    lines = [head, f"  {out['elapsed_s'] / 60:.2f} min{memory}; log {result.log}"]
    if out.get("job_id"):
        lines.append(f"  Slurm job {out['job_id']} {out.get('state') or ''}".rstrip())
    lines.extend(f"  note: {note}" for note in out.get("notes", []))
    if result.status == "crash":
        record = result.record
        lines.append(f"recorded #{record.index} {record.row['branch']} crash ({result.run_class})")
        lines.append(f"  ledger: {record.ledger}\n  next: ngrp ledger status")
    else:
        lines.append(render_record(result.record))
    if result.log_tail:
        lines.append("  last lines of the log:")
        lines.extend(f"  | {line}" for line in result.log_tail[-10:])
    return "\n".join(lines)
