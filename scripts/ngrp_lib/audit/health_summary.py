"""Reduce the per-rollout digests to Gym's `quality_summary.json` (task checks, coverage, verdicts, issues,
stats, per-task counts) plus our `ngrp` block (keys, rollouts affected per check, zero rewards).

One pass over the digests in identity order: copies of one identity are adjacent, so duplicates are
marked and each task's repeats collapsed as the pass goes; every count is taken in the same loop.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..artifacts.names import pack_key
from .health_causes import CauseTally, causes_block
from .health_checks import CHECK_IDS, CONDITIONAL_IDS, ROLLOUT_IDS, TASK_IDS, Settings, finding

if TYPE_CHECKING:
    from .health_checks import Digest
    from .health_scan import RolloutScan, SidecarFailures

EXAMPLES = 20  # rollouts named per check in quality_summary.json (health.py shares it)
# Per task, over its repeats (rollout indices, copies collapsed as Gym does):
# [repeats, unhealthy, unobserved, observed (every copy tells whether a call succeeded), successful]
TaskCounts = list[int]
REPEATS, UNHEALTHY, UNOBSERVED, OBSERVED, SUCCESSFUL = range(5)


@dataclass
class _Pass:
    repeats: dict[Any, TaskCounts] = field(default_factory=dict)
    patterns: Counter = field(default_factory=Counter)  # (unobserved, not applicable) -> digests
    issues: Counter = field(default_factory=Counter)
    affected: Counter = field(default_factory=Counter)
    unhealthy: int = 0
    unobserved: int = 0
    prompt: int = 0
    completion: int = 0
    failed_rows: int = 0  # failed responses in the rollouts file
    ended_on_error: int = 0
    zero: int = 0
    zero_unhealthy: int = 0
    zero_why: Counter = field(default_factory=Counter)  # check -> zero-reward rollouts it flags
    causes: CauseTally = field(default_factory=CauseTally)  # one cause per zero or missing score
    failure_only: int = 0


def _stage_key(stage: Any) -> Any:
    return stage if stage is None or type(stage) in (int, str, float) else repr(stage)


def mark_duplicates(copies: list[Digest]) -> None:
    """Gym's rollout_duplicate_identity: every record sharing (stage, task, rollout) with another."""
    by_stage: dict[Any, list[Digest]] = {}
    for d in copies:
        if not d.from_failures:
            by_stage.setdefault(_stage_key(d.stage), []).append(d)
    for group in by_stage.values():
        if len(group) > 1:
            for d in group:
                d.findings.append(finding("rollout_duplicate_identity", {"duplicate_count": len(group)}))


_NO_TASK = object()


def _count_repeat(current: list[int], group: Any) -> None:
    """Count one repeat of a task in its counts (`current`): the digests of one rollout identity (several
    when it is duplicated) give one verdict, unobserved unless they agree."""
    current[REPEATS] += 1
    if len(group) > 1:
        verdicts = {d.verdict for d in group}
        verdict = verdicts.pop() if len(verdicts) == 1 else "unobserved"
        observed = all(d.successful_call is not None for d in group)
        successful = any(d.successful_call for d in group)
    else:
        first = group[0]
        verdict = first.verdict
        observed, successful = first.successful_call is not None, first.successful_call is True
    if verdict == "unhealthy":
        current[UNHEALTHY] += 1
    elif verdict == "unobserved":
        current[UNOBSERVED] += 1
    current[OBSERVED] += observed
    current[SUCCESSFUL] += successful


