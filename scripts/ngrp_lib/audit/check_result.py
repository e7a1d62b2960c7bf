"""What `ngrp check` found: per-file line statistics, findings with their fixes, and the result record."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .. import __version__
from ..artifacts.failures import FailureSummary

ERROR, WARNING, NOTE = "error", "warning", "note"
EXAMPLES = 10
AGENT_BITS = 20  # an expected key's value packs (first line << 20) | agent id


@dataclass
class FileStats:
    """What one file held, line by line."""

    path: str
    lines: int = 0
    rows: int = 0
    blank_lines: int = 0
    invalid_lines: int = 0
    torn_tail: bool = False
    rows_without_key: int = 0
    duplicates: int = 0
    duplicate_examples: list[dict[str, Any]] = field(default_factory=list)
    invalid_examples: list[int] = field(default_factory=list)

    def note_duplicate(self, key: tuple[int, int], first: int, line: int) -> None:
        self.duplicates += 1
        if len(self.duplicate_examples) < EXAMPLES:
            self.duplicate_examples.append({"key": list(key), "first_line": first, "line": line})


@dataclass
class Finding:
    code: str
    severity: str
    count: int
    message: str
    fix: str | None = None
    examples: list[Any] = field(default_factory=list)


@dataclass
class CheckCounts:
    """Rollout keys of the run: expected (materialized), completed, missing, and what went wrong."""

    expected: int
    completed: int
    missing: int
    extra: int  # rollout keys with no materialized row
    duplicate_inputs: int
    duplicate_rollouts: int
    masked: int
    null_reward: int
    absent_reward: int
    failed_attempts: int
    failed_keys: int
    failed_keys_still_missing: int
    failed_keys_recovered: int
    failure_keys_not_in_inputs: int
    zero_completion_tokens: int  # responses with 0 completion tokens (`ngrp health` judges them)
    stopped_at_token_cap: int  # responses stopped at the token cap


@dataclass
class TaskCounts:
    """Task groups (task, or task and agent in fan-out) by completion: every, some or none of their
    expected rollouts completed."""

    total: int = 0
    complete: int = 0
    partial: int = 0
    none: int = 0


@dataclass
class AgentCheck:
    agent: str | None
    expected: int
    completed: int
    missing: int
    extra: int
    masked: int
    null_reward: int
    absent_reward: int
    tasks: TaskCounts


@dataclass
class CheckResult:
    inputs: FileStats
    rollouts: FileStats
    failures: FileStats | None
    counts: CheckCounts
    tasks: TaskCounts
    grouping: str
    order: str
    failures_by_class: dict[str, int]
    agents: list[AgentCheck]
    findings: list[Finding]
    top_failures: list[FailureSummary] = field(default_factory=list)
    in_progress: dict[str, Any] | None = None  # `live.LiveRun.to_json()` while a collector holds the lock
    retries: dict[str, int] = field(default_factory=dict)  # cause -> requests the collector sent again
    prefix_cache: list[dict[str, Any]] = field(default_factory=list)  # `artifacts.prefix_cache_of`
    adaptive: Any = None  # `adaptive_check.AdaptiveCheck` of an adaptive run, None for a fixed-N run

    @property
    def exit_code(self) -> int:
        live = self.in_progress is not None  # a run still being written is not complete (its status)
        return 1 if live or any(f.severity == ERROR for f in self.findings) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": {"name": "ngrp", "version": __version__},
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "files": {
                "inputs": asdict(self.inputs),
                "rollouts": asdict(self.rollouts),
                "failures": None if self.failures is None else asdict(self.failures),
            },
            "counts": asdict(self.counts),
            "tasks": asdict(self.tasks),
            "grouping": self.grouping,
            "order": self.order,
            "failures_by_class": self.failures_by_class,
            "agents": [asdict(a) for a in self.agents],
            "top_failures": [asdict(f) for f in self.top_failures],
            "retries": self.retries,
            "findings": [asdict(f) for f in self.findings],
            "in_progress": self.in_progress,
            "prefix_cache": self.prefix_cache,
            "adaptive": None if self.adaptive is None else self.adaptive.to_json(),
        }
