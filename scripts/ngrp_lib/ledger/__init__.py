"""The research ledger: a TSV of experiment runs with stop rules and statistics behind every keep.

Library entry points (the `ngrp ledger` commands are thin shells around these): `init_campaign`,
`record_run`, `ledger_status`, `read_ledger`, `scrub`; `run_experiment` (run one command, classify
how it ended, record it), `create_branch` (one git branch per hypothesis), `write_checkpoint` and
`gather_handoff` (session memory).
"""

from ..artifacts.scrub import scrub
from .branch import BranchResult, create_branch
from .campaign import Campaign, CampaignSpec, LedgerPaths, init_campaign, load_campaign, resolve_dir
from .checkpoint import CheckpointResult
from .checkpoint import checkpoint as write_checkpoint
from .handoff import Handoff
from .handoff import gather as gather_handoff
from .record import MetricSource, RecordResult, RunInfo, record_run
from .run import RunResult, StopRuleMet, run_experiment
from .run_request import RunRequest
from .status import LedgerStatus, ledger_status
from .table import COLUMNS, read_ledger

__all__ = [
    "COLUMNS",
    "BranchResult",
    "Campaign",
    "CheckpointResult",
    "Handoff",
    "LedgerPaths",
    "LedgerStatus",
    "CampaignSpec",
    "MetricSource",
    "RecordResult",
    "RunInfo",
    "RunRequest",
    "RunResult",
    "StopRuleMet",
    "create_branch",
    "gather_handoff",
    "init_campaign",
    "ledger_status",
    "load_campaign",
    "read_ledger",
    "record_run",
    "resolve_dir",
    "run_experiment",
    "scrub",
    "write_checkpoint",
]
