"""Ctrl-C during a collection: the rows already written stay, the summary is printed, exit 130.

The command installs `Interrupt.fire` as the SIGINT handler of its event loop. Before the workers start
(staging, pre-flight), a Ctrl-C cancels the whole collection, as any interrupt would: nothing was sent. Once
they run, it cancels only the workers (rows in flight are dropped, unwritten: `--resume` sends them
again), and the collection sums up what it wrote, as after an early stop.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

REASON = "interrupted (Ctrl-C); rows in flight were not written"


class Interrupt:
    """What a SIGINT cancels: the collection (`target`, until the workers start), then the workers."""

    def __init__(self) -> None:
        self.fired = False
        self.target: asyncio.Future | None = None

    def fire(self) -> None:
        self.fired = True
        if self.target is not None:
            self.target.cancel()

    @contextmanager
    def on_sigint(self, loop: asyncio.AbstractEventLoop, task: asyncio.Future) -> Iterator[None]:
        """SIGINT fires this while the block runs (where the loop can take signals: Unix, main thread)."""
        self.target = task
        try:
            loop.add_signal_handler(signal.SIGINT, self.fire)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or not Unix
            installed = False
        try:
            yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
