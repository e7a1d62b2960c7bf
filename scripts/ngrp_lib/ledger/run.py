"""`ledger run`: check the stop rules, run one experiment, classify how it ended, record it.

The stop-rule check and the reservation of the run's index happen under the ledger lock, so two runs
started at once never share an index and never both take the last slot of the budget. The row is
written with `record`'s rules: a paired keep/discard suggestion for a run that produced its metric,
a crash row (class in the description) for every other ending. `logs/<index>/run.json` says what
happened, whatever the ending, before and after the row is written.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..artifacts.scrub import environment_secrets, mask_file, scrub
from ..errors import FindingsError, InputError, NgrpError, UsageError
from . import runs, table
from .campaign import Campaign, LedgerPaths, load_campaign, now_utc
from .classify import Verdict, classify_end, classify_success, read_tail, tail_lines
from .decide import best_row
from .gitinfo import NONE, GitInfo, changed_paths, read_git, toplevel, warnings_for
from .metric import NonFiniteMetric, Reading
from .outcome import ESCAPED, Outcome, StopRequest, Watch
from .record import MetricSource, RecordResult, RunInfo, read_metric, record_run
from .run_request import RunRequest, check_request, metric_source, timeout_seconds
from .status import stop_rules

RESULT_SCHEMA = "ngrp.ledger_run_result.v1"


class StopRuleMet(FindingsError):
    """A stop rule is met: no run is started (exit 1)."""


@dataclass
class RunResult:
    index: int
    run_class: str  # ok, timeout, oom, nan, killed, exit:N, no_metric
    detail: str
    evidence: str
    status: str  # the ledger status written: keep, discard, crash
    log: str
    run_dir: str
    outcome: dict[str, Any]
    record: RecordResult
    memory_source: str | None  # gpu, host_rss, or None when not measured
    log_tail: list[str]  # the log's last lines (scrubbed) for every class but ok
    warnings: list[str]

    @property
    def interrupted(self) -> bool:
        return bool(self.outcome.get("stopped_by"))

    def to_json(self) -> dict[str, Any]:
        out = {"schema": RESULT_SCHEMA, **{k: getattr(self, k) for k in self.__dataclass_fields__}}
        out["record"] = self.record.to_json()
        return out


def memory_of(outcome: Outcome) -> tuple[float | None, str | None]:
    """memory_gb for the row: GPU memory where nvidia-smi saw the run, else the tree's resident memory."""
    if outcome.peak_gpu_mib is not None:
        return outcome.peak_gpu_mib / 1024.0, "gpu"
    if outcome.peak_rss_bytes is not None:
        return outcome.peak_rss_bytes / 2**30, "host_rss"
    return None, None


def _reserve(paths: LedgerPaths, campaign: Campaign, now: datetime) -> runs.RunSlot:
    """Refuse when a stop rule is met (running runs count as attempted), else reserve the index."""
    with table.locked(paths.ledger):
        rows = table.read_ledger(paths.ledger)
        going = len(runs.live(runs.open_runs(paths, rows)))
        rules = stop_rules(campaign, len(rows), best_row(rows, campaign.direction), now, going)
        met = [rule for rule in rules if rule.met]
        if met:
            raise StopRuleMet(
                f"refusing to start: stop rule {met[0].rule} is met ({met[0].detail})",
                hint="summarise the campaign and ask the user; with their consent: ngrp ledger amend "
                "--reason '...' (ngrp ledger status is the probe: exit 0 may launch)",
            )
        return runs.reserve(paths, rows)


def run_experiment(paths: LedgerPaths, req: RunRequest, *, now: datetime | None = None) -> RunResult:
    """Run `req.argv` as the campaign's next experiment and record it."""
    check_request(req)
    campaign = load_campaign(paths)
    now = now or now_utc()
    warnings: list[str] = []
    timeout_s = timeout_seconds(req, campaign, now, warnings)
    git = read_git(req.repo, req.parent_ref)
    warnings.extend(warnings_for(git, req.repo))
    for warning in warnings:
        if req.notify is not None:
            req.notify(warning)
    slot = _reserve(paths, campaign, now)
    return _Experiment(paths, req, campaign, slot, git, timeout_s, warnings).run(now)


