"""`ngrp ledger status` as text."""

from __future__ import annotations

from ..ledger.status import LedgerStatus, format_minutes

RUNS_SHOWN = 50  # the text lists the latest runs; --json lists every one


def render(status: LedgerStatus) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in status.counts.items())
    lines = [f"campaign {status.campaign}: {status.metric} ({status.direction}), ledger {status.ledger}"]
    budget = f"{status.attempted} attempted ({counts})"
    if status.remaining is not None:
        budget += f", {status.remaining} remaining"
    if status.time_left_min is not None:
        budget += f", {format_minutes(status.time_left_min)} left"
    if status.runs_that_fit is not None:
        budget += f" (room for {status.runs_that_fit} more run(s))"
    lines.append(budget)
    for label, row in (("best", status.best), ("latest", status.latest)):
        if row is not None:
            lines.append(f"{label}: #{row['index']} {row['branch']} {row['status']} {_value(row)}")
    if status.runs:
        shown = status.runs[-RUNS_SHOWN:]
        more = len(status.runs) - len(shown)
        lines.append(
            "runs (index, branch, status, metric):" + (f" ({more} earlier: see --json)" if more else "")
        )
        lines.extend(f"  #{r['index']} {r['branch']} {r['status']} {_value(r)}{_about(r)}" for r in shown)
    for run in status.open_runs:
        owner = {True: "running", False: "stale: its ngrp process is gone", None: "on another host"}
        lines.append(f"open: #{run.index} {owner[run.owner_alive]}, started {run.started_at}, log {run.log}")
    if status.overruns:
        lines.append(f"{status.overruns} run(s) overran the per-run timeout (counted as failures)")
    for rule in status.rules:
        lines.append(f"  [{'MET' if rule.met else ' - '}] {rule.rule}: {rule.detail}")
    if status.default_rule:
        lines.append(
            "  (no stop rule was given: default is the baseline plus 3 experiments, then ask the user)"
        )
    if status.amendments:
        last = status.amendments[-1]
        lines.append(
            f"  stop rules amended {len(status.amendments)} time(s); last {last['at']}: {last['rule']} "
            f"{last['old']} -> {last['new']} ({last['reason']})"
        )
    verdict = "STOP: a stop rule is met" if status.stop else "stop condition not yet met: continue"
    lines.append(verdict)
    return "\n".join(lines)


def _about(row: dict) -> str:
    text = row["description"].replace("\n", " ")
    return "" if not text else f"  {text[:77]}..." if len(text) > 80 else f"  {text}"


def _value(row: dict) -> str:
    if row["status"] == "crash":
        return "(no metric)"
    text = f"{row['metric_value']:.6g}"
    if row["ci_low"] is not None and row["ci_high"] is not None:
        text += f" [{row['ci_low']:.6g}, {row['ci_high']:.6g}]"
    return text
