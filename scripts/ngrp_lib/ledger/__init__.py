"""The research ledger: a TSV of experiment runs with stop rules and statistics behind every keep.

Library entry points (the `ngrp ledger` commands are thin shells around these):
`init_campaign`, `record_run`, `ledger_status`, `read_ledger`, `scrub`.
"""

from .campaign import Campaign, LedgerPaths, init_campaign, load_campaign, resolve_dir
from .record import MetricSource, RecordResult, RunInfo, record_run
from .scrub import scrub
from .status import LedgerStatus, ledger_status
from .table import COLUMNS, read_ledger

__all__ = [
    "COLUMNS",
    "Campaign",
    "LedgerPaths",
    "LedgerStatus",
    "MetricSource",
    "RecordResult",
    "RunInfo",
    "init_campaign",
    "ledger_status",
    "load_campaign",
    "read_ledger",
    "record_run",
    "resolve_dir",
    "scrub",
]
