"""A run's workers stop together: when one fails (a full disk under `Appender.write`, say), the others
are cancelled and waited for before the error goes on. `asyncio.gather` alone leaves them running while
the run unwinds: they would send requests and record "Session is closed" failures (their session closed
under them) in a sidecar that still had room. Rows they held are dropped unwritten, as after a Ctrl-C:
`--resume` sends them again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


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
