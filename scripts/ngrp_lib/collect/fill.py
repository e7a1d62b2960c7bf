"""Keep the server's batch full (`collect --fill-batch`): raise the limit of sequences in flight while no
server has a waiting queue and their generation throughput still grows; back off when requests queue or
time out.

The signals are vLLM's own, read from each server's Prometheus `/metrics` through the bounded reader of
`metrics.py` every `every` seconds: the gauges `vllm:num_requests_running` and `vllm:num_requests_waiting`
(vLLM counts each of a grouped request's `n` choices as a request: sequences) and the counter
`vllm:generation_tokens_total` (its rate is the throughput). One step (`FillRule.step`):
- a server has requests waiting, or a request timed out since the last step: lower the limit to 3/4
  (never below `floor`); the limit that queued is never reached again (the ceiling `cap` drops below it);
- else, when the run holds the limit (sequences in flight at least 90% of it: the limit binds) and the
  throughput of the last step grew by at least `GROWTH` over the best seen at a lower limit (or no step
  was measured yet): raise the limit by a quarter (at least 1), up to `cap`;
- else hold.
A server without those metrics gives no signal: with none reporting, the limit stays where it started.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .metrics import metrics_text, parse_counters
from .routing import Endpoint

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
GENERATED = "vllm:generation_tokens_total"
GROWTH = 0.03  # a raise must have bought at least 3% more tokens/s, or the limit stops growing
CAP_FACTOR = 4  # the limit never grows past 4 times where it started


@dataclass
class Sample:
    """One server's gauges and counter at one moment."""

    running: float
    waiting: float
    generated: float


@dataclass
class FillRule:
    """The pure rule: fed each step's signals, answers the new limit."""

    limit: int
    floor: int = 1
    cap: int = 1 << 30
    best_rate: float = 0.0  # the most tokens/s measured so far
    raised: int = 0
    lowered: int = 0
    history: list[tuple[int, str]] = field(default_factory=list)  # (limit, why) per change

    def step(self, *, waiting: float, timed_out: bool, in_flight: int, rate: float | None) -> int:
        """`waiting`: requests queued at the servers; `timed_out`: a request timed out since the last step;
        `in_flight`: the run's sequences in flight now; `rate`: generated tokens/s over the last step, None
        when not measured."""
        if waiting > 0 or timed_out:
            queued = self.limit
            self.cap = min(self.cap, max(self.floor, queued - 1))  # the limit that queued is not tried again
            new = max(self.floor, min(queued - 1, math.floor(queued * 0.75)))
            if new < queued:
                self.lowered += 1
                self._change(new, "requests waiting at a server" if waiting > 0 else "a request timed out")
            return self.limit
        if rate is None or in_flight < 0.9 * self.limit:
            return self.limit  # nothing measured, or the limit does not bind: raising it would change nothing
        grew = self.best_rate == 0.0 or rate >= self.best_rate * (1 + GROWTH)
        self.best_rate = max(self.best_rate, rate)
        if grew and self.limit < self.cap:
            self.raised += 1
            self._change(min(self.cap, self.limit + max(1, self.limit // 4)), "no queue, throughput grew")
        return self.limit

    def _change(self, limit: int, why: str) -> None:
        self.limit = limit
        self.history.append((limit, why))


async def read_samples(session: Any, endpoints: Iterable[Endpoint], headers: dict[str, str]) -> list[Sample]:
    """The gauges of every server that reports all three now (the others are left out)."""
    endpoints = tuple(endpoints)
    found = await asyncio.gather(*(_one(session, e, headers) for e in endpoints))
    return [s for s in found if s is not None]


async def _one(session: Any, endpoint: Endpoint, headers: dict[str, str]) -> Sample | None:
    text = await metrics_text(session, endpoint, headers)
    if text is None:
        return None
    found = parse_counters(text, (RUNNING, WAITING, GENERATED))
    if len(found) < 3:
        return None
    return Sample(found[RUNNING], found[WAITING], found[GENERATED])


async def fill_batch(
    rule: FillRule,
    read: Callable[[], Any],
    set_limit: Callable[[int], None],
    in_flight: Callable[[], int],
    timeouts: Callable[[], int],
    every: float,
    clock: Callable[[], float],
) -> None:
    """Run the rule every `every` seconds until cancelled: `read()` awaits the servers' samples,
    `set_limit` moves the run's limit, `in_flight()` and `timeouts()` are the run's own counts."""
    last: tuple[float, float] | None = None  # (time, generated tokens) of the previous step
    seen_timeouts = timeouts()
    while True:
        await asyncio.sleep(every)
        samples = await read()
        if not samples:
            continue
        now, generated = clock(), sum(s.generated for s in samples)
        rate = None if last is None or now <= last[0] else (generated - last[1]) / (now - last[0])
        last = (now, generated)
        count = timeouts()
        timed_out, seen_timeouts = count > seen_timeouts, count
        waiting = sum(s.waiting for s in samples)
        before = rule.limit
        after = rule.step(waiting=waiting, timed_out=timed_out, in_flight=in_flight(), rate=rate)
        if after != before:
            set_limit(after)
