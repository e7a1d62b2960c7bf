"""Where the campaign stands, and whether a stop rule is met (the check an agent loops on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import runs, table
from .campaign import Campaign, LedgerPaths, load_campaign, now_utc
from .decide import baseline_row, best_row
from .runs import OpenRun

STATUS_SCHEMA = "ngrp.ledger_status.v1"


@dataclass
class Rule:
    rule: str  # target, max_experiments, deadline
    met: bool
    detail: str


@dataclass
class LedgerStatus:
    campaign: str
    metric: str
    direction: str
    ledger: str
    now: str
    attempted: int
    counts: dict[str, int]
    remaining: int | None
    time_left_min: float | None
    runs_that_fit: int | None  # whole per-run timeouts left before the deadline
    per_run_timeout_min: float | None
    overruns: int
    best: dict | None
    baseline: dict | None
    latest: dict | None
    rules: list[Rule] = field(default_factory=list)
    stop: bool = False
    default_rule: bool = False
    branch_prefix: str = ""
    runs: list[dict] = field(default_factory=list)  # every row, briefly, in index order
    open_runs: list[OpenRun] = field(default_factory=list)  # started by `ledger run`, not recorded
    amendments: list[dict] = field(default_factory=list)  # the campaign's stop-rule history (ledger amend)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"schema": STATUS_SCHEMA}
        out.update(
            {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("rules", "open_runs")}
        )
        out["rules"] = [vars(rule) for rule in self.rules]
        out["open_runs"] = [run.to_json() for run in self.open_runs]
        return out


def _brief(row: table.LedgerRow | None) -> dict | None:
    return None if row is None else _brief_row(row)


def _brief_row(row: table.LedgerRow) -> dict:
    keys = (
        "index",
        "branch",
        "commit",
        "metric_value",
        "ci_low",
        "ci_high",
        "n_tasks",
        "status",
        "description",
    )
    data = row.to_json()
    return {k: data[k] for k in keys}


def stop_rules(
    campaign: Campaign, attempted: int, best: table.LedgerRow | None, now: datetime, running: int = 0
) -> list[Rule]:
    """Each stop rule with whether it is met. `running` runs still going count as attempted."""
    rules: list[Rule] = []
    if campaign.target is not None:
        value = None if best is None else best.number("metric_value")
        if best is None or value is None:
            rules.append(Rule("target", False, f"target {campaign.target:g}: no scored run yet"))
        else:
            met = value >= campaign.target if campaign.direction == "max" else value <= campaign.target
            word = "reached" if met else "not reached"
            detail = f"target {campaign.target:g} {word}: best #{best.index} = {value:.6g}"
            low, high = best.number("ci_low"), best.number("ci_high")
            if low is not None and high is not None:
                detail += f" (95% CI [{low:.6g}, {high:.6g}])"
            rules.append(Rule("target", met, detail))
    if campaign.max_experiments is not None:
        met = attempted + running >= campaign.max_experiments
        going = f" + {running} running" if running else ""
        text = f"{attempted}{going}/{campaign.max_experiments} attempted (the baseline counts)"
        rules.append(Rule("max_experiments", met, text))
    deadline = campaign.deadline_at()
    if deadline is not None:
        left = (deadline - now).total_seconds() / 60.0
        timeout = campaign.per_run_timeout_min
        if left <= 0:
            rules.append(Rule("deadline", True, f"deadline {campaign.deadline} passed"))
        elif timeout is not None and left < timeout:
            text = f"{format_minutes(left)} left, less than one run ({format_minutes(timeout)})"
            rules.append(Rule("deadline", True, text))
        else:
            rules.append(Rule("deadline", False, f"{format_minutes(left)} left until {campaign.deadline}"))
    return rules


def _runs_that_fit(deadline: datetime | None, timeout: float | None, now: datetime) -> int | None:
    if deadline is None or timeout is None:
        return None
    return max(0, int((deadline - now).total_seconds() / 60.0 // timeout))


def format_minutes(minutes: float) -> str:
    total = max(0, int(round(minutes)))
    days, rest = divmod(total, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h{mins:02d}m"
    return f"{hours}h{mins:02d}m" if hours else f"{mins}m"


def ledger_status(paths: LedgerPaths, now: datetime | None = None) -> LedgerStatus:
    now = now or now_utc()
    campaign = load_campaign(paths)
    rows = table.read_ledger(paths.ledger)
    attempted = len(rows)
    counts = {s: sum(r.status == s for r in rows) for s in table.STATUSES}
    best = best_row(rows, campaign.direction)
    deadline = campaign.deadline_at()
    timeout = campaign.per_run_timeout_min
    overruns = sum(1 for r in rows if timeout is not None and (r.number("elapsed_min") or 0.0) > timeout)
    open_now = runs.open_runs(paths, rows)
    rules = stop_rules(campaign, attempted, best, now, len(runs.live(open_now)))
    return LedgerStatus(
        campaign=campaign.campaign,
        metric=campaign.metric,
        direction=campaign.direction,
        ledger=str(paths.ledger),
        now=now.isoformat(timespec="seconds"),
        attempted=attempted,
        counts=counts,
        remaining=None if campaign.max_experiments is None else max(0, campaign.max_experiments - attempted),
        time_left_min=None if deadline is None else round((deadline - now).total_seconds() / 60.0, 2),
        runs_that_fit=_runs_that_fit(deadline, timeout, now),
        per_run_timeout_min=timeout,
        overruns=overruns,
        best=_brief(best),
        baseline=_brief(baseline_row(rows)),
        latest=_brief(max(rows, key=lambda r: r.index) if rows else None),
        rules=rules,
        stop=any(rule.met for rule in rules),
        default_rule=campaign.default_rule,
        branch_prefix=campaign.prefix(),
        runs=[_brief_row(row) for row in sorted(rows, key=lambda r: r.index)],
        open_runs=open_now,
        amendments=list(campaign.history),
    )
