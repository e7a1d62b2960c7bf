"""`run_health`: judge every rollout of a run from its rows, then write Gym's two health files.

read (materialized caps, failures sidecar, rollouts: one judgement per line) -> accumulate (one small
digest per rollout; duplicates marked once all lines are read; failure-only keys added) -> reduce (task
checks, coverage, counts; Gym's `_reduce` shape) -> write `quality_summary.json` and
`rollout_verdicts.jsonl` together, atomically.

Verdicts follow Gym: `unhealthy` when the rollout has a finding, else `unobserved` when a check could not
be judged on it, else `healthy`. Task-level findings flag the task, never its rollouts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..artifacts.jsonl import BLANK, Row, atomic_outputs, iter_records, refuse_existing
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, failures_path_for, health_paths_for, is_index, pack_key
from ..errors import InputError
from .health_checks import (
    CONDITIONAL_IDS,
    REGISTRY,
    RESPONSE_IDS,
    ROLLOUT_IDS,
    TASK_IDS,
    Settings,
    finding,
    judge_row,
)

ROLLOUT_ID_KEY = "_ng_rollout_id"
VERIFY_FAILED = "verify_failed"  # the collector's failure class for a verifier that could not score
EXAMPLES = 20
# What a failure-only key (no rollout row, only failed attempts) can be judged on; it is not a record, so
# the record checks are unobserved on it (and Gym's coverage of them stays Gym's plus these keys).
_FAILURE_JUDGED = frozenset({"model_call_failed", "ngrp/verifier_error"})


@dataclass(slots=True)
class Digest:
    """One judged rollout (a rollouts line, or a key seen only in the failures sidecar)."""

    task: int | str
    rollout: int | str
    rollout_id: str
    findings: list[dict[str, Any]]
    unobserved: list[str]
    stage: Any = None
    not_applicable: tuple[str, ...] = ()
    successful_call: bool | None = None  # None: nothing tells whether a model call succeeded
    failed_call: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    zero_reward: bool = False
    from_failures: bool = False

    @property
    def verdict(self) -> str:
        return "unhealthy" if self.findings else "unobserved" if self.unobserved else "healthy"


@dataclass
class _Failures:
    """The failures sidecar, per key: attempts, the last attempt's class and line, HTTP statuses."""

    path: Path | None
    rows: int = 0
    unreadable: int = 0
    by_key: dict[Any, list[Any]] = field(default_factory=dict)  # packed -> [attempts, class, line, key]
    call_errors: Counter = field(default_factory=Counter)  # packed key -> failed model-call attempts
    statuses: Counter = field(default_factory=Counter)


@dataclass
class HealthResult:
    rollouts: str
    inputs: str
    failures: str | None
    outputs: dict[str, str]
    summary: dict[str, Any]  # what quality_summary.json holds
    affected: dict[str, int]  # check -> rollouts (or tasks) with a finding
    flagged_tasks: dict[str, list[Any]]  # task check -> first task indices flagged
    unhealthy_examples: list[list[Any]]

    @property
    def verdicts(self) -> dict[str, int]:
        return self.summary["run"]["verdicts"]

    @property
    def exit_code(self) -> int:
        v = self.verdicts
        return 0 if v["unhealthy"] == 0 and v["unobserved"] == 0 else 1

    def to_json(self) -> dict[str, Any]:
        run, ours = self.summary["run"], self.summary["ngrp"]
        checks = [
            {
                "id": check.id,
                "origin": check.origin,
                "scope": check.scope,
                "findings": run["issues"][check.id],
                "affected": self.affected[check.id],
                **run["artifacts"]["coverage"][check.id],
            }
            for check in REGISTRY
        ]
        return {
            "tool": {"name": "ngrp", "version": __version__},
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "files": {"rollouts": self.rollouts, "inputs": self.inputs, "failures": self.failures},
            "outputs": self.outputs,
            "ignored_checks": run["ignored_checks"],
            "verdicts": run["verdicts"],
            "keys": ours["keys"],
            "checks": checks,
            "flagged_tasks": self.flagged_tasks,
            "zero_rewards": ours["zero_rewards"],
            "unhealthy_examples": self.unhealthy_examples,
        }


def _regular_file(path: Path, role: str) -> None:
    if not path.is_file():
        why = "not a regular file" if path.exists() else "no such file"
        raise InputError(f"cannot read {role}: {why}", path=path)


def _read_inputs(path: Path) -> dict[Any, int | None]:
    """Expected keys (packed) -> the row's max_output_tokens (None when unset). Malformed lines stop here."""
    _regular_file(path, "materialized inputs")
    caps: dict[Any, int | None] = {}
    for record in iter_records(path):
        if isinstance(record, Row):
            row = record.data
            task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
            if is_index(task) and is_index(rollout):
                caps.setdefault(pack_key((task, rollout)), _cap(row))
        elif record.kind != BLANK:
            raise InputError(record.message, path=path, line=record.line)
    return caps


