"""Gym mode for `ngrp collect --gym-url URL`: post each materialized row to a NeMo Gym `/run`.

The request body is the materialized row, as `gym eval run --no-serve` posts it; the row written is the
server's reply (the verify response) with Gym's collector stamps (`gym_run.stamp`). Resume, the
failures sidecar, admission and progress are the direct mode's (`direct.DirectRun`); only `run_row` differs.
Failure classes follow Gym 0.7.0: `agent_run_error` when the server answered with a non-gateway error
status, `agent_request_failed` for 429/502/503/504 or no reply. Unlike Gym, no reply is retried a bounded
number of times (`--max-retries`) instead of forever, and a 500 is not retried (the rollout ran and broke).
A reply that carries its own `_ng_failure_class` goes to the sidecar; one marked `_ng_no_persist` is
written nowhere, so `--resume` runs it again, as in Gym.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from ..artifacts import jsonl
from .direct import DirectRun, output_tokens
from .gym_run import FAILURE_CLASS_KEY, GymTargets, outcome, resolve_gym_url, stamp
from .http import GATEWAY_STATUSES, AttemptFailed, RetryPolicy, post_once
from .routing import Endpoint


async def post_run(session: Any, url: str, body: bytes, headers: dict, policy: RetryPolicy) -> dict:
    """POST one row to /run; retry only no reply and gateway statuses; return the JSON object."""
    retry = 0
    while True:
        try:
            payload = await post_once(session, url, body, headers, policy.timeout, policy=policy)
            break
        except AttemptFailed as failure:
            if failure.failure_class == "timeout":  # Gym has no request timeout: no reply at all
                failure.failure_class = "agent_request_failed"
            retryable = failure.status is None or failure.status in GATEWAY_STATUSES
            if not retryable or retry >= policy.max_retries:
                failure.retries = retry
                raise
        await asyncio.sleep(policy.delay(retry))
        retry += 1
    try:
        result = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise AttemptFailed("agent_run_error", "JSONDecodeError", f"/run answered non-JSON: {exc}") from exc
    if not isinstance(result, dict):
        raise AttemptFailed("agent_run_error", "TypeError", f"/run answered a JSON {type(result).__name__}")
    return result


def check_agents(targets: GymTargets, materialized: Any) -> None:
    """Fail before any request when a row names an agent no Gym server runs."""
    seen: set[str | None] = set()
    for row in jsonl.iter_rows(materialized):
        name = (
            (row.data.get("agent_ref") or {}).get("name")
            if isinstance(row.data.get("agent_ref"), dict)
            else None
        )
        if name not in seen:
            seen.add(name)
            targets.for_row(row.data)


class GymRun(DirectRun):
    """A collection whose rows run on a NeMo Gym stack's `/run`."""

    def __init__(self, options: Any, verifier: Any, plan: Any, disk: Any, session: Any) -> None:
        super().__init__(options, verifier, plan, disk, session)
        self.targets = resolve_gym_url(options.gym_url)
        check_agents(self.targets, options.materialized_path)

    async def run_row(self, row: dict, attempt: int) -> None:
        started = time.monotonic()
        target = self.targets.for_row(row)
        try:
            result = await post_run(
                self.session, target.url, orjson.dumps(row), self.headers, self.options.retry
            )
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, Endpoint(target.url, ""))
            return
        self.no_reply_streak = 0
        stamp(row, result, target, attempt)
        kind = outcome(result)
        if kind == "no_persist":
            self.tally.add_failure(self.redactor.text(str(result.get(FAILURE_CLASS_KEY) or "no_persist")))
            return
        if kind == "failure":
            self.failures.write(result)
            self.tally.add_failure(self.redactor.text(str(result[FAILURE_CLASS_KEY])))
            return
        self.results.write(result)
        response = result.get("response")  # the server's reply, whatever its shape: never a crash here
        tokens = output_tokens(response) if isinstance(response, dict) else 0
        self.tally.add_result(result.get("reward"), tokens)
