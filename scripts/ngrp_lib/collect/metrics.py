"""vLLM's prefix-cache hit rate over one run, from its Prometheus `/metrics` (sampled before and after).

vLLM 0.32 exports the counters `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total`
(tokens looked up in, and found in, the prefix cache; one series per engine and model). The hit rate of a
run is (hits after - hits before) / (queries after - queries before), summed over the servers that
reported both counters both times. A server without `/metrics`, or with other names (they changed
between vLLM versions), gives nothing: the run says "not reported", never 0.

Replies are read through `http.read_limited`, so a huge or endless `/metrics` body is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from .http import AttemptFailed, read_limited
from .routing import Endpoint

QUERIES = "vllm:prefix_cache_queries_total"
HITS = "vllm:prefix_cache_hits_total"
# tokens the server generated and prefilled (an aborted request's included): what a killed invocation
# lost in flight is their growth less what its rows hold (`invocations.lost_in_flight`)
GENERATED = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
READ = (QUERIES, HITS, GENERATED, PROMPT)
METRICS_LIMIT = 4 << 20  # bytes of /metrics read at most
TIMEOUT_S = 5.0

Counts = dict[str, tuple[float, float]]  # server URL -> (queries, hits)
Counters = dict[str, dict[str, float]]  # server URL -> counter name -> value (those it reports)


def metrics_url(endpoint: Endpoint) -> str:
    return endpoint.base_url.removesuffix("/v1") + "/metrics"


def parse_counters(text: str, names: Iterable[str]) -> dict[str, float]:
    """The sum over all label sets of each named counter in a Prometheus text exposition."""
    wanted = set(names)
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in wanted:
            continue
        try:
            value = float(line.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        found[name] = found.get(name, 0.0) + value
    return found


async def read_counters(session: Any, endpoints: Iterable[Endpoint], headers: dict[str, str]) -> Counters:
    """The counters in `READ` of every server whose `/metrics` answers now (the others are left out)."""
    endpoints = tuple(endpoints)
    found = await asyncio.gather(*(_one(session, e, headers) for e in endpoints))
    return {e.public_url: counters for e, counters in zip(endpoints, found, strict=True) if counters}


def prefix_counts(counters: Counters) -> Counts:
    """The prefix-cache (queries, hits) of the servers that report both."""
    return {url: (c[QUERIES], c[HITS]) for url, c in counters.items() if QUERIES in c and HITS in c}


async def read_counts(session: Any, endpoints: Iterable[Endpoint], headers: dict[str, str]) -> Counts:
    """The prefix-cache counters of every server that reports them now (the others are left out)."""
    return prefix_counts(await read_counters(session, endpoints, headers))


async def _one(session: Any, endpoint: Endpoint, headers: dict[str, str]) -> dict[str, float] | None:
    import aiohttp

    url = metrics_url(endpoint)
    try:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with session.get(url, headers=headers, timeout=timeout, allow_redirects=False) as reply:
            if reply.status != 200:
                return None
            body = await read_limited(reply, METRICS_LIMIT, url)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, AttemptFailed):
        return None
    return parse_counters(body.decode("utf-8", errors="replace"), READ)


def hit_rate(before: Counts, after: Counts) -> float | None:
    """Hits over queries between the two samples, over servers present in both; None when no server
    reported, or none was queried (a counter that went down means the server restarted: left out)."""
    queries = hits = 0.0
    for url, (q0, h0) in before.items():
        if url not in after:
            continue
        q1, h1 = after[url]
        if q1 < q0 or h1 < h0:
            continue
        queries += q1 - q0
        hits += h1 - h0
    return round(hits / queries, 4) if queries > 0 else None