def _cap(row: dict[str, Any]) -> int | None:
    params = row.get("responses_create_params")
    cap = params.get("max_output_tokens") if isinstance(params, dict) else None
    return cap if type(cap) is int and cap > 0 else None


def _read_failures(path: Path | None) -> _Failures:
    out = _Failures(path)
    if path is None:
        return out
    _regular_file(path, "failures sidecar")
    for record in iter_records(path):
        if not isinstance(record, Row):
            out.unreadable += record.kind != BLANK
            continue
        out.rows += 1
        row = record.data
        task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        if not (is_index(task) and is_index(rollout)):
            continue
        packed = pack_key((task, rollout))
        cls = row.get("_ng_failure_class")
        cls = cls if isinstance(cls, str) else "(no class)"
        entry = out.by_key.setdefault(packed, [0, cls, record.line, (task, rollout)])
        entry[0] += 1
        entry[1], entry[2] = cls, record.line
        if cls != VERIFY_FAILED:
            out.call_errors[packed] += 1
            status = row.get("_ng_failure_http_status")
            out.statuses[str(status) if type(status) is int else "unknown"] += 1
    return out


@dataclass
class _Scan:
    digests: list[Digest] = field(default_factory=list)
    rows: int = 0
    blank_lines: int = 0
    unreadable: int = 0
    seen: set = field(default_factory=set)  # packed keys with a rollout row


def _unreadable(path: Path, line: int, error: str, settings: Settings) -> Digest:
    """Gym's digest for a line that does not parse: its own pseudo task, every other check unobserved."""
    task = f"__unreadable_record__:input-0:line-{line}"
    unobserved = [c for c in ROLLOUT_IDS if c != "record_unreadable" and c not in settings.ignored]
    findings = []
    if "record_unreadable" not in settings.ignored:
        detail = {"reason": "rollout record is unreadable", "error": error}
        findings.append(finding("record_unreadable", detail, {"source_file": str(path), "line": line}))
    return Digest(task, 0, f"{task}-0", findings, unobserved)


def _judge(row: dict[str, Any], line: int, caps: dict[Any, int | None], settings: Settings) -> Digest:
    task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
    keyed = is_index(task) and is_index(rollout)
    cap = caps.get(pack_key((task, rollout))) if keyed else None
    if cap is None:
        cap = _cap(row)
    try:
        judged = judge_row(row, cap, settings)
    except Exception as exc:  # a check must never stop the run: record it as Gym does
        unobserved = [c for c in ROLLOUT_IDS if c not in settings.ignored and c != "check_execution_error"]
        findings = []
        if "check_execution_error" not in settings.ignored:
            detail = {"reason": "check raised an unexpected exception", "error": type(exc).__name__}
            findings.append(finding("check_execution_error", detail))
        judged = None
    else:
        findings, unobserved = judged.findings, judged.unobserved
    if not keyed:
        task, rollout = f"__no_identity__:line-{line}", 0
        if "ngrp/record_without_identity" not in settings.ignored:
            detail = {TASK_KEY: _describe(row.get(TASK_KEY)), ROLLOUT_KEY: _describe(row.get(ROLLOUT_KEY))}
            findings.insert(0, finding("ngrp/record_without_identity", detail, {"line": line}))
    explicit = row.get(ROLLOUT_ID_KEY)
    trajectory = row.get("ng_trajectory")
    if not explicit and isinstance(trajectory, dict):
        explicit = trajectory.get("rollout_id")
    digest = Digest(
        task, rollout, str(explicit or f"{task}-{rollout}"), findings, unobserved, row.get("stage_index")
    )
    if judged is not None:
        digest.not_applicable = judged.not_applicable
        digest.successful_call, digest.failed_call = judged.successful_call, judged.failed_call
        digest.prompt_tokens, digest.completion_tokens = judged.prompt_tokens, judged.completion_tokens
        digest.zero_reward = judged.zero_reward
    return digest


def _describe(value: Any) -> Any:
    return "absent" if value is None else value if isinstance(value, (int, str)) else type(value).__name__


def _scan_rollouts(path: Path, caps: dict[Any, int | None], settings: Settings) -> _Scan:
    _regular_file(path, "rollouts")
    scan = _Scan()
    append, seen = scan.digests.append, scan.seen
    for record in iter_records(path):
        if isinstance(record, Row):
            scan.rows += 1
            digest = _judge(record.data, record.line, caps, settings)
            if type(digest.task) is int:
                seen.add(pack_key((digest.task, digest.rollout)))
            append(digest)
        elif record.kind == BLANK:
            scan.blank_lines += 1
        else:
            scan.unreadable += 1
            error = "ValueError" if record.kind == "not_an_object" else "JSONDecodeError"
            append(_unreadable(path, record.line, error, settings))
    return scan


