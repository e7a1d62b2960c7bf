"""The requests of one collection, as workers take them: the materialized file's pending rows, streamed,
then the rows a follow-up (`FollowUp`) adds while the run goes.

Without a follow-up the queue is the file's stream and nothing more: a worker stops when it is used up.
With one, a finished request may add rows (`collect --adaptive` gives a task its next round the moment its
own round is done, `adaptive/rounds.py`), so a worker that finds nothing queued waits while requests are in
flight, and all stop when nothing is queued and nothing is in flight. Added rows go before the file's
rest: they are the later rounds of tasks already started, whose chains of rounds set the run's end.

Sequences in flight are the unit (`WorkQueue.limit`): a request carries one sequence per rollout it asks
for (its `n`), and the sequences in flight never pass the limit, whatever the request shape (one per
rollout, a task group, an adaptive round). The next group is cut to the room the limit leaves: with 5
sequences free and a round of 8 next, a request of 5 goes now and one of 3 when room frees. A group is
rows that send the same request, so any part of it is a request; a round is where the rule decides, not
a request, so cutting it changes no decision (the follow-up is told each rollout as it is written). So
while work is pending the batch holds the limit exactly, whatever the rounds' sizes: a group waiting for
room whole would leave up to its size minus one sequences free (growing rounds of 1, 1, 2, 4, 8 under a
limit of 12: 8 in flight while the next 8 waited). The group first in line is cut, never passed: added
rounds keep their place ahead of the file. `load` keeps the time-weighted mean and the peak of
sequences and requests in flight, and the mean over the time a request waited for room, for the
summary and the manifest.

`run_workers`: a run's workers stop together. When one fails (a full disk under `Appender.write`, say),
the others are cancelled and waited for before the error goes on. `asyncio.gather` alone leaves them
running while the run unwinds: they would send requests and record "Session is closed" failures (their
session closed under them) in a sidecar that still had room. Rows they held are dropped unwritten, as
after a Ctrl-C: `--resume` sends them again.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Iterable, Iterator
from typing import Any, Protocol

from .grouping import Item


class FollowUp(Protocol):
    """Told each rollout as it is written (its row and reward); answers the rows to run next (materialized
    rows of the same shape, with new keys), usually none. The collector appends them to the materialized
    file, under its lock, before it sends them."""

    def __call__(self, row: dict, reward: Any) -> list[dict]: ...


class Load:
    """Sequences and requests in flight over a run: time-weighted means and peaks, against the limit."""

    def __init__(self, limit: int, clock: Any = time.monotonic) -> None:
        self.limit = limit
        self.peak_limit = limit
        self.sequences = 0
        self.requests = 0
        self.peak_sequences = 0
        self.peak_requests = 0
        self._clock = clock
        self._started = self._last = clock()
        self._seq_area = 0.0
        self._req_area = 0.0
        self.waiting = False  # a request is waiting for room (work pending, the limit binds)
        self._wait_s = 0.0
        self._wait_seq_area = 0.0

    def change(self, sequences: int, requests: int) -> None:
        now = self._clock()
        span = now - self._last
        self._seq_area += self.sequences * span
        self._req_area += self.requests * span
        if self.waiting:
            self._wait_s += span
            self._wait_seq_area += self.sequences * span
        self._last = now
        self.sequences += sequences
        self.requests += requests
        self.peak_sequences = max(self.peak_sequences, self.sequences)
        self.peak_requests = max(self.peak_requests, self.requests)

    def wait(self, waiting: bool) -> None:
        """From now on a request is (or no request is) waiting for room."""
        if waiting != self.waiting:
            self.change(0, 0)
            self.waiting = waiting

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        self.peak_limit = max(self.peak_limit, limit)

    def to_json(self) -> dict[str, Any]:
        self.change(0, 0)
        span = self._last - self._started
        return {
            "sequences_mean": round(self._seq_area / span, 2) if span > 0 else 0.0,
            "sequences_peak": self.peak_sequences,
            "requests_mean": round(self._req_area / span, 2) if span > 0 else 0.0,
            "requests_peak": self.peak_requests,
            "waiting_s": round(self._wait_s, 3),
            "sequences_mean_waiting": round(self._wait_seq_area / self._wait_s, 2)
            if self._wait_s > 0
            else None,
        }


class WorkQueue:
    """Request groups for the workers: added groups first, then the file's, each cut to the room left;
    `None` when the run is done. At most `limit` sequences (rows) are in flight (`load.limit`, which a
    controller may move)."""

    def __init__(self, groups: Iterator[list[Item]], *, grows: bool, limit: int = 1 << 30) -> None:
        self._file: Iterator[list[Item]] | None = groups
        self._added: deque[list[Item]] = deque()
        self._grows = grows  # a follow-up may add rows while requests are in flight
        self._in_flight = 0
        self._head: list[Item] | None = None  # taken from the sources, waiting for room
        self._changed = asyncio.Event()
        self.load = Load(limit)

    @property
    def limit(self) -> int:
        return self.load.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self.load.set_limit(max(1, value))
        self._wake()

    def add(self, groups: list[list[Item]]) -> None:
        self._added.extend(groups)
        self._wake()

    async def take(self) -> list[Item] | None:
        """The next group, cut to the room the limit leaves (the caller must call `done` once it is
        handled), or None: nothing is left."""
        while True:
            if self._head is None:
                self._head = self._next()
            group = self._head
            room = self.load.limit - self.load.sequences
            if group is not None and room > 0:
                taken, rest = group[:room], group[room:]
                self._head = rest or None
                self._in_flight += 1
                self.load.change(len(taken), 1)
                self.load.wait(bool(rest))  # the rest waits: the limit is reached
                return taken
            if group is None and (not self._grows or self._in_flight == 0):
                self.load.wait(False)
                self._wake()  # the other waiting workers see it too
                return None
            self.load.wait(group is not None)
            self._changed.clear()
            await self._changed.wait()

    def done(self, size: int = 1) -> None:
        """A request of `size` sequences is finished (handled, failed or dropped)."""
        self._in_flight -= 1
        self.load.change(-size, -1)
        self._wake()

    def _next(self) -> list[Item] | None:
        if self._added:
            return self._added.popleft()
        if self._file is not None:
            group = next(self._file, None)
            if group is not None:
                return group
            self._file = None
        return None

    def _wake(self) -> None:
        self._changed.set()


async def run_workers(workers: Iterable[Awaitable[Any]]) -> None:
    """Await every worker; the first to raise cancels the rest, which are awaited, then it is raised."""
    tasks = [asyncio.ensure_future(worker) for worker in workers]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
