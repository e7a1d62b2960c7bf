"""What `ledger run` is asked to do, checked before anything runs: the command, its metric source,
its timeout (never past the campaign's deadline)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from ..artifacts.scrub import refuse_env_dump
from ..errors import UsageError
from .campaign import Campaign, parse_duration_min
from .record import MetricSource


@dataclass
class RunRequest:
    argv: list[str]
    timeout: str | None = None  # a duration; default: the campaign's per-run timeout
    grace_s: float = 30.0
    metric_regex: str | None = None
    metric_json: Path | None = None
    metric_key: str | None = None
    ci_key: str | None = None
    n_tasks_key: str | None = None
    profile: Path | None = None
    compare_metric: str | None = None
    compare_to: str = "best"
    description: str = ""
    recipe: str = ""
    launcher: str = "local"
    sbatch_args: list[str] = field(default_factory=list)
    repo: Path = Path(".")
    parent_ref: str | None = None
    echo: BinaryIO | None = None  # where the command's output is teed besides the log (None: log only)
    notify: Callable[[str], None] | None = None  # told each warning before the run starts


def expand(path: Path | None, index: int, run_dir: Path) -> Path | None:
    """`{run_dir}` and `{index}` in a --profile or --metric-from-json path: the run's own folder and index."""
    if path is None:
        return None
    return Path(str(path).replace("{run_dir}", str(run_dir)).replace("{index}", str(index)))


def metric_source(req: RunRequest, log: Path, index: int) -> MetricSource:
    """Where the finished run's metric is read: its own log for --metric-regex, the files it wrote."""
    return MetricSource(
        json_path=expand(req.metric_json, index, log.parent),
        metric_key=req.metric_key,
        ci_key=req.ci_key,
        n_tasks_key=req.n_tasks_key,
        log_path=log if req.metric_regex else None,
        metric_regex=req.metric_regex,
        profile=expand(req.profile, index, log.parent),
        compare_metric=req.compare_metric,
    )


def check_request(req: RunRequest) -> None:
    """Everything that can be refused before anything runs (exit 2)."""
    if not req.argv:
        raise UsageError(
            "no command to run", hint="put it after --: ngrp ledger run --campaign C -- CMD ARGS"
        )
    if req.launcher not in ("local", "slurm"):
        raise UsageError(f"--launcher must be local or slurm, not {req.launcher!r}")
    if req.metric_json is not None and not req.metric_key:
        raise UsageError("--metric-from-json needs --metric-key (a key path such as overall.mean_reward)")
    if req.metric_json is not None and req.metric_regex is not None:
        raise UsageError("give one metric source: --metric-regex or --metric-from-json, not both")
    if req.metric_json is None and req.metric_regex is None and req.profile is None:
        raise UsageError(
            "no metric source: pass --metric-regex RE (read from the run's log), "
            "--metric-from-json FILE --metric-key K, or --profile FILE",
            hint="without one, every run would be recorded as no_metric",
        )
    if req.metric_regex is not None:
        try:
            re.compile(req.metric_regex)
        except re.error as exc:
            raise UsageError(f"--metric-regex is not a valid regular expression: {exc}") from None
    if not (req.grace_s >= 0 and req.grace_s < 86400):
        raise UsageError(f"--grace must be between 0 and 86400 seconds, not {req.grace_s}")
    for name in ("description", "recipe"):
        refuse_env_dump(name, getattr(req, name))
    if req.launcher == "local" and _executable(req.argv[0]) is None:
        raise UsageError(f"command not found: {req.argv[0]!r}", hint="give its path, or check PATH")
    if req.launcher == "slurm" and shutil.which("sbatch") is None:
        raise UsageError("--launcher slurm needs sbatch, which is not on PATH")


def _executable(name: str) -> str | None:
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name)


def timeout_seconds(req: RunRequest, campaign: Campaign, now: datetime, warnings: list[str]) -> float | None:
    """The run's timeout: --timeout, else the campaign's; never past the campaign's deadline."""
    seconds: float | None
    if req.timeout is not None:
        seconds = parse_duration_min(req.timeout) * 60.0
        if not seconds > 0:
            raise UsageError(f"--timeout must be more than zero, not {req.timeout!r}")
        limit = campaign.per_run_timeout_min
        if limit is not None and seconds > limit * 60.0:
            longer = f"--timeout {req.timeout} is longer than the campaign's per-run timeout ({limit:g} min)"
            warnings.append(f"{longer}: a run that overruns it counts as a failure")
    else:
        seconds = None if campaign.per_run_timeout_min is None else campaign.per_run_timeout_min * 60.0
    deadline = campaign.deadline_at()
    if deadline is not None:
        left = (deadline - now).total_seconds()
        if seconds is None or left < seconds:
            warnings.append(f"the timeout is cut to the campaign deadline ({left / 60:.1f} min left)")
            seconds = left
    if seconds is None:
        warnings.append("no timeout: neither --timeout nor a campaign per-run timeout is set")
    return seconds