def _mark_duplicates(digests: list[Digest], settings: Settings) -> None:
    if "rollout_duplicate_identity" in settings.ignored:
        return
    groups: dict[tuple[Any, Any, Any], list[Digest]] = defaultdict(list)
    for digest in digests:
        if not digest.from_failures:
            groups[(_hashable(digest.stage), digest.task, digest.rollout)].append(digest)
    for copies in groups.values():
        if len(copies) > 1:
            for digest in copies:
                digest.findings.append(
                    finding("rollout_duplicate_identity", {"duplicate_count": len(copies)})
                )


def _hashable(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, str, float)) else orjson.dumps(value)


def _failure_only(failures: _Failures, scan: _Scan, caps: dict, settings: Settings) -> list[Digest]:
    """A key with failed attempts and no rollout row (expected by the inputs): judged from the sidecar."""
    out = []
    unobserved = [c for c in ROLLOUT_IDS if c not in _FAILURE_JUDGED and c not in settings.ignored]
    for packed, (attempts, cls, line, (task, rollout)) in failures.by_key.items():
        if packed in scan.seen or packed not in caps:
            continue
        check = "ngrp/verifier_error" if cls == VERIFY_FAILED else "model_call_failed"
        findings = []
        if check not in settings.ignored:
            detail = {"source": "failures", "failure_class": cls, "attempts": attempts}
            findings.append(finding(check, detail, {"source_file": str(failures.path), "line": line}))
        digest = Digest(task, rollout, f"{task}-{rollout}", findings, list(unobserved), from_failures=True)
        digest.successful_call = cls == VERIFY_FAILED  # the model answered; its verifier failed
        digest.failed_call = cls != VERIFY_FAILED
        out.append(digest)
    return out


def run_health(
    inputs: Path | str,
    rollouts: Path | str,
    failures: Path | str | None = None,
    settings: Settings | None = None,
    *,
    overwrite: bool = False,
) -> HealthResult:
    """Judge the run and write its two health files next to the rollouts file."""
    settings = settings or Settings()
    settings.check()
    inputs, rollouts = Path(inputs), Path(rollouts)
    if failures is None and failures_path_for(rollouts).is_file():
        failures = failures_path_for(rollouts)
    failures = None if failures is None else Path(failures)
    paths = health_paths_for(rollouts)
    refuse_existing(list(paths.values()), overwrite)
    caps = _read_inputs(inputs)
    sidecar = _read_failures(failures)
    scan = _scan_rollouts(rollouts, caps, settings)
    _mark_duplicates(scan.digests, settings)
    digests = scan.digests + _failure_only(sidecar, scan, caps, settings)
    from .health_summary import summarize

    summary, affected, flagged = summarize(digests, scan, sidecar, caps, settings)
    summary["ngrp"]["sources"] = {
        "rollouts": {"path": str(rollouts), "rows": scan.rows, "blank_lines": scan.blank_lines,
                     "unreadable_lines": scan.unreadable},
        "inputs": {"path": str(inputs), "keys": len(caps)},
        "failures": None if failures is None else {"path": str(failures), "rows": sidecar.rows,
                                                   "unreadable_lines": sidecar.unreadable},
    }  # fmt: skip
    _write(paths, summary, digests, overwrite)
    examples = [[d.task, d.rollout] for d in sorted(digests, key=_sort_key) if d.findings][:EXAMPLES]
    return HealthResult(
        rollouts=str(rollouts),
        inputs=str(inputs),
        failures=None if failures is None else str(failures),
        outputs={name: str(path) for name, path in paths.items()},
        summary=summary,
        affected=affected,
        flagged_tasks=flagged,
        unhealthy_examples=examples,
    )


def _sort_key(digest: Digest) -> tuple[tuple[int, Any], ...]:
    def part(value: Any) -> tuple[int, Any]:
        return (0, value) if type(value) is int else (1, str(value))

    return part(digest.task), part(digest.rollout), part(digest.stage)


def verdict_row(digest: Digest) -> dict[str, Any]:
    """One rollout_verdicts.jsonl line, with Gym's keys in Gym's order."""
    row: dict[str, Any] = {
        TASK_KEY: digest.task,
        ROLLOUT_KEY: digest.rollout,
        "rollout_id": digest.rollout_id,
        "verdict": digest.verdict,
        "findings": digest.findings,
        "unobserved": digest.unobserved,
    }
    if digest.stage is not None:
        row["stage_index"] = digest.stage
    return row


def _write(paths: dict[str, Path], summary: dict, digests: list[Digest], overwrite: bool) -> None:
    dumps = orjson.dumps
    newline = orjson.OPT_APPEND_NEWLINE
    with atomic_outputs(paths, overwrite=overwrite) as out:
        out["quality_summary"].write(dumps(summary, option=orjson.OPT_INDENT_2))
        handle = out["rollout_verdicts"]
        for digest in sorted(digests, key=_sort_key):
            handle.write(dumps(verdict_row(digest), option=newline))


__all__ = ["CONDITIONAL_IDS", "RESPONSE_IDS", "TASK_IDS", "Digest", "HealthResult", "run_health"]
