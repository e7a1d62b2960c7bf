"""`reverify`: re-score stored rollouts with another verifier. Nothing is sent to the model.

Plan from disk (the source rollouts, optional materialized inputs, what an earlier run already wrote),
then re-score the pending rows with bounded admission, exactly as `collect` runs its rows: workers pull
from one shared generator, every result and every failed attempt is appended and flushed as it
completes, so a kill at any moment and `--resume` leave every key exactly once. The verifier options and
their code are collect's (verify.py; /verify goes through http.py's timeouts and bounded retries).

A re-scored row is the stored row with the new verifier's fields written over it: identity, response and
everything else are kept, `reward` is the new reward and `ngrp/previous_reward` the old one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..artifacts import jsonl, names
from ..artifacts.failures import Failure
from ..artifacts.kinds import ROLLOUTS, refuse_swapped, refuse_wrong_kind
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, key_problem, pack_key, rollout_key
from ..artifacts.opening import line_too_long, max_line_bytes, open_input, require_regular, same_file
from ..artifacts.redact import Redactor, masked_errors, server_redactor
from ..collect.http import AttemptFailed, RetryPolicy, open_session
from ..collect.materialize import sha256_file
from ..collect.preflight import DEFAULT_TIMEOUT, blocking, check_verify_url
from ..collect.progress import ProgressBar, Tally
from ..collect.routing import public_url, split_http_url
from ..collect.run import IDENTITY_KEYS
from ..collect.state import CollectorLock, check_manifest, nothing_written, now_iso, scan_outputs
from ..collect.verify import describe, score, verifier_for
from ..collect.work import run_workers
from ..errors import FindingsError, InputError, UsageError

PREVIOUS_REWARD = "ngrp/previous_reward"
REVERIFIED_WITH = "ngrp/reverified_with"
# Never taken from a verifier's answer: the row's identity and what the model produced.
_KEPT = frozenset({*IDENTITY_KEYS, "response", "responses_create_params"})
# Not sent to the verifier when the rollout row itself is the verifier's input (no --inputs).
_NOT_SENT = frozenset({"reward", PREVIOUS_REWARD, REVERIFIED_WITH, "response"})


@dataclass(frozen=True)
class ReverifyOptions:
    rollouts: Path
    output: Path
    inputs: Path | None = None  # materialized inputs: the verifier gets the input row, as Gym's reverify
    verifier: str | None = None
    verifier_pattern: str | None = None
    answer_key: str = "expected_answer"
    verify_url: str | None = None
    verifier_fn: str | None = None
    concurrency: int = 32
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_attempts: int = 3
    resume: bool = False
    overwrite: bool = False
    progress: bool = False
    verifier_from: str | None = None  # the run manifest the verifier was read from (no verifier option)

    def __post_init__(self) -> None:
        if self.resume and self.overwrite:
            raise UsageError("--resume and --overwrite contradict each other; choose one")
        if self.concurrency < 1 or self.max_attempts < 1:
            raise UsageError("--concurrency and --max-attempts must be at least 1")
        if not (math.isfinite(self.retry.timeout) and self.retry.timeout > 0):
            raise UsageError(f"--timeout must be finite and > 0, not {self.retry.timeout}")
        if self.retry.max_retries < 0:
            raise UsageError(f"--max-retries must be >= 0, not {self.retry.max_retries}")
        if self.verify_url is not None:  # as collect: a port out of range, no host... named, password masked
            split_http_url(self.verify_url, "--verify-url")
        written = (self.output, self.failures_path, self.manifest_path)
        for role, path in (("--rollouts", self.rollouts), ("--inputs", self.inputs)):
            if path is not None and any(same_file(path, out) for out in written):
                raise UsageError(
                    f"{role} {path} would be written over: reverify never rewrites its input in place",
                    hint="give --output a new file name",
                )

    @property
    def failures_path(self) -> Path:
        return names.failures_path_for(self.output)

    @property
    def manifest_path(self) -> Path:
        return names.sibling(self.output, names.REVERIFY_MANIFEST_SUFFIX, ".json")

    def identity(self, source_sha: str, inputs_sha: str | None) -> dict[str, Any]:
        """What shapes the results; --resume refuses to continue when any of it changed."""
        return {
            "rollouts_sha256": source_sha,
            "inputs_sha256": inputs_sha,
            "verifier": self.verifier,
            "verifier_pattern": self.verifier_pattern,
            "answer_key": self.answer_key,
            "verify_url": None if self.verify_url is None else public_url(self.verify_url),
            "verifier_fn": self.verifier_fn,
        }


@dataclass
class RewardChanges:
    """Old reward (`ngrp/previous_reward`) against new (`reward`) over the rows of the output file."""

    rows: int = 0
    increased: int = 0
    decreased: int = 0
    unchanged: int = 0
    newly_scored: int = 0  # old reward null, absent or not a number; new one a number
    no_longer_scored: int = 0  # the other way round
    unscored: int = 0  # neither is a number
    mean_before: float | None = None  # over the rows where both are numbers
    mean_after: float | None = None

    @property
    def changed(self) -> int:
        return self.increased + self.decreased + self.newly_scored + self.no_longer_scored


@dataclass
class ReverifyResult:
    rollouts: str
    output: str
    failures: str
    manifest: str
    verifier: str
    source_rows: int
    completed: int
    missing: int
    rescored: int
    failed: int
    skipped_completed: int
    exhausted: int
    failures_by_class: dict[str, int]
    changes: RewardChanges
    elapsed_s: float
    rows_per_s: float
    resumed: bool
    repaired: dict[str, str] = field(default_factory=dict)
    verifier_from: str | None = None  # the run's own verifier, read from this manifest

    @property
    def complete(self) -> bool:
        return self.missing == 0

    @property
    def rewards_differ(self) -> bool:
        """An audit's finding: re-scored with the run's own verifier, some stored rewards are not its."""
        return self.verifier_from is not None and self.changes.changed > 0

    @property
    def exit_code(self) -> int:
        """1 when rows are missing, or when an audit (the run's own verifier) finds rewards that differ."""
        return 0 if self.complete and not self.rewards_differ else 1

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["changes"]["changed"] = self.changes.changed
        return {**out, "complete": self.complete, "exit_code": self.exit_code}


@dataclass
class _Plan:
    keys: set[Any]  # packed source keys
    sha256: str
    inputs: dict[Any, tuple[int, int]] | None  # packed key -> (offset, length) of its materialized line
    inputs_sha256: str | None


def _index_inputs(path: Path, answer_key: str | None) -> tuple[dict[Any, tuple[int, int]], set[Any]]:
    """Where each key's materialized line is (so no input row is held), and the keys without `answer_key`."""
    index: dict[Any, tuple[int, int]] = {}
    no_answer: set[Any] = set()
    lines: dict[Any, int] = {}
    offset = 0
    limit = max_line_bytes()
    with open_input(path) as handle:  # regular files only; lines bounded, as every reader's
        for number, line in enumerate(iter(functools.partial(handle.readline, limit + 2), b""), 1):
            if len(line) > limit + 1:
                raise line_too_long(path, number, limit)
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            parsed = jsonl.parse_line(line.rstrip(b"\r\n"), number)
            if not isinstance(parsed, jsonl.Row):
                raise InputError(parsed.message, path=path, line=number)
            key = rollout_key(parsed.data)
            if key is None:
                raise InputError(key_problem(parsed.data), path=path, line=number)
            packed = pack_key(key)
            if packed in index:
                first = lines[packed]
                raise InputError(
                    f"rollout key {key} is also at line {first}: which input re-scores it?", path=path,
                    line=number, hint="pass the run's materialized inputs as its collector wrote them",
                )  # fmt: skip
            index[packed], lines[packed] = (start, len(line)), number
            if answer_key is not None and parsed.data.get(answer_key) is None:
                no_answer.add(pack_key(key))
    return index, no_answer


def _plan(options: ReverifyOptions, needs_answer: bool) -> _Plan:
    source = options.rollouts
    for path in (source, options.inputs):
        if path is not None:
            require_regular(path)
    answer_key = options.answer_key if needs_answer else None
    inputs, no_answer = (None, set()) if options.inputs is None else _index_inputs(options.inputs, answer_key)
    keys: dict[Any, int] = {}
    for row in jsonl.iter_rows(source):
        key = rollout_key(row.data)
        if key is None:
            raise InputError(key_problem(row.data, "rollout"), path=source, line=row.line)
        packed = pack_key(key)
        if packed in keys:
            raise FindingsError(
                f"{source}:{row.line}: rollout key {key} is also at line {keys[packed]}: which to re-score?",
                hint=f"deduplicate first: ngrp merge {source} --output <new file>",
            )
        keys[packed] = row.line
        _check_verifiable(options, row, key, packed, inputs, no_answer, answer_key)
    return _Plan(set(keys), sha256_file(source), inputs,
                 None if options.inputs is None else sha256_file(options.inputs))  # fmt: skip


def _check_verifiable(options, row, key, packed, inputs, no_answer, answer_key) -> None:
    """Stop before any request when a row could never be re-scored for want of its input."""
    if inputs is not None and packed not in inputs:
        raise InputError(
            f"rollout key {key} has no row in --inputs {options.inputs}", path=options.rollouts,
            line=row.line, hint="pass the materialized inputs this run was collected from",
        )  # fmt: skip
    if answer_key is None:
        return
    missing = packed in no_answer if inputs is not None else row.data.get(answer_key) is None
    if missing:
        raise InputError(
            f"no {answer_key!r} for the verifier to compare with (key {key})",
            path=options.inputs if inputs is not None else options.rollouts,
            line=None if inputs is not None else row.line,
            hint="choose the field with --answer-key, or pass --inputs with the materialized inputs",
        )


def rescored_row(row: dict[str, Any], verdict: dict[str, Any], verifier: str) -> dict[str, Any]:
    """The stored row with the new verifier's fields over it; the old reward under ngrp/previous_reward."""
    out = dict(row)
    out.update((k, v) for k, v in verdict.items() if k not in _KEPT)
    out[PREVIOUS_REWARD] = row.get("reward")
    out[REVERIFIED_WITH] = verifier
    return out


RUN_VERIFIER_FIELDS = ("verifier", "verifier_pattern", "answer_key", "verify_url", "verifier_fn")


def run_verifier(rollouts: Path) -> tuple[dict[str, Any], Path]:
    """The verifier the run was collected with, from the run manifest beside `rollouts` (what `collect`
    recorded in its identity): the fields of `ReverifyOptions` that choose it, and the manifest's path.
    A usage error when no manifest names one (a run ngrp did not collect: name the verifier)."""
    from ..artifacts.manifest import manifest_beside

    path = names.manifest_path_for(rollouts)
    manifest = manifest_beside(rollouts)
    identity = manifest.get("identity") if manifest is not None else None
    found = {k: identity.get(k) for k in RUN_VERIFIER_FIELDS} if isinstance(identity, dict) else {}
    if not any(found.get(k) for k in ("verifier", "verify_url", "verifier_fn")):
        raise UsageError(
            f"no verifier given, and no run manifest beside {rollouts} names the run's ({path})",
            hint="choose one: --verifier exact|math|mcq|regex, --verify-url URL or --verifier-fn MOD:FN",
        )
    found["answer_key"] = found.get("answer_key") or "expected_answer"
    return found, path


def reverify(options: ReverifyOptions) -> ReverifyResult:
    """Re-score; a password in --verify-url is masked in every message and every row written."""
    redactor = server_redactor([options.verify_url])
    with masked_errors(redactor):
        return _reverify(options, redactor)


def _reverify(options: ReverifyOptions, redactor: Redactor) -> ReverifyResult:
    if options.inputs is None:
        refuse_wrong_kind(options.rollouts, ROLLOUTS, option="--rollouts")
    else:
        refuse_swapped(options.inputs, options.rollouts)
    verifier = verifier_for(options)
    if options.verify_url:  # collect's pre-flight probe: a dead /verify server is named before anything
        timeout = min(options.retry.timeout, DEFAULT_TIMEOUT)
        check = blocking(check_verify_url, options.verify_url, timeout=timeout)
        if not check.ok:
            raise UsageError(check.line(), hint="nothing was re-scored and no file was written")
    with CollectorLock(options.output):
        resume = options.resume and not nothing_written(options.output, options.failures_path)
        if not resume:
            _refuse_earlier(options)
        plan = _plan(options, getattr(verifier, "needs_answer", False))
        if not resume:  # only once the source and inputs are known good: a refused run loses nothing
            _discard_earlier(options)
        identity = options.identity(plan.sha256, plan.inputs_sha256)
        if resume:
            check_manifest(options.manifest_path, identity)
        else:
            jsonl.write_json(options.manifest_path, _manifest(options, identity, plan), indent=True)
        disk = scan_outputs(options.output, options.failures_path)
        done = {pack_key(k) for k in disk.completed}
        stray = done - plan.keys
        if stray:
            raise InputError(
                f"{len(stray)} keys of the output are not in {options.rollouts}", path=options.output,
                hint="--output belongs to another run: choose a new file, or --overwrite",
            )  # fmt: skip
        exhausted = sum(
            1 for k, n in disk.attempts.items() if n >= options.max_attempts and pack_key(k) not in done
        )
        to_run = len(plan.keys) - len(done) - exhausted
        run = _Run(options, verifier, disk, to_run, plan, redactor)
        asyncio.run(run.run_all())
    return _result(options, verifier, plan, disk, run, resume)


def _outputs(options: ReverifyOptions) -> list[Path]:
    return [options.output, options.failures_path, options.manifest_path]


def _refuse_earlier(options: ReverifyOptions) -> None:
    """A fresh run: refuse an earlier run's outputs unless --overwrite (nothing is deleted here)."""
    existing = [p for p in _outputs(options) if p.exists()]
    if existing and not options.overwrite:
        raise UsageError(
            f"outputs of an earlier reverify exist: {', '.join(map(str, existing))}",
            hint="pass --resume to continue it, or --overwrite to discard it and start over",
        )


def _discard_earlier(options: ReverifyOptions) -> None:
    """--overwrite, after every check has passed: the earlier run's files go."""
    for path in _outputs(options):
        path.unlink(missing_ok=True)


def _manifest(options: ReverifyOptions, identity: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    return {
        "tool": {"name": "ngrp", "version": __version__},
        "command": "reverify",
        "created_at": now_iso(),
        "rollouts": {"path": str(options.rollouts), "sha256": plan.sha256, "rows": len(plan.keys)},
        "inputs": None if options.inputs is None
        else {"path": str(options.inputs), "sha256": plan.inputs_sha256},
        "output": {"path": str(options.output)},
        "identity": identity,
        "options": {"concurrency": options.concurrency, "timeout": options.retry.timeout,
                    "max_retries": options.retry.max_retries, "max_attempts": options.max_attempts},
    }  # fmt: skip


class _Run:
    """State shared by the workers of one reverify run."""

    def __init__(
        self, options: ReverifyOptions, verifier: Any, disk: Any, to_run: int, plan: _Plan, redactor: Redactor
    ) -> None:
        self.options, self.verifier, self.disk, self.plan = options, verifier, disk, plan
        self.redactor = redactor
        self.label = describe(verifier)
        self.tally = Tally(total=to_run, done_before=len(disk.completed))
        self.bar = ProgressBar(self.tally, options.progress)
        self.session: Any = None
        self._inputs_fd: int | None = None

    async def run_all(self) -> None:
        results = jsonl.Appender(self.options.output, redact=self.redactor)
        failures = jsonl.Appender(self.options.failures_path, redact=self.redactor)
        if self.plan.inputs is not None and self.options.inputs is not None:
            with open_input(self.options.inputs) as handle:  # never a FIFO swapped in since the index
                self._inputs_fd = os.dup(handle.fileno())
        try:
            async with _session(self.verifier, self.options.concurrency) as self.session:
                rows = self.pending()
                workers = (self.worker(rows, results, failures) for _ in range(self.options.concurrency))
                await run_workers(workers)  # one failing (a full disk) stops the others before the session
        finally:
            self.bar.close()
            results.close()
            failures.close()
            if self._inputs_fd is not None:
                os.close(self._inputs_fd)

    def pending(self) -> Iterator[tuple[dict, int]]:
        for row in jsonl.iter_rows(self.options.rollouts):
            key = (row.data[TASK_KEY], row.data[ROLLOUT_KEY])
            if key in self.disk.completed or self.disk.attempts[key] >= self.options.max_attempts:
                continue
            yield row.data, self.disk.attempts[key]

    def input_row(self, key: tuple[int, int]) -> dict | None:
        if self._inputs_fd is None or self.plan.inputs is None:
            return None
        offset, length = self.plan.inputs[pack_key(key)]
        return jsonl.loads(os.pread(self._inputs_fd, length, offset))

    async def worker(self, rows: Iterator[tuple[dict, int]], results: Any, failures: Any) -> None:
        for row, attempt in rows:  # one shared generator: a row is admitted only when a worker is free
            started = time.monotonic()
            try:
                out = await self.rescore(row)
                results.write(out)  # serialized whole first: a failure here writes no byte
            except AttemptFailed as failure:
                self.record_failure(failures, row, attempt, failure, time.monotonic() - started)
            except TypeError as exc:  # orjson: a verifier value JSON cannot hold
                not_json = AttemptFailed("verify_failed", type(exc).__name__, f"result is not JSON: {exc}")
                self.record_failure(failures, row, attempt, not_json, time.monotonic() - started)
            else:
                self.tally.add_result(out.get("reward"), 0)
            self.bar.update()

    async def rescore(self, row: dict) -> dict:
        response = row.get("response")
        if not isinstance(response, dict):
            raise AttemptFailed(
                "no_response", "MissingResponse", "the row has no response object to re-score"
            )
        source = self.input_row((row[TASK_KEY], row[ROLLOUT_KEY]))
        if source is None:
            source = {k: v for k, v in row.items() if k not in _NOT_SENT}
        verdict = await score(self.verifier, source, response, self.session)
        if not isinstance(verdict, dict) or "reward" not in verdict:
            raise AttemptFailed("verify_failed", "VerifyError", "the verifier returned no 'reward'")
        return rescored_row(row, verdict, self.label)

    def record_failure(
        self, failures: Any, row: dict, attempt: int, failure: AttemptFailed, elapsed: float
    ) -> None:
        out = {
            **failure.fields(),
            **{k: row[k] for k in IDENTITY_KEYS if k in row},
            "_ng_attempt_index": attempt,
            "_ngrp_elapsed_s": round(elapsed, 4),
            "_ngrp_retries": failure.retries,
        }
        failures.write(out)
        last = attempt + 1 >= self.options.max_attempts
        self.tally.add_failure(Failure.from_fields(out), rollout_key(out), last=last)


def _session(verifier: Any, concurrency: int) -> Any:
    """collect's session, only for /verify (built-in and function verifiers need none: no aiohttp import)."""
    if getattr(verifier, "kind", None) != "url":
        return contextlib.nullcontext()
    return open_session(concurrency)


def _number(value: Any) -> float | None:
    return float(value) if type(value) in (int, float, bool) else None


def reward_changes(output: Path | str) -> RewardChanges:
    """Count, over the output rows, how the reward moved from `ngrp/previous_reward` to `reward`."""
    changes = RewardChanges()
    before = after = 0.0
    paired = 0
    for row in jsonl.iter_rows(output):
        changes.rows += 1
        old, new = _number(row.data.get(PREVIOUS_REWARD)), _number(row.data.get("reward"))
        if old is None or new is None:
            field_name = (
                "unscored"
                if old is None and new is None
                else "newly_scored"
                if old is None
                else "no_longer_scored"
            )
            setattr(changes, field_name, getattr(changes, field_name) + 1)
            continue
        paired += 1
        before, after = before + old, after + new
        if new > old:
            changes.increased += 1
        elif new < old:
            changes.decreased += 1
        else:
            changes.unchanged += 1
    if paired:
        changes.mean_before, changes.mean_after = before / paired, after / paired
    return changes


def _result(
    options: ReverifyOptions, verifier: Any, plan: _Plan, disk: Any, run: _Run, resumed: bool
) -> ReverifyResult:
    t = run.tally
    completed = len(disk.completed) + t.completed
    classes: Counter = t.failure_classes
    exhausted = t.exhausted + sum(  # out of attempts before this run, and during it
        1 for k, n in disk.attempts.items() if n >= options.max_attempts and k not in disk.completed
    )
    return ReverifyResult(
        rollouts=str(options.rollouts),
        output=str(options.output),
        failures=str(options.failures_path),
        manifest=str(options.manifest_path),
        verifier=run.label,
        source_rows=len(plan.keys),
        completed=completed,
        missing=len(plan.keys) - completed,
        rescored=t.completed,
        failed=t.failed,
        skipped_completed=len(disk.completed),
        exhausted=exhausted,
        failures_by_class=dict(classes),
        changes=reward_changes(options.output),
        elapsed_s=round(t.elapsed, 3),
        rows_per_s=round(t.completed / t.elapsed, 3),
        resumed=resumed,
        repaired=disk.repaired,
        verifier_from=options.verifier_from,
    )