def one_pass(ordered: list[Digest], settings: Settings) -> _Pass:
    """Mark duplicates, collapse repeats and count, in one walk over the digests in identity order."""
    mark = "rollout_duplicate_identity" not in settings.ignored
    acc = _Pass()
    repeats, patterns, issues, affected = acc.repeats, acc.patterns, acc.issues, acc.affected
    unhealthy = unobserved = prompt = completion = failed_rows = ended = zero = zero_bad = only = 0
    plain = 0  # digests with every check judged
    not_applicable: Counter = Counter()  # digests with only conditional checks not applicable, per tuple
    current_task, current = _NO_TASK, [0] * 5
    i, n = 0, len(ordered)
    while i < n:
        first = ordered[i]
        task, rollout = first.task, first.rollout
        j = i + 1
        while j < n and ordered[j].rollout == rollout and ordered[j].task == task:
            j += 1
        group = ordered[i:j] if j - i > 1 else (first,)
        if mark and j - i > 1:
            mark_duplicates(group)  # type: ignore[arg-type]
        for d in group:
            findings, missing = d.findings, d.unobserved
            if findings:
                unhealthy += 1
                checks = [f["check"] for f in findings]
                issues.update(checks)
                affected.update(set(checks))
            if missing:
                unobserved += not findings
                patterns[(tuple(missing), d.not_applicable)] += 1
            elif d.not_applicable:
                not_applicable[d.not_applicable] += 1
            else:
                plain += 1
            prompt += d.prompt_tokens
            completion += d.completion_tokens
            if d.failed_call:
                ended += 1
                failed_rows += not d.from_failures
            if d.zero_reward:
                zero += 1
                if findings:  # why this zero may not be the policy's
                    zero_bad += 1
                    acc.zero_why.update({f["check"] for f in findings})
                acc.causes.add(d)
            elif d.unscored:
                acc.causes.add(d)
            only += d.from_failures
        if task != current_task:
            current_task, current = task, repeats.setdefault(task, [0] * 5)
        _count_repeat(current, group)
        i = j
    if plain:
        patterns[((), ())] += plain
    for na, count in not_applicable.items():
        patterns[((), na)] += count
    acc.unhealthy, acc.unobserved, acc.prompt, acc.completion = unhealthy, unobserved, prompt, completion
    acc.failed_rows, acc.ended_on_error, acc.zero, acc.zero_unhealthy = failed_rows, ended, zero, zero_bad
    acc.failure_only = only
    return acc


