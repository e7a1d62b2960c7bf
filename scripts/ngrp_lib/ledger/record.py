"""Record one run: read its metric, read git, suggest a status, scrub, append under the lock."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.opening import real_path
from ..artifacts.scrub import refuse_env_dump, scrub
from ..errors import InputError, UsageError
from . import runs, table
from .campaign import LedgerPaths, load_campaign
from .decide import Suggestion, suggest
from .gitinfo import NONE, GitInfo, read_git, warnings_for
from .metric import Reading, from_json, from_log, from_profile

LAUNCHERS = ("local", "slurm", "nrl-k8s")
MAX_FIELD = 4000  # a ledger row is a line in a table, not a log


@dataclass
class MetricSource:
    json_path: Path | None = None
    metric_key: str | None = None
    ci_key: str | None = None
    n_tasks_key: str | None = None
    log_path: Path | None = None
    metric_regex: str | None = None
    profile: Path | None = None
    compare_metric: str | None = None  # default: the campaign's

    def given(self) -> bool:
        return any(x is not None for x in (self.json_path, self.metric_regex, self.profile))


@dataclass
class RunInfo:
    status: str = "auto"  # keep, discard, crash or auto
    repo: Path = Path(".")
    parent_ref: str | None = None
    recipe: str = ""
    command: str = ""
    description: str = ""
    memory_gb: float | None = None
    elapsed_min: float | None = None
    launcher: str = "local"
    job_id: str = NONE
    log_path: str = ""
    compare_to: str = "best"
    branch: str | None = None  # overrides for runs recorded outside their checkout
    commit: str | None = None
    index: int | None = None  # the index a `ledger run` reserved; default: the next free one


@dataclass
class RecordResult:
    index: int
    status: str
    suggested: str | None
    reason: str
    overridden: bool
    row: dict
    ledger: str
    warnings: list[str] = field(default_factory=list)
    written: bool = True  # False for --dry-run
    sampling: dict | None = None  # with --profile: what the run's rows asked for (its profile summary)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def read_metric(source: MetricSource) -> Reading:
    if source.json_path is not None:
        if not source.metric_key:
            raise UsageError("--from-json needs --metric-key (a key path such as overall.mean_reward)")
        return from_json(
            source.json_path, source.metric_key, ci_key=source.ci_key, n_tasks_key=source.n_tasks_key
        )
    if source.metric_regex is not None:
        if source.log_path is None:
            raise UsageError("--metric-regex needs --log PATH")
        return from_log(source.log_path, source.metric_regex)
    if source.profile is not None:
        return from_profile(source.profile, source.compare_metric or "reward")
    raise UsageError(
        "no metric source: pass --from-json with --metric-key, --log with --metric-regex, or --profile",
        hint="if the run produced no metric, record it with --status crash",
    )


def sampling_beside(profile: Path) -> dict | None:
    """The sampling a profiled run's rows used, from the profile summary beside the profile."""
    from ..artifacts import jsonl
    from ..stats.cost import summary_beside

    source = summary_beside(profile)
    if source is None:
        return None
    try:
        summary = jsonl.read_json(source)
    except (InputError, OSError):
        return None
    sampling = summary.get("sampling") if isinstance(summary, dict) else None
    return sampling if isinstance(sampling, dict) else None


def _check_options(run: RunInfo) -> None:
    if run.status not in ("keep", "discard", "crash", "auto"):
        raise UsageError(f"--status must be keep, discard, crash or auto, not {run.status!r}")
    if run.launcher not in LAUNCHERS:
        raise UsageError(f"--launcher must be one of {', '.join(LAUNCHERS)}")
    if run.compare_to not in ("best", "baseline") and not run.compare_to.isdigit():
        raise UsageError("--compare-to must be best, baseline or a ledger index")
    for name in ("memory_gb", "elapsed_min"):  # the ledger's reader refuses what is not finite: so do we
        value = getattr(run, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"--{name.replace('_', '-')} must be a finite number >= 0, not {value}")
    for name in ("recipe", "command", "description"):
        refuse_env_dump(name, getattr(run, name))


