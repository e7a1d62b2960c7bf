"""`ngrp check`: line counts and key accounting between materialized inputs, rollouts and failures.

Streams each file once and keeps only compact integers per key (never rows): the expected keys with
their first line and agent, the completed keys with their first line, and counters. Findings name the
command that fixes them. Errors make the exit code 1; warnings and notes do not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.collector_retries import retries_of
from ..artifacts.failures import Failure, FailureDigest
from ..artifacts.jsonl import BLANK, TORN, Row, iter_records, read_json
from ..artifacts.kinds import FAILURES, refuse_swapped, refuse_wrong_kind
from ..artifacts.live import adaptive_up_to, live_run, pace, progress_block
from ..artifacts.manifest import manifest_and_problem
from ..artifacts.names import (
    USAGE_MISSING,
    agent_name,
    failures_beside,
    manifest_path_for,
    pack_key,
    rollout_key,
)
from ..artifacts.opening import require_regular
from ..artifacts.prefix_cache import prefix_cache_in
from ..artifacts.response import prompt_and_completion_tokens, request_token_cap, stopped_at_token_cap
from ..errors import InputError
from .check_result import AGENT_BITS, ERROR, EXAMPLES, WARNING, CheckResult, FileStats, Finding
from .crossfiles import cross_check
from .findings import CollectedBy, summarize, while_running
from .manifest_rows import manifest_rows_finding


def _scan(path: Path, stats: FileStats):
    """Yield (line, row) for parsed rows; count blank, invalid and torn lines into `stats`."""
    require_regular(path)  # the readers' own check: FIFOs, devices, folders, symlink loops
    for record in iter_records(path):
        stats.lines = record.line
        if isinstance(record, Row):
            stats.rows += 1
            yield record.line, record.data
        elif record.kind == BLANK:
            stats.blank_lines += 1
        elif record.kind == TORN:
            stats.torn_tail = True
        else:
            stats.invalid_lines += 1
            if len(stats.invalid_examples) < EXAMPLES:
                stats.invalid_examples.append(record.line)


class _Agents:
    """Agent labels interned as small ints (label None is 'no agent_ref')."""

    def __init__(self) -> None:
        self.ids: dict[str | None, int] = {}
        self.names: list[str | None] = []

    def id(self, name: str | None) -> int:
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = len(self.names)
            self.names.append(name)
        return found


def _label(row: dict[str, Any]) -> str | None:
    name = agent_name(row)
    if name is None and isinstance(row.get("_ng_environment_server"), str):
        return row["_ng_environment_server"]
    return name


def _first_keys(
    path: Path, stats: FileStats, seen: dict[Any, int], first_line: Callable[[int], int] = int
) -> Iterator[tuple[int, dict[str, Any], Any, Any]]:
    """(line, row, key, packed key) of the rows whose key is not in `seen` yet; rows without a key and
    repeats of a key (`first_line(seen[packed])` gives where it was first) are counted in `stats`."""
    for line, row in _scan(path, stats):
        key = rollout_key(row)
        if key is None:
            stats.rows_without_key += 1
            continue
        packed = pack_key(key)
        if packed in seen:
            stats.note_duplicate(key, first_line(seen[packed]), line)
            continue
        yield line, row, key, packed


def _read_inputs(path: Path, agents: _Agents) -> tuple[FileStats, dict[Any, int]]:
    stats = FileStats(str(path))
    expected: dict[Any, int] = {}  # packed key -> first line and agent id, packed in one int
    for line, row, _key, packed in _first_keys(path, stats, expected, lambda slot: slot >> AGENT_BITS):
        expected[packed] = (line << AGENT_BITS) | agents.id(_label(row))
    return stats, expected


@dataclass
class _RolloutTally:
    completed: dict[Any, int] = field(default_factory=dict)  # packed key -> first line
    extra: list[Any] = field(default_factory=list)
    extra_count: int = 0
    extra_by_agent: Counter = field(default_factory=Counter)
    masked: Counter = field(default_factory=Counter)  # agent id -> n
    null_reward: Counter = field(default_factory=Counter)
    absent_reward: Counter = field(default_factory=Counter)
    sorted_by_key: bool = True
    zero_tokens: int = 0  # rollouts whose response has 0 completion tokens
    capped: int = 0  # rollouts that stopped at the token cap


def _read_rollouts(path: Path, expected: dict[Any, int], agents: _Agents) -> tuple[FileStats, _RolloutTally]:
    stats, tally = FileStats(str(path)), _RolloutTally()
    completed, last = tally.completed, (-1, -1)
    mask = (1 << AGENT_BITS) - 1
    for line, row, key, packed in _first_keys(path, stats, completed):
        completed[packed] = line
        if key < last:
            tally.sorted_by_key = False
        last = key
        slot = expected.get(packed)
        if slot is None:
            tally.extra_count += 1
            if len(tally.extra) < EXAMPLES:
                tally.extra.append(list(key))
            agent = agents.id(_label(row))
            tally.extra_by_agent[agent] += 1
        else:
            agent = slot & mask
        if row.get("mask_sample") is True:
            tally.masked[agent] += 1
        if "reward" not in row:
            tally.absent_reward[agent] += 1
        elif row["reward"] is None:
            tally.null_reward[agent] += 1
        response = row.get("response")
        if isinstance(response, dict):
            _note_generation(row, response, tally)
    return stats, tally


def _note_generation(row: dict[str, Any], response: dict[str, Any], tally: _RolloutTally) -> None:
    """Count a response with no completion tokens, or one stopped at the token cap (for `ngrp health`)."""
    # a count never given is not 0
    completion = prompt_and_completion_tokens(response, row.get(USAGE_MISSING))[1]
    if completion == 0:
        tally.zero_tokens += 1
        return
    if stopped_at_token_cap(response, request_token_cap(row), completion):  # the one "truncated"
        tally.capped += 1


@dataclass
class _FailureTally:
    by_class: Counter = field(default_factory=Counter)
    keys: set = field(default_factory=set)
    attempts: Counter = field(default_factory=Counter)  # packed key -> failed attempts in the sidecar
    unknown_keys: int = 0
    digest: FailureDigest = field(default_factory=FailureDigest)  # the messages, by how often


def _read_failures(
    path: Path, expected: dict[Any, int], completed: dict[Any, int]
) -> tuple[FileStats, _FailureTally]:
    stats, tally = FileStats(str(path)), _FailureTally()
    for _line, row in _scan(path, stats):
        cls = row.get("_ng_failure_class")
        tally.by_class[cls if isinstance(cls, str) else "(no class)"] += 1
        key = rollout_key(row)
        packed = None if key is None else pack_key(key)
        tally.digest.add(Failure.from_fields(row), key, still_missing=packed not in completed)
        if packed is None:
            stats.rows_without_key += 1
            continue
        if packed not in expected and packed not in tally.keys:
            tally.unknown_keys += 1
        tally.keys.add(packed)
        tally.attempts[packed] += 1
    return stats, tally


def check_run(
    inputs: Path | str,
    rollouts: Path | str,
    failures: Path | str | None = None,
    others: tuple[Path | str, ...] = (),
) -> CheckResult:
    """Account for every key. `failures` defaults to `<rollouts stem>_failures.jsonl` if that exists.
    `others` (a profile, health files...) are each held against the inputs (audit/crossfiles.py)."""
    inputs, rollouts = Path(inputs), Path(rollouts)
    refuse_swapped(inputs, rollouts)
    failures = failures_beside(rollouts, failures)
    if failures is not None:
        refuse_wrong_kind(failures, FAILURES, option="--failures")
    agents = _Agents()
    in_stats, expected = _read_inputs(inputs, agents)
    out_stats, tally = _read_rollouts(rollouts, expected, agents)
    fail_stats, fail = (
        (None, _FailureTally())
        if failures is None
        else _read_failures(Path(failures), expected, tally.completed)
    )
    collected = _collected_by(rollouts)
    result = summarize(in_stats, out_stats, fail_stats, expected, tally, fail, agents.names, collected)
    result.findings += cross_check(inputs, [Path(p) for p in others], (str(rollouts), out_stats.rows))
    manifest, problem = manifest_and_problem(rollouts)  # read once: pace, retries, adaptive, rows written
    if problem is not None:
        result.findings.append(_manifest_unreadable(rollouts, problem))
    live = live_run(rollouts)
    result.findings += _adaptive(result, manifest, rollouts, live is not None)
    if live is None:  # a collector writing now has not recorded its rows yet
        found = manifest_rows_finding(manifest, rollouts, out_stats.rows)
        result.findings += [found] if found is not None else []
    if live is not None:
        speed = pace(rollouts, live, result.counts.missing, manifest)
        up_to = adaptive_up_to(manifest)
        result.in_progress = progress_block(live, speed, up_to)
        result.findings = while_running(result, live, speed, up_to)
    result.retries = retries_of(manifest)
    result.prefix_cache = prefix_cache_in(manifest)
    return result


def _manifest_unreadable(rollouts: Path, problem: str) -> Finding:
    path = manifest_path_for(rollouts)
    message = (
        f"the run manifest {path} cannot be read ({problem}): nothing it records is checked (an adaptive"
        " run's decisions, the rows each invocation wrote), and stats, compare, curriculum and profile"
        " refuse it"
    )
    fix = "put back the manifest collect wrote (collect --resume needs it too), or move it aside"
    return Finding("run_manifest_unreadable", WARNING, 1, message, fix)


def _adaptive(result: CheckResult, manifest: Any, rollouts: Path, live: bool) -> list[Finding]:
    """An adaptive run's decisions replayed on its stored rewards (`adaptive_check`): `result.adaptive`,
    and an error finding when they differ or the manifest's adaptive block is malformed. A fixed-N run
    (no identity.adaptive) imports and reads nothing more."""
    identity = manifest.get("identity") if manifest is not None else None
    if not isinstance(identity, dict) or not isinstance(identity.get("adaptive"), dict):
        return []
    from ..artifacts.resume import resume_command
    from ..stats.adaptive_run import adaptive_in
    from .adaptive_check import check_decisions, decision_findings

    try:
        run = adaptive_in(manifest, manifest_path_for(rollouts))
    except InputError as error:
        message = f"{error}: the run's decisions cannot be checked"
        return [Finding("adaptive_manifest_invalid", ERROR, 1, message)]
    if run is None:
        return []
    result.adaptive = check_decisions(run, rollouts, live)
    if not result.adaptive.differ:
        return []
    resume = resume_command(manifest, output=rollouts)
    if resume is None:
        resume = f"ngrp collect --output {rollouts} --resume <the options of {run.manifest}>"
    return decision_findings(result.adaptive, resume)


def _collected_by(rollouts: Path) -> CollectedBy:
    """How the run was collected, from its ngrp manifest, for the fixes of its failures: the variable it
    read its API key from (the fix of a 401), `failures.MODES` ("gym" without an ngrp manifest: Gym's
    own collector wrote it) and its --max-attempts, past which a plain --resume skips a failed key (None
    when unknown)."""
    manifest = manifest_path_for(rollouts)
    if not manifest.is_file():
        return CollectedBy()
    try:
        data = read_json(manifest)
    except (InputError, OSError):
        return CollectedBy()
    if not isinstance(data, dict):
        return CollectedBy()
    options = data.get("options")
    options = options if isinstance(options, dict) else {}
    name, limit = options.get("api_key_env"), options.get("max_attempts")
    key_env = name if isinstance(name, str) and name else "OPENAI_API_KEY"
    max_attempts = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    if data.get("command") == "reverify":
        return CollectedBy(key_env, "reverify", max_attempts)
    return CollectedBy(key_env, "gym" if data.get("backend") == "gym" else "direct", max_attempts)
