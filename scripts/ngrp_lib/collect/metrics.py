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

CACHE_INFO = "vllm:cache_config_info"  # an info gauge whose labels hold the cache config (block_size)
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


def parse_block_size(text: str) -> int | None:
    """The KV-cache block size (tokens) in vLLM's `vllm:cache_config_info{block_size="128",...}` gauge."""
    for line in text.splitlines():
        if line.startswith(CACHE_INFO + "{"):
            labels = line[len(CACHE_INFO) + 1 :].split("}", 1)[0]
            for part in labels.split(","):
                key, _, value = part.partition("=")
                if key.strip() == "block_size":
                    digits = value.strip().strip('"')
                    return int(digits) if digits.isdigit() and int(digits) > 0 else None
    return None


async def read_counters(
    session: Any, endpoints: Iterable[Endpoint], headers: dict[str, str], blocks: dict[str, int] | None = None
) -> Counters:
    """The counters in `READ` of every server whose `/metrics` answers now (the others are left out); the
    block size each server reports goes into `blocks` (URL -> tokens) when given."""
    endpoints = tuple(endpoints)
    found = await asyncio.gather(*(_one(session, e, headers) for e in endpoints))
    out: Counters = {}
    for endpoint, one in zip(endpoints, found, strict=True):
        if one is None:
            continue
        counters, block = one
        if counters:
            out[endpoint.public_url] = counters
        if blocks is not None and block is not None:
            blocks[endpoint.public_url] = block
    return out


def prefix_counts(counters: Counters) -> Counts:
    """The prefix-cache (queries, hits) of the servers that report both."""
    return {url: (c[QUERIES], c[HITS]) for url, c in counters.items() if QUERIES in c and HITS in c}


async def read_counts(
    session: Any, endpoints: Iterable[Endpoint], headers: dict[str, str], blocks: dict[str, int] | None = None
) -> Counts:
    """The prefix-cache counters of every server that reports them now (the others are left out); the
    block size each server reports goes into `blocks` (URL -> tokens) when given."""
    return prefix_counts(await read_counters(session, endpoints, headers, blocks))


async def _one(
    session: Any, endpoint: Endpoint, headers: dict[str, str]
) -> tuple[dict[str, float], int | None] | None:
    text = await metrics_text(session, endpoint, headers)
    return None if text is None else (parse_counters(text, READ), parse_block_size(text))


async def metrics_text(session: Any, endpoint: Endpoint, headers: dict[str, str]) -> str | None:
    """One server's /metrics page (bounded read, no redirect followed), None when it does not answer 200
    in time: a figure the server cannot give is "not reported", never an error of the run."""
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
    return body.decode("utf-8", errors="replace")


def cache_note(
    rate: float | None, blocks: dict[str, int], max_prompt: int | None, sequences: int, tasks: int
) -> str | None:
    """Why this invocation's prefix-cache hit rate is 0 when its own rows show it (None when it is not 0 or
    not reported): prompts shorter than one KV-cache block (only full blocks are cached), one rollout per
    task (every prompt sent once: nothing earlier to reuse), else a cache that may be off. The n rollouts
    of a grouped request are n sequences to the server, each looked up in the cache: the second and later
    hit the first's full blocks, as separate requests of one prompt do (vLLM 0.32 CPU, measured)."""
    if rate != 0.0:
        return None
    block = min(blocks.values()) if blocks else None
    if max_prompt is not None and block is not None and max_prompt < block:
        return (
            f"every prompt this invocation sent (at most {max_prompt} tokens) is shorter than one KV-cache"
            f" block ({block} tokens on the server): only full blocks are cached, so no prompt could hit"
        )
    if max_prompt is not None and block is None and max_prompt < 16:
        return (
            f"every prompt this invocation sent (at most {max_prompt} tokens) is shorter than one KV-cache"
            " block (16 tokens at the least in vLLM): only full blocks are cached, so no prompt could hit"
        )
    if 0 < sequences <= tasks:
        return (
            "each task's prompt went to the server once in this invocation (one rollout per task): there"
            " was no earlier prompt to reuse"
        )
    size = f" ({block} tokens)" if block is not None else " (vLLM: 16 tokens on GPU, 128 on CPU by default)"
    return (
        "prompts went to the server more than once (a grouped request's n rollouts count as n, each looked"
        f" up in the cache) and none hit: prompts shorter than one block{size} cache nothing, or the"
        " server runs with prefix caching off (--no-enable-prefix-caching)"
    )


def hit_rate(before: Counts, after: Counts) -> float | None:
    """Hits over queries between the two samples (see `prefix_cache`), None when not reported."""
    return prefix_cache(before, after)[0]


def prefix_cache(before: Counts, after: Counts) -> tuple[float | None, str | None]:
    """(rate, note): hits over queries between the two samples, summed over the servers present in both
    whose figures hold; the note names each server left out and why. A figure read from a server is
    believed only in range: every counter finite and >= 0, hits <= queries, neither going down (a restart,
    or a peer that invents them). The rate is None ("not reported") when no server's figures hold or none
    was queried, never a number outside [0, 1]."""
    queries = hits = 0.0
    refused: list[str] = []
    for url, (q0, h0) in before.items():
        if url not in after:
            continue
        q1, h1 = after[url]
        why = _out_of_range(q0, h0, q1, h1)
        if why is not None:
            refused.append(f"{url}: {why}")
            continue
        queries += q1 - q0
        hits += h1 - h0
    rate = round(hits / queries, 4) if queries > 0 else None
    if rate is not None and not 0 <= rate <= 1:  # pragma: no cover - each server's figures are in range
        rate = None
    note = None
    if refused:
        shown = "; ".join(refused[:3]) + (f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        note = f"/metrics figures out of range, left out: {shown}"
    return rate, note


def _out_of_range(q0: float, h0: float, q1: float, h1: float) -> str | None:
    """Why one server's two samples cannot be believed, or None when they hold."""
    import math

    if not all(math.isfinite(v) and v >= 0 for v in (q0, h0, q1, h1)):
        return "a counter is negative or not finite"
    if q1 < q0 or h1 < h0:
        return "a counter went down (a restart?)"
    if h0 > q0 or h1 > q1 or h1 - h0 > q1 - q0:
        return f"more prefix-cache hits ({h1 - h0:g}) than queries ({q1 - q0:g})"
    return None