class _Experiment:
    def __init__(
        self,
        paths: LedgerPaths,
        req: RunRequest,
        campaign: Campaign,
        slot: runs.RunSlot,
        git: GitInfo,
        timeout_s: float | None,
        warnings: list[str],
    ) -> None:
        self.paths, self.req, self.campaign, self.slot = paths, req, campaign, slot
        self.git, self.timeout_s, self.warnings = git, timeout_s, warnings
        self.note: dict[str, Any] = {}

    def run(self, now: datetime) -> RunResult:
        req = self.req
        self.note = {
            **runs.process_identity(),
            "state": "running",
            "started_at": now.isoformat(timespec="seconds"),
            "command": scrub(shlex.join(req.argv)),
            "cwd": str(Path.cwd()),
            "launcher": req.launcher,
            "job_id": os.environ.get("SLURM_JOB_ID") or NONE,
            "timeout_s": self.timeout_s,
            "branch": self.git.branch,
            "commit": self.git.commit,
            "description": scrub(req.description),
        }
        runs.write_record(self.slot, self.note)
        before = set(changed_paths(req.repo) or [])
        with StopRequest() as stop:  # from here on, Ctrl-C stops the run and the run is still recorded
            try:
                outcome = self._launch(stop)
            except (OSError, UsageError):  # it never started: give the index back
                runs.release(self.slot)
                raise
            return self._conclude(outcome, before)

    def _launch(self, stop: StopRequest) -> Outcome:
        req, slot = self.req, self.slot
        env = {
            **os.environ,
            "NGRP_LEDGER_INDEX": str(slot.index),
            "NGRP_LEDGER_RUN_DIR": str(slot.folder.resolve()),
            "NGRP_LEDGER_CAMPAIGN": self.campaign.campaign,
        }
        watch = Watch(self.timeout_s, req.grace_s, req.echo, env, stop, self._started)
        if req.launcher == "slurm":
            from .slurm import run_slurm

            name = f"ngrp-{self.campaign.campaign}-{slot.index}"
            try:
                return run_slurm(req.argv, slot.log, watch, job_name=name, sbatch_args=req.sbatch_args)
            finally:  # Slurm wrote the log itself: its secret values are masked once the job is over
                mask_file(slot.log, environment_secrets(env))
        from .local import run_local

        return run_local(req.argv, slot.log, watch)

    def _started(self, handle: dict[str, Any]) -> None:
        """The command's process group (or Slurm job id) in run.json: what to stop if ngrp dies."""
        self.note.update(handle)
        runs.write_record(self.slot, self.note)

    def _conclude(self, outcome: Outcome, before: set[str]) -> RunResult:
        verdict, reading = self._verdict(outcome)
        if outcome.job_id:
            self.note["job_id"] = outcome.job_id
        self.note.update(
            run_class=verdict.run_class,
            detail=verdict.detail,
            evidence=verdict.evidence,
            outcome=outcome.to_json(),
            files_changed=self._changed(before),
            ended_at=now_utc().isoformat(timespec="seconds"),
        )
        record = self._record(outcome, verdict, reading)
        self.note.update(state="recorded", status=record.status)
        runs.write_record(self.slot, self.note)
        return RunResult(
            index=self.slot.index,
            run_class=verdict.run_class,
            detail=verdict.detail,
            evidence=verdict.evidence,
            status=record.status,
            log=str(self.slot.log),
            run_dir=str(self.slot.folder),
            outcome=outcome.to_json(),
            record=record,
            memory_source=memory_of(outcome)[1],
            log_tail=[] if verdict.run_class == "ok" else tail_lines(read_tail(self.slot.log, 65536)),
            warnings=self.warnings + [w for w in record.warnings if w not in self.warnings],
        )

    def _verdict(self, outcome: Outcome) -> tuple[Verdict, Reading | None]:
        log = self.slot.log
        tail = read_tail(log)
        ended = classify_end(outcome, tail, self.timeout_s)
        if ended is not None:
            return ended, None
        try:
            reading = read_metric(metric_source(self.req, log, self.slot.index))
        except InputError as exc:  # no match, no such key, a file the run did not write, or nan
            text = exc.detail if exc.path == log else exc.message + (f"; {exc.hint}" if exc.hint else "")
            return classify_success(tail, text, isinstance(exc, NonFiniteMetric), log), None
        verdict = classify_success(tail, None, False, log)
        return verdict, reading if verdict.run_class == "ok" else None

    def _changed(self, before: set[str]) -> list[str]:
        """Paths git saw change while the run went (the ledger's own folder left out)."""
        top = toplevel(self.req.repo)
        if top is None:
            return []
        ledger = self.paths.dir.resolve()
        after = set(changed_paths(self.req.repo) or [])
        return [p for p in sorted(after - before) if not (top / p).resolve().is_relative_to(ledger)]

    def _record(self, outcome: Outcome, verdict: Verdict, reading: Reading | None) -> RecordResult:
        req, ok = self.req, verdict.run_class == "ok"
        description = " ".join(part for part in (req.description, f"[{verdict.text()}]") if part)
        escaped = [f"[{note}]" for note in outcome.notes if note.startswith(ESCAPED)]
        if escaped:  # the row says so whatever the class: something of the run may still be running
            description = " ".join([req.description if ok else description, *escaped]).strip()
            ok_description = description
        else:
            ok_description = req.description
        info = RunInfo(
            status="auto" if ok else "crash",
            repo=req.repo,
            parent_ref=req.parent_ref,
            recipe=req.recipe,
            command=shlex.join(req.argv),
            description=ok_description if ok else description,
            memory_gb=memory_of(outcome)[0],
            elapsed_min=outcome.elapsed_s / 60.0,
            launcher="slurm" if req.launcher == "slurm" or os.environ.get("SLURM_JOB_ID") else "local",
            job_id=str(self.note["job_id"]),
            log_path=str(self.slot.log),
            compare_to=req.compare_to,
            index=self.slot.index,
        )
        source = metric_source(req, self.slot.log, self.slot.index) if ok else MetricSource()
        if source.profile is not None and not source.profile.is_file():
            self.warnings.append(
                f"--profile {source.profile} was not written by the run: no paired comparison"
            )
            source.profile = None
        try:
            return record_run(self.paths, info, source, reading=reading, git=self.git)
        except NgrpError as exc:
            self.note.update(state="unrecorded", error=scrub(exc.message))
            runs.write_record(self.slot, self.note)
            where = f"the run is described in {self.slot.record}: record it by hand with `ngrp ledger record`"
            exc.hint = f"{exc.hint}; {where}" if exc.hint else where
            raise
