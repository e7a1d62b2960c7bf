"""One model call with a per-request timeout and bounded, jittered exponential retries.

Retried: connection errors, timeouts, HTTP 429 and 5xx. Not retried: other statuses (a bad request
stays bad). When the retries run out the call raises `AttemptFailed` carrying Gym's failure fields.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 520, 408})
GATEWAY_STATUSES = frozenset({429, 502, 503, 504})
BODY_LIMIT = 2000


@dataclass
class RetryPolicy:
    timeout: float = 120.0
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 10.0

    def delay(self, retry: int) -> float:
        return min(self.max_delay, self.base_delay * 2**retry) * random.uniform(0.5, 1.5)


class AttemptFailed(Exception):
    """A failed attempt, with the fields Gym writes to the failures sidecar."""

    def __init__(
        self,
        failure_class: str,
        failure_type: str,
        message: str,
        status: int | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.failure_type = failure_type
        self.message = message
        self.status = status
        self.body = None if body is None else body[:BODY_LIMIT]
        self.retries = 0

    def fields(self) -> dict[str, Any]:
        return {
            "_ng_failure_class": self.failure_class,
            "_ng_failure_type": self.failure_type,
            "_ng_failure_message": self.message,
            "_ng_failure_http_status": self.status,
            "_ng_failure_response_body": self.body,
        }


async def post_json(session: Any, url: str, body: bytes, headers: dict, policy: RetryPolicy) -> bytes:
    """POST and return the 200 body; retry transient failures; raise AttemptFailed when out of retries."""
    retry = 0
    while True:
        try:
            return await post_once(session, url, body, headers, policy.timeout)
        except AttemptFailed as failure:
            transient = failure.status is None or failure.status in RETRY_STATUSES
            if not transient or retry >= policy.max_retries:
                failure.retries = retry
                raise
        await asyncio.sleep(policy.delay(retry))
        retry += 1


async def post_once(session: Any, url: str, body: bytes, headers: dict, timeout: float) -> bytes:
    import aiohttp

    try:
        async with session.post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as r:
            payload = await r.read()
            if r.status == 200:
                return payload
            text = payload.decode("utf-8", errors="replace")
            kind = "agent_request_failed" if r.status in GATEWAY_STATUSES else "agent_run_error"
            raise AttemptFailed(kind, "HTTPError", f"HTTP {r.status} from {_path(url)}", r.status, text)
    except asyncio.TimeoutError as exc:
        raise AttemptFailed(
            "timeout", "TimeoutError", f"no answer within {timeout:g}s from {_path(url)}"
        ) from exc
    except aiohttp.ClientError as exc:
        raise AttemptFailed("agent_request_failed", type(exc).__name__, f"{exc} ({_path(url)})") from exc


def _path(url: str) -> str:
    from .routing import public_url

    return public_url(url)
