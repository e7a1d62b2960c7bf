"""Gym mode for `ngrp collect --gym-url URL`: post each materialized row to a NeMo Gym `/run`.

The request body is the materialized row, as `gym eval run --no-serve` posts it; the row written is the
server's reply (the verify response) with Gym's collector stamps (`gym_targets.stamp`). Resume, the
failures sidecar, admission, progress and the stop rules are shared with direct mode (`run.Run`); only
`run_row` differs. Failure classes follow Gym 0.7.0: `agent_run_error` when the server answered with a
non-gateway error status, `agent_request_failed` for 429/502/503/504 or no reply. Unlike Gym, no reply is
retried a bounded number of times (`--max-retries`) instead of forever, and a 500 is not retried (the
rollout ran and broke). A reply that carries its own `_ng_failure_class` goes to the sidecar; one marked
`_ng_no_persist` is written nowhere, so `--resume` runs it again, as in Gym.

Pre-flight: the head server must answer (it lists the servers), and so must every server rows go to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ..artifacts import jsonl
from ..artifacts.failures import Failure
from ..artifacts.response import output_tokens_or_zero
from ..errors import UsageError
from .grouping import whole_run_fallback
from .gym_targets import FAILURE_CLASS_KEY, GymTargets, RunTarget, outcome, resolve_gym_url, stamp
from .http import GATEWAY_STATUSES, AttemptFailed, RetryPolicy, post_json, transient
from .preflight import DEFAULT_TIMEOUT, REFUSED, ServerCheck, check_reachable, origin
from .routing import public_url
from .run import Run

STATUS_HINT = "is the Gym stack running? `gym env status`"


def gym_retryable(failure: AttemptFailed) -> bool:
    """Gym retries no reply and gateway statuses; a 500 means the rollout ran and broke."""
    return transient(failure) if failure.status is None else failure.status in GATEWAY_STATUSES


async def post_run(
    session: Any,
    url: str,
    body: bytes,
    headers: dict,
    policy: RetryPolicy,
    on_retry: Callable[[AttemptFailed], None] | None = None,
) -> dict:
    """POST one row to /run; retry only no reply and gateway statuses (each told to `on_retry`); return
    the JSON object."""
    try:
        payload = await post_json(
            session, url, body, headers, policy, retry_if=gym_retryable, on_retry=on_retry
        )
    except AttemptFailed as failure:
        if failure.failure_class == "timeout":  # Gym has no request timeout: no reply at all
            failure.failure_class = "agent_request_failed"
        raise
    try:
        result = jsonl.loads(payload)  # a lone surrogate escape reads as U+FFFD, as every row does
    except orjson.JSONDecodeError as exc:
        raise AttemptFailed("agent_run_error", "JSONDecodeError", f"/run answered non-JSON: {exc}") from exc
    if not isinstance(result, dict):
        raise AttemptFailed("agent_run_error", "TypeError", f"/run answered a JSON {type(result).__name__}")
    return result


def check_agents(targets: GymTargets, rows: Iterable[dict]) -> None:
    """Fail before any request when a row names an agent no Gym server runs. `rows`: one row for each
    agent the materialized file names (the runner's scan keeps them, so the file is not read again)."""
    for row in rows:
        targets.for_row(row)


async def preflight(
    session: Any,
    gym_url: str,
    timeout: float = DEFAULT_TIMEOUT,
    resolve: Callable[[str], GymTargets] = resolve_gym_url,
) -> tuple[GymTargets, list[ServerCheck]]:
    """Resolve where rows go (through the head server), then check every server rows may go to answers."""
    targets = await asyncio.to_thread(resolve, gym_url)
    servers: dict[str, RunTarget] = {t.url: t for t in [*targets.by_agent.values(), targets.default] if t}
    probes = [
        check_reachable(session, origin(url), what=_what(t, targets), fix=STATUS_HINT, timeout=timeout)
        for url, t in servers.items()
    ]
    if targets.head_url is not None:  # it listed the servers; its /health answers 503 until all are ready
        fix = "is the Gym stack running, and ready? `gym env status`"
        health = targets.head_url + "/health"
        probes.append(check_reachable(session, health, what="the Gym head server", fix=fix, timeout=timeout))
    checks = await asyncio.gather(*probes)
    bad = [c for c in checks if not c.ok]
    if bad:
        raise UsageError("\n".join(c.line() for c in bad), hint=REFUSED)
    return targets, list(checks)


def _what(target: RunTarget, targets: GymTargets) -> str | None:
    if targets.head_url is None:
        return None
    name = target.environment_server or "an agent"
    return f"{name}, listed by the Gym head server {public_url(targets.head_url)}"


class GymRun(Run):
    """A collection whose rows run on a NeMo Gym stack's `/run`."""

    def __init__(self, *args: Any, targets: GymTargets, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.targets = targets
        self.fallback = whole_run_fallback(
            enabled=self.options.group_requests, api=self.options.api, gym=True
        )
        if self.options.group_requests:  # not asked for: say why, once
            self.log(f"one request per rollout: {self.fallback}")

    async def run_row(self, row: dict, attempt: int) -> None:
        started = time.monotonic()
        target = self.targets.for_row(row)
        try:
            result = await post_run(
                self.session, target.url, orjson.dumps(row), self.headers, self.options.retry, self.note_retry
            )
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, public_url(target.url))
            return
        stamp(row, result, target, attempt)
        kind = outcome(result)
        if kind == "no_persist":
            klass = str(result.get(FAILURE_CLASS_KEY) or "no_persist")
            self.count_failure(Failure.from_fields({**result, FAILURE_CLASS_KEY: klass}), row, replied=True)
            return
        if kind == "failure":
            self.failures.write(result)
            self.count_failure(Failure.from_fields(result), row, replied=True, attempt=attempt)
            return
        response = result.get("response")  # the server's reply, whatever its shape: never a crash here
        tokens = output_tokens_or_zero(response) if isinstance(response, dict) else 0
        self.record_result(result, result.get("reward"), tokens)
