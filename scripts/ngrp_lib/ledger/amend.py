"""`ledger amend`: change a campaign's stop rules after `init`, with the user's consent, on the record.

A campaign's stop rules are the user's budget, so they change only when the user says so: every change
names its reason (what the user agreed to), and is appended to the campaign file's `history` with its
time, the rule, the old and the new value. Nothing is changed silently, and the history is never
rewritten. `ledger status` shows the rules as they are now and how often they were amended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..artifacts.jsonl import write_json
from ..artifacts.scrub import scrub
from ..errors import UsageError
from . import table
from .campaign import Campaign, LedgerPaths, load_campaign, now_utc, parse_deadline, parse_duration_min


@dataclass
class Amendment:
    """The rules to change; None leaves a rule as it is."""

    reason: str
    max_experiments: int | None = None
    deadline: str | None = None  # ISO 8601, or a budget from now such as 2h
    target: float | None = None
    clear_target: bool = False
    per_run_timeout: str | None = None


def _changes(campaign: Campaign, change: Amendment, now: datetime) -> dict[str, Any]:
    """rule -> new value, checked as `init` checks it."""
    new: dict[str, Any] = {}
    if change.max_experiments is not None:
        if change.max_experiments < 1:
            raise UsageError("--max-experiments must be at least 1")
        new["max_experiments"] = change.max_experiments
    if change.deadline is not None:
        new["deadline"] = parse_deadline(change.deadline, now)
    if change.target is not None and change.clear_target:
        raise UsageError("--target and --clear-target exclude each other")
    if change.target is not None:
        if not math.isfinite(change.target):
            raise UsageError(f"--target must be a finite number, not {change.target}")
        new["target"] = change.target
    if change.clear_target:
        new["target"] = None
    if change.per_run_timeout is not None:
        new["per_run_timeout_min"] = parse_duration_min(change.per_run_timeout)
    return {rule: value for rule, value in new.items() if getattr(campaign, rule) != value}


def amend_campaign(paths: LedgerPaths, change: Amendment, now: datetime | None = None) -> dict[str, Any]:
    """Apply the changes under the ledger lock; return what changed (the history entries added) and the
    campaign as it is now. Refuses without a reason, or when nothing would change."""
    now = now or now_utc()
    if not change.reason.strip():
        raise UsageError(
            "--reason is required: say what the user agreed to (it is recorded with the change)",
            hint='for example --reason "user approved 3 more runs after the baseline came in low"',
        )
    with table.locked(paths.ledger):
        campaign = load_campaign(paths)
        new = _changes(campaign, change, now)
        if not new:
            raise UsageError(
                "nothing to amend: give a stop rule that differs from the campaign's "
                "(--max-experiments, --deadline, --target, --clear-target, --per-run-timeout)"
            )
        at = now.isoformat(timespec="seconds")
        entries = [
            {
                "at": at,
                "rule": rule,
                "old": getattr(campaign, rule),
                "new": value,
                "reason": scrub(change.reason.strip()),  # stored and pasted: no secrets
            }
            for rule, value in new.items()
        ]
        for rule, value in new.items():
            setattr(campaign, rule, value)
        campaign.default_rule = False  # the rules are the user's now
        campaign.history = [*campaign.history, *entries]
        write_json(paths.campaign, campaign.to_json(), overwrite=True, indent=True)  # under the ledger lock
    return {"campaign_file": str(paths.campaign), "changes": entries, "campaign": campaign.to_json()}