def _task_checks(
    repeats: dict[Any, TaskCounts], ignored: frozenset[str]
) -> tuple[dict[Any, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    findings: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    coverage = {c: {"evaluated": 0, "unobserved": 0, "ignored": 0} for c in TASK_IDS}
    consistently, no_calls = (
        coverage["task_consistently_unhealthy"],
        coverage["task_no_successful_model_calls"],
    )
    skip_consistently = "task_consistently_unhealthy" in ignored
    skip_no_calls = "task_no_successful_model_calls" in ignored
    for task, (n, unhealthy, unobserved, observed, successful) in repeats.items():
        if skip_consistently:
            consistently["ignored"] += 1
        elif n - unobserved >= 2:  # Gym needs two judged repeats
            consistently["evaluated"] += 1
            if unhealthy == n - unobserved:
                detail = {"computable_repeats": n - unobserved}
                findings[task].append(finding("task_consistently_unhealthy", detail))
        else:
            consistently["unobserved"] += 1
        if skip_no_calls:
            no_calls["ignored"] += 1
        elif n and observed == n:
            no_calls["evaluated"] += 1
            if not successful:
                findings[task].append(finding("task_no_successful_model_calls", {"repeats": n}))
        else:
            no_calls["unobserved"] += 1
    return findings, coverage


def _coverage(patterns: Counter, ignored: frozenset[str]) -> dict[str, dict[str, int]]:
    """Per check: rollouts where it was evaluated, unobserved, ignored (and not applicable, for the
    checks that have a condition), from the few distinct (unobserved, not applicable) patterns."""
    coverage: dict[str, dict[str, int]] = {}
    for check in CHECK_IDS:
        entry = {"evaluated": 0, "unobserved": 0, "ignored": 0}
        if check in CONDITIONAL_IDS:
            entry["not_applicable"] = 0
        coverage[check] = entry
    for (unobserved, not_applicable), n in patterns.items():
        missing, na = set(unobserved), set(not_applicable)
        for check in ROLLOUT_IDS:
            slot = (
                "ignored" if check in ignored
                else "unobserved" if check in missing
                else "not_applicable" if check in na
                else "evaluated"
            )  # fmt: skip
            coverage[check][slot] += n
    return coverage


def _stats(acc: _Pass, sidecar: SidecarFailures, digests: list[Digest]) -> dict[str, Any]:
    """Gym's `run.stats`: failed model calls come from failed responses and the sidecar's attempts."""
    by_status = Counter(sidecar.statuses)
    if acc.failed_rows:
        by_status["unknown"] += acc.failed_rows
    affected: set[Any] = set(sidecar.call_errors)
    if acc.failed_rows:  # a failed response whose key also failed earlier attempts is one rollout
        for d in digests:
            if d.failed_call and not d.from_failures:
                affected.add(pack_key((d.task, d.rollout)) if type(d.task) is int else id(d))
    return {
        "model_call_errors": {
            "total": sum(sidecar.call_errors.values()) + acc.failed_rows,
            "by_status": dict(sorted(by_status.items())),
            "rollouts_affected": len(affected),
            "ended_on_error": acc.ended_on_error,
        },
        "duplicated_calls": {"replayed": 0, "rollouts": 0},
        "tokens": {
            "prompt": acc.prompt,
            "completion": acc.completion,
            "capture_prompt": 0,
            "capture_completion": 0,
        },
    }


def _task_table(repeats: dict[Any, TaskCounts], task_findings: dict) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for task in sorted(repeats, key=lambda v: (isinstance(v, str), str(v))):  # Gym's order: "10" < "2"
        n, bad, unknown = repeats[task][:3]
        tasks[str(task)] = {
            "repeats": n,
            "healthy": n - bad - unknown,
            "unhealthy": bad,
            "unobserved": unknown,
            "flags": [f["check"] for f in task_findings[task]] if task in task_findings else [],
        }
    return tasks


def summarize(
    digests: list[Digest], scan: RolloutScan, sidecar: SidecarFailures, caps: dict, settings: Settings
) -> tuple[dict[str, Any], dict[str, int], dict[str, list[Any]]]:
    """(quality summary, rollouts or tasks affected per check, first flagged tasks per task check).
    `digests` are in Gym's order (by identity); duplicates are marked here."""
    ignored = settings.ignored
    acc = one_pass(digests, settings)
    task_findings, task_coverage = _task_checks(acc.repeats, ignored)
    coverage = _coverage(acc.patterns, ignored)
    coverage.update(task_coverage)
    issues, affected = acc.issues, acc.affected
    flagged: dict[str, list[Any]] = {c: [] for c in TASK_IDS}
    for task in sorted(task_findings, key=lambda v: (isinstance(v, str), str(v))):
        for f in task_findings[task]:
            issues[f["check"]] += 1
            affected[f["check"]] += 1
            if len(flagged[f["check"]]) < EXAMPLES:
                flagged[f["check"]].append(task)
    healthy = len(digests) - acc.unhealthy - acc.unobserved
    summary = {
        "run": {
            "ignored_checks": sorted(ignored),
            "artifacts": {"records": scan.rows + scan.unreadable, "captures": 0, "coverage": coverage},
            "verdicts": {"healthy": healthy, "unhealthy": acc.unhealthy, "unobserved": acc.unobserved},
            "issues": {c: issues[c] for c in CHECK_IDS},
            "stats": _stats(acc, sidecar, digests),
        },
        "tasks": _task_table(acc.repeats, task_findings),
        "ngrp": _ngrp_block(acc, len(digests), scan, caps, settings),
    }
    ours = summary["ngrp"]
    ours["causes"] = causes_block(acc.causes, len(caps), ours["keys"]["missing"], sidecar.path is not None)
    return summary, {c: affected[c] for c in CHECK_IDS}, flagged


def _ngrp_block(acc: _Pass, judged: int, scan: RolloutScan, caps: dict, settings: Settings) -> dict:
    in_inputs = len(scan.seen & caps.keys())
    return {
        "tool": {"name": "ngrp", "version": __version__},
        "settings": {
            "loop_min_repeats": settings.loop_min_repeats,
            "loop_min_chars": settings.loop_min_chars,
            "tool_loop_min_repeats": settings.tool_loop_min_repeats,
        },
        "keys": {
            "expected": len(caps),
            "rollout_rows": scan.rows,
            "unreadable_lines": scan.unreadable,
            "failure_only": acc.failure_only,
            "judged": judged,
            "missing": len(caps) - in_inputs - acc.failure_only,
            "not_in_inputs": len(scan.seen) - in_inputs,
        },
        "rollouts_affected": {c: acc.affected[c] for c in CHECK_IDS},
        "zero_rewards": {
            "total": acc.zero,
            "unhealthy": acc.zero_unhealthy,
            "share_unhealthy": acc.zero_unhealthy / acc.zero if acc.zero else None,
            "by_check": dict(acc.zero_why.most_common()),
        },
    }
