"""One model call with a timeout that fits the request, and bounded, jittered exponential retries.

The timeout (`RetryPolicy.timeout`, `collect --timeout`) is per sequence: a request carrying `n`
sequences (a grouped request's `n` choices) waits `n` times it, so a grouped request of long generations
does not time out where its rollouts sent one by one would not. Every retry is told to the caller
(`on_retry`, with its cause) before it is sent: none is silent.

Retried by default: no reply (connection errors, timeouts), HTTP 429 and 5xx. Not retried: other statuses
(a bad request stays bad). Callers with another rule (Gym's `/run`) pass their own `retry_if`. When the
retries run out the call raises `AttemptFailed` carrying Gym's failure fields; its message quotes the
server's own error message when the reply carries one.

Replies are read up to a limit (`max_response_bytes`, 16 MiB by default, `collect --max-response-mb`): a
larger 200 reply is a `response_too_large` failure, and of an error reply only the first 64 KiB are read
(Gym keeps 2,000 characters of it). Redirects are not followed unless asked (`--follow-redirects`): a 3xx
is a `redirect_refused` failure, so a prompt is never re-posted to a host nobody named.

Every other reply the project reads goes through the same bound: `get_bounded` (the pre-flight
`GET /models`, liveness probes) and `fetch_bounded` (callers without an event loop: serve's `/health`,
Gym's discovery GETs). Neither follows a redirect, but the pre-flight `GET /models` of a run with
`--follow-redirects`: it follows the redirects the rows will.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from ..artifacts.failures import REPEATING_TYPES, RETRYABLE_STATUSES, server_message

GATEWAY_STATUSES = frozenset({429, 502, 503, 504})
BODY_LIMIT = 2000
DEFAULT_MAX_RESPONSE_BYTES = 16 * 2**20
ERROR_BODY_READ = 1 << 16  # bytes of an error reply read (enough for BODY_LIMIT characters)


@dataclass
class RetryPolicy:
    timeout: float = 120.0
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 10.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    follow_redirects: bool = False

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


def transient(failure: AttemptFailed) -> bool:
    """No reply at all (but a redirect aiohttp cannot follow, or a URL it refuses), or a status that says
    "try again" (429, 5xx, 408)."""
    if failure.status is None:
        return failure.failure_type not in REPEATING_TYPES
    return failure.status in RETRYABLE_STATUSES


@asynccontextmanager
async def open_session(concurrency: int | None) -> AsyncIterator[Any]:
    """The aiohttp session of one run, sized for `concurrency` requests in flight (created by the caller
    of `collect` and passed in); None: no limit of connections (the run's own limit holds)."""
    import aiohttp

    limit = 0 if concurrency is None else concurrency + 8
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as s:
        yield s


async def post_json(
    session: Any,
    url: str,
    body: bytes,
    headers: dict,
    policy: RetryPolicy,
    retry_if: Callable[[AttemptFailed], bool] = transient,
    *,
    sequences: int = 1,
    on_retry: Callable[[AttemptFailed], None] | None = None,
) -> bytes:
    """POST and return the 200 body; retry while `retry_if(failure)`, telling `on_retry` each time;
    AttemptFailed when out of retries. `sequences`: how many the request carries (its timeout's factor)."""
    retry = 0
    while True:
        try:
            return await post_once(session, url, body, headers, policy, sequences=sequences)
        except AttemptFailed as failure:
            if not retry_if(failure) or retry >= policy.max_retries:
                failure.retries = retry
                raise
            if on_retry is not None:
                on_retry(failure)
        await asyncio.sleep(policy.delay(retry))
        retry += 1


def retry_cause(failure: AttemptFailed) -> str:
    """A retry's cause in a word: `timeout`, `HTTP 503`, or the connection error's type."""
    if failure.status is not None:
        return f"HTTP {failure.status}"
    return "timeout" if failure.failure_class == "timeout" else failure.failure_type


def timeout_message(timeout: float, sequences: int, url: str) -> str:
    """What timed out, and what to change."""
    size = (
        f" (a request of {sequences} sequences: --timeout {timeout / sequences:g}s per sequence)"
        if sequences > 1
        else ""
    )
    return (
        f"no answer within {timeout:g}s from {_path(url)}{size}: raise --timeout, or lower --concurrency"
        " if the server is overloaded"
    )


async def post_once(
    session: Any, url: str, body: bytes, headers: dict, policy: RetryPolicy, *, sequences: int = 1
) -> bytes:
    """One POST under `policy` (its timeout, times the sequences the request carries, its redirect rule
    and reply size limit); AttemptFailed on failure."""
    import aiohttp

    timeout = policy.timeout * max(1, sequences)
    try:
        async with session.post(
            url,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            allow_redirects=policy.follow_redirects,
        ) as r:
            if r.status == 200:
                return await read_limited(r, policy.max_response_bytes, url)
            if 300 <= r.status < 400:
                raise redirect_refused(r.status, r.headers.get("Location"), url)
            payload = await read_prefix(r, ERROR_BODY_READ)
            text = payload.decode("utf-8", errors="replace")
            kind = "agent_request_failed" if r.status in GATEWAY_STATUSES else "agent_run_error"
            said = server_message(text)
            message = f"HTTP {r.status} from {_path(url)}" + (f": {said}" if said else "")
            raise AttemptFailed(kind, "HTTPError", message, r.status, text)
    except asyncio.TimeoutError as exc:
        raise AttemptFailed("timeout", "TimeoutError", timeout_message(timeout, sequences, url)) from exc
    except aiohttp.ClientError as exc:
        raise AttemptFailed("agent_request_failed", type(exc).__name__, f"{exc} ({_path(url)})") from exc


async def read_limited(reply: Any, limit: int, url: str) -> bytes:
    """The whole body of a reply, refusing (AttemptFailed response_too_large) one longer than `limit`."""
    declared = reply.content_length
    if declared is not None and declared > limit:
        raise too_large(declared, limit, url, reply.status)
    chunks: list[bytes] = []
    size = 0
    async for chunk in reply.content.iter_chunked(1 << 16):  # decompressed: a zip bomb is caught too
        size += len(chunk)
        if size > limit:
            raise too_large(None, limit, url, reply.status)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_prefix(reply: Any, limit: int) -> bytes:
    """At most the first `limit` bytes of a reply (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await reply.content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def get_bounded(
    session: Any,
    url: str,
    *,
    headers: dict | None = None,
    timeout: float,
    limit: int = DEFAULT_MAX_RESPONSE_BYTES,
    follow_redirects: bool = False,
) -> tuple[int, bytes]:
    """`GET url`, following a redirect only when asked: the status and the body, a 200 read up to `limit`
    bytes (AttemptFailed response_too_large past it), any other status only its first ERROR_BODY_READ
    bytes. A 3xx (not followed) is returned with no body: the caller decides what a redirect means for it."""
    import aiohttp

    client_timeout = aiohttp.ClientTimeout(total=timeout)
    get = session.get(url, headers=headers, timeout=client_timeout, allow_redirects=follow_redirects)
    async with get as reply:
        if reply.status == 200:
            return 200, await read_limited(reply, limit, url)
        if 300 <= reply.status < 400:
            return reply.status, b""
        return reply.status, await read_prefix(reply, ERROR_BODY_READ)


def fetch_bounded(url: str, timeout: float, limit: int = DEFAULT_MAX_RESPONSE_BYTES) -> tuple[int, bytes]:
    """`GET url` for callers without an event loop, on http.client (which never follows a redirect):
    the status and at most `limit` bytes of a 200 body (AttemptFailed past it; other statuses: their
    first ERROR_BODY_READ bytes), all within `timeout` seconds in total (OSError: TimeoutError past it)."""
    import http.client
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OSError(f"not an http(s) URL: {_path(url)}")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        connection.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
        reply = connection.getresponse()
        if reply.status == 200 and reply.length is not None and reply.length > limit:
            raise too_large(reply.length, limit, url, 200)
        cap = limit if reply.status == 200 else ERROR_BODY_READ
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no whole answer within {timeout:g}s from {_path(url)}")
            chunk = reply.read1(1 << 16) if hasattr(reply, "read1") else reply.read(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap and reply.status == 200:
            raise too_large(None, limit, url, 200)
        return reply.status, b"".join(chunks)[:cap]
    except http.client.HTTPException as exc:
        raise OSError(f"{type(exc).__name__} from {_path(url)}") from exc
    finally:
        connection.close()


def too_large(declared: int | None, limit: int, url: str, status: int | None) -> AttemptFailed:
    size = f"{declared} bytes" if declared is not None else f"more than {limit} bytes"
    return AttemptFailed(
        "response_too_large",
        "ResponseTooLarge",
        f"reply too large: {size} from {_path(url)}, over the limit of {limit} bytes"
        " (raise --max-response-mb)",
        status,
    )


def redirect_refused(status: int, location: str | None, url: str) -> AttemptFailed:
    target = _path(location) if location else "nowhere"
    return AttemptFailed(
        "redirect_refused",
        "RedirectRefused",
        f"HTTP {status} from {_path(url)} redirects to {target}; not followed (pass --follow-redirects)",
        status,
    )


def _path(url: str) -> str:
    from .routing import public_url

    return public_url(url)
