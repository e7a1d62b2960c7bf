"""Several servers in one run: task-affine routing, spill-over when saturated, failover when dead.

- Home server: every repeat of task `t` goes to server `t % n`, so its prompt prefix is cached once.
- Saturation: a server with `capacity` sequences in flight (ceil(limit / n): a grouped request counts its
  `n`) is full; a row
  whose home is full goes to the healthy server with the fewest requests in flight instead.
- Failover: an attempt that got no reply (connection refused or reset, timeout) takes that server out
  and the same attempt is re-sent to another healthy server, so a dying server costs no key. The tasks
  of a server that is out go to the next healthy server after it (all repeats still together).
- Probing: a server that is out is probed with `GET <base_url>/models` after 2 s, then 4, 8... up to
  30 s; when it answers 200 it takes rows again.
With a single server this is the plain behaviour: no failover, failures are recorded as attempts.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass
from typing import Any, TypeVar

from ..artifacts.failures import NO_REPLY_CLASSES
from .http import AttemptFailed
from .routing import Endpoint

T = TypeVar("T")


@dataclass(eq=False)
class ServerState:
    endpoint: Endpoint
    index: int
    outstanding: int = 0
    healthy: bool = True
    next_probe: float = 0.0
    backoff: float = 0.0
    probing: bool = False
    served: int = 0
    went_down: int = 0


@dataclass(frozen=True)
class ProbeSchedule:
    """When a server that is out is probed: after `after` s, doubling up to `max_after`; each probe waits
    at most `timeout` s for its answer."""

    after: float = 2.0
    max_after: float = 30.0
    timeout: float = 5.0


def no_reply(failure: AttemptFailed) -> bool:
    """The server did not answer at all (as opposed to answering with an error)."""
    return failure.status is None and failure.failure_class in NO_REPLY_CLASSES


class FailoverRouter:
    def __init__(
        self,
        endpoints: list[Endpoint],
        *,
        capacity: int,
        session: Any = None,
        headers: dict[str, str] | None = None,  # the run's (its API key): a keyed server answers 401 without
        probes: ProbeSchedule = ProbeSchedule(),
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.servers = [ServerState(e, i) for i, e in enumerate(endpoints)]
        self.endpoints = endpoints
        self.capacity = max(1, capacity)
        self.session = session
        self.headers = headers or {}
        self.probes = probes
        self.clock = clock
        self.log = log or (lambda text: print(f"ngrp collect: {text}", file=sys.stderr, flush=True))

    def endpoint_for(self, task_index: int) -> Endpoint:
        """The home server of a task (what a single-call caller would use)."""
        return self.servers[task_index % len(self.servers)].endpoint

    def pick(self, task_index: int, exclude: Set[int] = frozenset()) -> ServerState | None:
        """Home when healthy and not full; when home is full, the least busy healthy server; when home is
        out, the next healthy server after it that is not full, so a dead server's tasks move together."""
        n = len(self.servers)
        home = self.servers[task_index % n]
        live = [s for s in self.servers if s.healthy and s.index not in exclude]
        if not live:
            return None
        ring = sorted(live, key=lambda s: (s.index - task_index) % n)  # home first, then the ones after it
        least_busy = min(ring, key=lambda s: s.outstanding)  # min keeps the first of equals: ring order
        if home in live:
            return home if home.outstanding < self.capacity else least_busy
        return next((s for s in ring if s.outstanding < self.capacity), least_busy)

    async def dispatch(
        self, task_index: int, call: Callable[[Endpoint], Awaitable[T]], *, weight: int = 1
    ) -> T:
        """Run `call(endpoint)` on the chosen server; on no reply, fail over to another one. `weight`: the
        sequences the request carries (its `n`)."""
        tried: set[int] = set()
        last: AttemptFailed | None = None
        while True:
            await self.probe_due()
            state = self.pick(task_index, tried)
            if state is None:
                raise last or AttemptFailed(
                    "agent_request_failed", "NoHealthyServer", "every server is out (no reply); probing them"
                )
            state.outstanding += weight
            try:
                result = await call(state.endpoint)
            except AttemptFailed as failure:
                if len(self.servers) == 1 or not no_reply(failure):
                    raise
                self.mark_down(state, failure.message)
                tried.add(state.index)
                last = failure
                continue
            finally:
                state.outstanding -= weight
            state.served += 1
            return result

    def mark_down(self, state: ServerState, reason: str) -> None:
        if not state.healthy:
            return
        state.healthy = False
        state.went_down += 1
        state.backoff = self.probes.after
        state.next_probe = self.clock() + state.backoff
        self.log(f"server {state.endpoint.public_url} is out ({reason}); probing it every few seconds")

    async def probe_due(self) -> None:
        """Probe the out-of-service servers whose time has come (one prober per server)."""
        if self.session is None:
            return
        now = self.clock()
        for state in self.servers:
            if state.healthy or state.probing or now < state.next_probe:
                continue
            state.probing = True
            try:
                alive = await self._probe(state.endpoint)
            finally:
                state.probing = False
            if alive:
                state.healthy = True
                self.log(f"server {state.endpoint.public_url} answers again; sending it rows")
            else:
                state.backoff = min(self.probes.max_after, state.backoff * 2)
                state.next_probe = self.clock() + state.backoff

    async def _probe(self, endpoint: Endpoint) -> bool:
        import asyncio

        import aiohttp

        try:
            timeout = aiohttp.ClientTimeout(total=self.probes.timeout)
            url = endpoint.base_url + "/models"
            get = self.session.get(url, headers=self.headers, timeout=timeout, allow_redirects=False)
            async with get as reply:
                return reply.status == 200  # the body is never read; a redirect is not this server answering
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    def summary(self) -> list[dict[str, Any]]:
        return [
            {"url": s.endpoint.public_url, "served": s.served, "went_down": s.went_down, "healthy": s.healthy}
            for s in self.servers
        ]


def make_router(
    endpoints: list[Endpoint],
    limit: int,
    session: Any = None,
    headers: dict[str, str] | None = None,
    log: Callable[[str], None] | None = None,
) -> FailoverRouter:
    """The router for a direct run: its endpoints are at least one (CollectOptions refuses a run with no
    server)."""
    capacity = math.ceil(limit / len(endpoints))  # sequences in flight per server
    return FailoverRouter(endpoints, capacity=capacity, session=session, headers=headers, log=log)
