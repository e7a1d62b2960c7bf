"""Reduce the per-rollout digests to Gym's `quality_summary.json` (task checks, coverage, verdicts, issues,
stats, per-task counts) plus our `ngrp` block (keys, rollouts affected per check, zero rewards)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..artifacts.names import pack_key
from .health_checks import CHECK_IDS, CONDITIONAL_IDS, ROLLOUT_IDS, TASK_IDS, Settings, finding

if TYPE_CHECKING:
    from .health import Digest, _Failures, _Scan

EXAMPLES = 20


@dataclass(slots=True)
class _Repeat:
    """One rollout index of a task, its copies collapsed as Gym collapses duplicate records."""

    verdict: str
    observed: bool  # every copy tells whether a model call succeeded
    successful: bool


def _repeats(digests: list[Digest]) -> dict[Any, list[_Repeat]]:
    copies: dict[Any, dict[Any, list[Digest]]] = defaultdict(lambda: defaultdict(list))
    for digest in digests:
        copies[digest.task][digest.rollout].append(digest)
    out: dict[Any, list[_Repeat]] = {}
    for task, by_rollout in copies.items():
        repeats = []
        for group in by_rollout.values():
            verdicts = {d.verdict for d in group}
            repeats.append(
                _Repeat(
                    verdict=verdicts.pop() if len(verdicts) == 1 else "unobserved",
                    observed=all(d.successful_call is not None for d in group),
                    successful=any(d.successful_call for d in group),
                )
            )
        out[task] = repeats
    return out


def _task_checks(
    repeats: dict[Any, list[_Repeat]], ignored: frozenset[str]
) -> tuple[dict[Any, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    findings: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in TASK_IDS}
    for task, reps in repeats.items():
        if "task_consistently_unhealthy" in ignored:
            coverage["task_consistently_unhealthy"]["ignored"] += 1
        else:
            judged = [r for r in reps if r.verdict != "unobserved"]
            if len(judged) >= 2:
                coverage["task_consistently_unhealthy"]["evaluated"] += 1
                if all(r.verdict == "unhealthy" for r in judged):
                    detail = {"computable_repeats": len(judged)}
                    findings[task].append(finding("task_consistently_unhealthy", detail))
            else:
                coverage["task_consistently_unhealthy"]["unobserved"] += 1
        if "task_no_successful_model_calls" in ignored:
            coverage["task_no_successful_model_calls"]["ignored"] += 1
        elif reps and all(r.observed for r in reps):
            coverage["task_no_successful_model_calls"]["evaluated"] += 1
            if not any(r.successful for r in reps):
                findings[task].append(finding("task_no_successful_model_calls", {"repeats": len(reps)}))
        else:
            coverage["task_no_successful_model_calls"]["unobserved"] += 1
    return findings, coverage


def _coverage(digests: list[Digest], ignored: frozenset[str]) -> dict[str, dict[str, int]]:
    """Per check: rollouts where it was evaluated, unobserved, ignored (and not applicable, for the
    checks that have a condition). Counted per distinct (unobserved, not applicable) pattern: few."""
    patterns = Counter((tuple(d.unobserved), d.not_applicable) for d in digests)
    coverage: dict[str, dict[str, int]] = {}
    for check in CHECK_IDS:
        entry = {"evaluated": 0, "unobserved": 0, "ignored": 0}
        if check in CONDITIONAL_IDS:
            entry["not_applicable"] = 0
        coverage[check] = entry
    for (unobserved, not_applicable), n in patterns.items():
        missing, na = set(unobserved), set(not_applicable)
        for check in ROLLOUT_IDS:
            entry = coverage[check]
            slot = (
                "ignored" if check in ignored
                else "unobserved" if check in missing
                else "not_applicable" if check in na
                else "evaluated"
            )  # fmt: skip
            entry[slot] += n
    return coverage


def _stats(digests: list[Digest], sidecar: _Failures) -> dict[str, Any]:
    """Gym's `run.stats`: failed model calls come from failed responses and the sidecar's attempts."""
    by_status = Counter(sidecar.statuses)
    affected = set(sidecar.call_errors)
    total = sum(sidecar.call_errors.values())
    ended = 0
    for d in digests:
        if d.failed_call:
            ended += 1
            if not d.from_failures:
                total += 1
                by_status["unknown"] += 1
                affected.add(pack_key((d.task, d.rollout)) if type(d.task) is int else id(d))
    return {
        "model_call_errors": {
            "total": total,
            "by_status": dict(sorted(by_status.items())),
            "rollouts_affected": len(affected),
            "ended_on_error": ended,
        },
        "duplicated_calls": {"replayed": 0, "rollouts": 0},
        "tokens": {
            "prompt": sum(d.prompt_tokens for d in digests),
            "completion": sum(d.completion_tokens for d in digests),
            "capture_prompt": 0,
            "capture_completion": 0,
        },
    }


def _task_table(repeats: dict[Any, list[_Repeat]], task_findings: dict) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for task in sorted(repeats, key=lambda v: (isinstance(v, str), str(v))):  # Gym's order: "10" < "2"
        counts = Counter(r.verdict for r in repeats[task])
        tasks[str(task)] = {
            "repeats": len(repeats[task]),
            "healthy": counts["healthy"],
            "unhealthy": counts["unhealthy"],
            "unobserved": counts["unobserved"],
            "flags": [f["check"] for f in task_findings.get(task, [])],
        }
    return tasks


def summarize(
    digests: list[Digest], scan: _Scan, sidecar: _Failures, caps: dict, settings: Settings
) -> tuple[dict[str, Any], dict[str, int], dict[str, list[Any]]]:
    """(quality summary, rollouts or tasks affected per check, first flagged tasks per task check)."""
    ignored = settings.ignored
    repeats = _repeats(digests)
    task_findings, task_coverage = _task_checks(repeats, ignored)
    coverage = _coverage(digests, ignored)
    coverage.update(task_coverage)
    issues: Counter = Counter()
    affected: Counter = Counter()
    for d in digests:
        checks = [f["check"] for f in d.findings]
        issues.update(checks)
        affected.update(set(checks))
    flagged: dict[str, list[Any]] = {c: [] for c in TASK_IDS}
    for task in sorted(task_findings, key=lambda v: (isinstance(v, str), str(v))):
        for f in task_findings[task]:
            issues[f["check"]] += 1
            affected[f["check"]] += 1
            if len(flagged[f["check"]]) < EXAMPLES:
                flagged[f["check"]].append(task)
    verdicts = Counter(d.verdict for d in digests)
    summary = {
        "run": {
            "ignored_checks": sorted(ignored),
            "artifacts": {"records": scan.rows + scan.unreadable, "captures": 0, "coverage": coverage},
            "verdicts": {k: verdicts[k] for k in ("healthy", "unhealthy", "unobserved")},
            "issues": {c: issues[c] for c in CHECK_IDS},
            "stats": _stats(digests, sidecar),
        },
        "tasks": _task_table(repeats, task_findings),
        "ngrp": _ngrp_block(digests, scan, caps, settings, affected),
    }
    return summary, {c: affected[c] for c in CHECK_IDS}, flagged


def _ngrp_block(
    digests: list[Digest], scan: _Scan, caps: dict, settings: Settings, affected: Counter
) -> dict:
    failure_only = sum(1 for d in digests if d.from_failures)
    in_inputs = sum(1 for k in scan.seen if k in caps)
    zero = [d for d in digests if d.zero_reward]
    zero_unhealthy = sum(1 for d in zero if d.findings)
    return {
        "tool": {"name": "ngrp", "version": __version__},
        "settings": {
            "loop_min_repeats": settings.loop_min_repeats,
            "loop_min_chars": settings.loop_min_chars,
        },
        "keys": {
            "expected": len(caps),
            "rollout_rows": scan.rows,
            "unreadable_lines": scan.unreadable,
            "failure_only": failure_only,
            "judged": len(digests),
            "missing": len(caps) - in_inputs - failure_only,
            "not_in_inputs": len(scan.seen) - in_inputs,
        },
        "rollouts_affected": {c: affected[c] for c in CHECK_IDS},
        "zero_rewards": {
            "total": len(zero),
            "unhealthy": zero_unhealthy,
            "share_unhealthy": zero_unhealthy / len(zero) if zero else None,
        },
    }
