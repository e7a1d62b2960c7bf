"""One collection, start to finish: stage and scan the rows, check the servers, write the manifest, then
run the pending rows (`run.Run`) and sum up (`result.CollectResult`).

Order matters for "nothing collected earlier is lost": the rows are materialized into a staging file and
scanned (a malformed row is exit 3 whatever the servers), the servers are checked (`preflight`), and the
rows are held against the model's context, all before any file of an earlier run is replaced, so a run
refused before its first row leaves the earlier run's files as they were, and removes the lock file and
the empty folders it created (`state.CollectorLock`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifacts import jsonl, names, schemas, task_lines
from ..artifacts.kinds import MATERIALIZED, refuse_wrong_kind
from ..artifacts.names import RCP, TASK_KEY
from ..artifacts.redact import Redactor, masked_errors
from ..artifacts.sampling import SamplingTally, apply_overrides
from ..errors import InputError, UsageError
from . import gym_run
from .direct import DirectRun
from .grouping import has_seed
from .gym_run import GymRun, check_agents
from .gym_targets import GymTargets, resolve_gym_url
from .interrupt import REASON as INTERRUPTED
from .interrupt import Interrupt
from .invocations import open_invocation, record_cost
from .materialize import expand, read_task_lines, sha256_file, task_source_lines
from .metrics import cache_note, prefix_cache, prefix_counts, read_counters, read_counts
from .options import CollectOptions, sequence_limit
from .preflight import (
    DEFAULT_TIMEOUT,
    REFUSED,
    OutputBudget,
    ServerCheck,
    auth_headers,
    check_endpoints,
    check_verify_url,
)
from .result import CollectResult, Plan, build_result
from .routing import Endpoint
from .run import Run, run_redactor, stderr_log
from .state import CollectorLock, build_manifest, check_manifest, nothing_written, scan_outputs
from .verify import verifier_for
from .work import FollowUp, run_workers

if TYPE_CHECKING:
    from .shards import Shard

__all__ = ["CollectResult", "collect", "scan_materialized"]


def scan_materialized(
    path: Path,
    needs_answer: str | None,
    *,
    budget: OutputBudget | None = None,
    shard: Shard | None = None,
    staged: bool = False,
) -> tuple[Plan, set]:
    """Validate every materialized row up front (so a bad row stops the run before any request); the
    keys of the rows this run owns (all, or its shard's). One pass over the file: the plan's sha256 is
    hashed from the bytes read. A `staged` file (this run just wrote it from --input) needs no kind check."""
    if not staged:
        refuse_wrong_kind(path, MATERIALIZED, option="--materialized")
    keys: set[tuple[int, int]] = set()
    seen: set[tuple[int, int]] = set()
    seeded = 0
    sampling = SamplingTally()  # what the rows ask for, for the manifest (options alone miss the rows' own)
    agents: dict[str | None, dict] = {}  # a row for each agent named: Gym mode checks each has a server
    digest = hashlib.sha256()
    for row in jsonl.iter_rows(path, on_block=digest.update):
        key = names.rollout_key(row.data)
        if key is None:
            raise InputError(names.key_problem(row.data), path=path, line=row.line)
        if key in seen:
            raise InputError(f"duplicate rollout key {key}", path=path, line=row.line)
        seen.add(key)
        if shard is not None and not shard.owns(key[0]):
            continue
        if not isinstance(row.data.get(RCP), dict):
            raise InputError(f"{RCP} must be an object", path=path, line=row.line, pointer=f"/{RCP}")
        problem = schemas.first_problem("materialized_input", row.data)  # the contract `validate` checks
        if problem is not None:
            raise InputError(problem[1], path=path, line=row.line, pointer=problem[0])
        _check_row(path, row, needs_answer, budget, row.data[RCP])
        keys.add(key)
        seeded += has_seed(row.data[RCP])
        sampling.add(row.data)
        agents.setdefault(names.agent_name(row.data), row.data)
    if not seen:  # a run of nothing would end "complete" with 0 rows
        raise UsageError(
            f"{path} holds no materialized rows", hint="materialize a task file with at least one row"
        )
    plan = Plan(rows=len(keys), sha256=digest.hexdigest(), seeded=seeded, sampling=sampling.to_json())
    plan.agent_rows = list(agents.values())
    return plan, keys


def check_tasks(
    options: CollectOptions, rows: list[Any], needs_answer: str | None, budget: OutputBudget
) -> None:
    """The checks of `scan_materialized` on the --input rows the run will materialize, so that a
    message names the line of the user's file."""
    assert options.input is not None
    overrides = options.materialize.overrides
    for row in rows:
        params = row.data.get(RCP)
        if isinstance(params, dict):  # materialize names a row without one
            _check_row(options.input, row, needs_answer, budget, apply_overrides(params, overrides))


def _check_row(
    path: Path, row: Any, needs_answer: str | None, budget: OutputBudget | None, params: dict
) -> None:
    if needs_answer and row.data.get(needs_answer) is None:
        raise InputError(
            f"row has no {needs_answer!r} for the verifier to compare with",
            path=path,
            line=row.line,
            hint="choose the field with --answer-key",
        )
    if budget is not None:
        budget.see(f"{path}:{row.line}", params)


async def collect(
    options: CollectOptions,
    session: Any,
    log: Callable[[str], None] = stderr_log,
    interrupt: Interrupt | None = None,
    follow_up: FollowUp | None = None,
) -> CollectResult:
    """Run a collection with the caller's aiohttp session (`http.open_session`); the API key comes in
    `options.api_key`. Rows and servers are checked before an earlier run's files are replaced.
    `interrupt` (fired by Ctrl-C) ends the rows phase early with a result, as an early stop does.
    `follow_up` may answer each written rollout with rows to add to the run (`work.FollowUp`)."""
    verifier = None if options.gym_url else verifier_for(options)
    redactor = run_redactor(options)  # a server may echo the key: masked in every message too
    with masked_errors(redactor), CollectorLock(options.output):
        if options.resume and nothing_written(options.output, options.failures_path):
            # Like Gym: resuming a run that never wrote a row (or never started) is a fresh start.
            options = replace(options, resume=False, overwrite=True)
        if options.resume and not options.materialized_path.exists():
            raise UsageError(
                f"cannot resume: {options.materialized_path} does not exist",
                hint="start over with --overwrite (earlier rollouts are discarded)",
            )
        plan, keys, servers = await _prepare(options, verifier, session, log, redactor)
        input_sha = sha256_file(options.input) if options.input is not None else None
        identity = options.identity(input_sha, plan.sha256)
        if options.resume:
            check_manifest(options.manifest_path, identity)
        else:
            files = _file_refs(options, input_sha, plan)
            manifest = build_manifest(identity, files, _runtime(options, servers))
            manifest["sampling"] = options.materialize.overrides if options.input is not None else None
            manifest["sampling_in_rows"] = plan.sampling
            jsonl.write_json(options.manifest_path, manifest, indent=True)
        disk = scan_outputs(options.output, options.failures_path)
        stray = disk.completed - keys
        if stray:
            raise InputError(
                f"{len(stray)} keys are not in the materialized file, e.g. "
                + ", ".join(f"({t}, {r})" for t, r in sorted(stray)[:3]),
                path=options.output,
            )
        plan.exhausted = sum(1 for k in keys - disk.completed if disk.attempts[k] >= options.max_attempts)
        plan.to_run = len(keys) - len(disk.completed) - plan.exhausted
        del keys
        run = _backend(options, servers, verifier, disk, session, plan.to_run, log, redactor)
        run.follow_up = follow_up
        sampled = () if options.skip_preflight else servers.endpoints  # servers that passed the check
        blocks: dict[str, int] = {}
        counters = await read_counters(session, sampled, run.headers, blocks)
        cache_before = prefix_counts(counters)
        # this invocation's runs[] entry, before any row: a kill leaves it for the next start to close
        invocation = open_invocation(
            options.manifest_path, options.output, options.failures_path, counters, options.resume
        )
        try:
            interrupted = await _work(run, interrupt)
        finally:
            run.close()
        plan.grow(len(run.added), run.added_seeded)
        checks = None if servers.checks is None else [redactor.value(c.to_json()) for c in servers.checks]
        result = build_result(options, plan, disk, run, checks)
        rate, refused = prefix_cache(cache_before, await read_counts(session, sampled, run.headers, blocks))
        result.cost["prefix_cache_hit_rate"] = rate
        why_zero = cache_note(rate, blocks, run.cost.max_prompt_tokens, run.cost.rows, len(run.cost.tasks))
        result.cost["prefix_cache_note"] = "; ".join(n for n in (refused, why_zero) if n) or None
        result.interrupted = interrupted
        result.load = load_block(run)
        result.retries = dict(run.retries)
        record_cost(options.manifest_path, result, invocation)
        return result


FILL_EVERY_S = 2.0  # seconds between two looks at the servers' gauges (--fill-batch)


def _fill_task(run: Run) -> asyncio.Future | None:
    """The --fill-batch controller of a direct run (`fill.py`); None without it (or in Gym mode)."""
    import time

    from .fill import CAP_FACTOR, FillRule, fill_batch, read_samples

    router = getattr(run, "router", None)
    if not run.options.fill_batch or router is None:
        return None
    assert run.queue is not None
    queue = run.queue
    run.fill = FillRule(limit=run.limit, cap=min(10_000, run.limit * CAP_FACTOR))

    def set_limit(limit: int) -> None:
        queue.limit = limit
        router.capacity = max(1, -(-limit // len(router.servers)))  # sequences per server
        run.log(f"sequences in flight: limit {limit} ({run.fill.history[-1][1]})")

    async def read() -> Any:
        return await read_samples(run.session, router.endpoints, run.headers)

    return asyncio.ensure_future(
        fill_batch(
            run.fill,
            read,
            set_limit,
            lambda: queue.load.sequences,
            lambda: run.retries["timeout"] + run.tally.failure_classes["timeout"],
            FILL_EVERY_S,
            time.monotonic,
        )
    )


async def _tick(run: Run, every: float) -> None:
    """A plain progress line every `every` seconds while the rows run (stderr is not a terminal)."""
    from .progress import progress_line

    while True:
        await asyncio.sleep(every)
        assert run.queue is not None
        load = run.queue.load
        run.log(progress_line(run.tally, run.retries, {"sequences": load.sequences, "limit": load.limit}))


def load_block(run: Run) -> dict[str, Any]:
    """Sequences (and requests) in flight over the run, against the limit and where it came from."""
    assert run.queue is not None
    load = run.queue.load
    block = {"limit": run.limit, "limit_source": run.limit_source, **load.to_json()}
    if run.fill is not None:
        block["fill_batch"] = {
            "final_limit": load.limit,
            "peak_limit": load.peak_limit,
            "raised": run.fill.raised,
            "lowered": run.fill.lowered,
        }
    return block


async def _work(run: Run, interrupt: Interrupt | None) -> bool:
    """Run the pending rows; True when `interrupt` cut them short (the run then counts as stopped early).
    One worker per sequence the limit allows (a request carries at least one); the queue holds the rest."""
    groups = run.work()
    fill = _fill_task(run)
    most = run.limit if fill is None else run.fill.cap
    # one worker's error (a full disk) cancels the others before the session closes under them
    workers = asyncio.ensure_future(run_workers(run.worker(groups) for _ in range(most)))
    helpers = [] if fill is None else [fill]
    if run.options.progress_every is not None:
        helpers.append(asyncio.ensure_future(_tick(run, run.options.progress_every)))

    def stop_helpers(_: Any) -> None:
        for helper in helpers:
            helper.cancel()

    workers.add_done_callback(stop_helpers)
    if interrupt is None:
        await workers
        return False
    interrupt.target = workers  # from now on a Ctrl-C cancels the workers only, not the summary
    try:
        await workers
    except asyncio.CancelledError:
        if not interrupt.fired:
            raise
        run.stop.reason = run.stop.reason or INTERRUPTED
        return True
    finally:
        interrupt.target = None
    return False


async def _prepare(
    options: CollectOptions, verifier: Any, session: Any, log: Callable[[str], None], redactor: Redactor
) -> tuple[Plan, set, Servers]:
    """Check the rows (a fresh run stages them), then the servers, then the rows against the model's
    context, all before the earlier run's files are replaced: a refused run leaves them as they were."""
    needs_answer = options.answer_key if getattr(verifier, "needs_answer", False) else None
    budget = OutputBudget()
    staging = None if options.resume else _stage(options, needs_answer, budget)
    try:
        if staging is not None:  # the --input rows were checked as they were staged
            needs_answer = None
        source = staging or options.materialized_path
        scan_budget = budget if staging is None else None
        plan, keys = scan_materialized(
            source, needs_answer, budget=scan_budget, shard=options.shard, staged=staging is not None
        )
        # a refusal's secrets are masked by collect's masked_errors around the whole run
        servers = await _check_servers(options, session, lambda text: log(redactor.text(text)))
        budget.check(servers.context)
        if servers.checks is not None and not options.gym_url:
            checked = servers.checks[: len(options.endpoints)]  # a --verify-url check comes after them
            log(redactor.text(servers_line(checked, options.materialize)))
        if servers.targets is not None:
            check_agents(servers.targets, plan.agent_rows)
        if not options.resume:
            _commit(options, staging)  # only now are the earlier run's files replaced
    finally:
        if staging is not None:
            staging.unlink(missing_ok=True)
    return plan, keys, servers


@dataclass
class Servers:
    """Where rows go, after the pre-flight check (`checks` is None when it was skipped)."""

    endpoints: tuple[Endpoint, ...] = ()
    checks: list[ServerCheck] | None = None
    targets: GymTargets | None = None
    context: tuple[int, ServerCheck] | None = None


async def _check_servers(options: CollectOptions, session: Any, log: Callable[[str], None]) -> Servers:
    # the probe's own limit: --timeout is seconds per generated sequence, and a GET /models is none (a small
    # --timeout let a busy but healthy server fail the probe: 'no answer within 0.02s')
    timeout = DEFAULT_TIMEOUT
    if options.gym_url:
        if options.skip_preflight:
            return Servers(targets=await asyncio.to_thread(resolve_gym_url, options.gym_url))
        targets, checks = await gym_run.preflight(session, options.gym_url, timeout)
        return Servers(checks=checks, targets=targets)
    if options.skip_preflight:
        return Servers(endpoints=options.endpoints)
    found = await check_endpoints(
        options.endpoints,
        session,
        api_key=options.api_key,
        api_key_env=options.api_key_env,
        timeout=timeout,
        log=log,
        follow_redirects=options.retry.follow_redirects,  # the rows' redirect rule, so they agree
    )
    checks = found.checks
    if options.verify_url:
        check = await check_verify_url(session, options.verify_url, timeout)
        if not check.ok:
            raise UsageError(check.line(), hint=REFUSED)
        checks.append(check)
    return Servers(endpoints=found.endpoints, checks=checks, context=found.context)


def servers_line(checks: list[ServerCheck], materialize: Any) -> str:
    """The pre-flight check's answer before the first row: each server that passed, what it serves, and
    whether ngrp sends a seed (what identical replies will mean: `audit.identical`)."""
    passed = [c for c in checks if c.ok and c.model is not None]
    each = "; ".join(
        f"{c.url} serves {c.model}" + (f" (max_model_len {c.max_model_len})" if c.max_model_len else "")
        for c in passed
    )
    fixed = (materialize.overrides or {}).get("seed")
    seed = (
        f"seed {fixed} in every row (--set seed): every repeat of a task is the same draw"
        if fixed is not None
        else "seed = rollout index (--seed-per-repeat)"
        if materialize.seed_per_repeat
        else "no seed sent by ngrp (each choice is the server's own draw)"
    )
    return f"servers: {len(passed)} of {len(checks)} passed the check (GET /models): {each}; {seed}"


def _runtime(options: CollectOptions, servers: Servers) -> dict[str, Any]:
    """The manifest's runtime block; servers the pre-flight check left out say why."""
    runtime = options.runtime()
    left_out = {c.url: c.line() for c in servers.checks or [] if not c.ok}
    for entry in runtime["servers"]:
        if entry["url"] in left_out:
            entry["left_out"] = left_out[entry["url"]]
    return runtime


def _backend(
    options: CollectOptions,
    servers: Servers,
    verifier: Any,
    disk: Any,
    session: Any,
    to_run: int,
    log: Callable[[str], None],
    redactor: Redactor,
) -> Run:
    limit, source = sequence_limit(options, servers.endpoints)
    common = {"to_run": to_run, "headers": auth_headers(options.api_key), "log": log, "redactor": redactor}
    common["limit"] = limit
    run: Run
    if servers.targets is not None:
        run = GymRun(options, disk, session, targets=servers.targets, **common)
    else:
        run = DirectRun(options, disk, session, endpoints=servers.endpoints, verifier=verifier, **common)
    run.limit_source = source
    return run


def _stage(options: CollectOptions, needs_answer: str | None, budget: OutputBudget) -> Path | None:
    """A fresh run: refuse an earlier run's outputs unless --overwrite, check the --input rows and
    materialize them into a staging file. Nothing of the earlier run is deleted here (see `_commit`)."""
    outputs = options.outputs
    existing = [p for p in outputs if p.exists()]
    if existing and not options.overwrite:
        raise UsageError(
            f"outputs of an earlier run exist: {', '.join(map(str, existing))}",
            hint="pass --resume to continue that run, or --overwrite to discard it and start over",
        )
    for path in (options.materialized_path, options.manifest_path):  # an earlier collector killed mid-write
        for stale in path.parent.glob(f".{path.name}.*.tmp"):  # we hold the lock: no one else writes these
            stale.unlink(missing_ok=True)
    if options.input is None:
        return None
    rows = list(read_task_lines(options.input, options.materialize.limit))  # read once: checked, expanded
    if not rows:  # a run of nothing would end "complete" with 0 rows
        raise UsageError(
            f"{options.input} holds no task rows", hint="give the task file with at least one row"
        )
    check_tasks(options, rows, needs_answer, budget)
    staging = options.materialized_path.with_name(f".{options.materialized_path.name}.staging.tmp")
    expanded = expand(rows, options.materialize, options.input)
    shard = options.shard
    if shard is not None:  # the shard's rows only, chosen before writing (not by rewriting the file)
        expanded = [row for row in expanded if shard.owns(row[TASK_KEY])]
    jsonl.write_jsonl(staging, expanded, overwrite=True)  # read back once, by scan_materialized
    return staging


def _commit(options: CollectOptions, staging: Path | None) -> None:
    """Discard the earlier run's files and put the staged materialized file in place."""
    for path in (options.output, options.failures_path, options.manifest_path):
        path.unlink(missing_ok=True)
    if staging is not None:
        os.replace(staging, options.materialized_path)


def _file_refs(options: CollectOptions, input_sha: str | None, plan: Plan) -> dict[str, Any]:
    files: dict[str, Any] = {
        "materialized": {"path": str(options.materialized_path), "sha256": plan.sha256, "rows": plan.rows},
        "rollouts": {"path": str(options.output)},
    }
    if options.input is not None:  # with each task's source lines, for the reports (`task_lines`)
        records = read_task_lines(options.input, options.materialize.limit)
        lines = task_lines.encode(task_source_lines(records, options.input))
        files["input"] = {"path": str(options.input), "sha256": input_sha, task_lines.KEY: lines}
    return files