def record_run(
    paths: LedgerPaths,
    run: RunInfo,
    source: MetricSource,
    *,
    dry_run: bool = False,
    reading: Reading | None = None,
    git: GitInfo | None = None,
) -> RecordResult:
    """Append one row (unless `dry_run`); everything is read and decided under the ledger lock.

    `reading` and `git` are given by a caller that has read them already (`ledger run`)."""
    _check_options(run)
    campaign = load_campaign(paths)
    git = git or read_git(run.repo, run.parent_ref)
    if run.parent_ref and git.commit != NONE and git.parent_commit == NONE:
        raise UsageError(f"--parent-ref {run.parent_ref!r} has no common ancestor with HEAD in {run.repo}")
    warnings = [] if run.branch and run.commit else warnings_for(git, run.repo)
    if run.status == "crash" and source.given():
        warnings.append("a crash row has no metric: the metric options were ignored")
    if run.status == "crash":
        reading = None
    elif reading is None:
        reading = read_metric(source)
    profile = None if source.profile is None else real_path(source.profile)
    with table.locked(paths.ledger):
        rows = table.read_ledger(paths.ledger)
        suggestion = None
        if reading is not None:
            suggestion = suggest(
                campaign,
                rows,
                reading,
                profile=profile,
                compare_to=run.compare_to,
                compare_metric=source.compare_metric,
                elapsed_min=run.elapsed_min,
            )
        status, note = _final_status(run.status, suggestion)
        index = _index(paths, rows, run.index)
        fields = _fields(index, campaign.metric, run, git, reading, profile, suggestion)
        if not dry_run:
            table.rewrite_with(paths.ledger, fields)
    return RecordResult(
        index=index,
        status=status,
        suggested=None if suggestion is None else suggestion.status,
        reason="crash: no metric" if suggestion is None else suggestion.reason,
        overridden=bool(note),
        row=table.LedgerRow(0, fields).to_json() | {"line": len(rows) + 2},
        ledger=str(paths.ledger),
        warnings=warnings,
        written=not dry_run,
        sampling=None if profile is None or reading is None else sampling_beside(profile),
    )


def _index(paths: LedgerPaths, rows: list[table.LedgerRow], wanted: int | None) -> int:
    if wanted is None:
        return runs.next_index(paths, rows)
    if any(r.index == wanted for r in rows):
        raise UsageError(f"index {wanted} is already in the ledger")
    return wanted


def _final_status(requested: str, suggestion: Suggestion | None) -> tuple[str, str]:
    if suggestion is None:
        return "crash", ""
    if requested in ("auto", suggestion.status):
        return suggestion.status, ""
    return requested, f"[override: suggested {suggestion.status}: {suggestion.reason}]"


def _clean(text: str) -> str:
    text = scrub(text)
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 15] + " ...[truncated]"


def _num(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _fields(
    index: int,
    metric_name: str,
    run: RunInfo,
    git: GitInfo,
    reading: Reading | None,
    profile: Path | None,
    suggestion: Suggestion | None,
) -> dict[str, str]:
    status, note = _final_status(run.status, suggestion)
    crash = reading is None
    description = " ".join(part for part in (run.description, note) if part)
    fields = {
        "index": str(index),
        "branch": run.branch or git.branch,
        "parent_commit": git.parent_commit,
        "commit": run.commit or git.commit,
        "recipe": run.recipe,
        "metric_name": metric_name,
        # The auto-research convention: crash rows carry 0.000000 and 0.0, never a real-looking value.
        "metric_value": "0.000000" if reading is None else repr(reading.value),
        "memory_gb": "0.0" if crash else _num(run.memory_gb, ".3f"),
        "elapsed_min": _num(run.elapsed_min, ".2f"),
        "launcher": run.launcher,
        "job_id": run.job_id or NONE,
        "command": run.command,
        "log_path": run.log_path,
        "status": status,
        "description": description,
        "ci_low": "" if reading is None or reading.ci_low is None else repr(reading.ci_low),
        "ci_high": "" if reading is None or reading.ci_high is None else repr(reading.ci_high),
        "n_tasks": "" if reading is None or reading.n_tasks is None else str(reading.n_tasks),
        "profile_path": "" if crash or profile is None else str(profile),
        "compared_to": "" if suggestion is None else suggestion.compared_to,
    }
    return {k: v if k in ("index", "status") else _clean(v) for k, v in fields.items()}
