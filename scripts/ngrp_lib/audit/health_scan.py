"""What `run_health` gathers before it reduces: the failures sidecar per key, and the scan of the rollouts
file (one digest per line). Its own module, below both `health` (which fills them) and `health_summary`
(which reduces them), so that neither imports the other's private types.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .health_checks import Digest


@dataclass
class SidecarFailures:
    """The failures sidecar, per key: attempts, the last attempt's class and line, HTTP statuses."""

    path: Path | None
    rows: int = 0
    unreadable: int = 0
    by_key: dict[Any, list[Any]] = field(default_factory=dict)  # packed -> [attempts, class, line, key]
    call_errors: Counter = field(default_factory=Counter)  # packed key -> failed model-call attempts
    statuses: Counter = field(default_factory=Counter)


@dataclass
class RolloutScan:
    """The rollouts file as read: one digest per line, counts of rows, blank and unreadable lines."""

    digests: list[Digest] = field(default_factory=list)
    rows: int = 0
    blank_lines: int = 0
    unreadable: int = 0
    seen: set = field(default_factory=set)  # packed keys with a rollout row
