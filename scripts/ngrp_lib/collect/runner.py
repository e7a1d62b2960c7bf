"""The collection loop: plan from disk, then run the pending rows with bounded admission.

Workers pull rows from one shared generator that streams the materialized file, so at most
`concurrency` rows are in flight and memory does not grow with the number of rows. Every result and
every failed attempt is appended and flushed as it completes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..artifacts import jsonl, names, schemas
from ..artifacts.names import RCP, ROLLOUT_KEY, TASK_KEY
from ..artifacts.opening import same_file
from ..errors import InputError, UsageError
from .direct import DirectRun, Plan
from .materialize import materialize, sha256_file
from .options import CollectOptions
from .shards import restrict_file
from .state import CollectorLock, build_manifest, check_manifest, scan_outputs
from .verify import make_verifier


@dataclass
class CollectResult:
    output: str
    failures: str
    manifest: str
    materialized: str
    expected: int
    completed: int
    missing: int
    attempted: int
    succeeded: int
    failed: int
    skipped_completed: int
    exhausted: int
    failures_by_class: dict[str, int]
    elapsed_s: float
    rollouts_per_s: float
    output_tokens: int
    output_tokens_per_s: float
    mean_reward: float | None
    resumed: bool
    repaired: dict[str, str] = field(default_factory=dict)
    duplicates_found: int = 0
    stopped_early: str | None = None

    @property
    def complete(self) -> bool:
        """Every key exactly once: a duplicated key (an edit or a concatenation, never this collector)
        would be refused by the profiler, so the run is not done."""
        return self.missing == 0 and self.duplicates_found == 0

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self), "complete": self.complete, "exit_code": 0 if self.complete else 1}


def scan_materialized(path: Path, needs_answer: str | None) -> tuple[Plan, set]:
    """Validate every materialized row up front (so a bad row stops the run before any request)."""
    keys: set[tuple[int, int]] = set()
    for row in jsonl.iter_rows(path):
        key = names.rollout_key(row.data)
        if key is None:
            raise InputError(
                f"materialized row needs integer {TASK_KEY} and {ROLLOUT_KEY}", path=path, line=row.line
            )
        if key in keys:
            raise InputError(f"duplicate rollout key {key}", path=path, line=row.line)
        if not isinstance(row.data.get(RCP), dict):
            raise InputError(f"{RCP} must be an object", path=path, line=row.line, pointer=f"/{RCP}")
        problem = schemas.first_problem("materialized_input", row.data)  # the contract `validate` checks
        if problem is not None:
            raise InputError(problem[1], path=path, line=row.line, pointer=problem[0])
        if needs_answer and row.data.get(needs_answer) is None:
            raise InputError(
                f"row has no {needs_answer!r} for the verifier to compare with",
                path=path,
                line=row.line,
                hint="choose the field with --answer-key",
            )
        keys.add(key)
    return Plan(rows=len(keys), sha256=sha256_file(path)), keys


def collect(options: CollectOptions) -> CollectResult:
    verifier = (
        None
        if options.gym_url
        else make_verifier(
            options.verifier,
            answer_key=options.answer_key,
            pattern=options.verifier_pattern,
            url=options.verify_url,
            function=options.verifier_fn,
            timeout=options.retry.timeout,
            policy=options.retry,
        )
    )
    with CollectorLock(options.output):
        if not options.resume:
            _start_fresh(options)
        elif _nothing_collected(options):
            # Like Gym: resuming a run that never wrote a row (or never started) is a fresh start.
            options = replace(options, resume=False, overwrite=True)
            _start_fresh(options)
        elif not options.materialized_path.exists():
            raise UsageError(
                f"cannot resume: {options.materialized_path} does not exist",
                hint="start over with --overwrite (earlier rollouts are discarded)",
            )
        needs_answer = options.answer_key if getattr(verifier, "needs_answer", False) else None
        plan, keys = scan_materialized(options.materialized_path, needs_answer)
        if options.shard is not None:
            keys = {k for k in keys if options.shard.owns(k[0])}
            plan.rows = len(keys)
        input_sha = sha256_file(options.input) if options.input is not None else None
        identity = options.identity(input_sha, plan.sha256)
        if options.resume:
            check_manifest(options.manifest_path, identity)
        else:
            files = _file_refs(options, input_sha, plan)
            jsonl.write_json(
                options.manifest_path, build_manifest(identity, files, options.runtime()), indent=True
            )
        disk = scan_outputs(options.output, options.failures_path)
        stray = disk.completed - keys
        if stray:
            raise InputError(
                f"{len(stray)} keys are not in the materialized file, e.g. {sorted(stray)[:3]}",
                path=options.output,
            )
        plan.exhausted = sum(1 for k in keys - disk.completed if disk.attempts[k] >= options.max_attempts)
        plan.to_run = len(keys) - len(disk.completed) - plan.exhausted
        del keys
        return asyncio.run(_run(options, verifier, plan, disk))


def _nothing_collected(options: CollectOptions) -> bool:
    """No rollout and no failure was ever written (a run killed while starting, or none at all)."""
    return all(not p.exists() or p.stat().st_size == 0 for p in (options.output, options.failures_path))


def _start_fresh(options: CollectOptions) -> None:
    outputs = [options.output, options.failures_path, options.manifest_path]
    if options.input is not None:
        outputs.append(options.materialized_path)
    source = options.input if options.input is not None else options.materialized
    if source is not None and any(same_file(source, p) for p in outputs):
        raise UsageError(  # --overwrite would delete the very rows it is about to read
            f"{source} is both an input and an output of this run", hint="give --output another file name"
        )
    existing = [p for p in outputs if p.exists()]
    if existing and not options.overwrite:
        raise UsageError(
            f"outputs of an earlier run exist: {', '.join(map(str, existing))}",
            hint="pass --resume to continue that run, or --overwrite to discard it and start over",
        )
    for path in (options.output, options.failures_path, options.manifest_path):
        path.unlink(missing_ok=True)
    for path in (options.materialized_path, options.manifest_path):  # an earlier collector killed mid-write
        for stale in path.parent.glob(f".{path.name}.*.tmp"):  # we hold the lock: no one else writes these
            stale.unlink(missing_ok=True)
    if options.input is not None:
        materialize(options.input, options.materialized_path, options.materialize, overwrite=True)
        if options.shard is not None:
            restrict_file(options.materialized_path, options.shard)


def _file_refs(options: CollectOptions, input_sha: str | None, plan: Plan) -> dict[str, Any]:
    files: dict[str, Any] = {
        "materialized": {"path": str(options.materialized_path), "sha256": plan.sha256, "rows": plan.rows},
        "rollouts": {"path": str(options.output)},
    }
    if options.input is not None:
        files["input"] = {"path": str(options.input), "sha256": input_sha}
    return files


async def _run(options: CollectOptions, verifier: Any, plan: Plan, disk: Any) -> CollectResult:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=options.concurrency + 8, limit_per_host=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        run = _run_class(options)(options, verifier, plan, disk, session)
        try:
            rows = run.pending()
            await asyncio.gather(*(run.worker(rows) for _ in range(options.concurrency)))
        finally:
            run.close()
    return _result(options, plan, disk, run)


def _run_class(options: CollectOptions) -> type[DirectRun]:
    if options.gym_url:
        from .gym_backend import GymRun

        return GymRun
    return DirectRun


def _result(options: CollectOptions, plan: Plan, disk: Any, run: DirectRun) -> CollectResult:
    t = run.tally
    completed = len(disk.completed) + t.completed
    return CollectResult(
        output=str(options.output),
        failures=str(options.failures_path),
        manifest=str(options.manifest_path),
        materialized=str(options.materialized_path),
        expected=plan.rows,
        completed=completed,
        missing=plan.rows - completed,
        attempted=t.completed + t.failed,
        succeeded=t.completed,
        failed=t.failed,
        skipped_completed=len(disk.completed),
        exhausted=plan.exhausted,
        failures_by_class=dict(t.failure_classes),
        elapsed_s=round(t.elapsed, 3),
        rollouts_per_s=round(t.completed / t.elapsed, 3),
        output_tokens=t.output_tokens,
        output_tokens_per_s=round(t.output_tokens / t.elapsed, 1),
        mean_reward=t.mean_reward,
        resumed=options.resume,
        repaired=disk.repaired,
        duplicates_found=disk.duplicates,
        stopped_early=run.stopped_early,
    )
