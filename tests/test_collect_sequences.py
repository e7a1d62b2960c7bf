"""Sequences in flight as the collector's unit: the queue admits a request only while the sequences it
carries fit the limit (whatever the request shape), the limit comes from --concurrency, the servers'
max_num_seqs or a documented default, and the summary reports mean and peak against it."""

from __future__ import annotations

import asyncio
import json

import pytest

from ngrp_lib.artifacts.endpoints import read_endpoints
from ngrp_lib.collect.options import DEFAULT_SEQUENCES_PER_SERVER, CollectOptions, sequence_limit
from ngrp_lib.collect.routing import Endpoint, load_endpoints
from ngrp_lib.collect.work import Load, WorkQueue, run_workers
from ngrp_lib.errors import InputError
from ngrp_lib.serve.plan import CPU_MAX_NUM_SEQS, max_num_seqs


def _groups(sizes: list[int]) -> list[list]:
    return [[({"i": i, "j": j}, 0) for j in range(size)] for i, size in enumerate(sizes)]


async def _drain(queue: WorkQueue, workers: int, seen: list[int]) -> None:
    async def worker() -> None:
        while (group := await queue.take()) is not None:
            seen.append(queue.load.sequences)  # sequences in flight, this request counted
            await asyncio.sleep(0.001 * len(group))
            queue.done(len(group))

    await run_workers(worker() for _ in range(workers))


@pytest.mark.parametrize("sizes", [[1] * 20, [4] * 6, [3, 1, 4, 1, 5, 2, 2, 3], [16, 1, 1]])
def test_the_queue_never_holds_more_sequences_than_the_limit(sizes):
    queue = WorkQueue(iter(_groups(sizes)), grows=False, limit=5)
    seen: list[int] = []
    asyncio.run(_drain(queue, workers=50, seen=seen))
    assert len(seen) == len(sizes)  # every request ran once
    for size, in_flight in zip(sizes, seen, strict=False):
        assert in_flight <= 5 or in_flight == size  # a request over the limit goes alone, never waits forever
    assert queue.load.peak_sequences == max(max(seen), 0)
    assert queue.load.peak_sequences <= max(5, max(sizes))
    assert queue.load.sequences == 0 and queue.load.requests == 0


def test_the_queue_fills_the_limit_when_requests_are_small():
    """20 one-sequence requests under a limit of 5, 50 workers: 5 in flight at the peak, never 6."""
    queue = WorkQueue(iter(_groups([1] * 20)), grows=False, limit=5)
    seen: list[int] = []
    asyncio.run(_drain(queue, workers=50, seen=seen))
    assert max(seen) == 5 and queue.load.peak_requests == 5


def test_load_means_are_time_weighted():
    """2 sequences for 1 s then 6 for 3 s: mean (2*1 + 6*3) / 4 = 5; requests 1 then 2: (1 + 6) / 4."""
    now = [0.0]
    load = Load(8, clock=lambda: now[0])
    load.change(2, 1)
    now[0] = 1.0
    load.change(4, 1)
    now[0] = 4.0
    block = load.to_json()
    assert block == {"sequences_mean": 5.0, "sequences_peak": 6, "requests_mean": 1.75, "requests_peak": 2}


def _options(tmp_path, **kw) -> CollectOptions:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("")
    return CollectOptions(output=tmp_path / "o.jsonl", input=tasks, endpoints=kw.pop("endpoints"), **kw)


def test_the_limit_comes_from_concurrency_then_the_servers_then_the_default(tmp_path):
    two = (Endpoint("http://a/v1", "m", 64), Endpoint("http://b/v1", "m", 32))
    assert sequence_limit(_options(tmp_path, endpoints=two, concurrency=7), two) == (7, "--concurrency")
    assert sequence_limit(_options(tmp_path, endpoints=two), two) == (96, "the servers' max_num_seqs")
    unknown = (Endpoint("http://a/v1", "m", 64), Endpoint("http://b/v1", "m"))
    limit, source = sequence_limit(_options(tmp_path, endpoints=unknown), unknown)
    assert limit == 2 * DEFAULT_SEQUENCES_PER_SERVER == 256 and source.startswith("default")


def test_an_endpoints_file_carries_max_num_seqs(tmp_path):
    path = tmp_path / "e.json"
    entry = {"base_url": "http://h:1/v1", "model": "m", "max_num_seqs": 48}
    path.write_text(json.dumps({"endpoints": [entry]}))
    assert load_endpoints(path, None)[0].max_num_seqs == 48
    assert load_endpoints(path, None)[0] == Endpoint("http://h:1/v1", "m")  # not part of a server's identity
    path.write_text(json.dumps({"endpoints": [{"base_url": "http://h:1/v1", "max_num_seqs": 0}]}))
    with pytest.raises(InputError, match="max_num_seqs must be at least 1"):
        read_endpoints(path)


@pytest.mark.parametrize(
    ("extra", "device", "expected"),
    [
        ([], "cpu", CPU_MAX_NUM_SEQS),
        (["--max-num-seqs", "12"], "cpu", 12),
        (["--max-num-seqs=300"], "gpu", 300),
        ([], "gpu", None),  # vLLM's GPU default depends on the GPU's memory
    ],
)
def test_serve_knows_its_servers_max_num_seqs(extra, device, expected):
    assert max_num_seqs(extra, device) == expected


class _Gauges:
    """Samples vLLM's own running + waiting gauges while a run goes (the server's view, not ours)."""

    def __init__(self, base_url: str) -> None:
        import threading

        self.url = base_url.removesuffix("/v1") + "/metrics"
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        import urllib.request

        from ngrp_lib.collect.metrics import parse_counters

        while not self._stop.is_set():
            with urllib.request.urlopen(self.url, timeout=5) as reply:
                text = reply.read().decode()
            found = parse_counters(text, ("vllm:num_requests_running", "vllm:num_requests_waiting"))
            self.peak = max(self.peak, sum(found.values()))
            self._stop.wait(0.05)

    def __enter__(self) -> _Gauges:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.vllm
@pytest.mark.parametrize("shape", ["grouped", "per-rollout"])
def test_sequences_in_flight_at_the_server_stay_within_concurrency(vllm_server, tmp_path, shape):
    """6 tasks x 8 repeats at --concurrency 4: the server never runs or queues more than 4 sequences,
    whether the run groups (n <= 4: 12 requests) or sends one request per rollout (48 requests). Before
    sequences were the unit, a grouped run held 4 requests of n = 8: 32 sequences."""
    from test_collect_vllm import collect_args, ngrp, write_tasks

    from ngrp_lib.artifacts import jsonl, names, schemas

    tasks = write_tasks(tmp_path / "tasks.jsonl", 6, max_tokens=16)
    out = tmp_path / "rollouts.jsonl"
    extra = ["--one-request-per-rollout"] if shape == "per-rollout" else []
    args = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "8", "--concurrency", "4", *extra)
    with _Gauges(vllm_server.base_url) as gauges:
        done = ngrp(*args, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    schemas.validator("collect_result").validate(summary)
    assert summary["cost"]["requests"] == (12 if shape == "grouped" else 48)
    if shape == "grouped":
        assert summary["grouping"]["cap"] == 4
    load = summary["load"]
    assert load["limit"] == 4 and load["limit_source"] == "--concurrency"
    assert 1 <= load["sequences_peak"] <= 4 and 0 < load["sequences_mean"] <= 4
    assert 0 < gauges.peak <= 4  # the server's own count of sequences running and waiting
    manifest = jsonl.read_json(names.manifest_path_for(out))
    assert manifest["runs"][-1]["load"] == load
    assert manifest["options"]["concurrency"] == 4
