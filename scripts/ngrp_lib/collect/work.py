"""The requests of one collection, as workers take them: the materialized file's pending rows, streamed,
then the rows a follow-up (`FollowUp`) adds while the run goes.

Without a follow-up the queue is the file's stream and nothing more: a worker stops when it is used up.
With one, a finished request may add rows (`collect --adaptive` gives a task its next round the moment its
own round is done, `adaptive/rounds.py`), so a worker that finds nothing queued waits while requests are in
flight, and all stop when nothing is queued and nothing is in flight. Added rows go before the file's
rest: they are the later rounds of tasks already started, whose chains of rounds set the run's end.

`run_workers`: a run's workers stop together. When one fails (a full disk under `Appender.write`, say),
the others are cancelled and waited for before the error goes on. `asyncio.gather` alone leaves them
running while the run unwinds: they would send requests and record "Session is closed" failures (their
session closed under them) in a sidecar that still had room. Rows they held are dropped unwritten, as
after a Ctrl-C: `--resume` sends them again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Iterable, Iterator
from typing import Any, Protocol

from .grouping import Item


class FollowUp(Protocol):
    """Told each rollout as it is written (its row and reward); answers the rows to run next (materialized
    rows of the same shape, with new keys), usually none. The collector appends them to the materialized
    file, under its lock, before it sends them."""

    def __call__(self, row: dict, reward: Any) -> list[dict]: ...


class WorkQueue:
    """Request groups for the workers: added groups first, then the file's; `None` when the run is done."""

    def __init__(self, groups: Iterator[list[Item]], *, grows: bool) -> None:
        self._file: Iterator[list[Item]] | None = groups
        self._added: deque[list[Item]] = deque()
        self._grows = grows  # a follow-up may add rows while requests are in flight
        self._in_flight = 0
        self._changed = asyncio.Event()

    def add(self, groups: list[list[Item]]) -> None:
        self._added.extend(groups)
        self._wake()

    async def take(self) -> list[Item] | None:
        """The next group (the caller must call `done` once it is handled), or None: nothing is left."""
        while True:
            group = self._next()
            if group is not None:
                self._in_flight += 1
                return group
            if not self._grows or self._in_flight == 0:
                self._wake()  # the other waiting workers see it too
                return None
            self._changed.clear()
            await self._changed.wait()

    def done(self) -> None:
        self._in_flight -= 1
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
