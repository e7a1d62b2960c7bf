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


async def _drain_pieces(queue: WorkQueue, workers: int, pieces: list[list]) -> None:
    async def worker() -> None:
        while (group := await queue.take()) is not None:
            pieces.append(group)
            await asyncio.sleep(0.001 * len(group))
            queue.done(len(group))

    await run_workers(worker() for _ in range(workers))


@pytest.mark.parametrize("sizes", [[1] * 20, [4] * 6, [3, 1, 4, 1, 5, 2, 2, 3], [16, 1, 1]])
def test_the_queue_never_holds_more_sequences_than_the_limit(sizes):
    queue = WorkQueue(iter(_groups(sizes)), grows=False, limit=5)
    seen: list[int] = []
    asyncio.run(_drain(queue, workers=50, seen=seen))
    assert sum(seen) and queue.load.peak_sequences == max(seen)
    assert (
        queue.load.peak_sequences == 5
    )  # a group over the room is cut to it: the limit is reached, never passed
    assert queue.load.sequences == 0 and queue.load.requests == 0


@pytest.mark.parametrize("sizes", [[4] * 6, [8, 8, 8], [1, 1, 2, 4, 8, 8, 4, 2, 1], [16, 1, 1]])
def test_groups_are_cut_to_the_room_so_every_row_runs_once_and_in_order(sizes):
    """Limit 5 with groups of 4 or 8: a group that does not fit whole goes in parts (never a row twice,
    never out of order), and while a part waited the batch held all 5 (a group waiting whole held 4)."""
    groups = _groups(sizes)
    queue = WorkQueue(iter(groups), grows=False, limit=5)
    pieces: list[list] = []
    asyncio.run(_drain_pieces(queue, workers=50, pieces=pieces))
    assert [item for piece in pieces for item in piece] == [item for group in groups for item in group]
    assert all(len({row["i"] for row, _ in piece}) == 1 for piece in pieces)  # a part is of one group
    assert max(len(piece) for piece in pieces) <= 5
    block = queue.load.to_json()
    assert block["sequences_peak"] == 5
    # 5 but for the moments between a request's end and the waiting part's start (an event-loop turn,
    # here against requests of a few ms); a group waiting whole held at most 4 while it waited
    assert block["waiting_s"] > 0 and 4.8 <= block["sequences_mean_waiting"] <= 5


def test_nothing_waits_when_every_group_fits():
    queue = WorkQueue(iter(_groups([1, 2, 1])), grows=False, limit=5)
    asyncio.run(_drain(queue, workers=50, seen=[]))
    block = queue.load.to_json()
    assert block["waiting_s"] == 0 and block["sequences_mean_waiting"] is None


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
    assert block == {"sequences_mean": 5.0, "sequences_peak": 6, "requests_mean": 1.75, "requests_peak": 2,
                     "waiting_s": 0.0, "sequences_mean_waiting": None}  # fmt: skip
    load.wait(True)  # then 6 for 2 s with a request waiting, and 3 for 2 s after
    now[0] = 6.0
    load.change(-3, -1)
    now[0] = 8.0
    load.wait(False)
    now[0] = 9.0
    block = load.to_json()
    assert block["waiting_s"] == 4.0 and block["sequences_mean_waiting"] == 4.5


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


@pytest.mark.vllm
def test_a_timeout_fits_the_request_and_every_retry_is_said_and_counted(vllm_server, tmp_path):
    """Real vLLM, real timeouts: 256-token generations against --timeout 0.02 s per sequence. A grouped
    request of 4 waits 4 x 0.02 s; each of the 3 requests is retried once, each retry said on stderr with
    its cause; the message says what to change; the summary, the manifest, `check` and `health` count the
    3 retries; and progress lines come at a steady pace on stderr (not a terminal here)."""
    from test_collect_vllm import collect_args, ngrp, write_tasks

    from ngrp_lib.artifacts import jsonl, names, schemas

    tasks = write_tasks(tmp_path / "tasks.jsonl", 3, max_tokens=256)
    out = tmp_path / "rollouts.jsonl"
    args = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "4", "--concurrency", "8")
    args += ["--timeout", "0.02", "--max-retries", "1", "--max-attempts", "1", "--abort-after", "100"]
    done = ngrp(*args, "--progress-every", "0.2", "--json")
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    schemas.validator("collect_result").validate(summary)
    assert summary["cost"]["requests"] == 3 and summary["failed"] == 12
    assert summary["retries"] == {"timeout": 3}
    assert done.stderr.count("retrying (timeout,") == 3, done.stderr
    assert done.stderr.count("ngrp collect: progress: ") >= 2, done.stderr
    failures = [r.data for r in jsonl.iter_rows(names.failures_path_for(out))]
    assert len(failures) == 12
    for row in failures:
        assert row["_ng_failure_class"] == "timeout" and row["_ngrp_retries"] == 1
        assert row["_ng_failure_message"] == (
            f"no answer within 0.08s from {vllm_server.base_url}/chat/completions (a request of 4"
            " sequences: --timeout 0.02s per sequence): raise --timeout, or lower --concurrency if the"
            " server is overloaded"
        )
    assert "raise --timeout (seconds per sequence" in summary["top_failures"][0]["fix"]
    assert jsonl.read_json(names.manifest_path_for(out))["runs"][-1]["retries"] == {"timeout": 3}
    materialized = names.materialized_path_for(out)
    checked = ngrp("check", "--json", "--inputs", materialized, "--rollouts", out)
    assert json.loads(checked.stdout)["retries"] == {"timeout": 3}
    text = ngrp("check", "--inputs", materialized, "--rollouts", out).stdout
    assert "retries: 3 requests the collector sent again (timeout 3); timeouts cost" in text
    health = ngrp("health", "--json", "--no-write", "--inputs", materialized, "--rollouts", out)
    report = json.loads(health.stdout)
    schemas.validator("health_result").validate(report)
    assert report["collector_retries"] == {"timeout": 3}


def test_fill_rule_raises_while_there_is_no_queue_and_throughput_grows():
    from ngrp_lib.collect.fill import FillRule

    rule = FillRule(limit=16, cap=64)
    # first measured step at the limit: 16 -> 20 (a quarter); tokens/s 100
    assert rule.step(waiting=0, timed_out=False, in_flight=16, rate=100.0) == 20
    # 20 binds and 110 >= 100 * 1.03: 20 -> 25
    assert rule.step(waiting=0, timed_out=False, in_flight=19, rate=110.0) == 25
    # the limit does not bind (in flight 20 < 0.9 * 25 = 22.5): hold, whatever the rate
    assert rule.step(waiting=0, timed_out=False, in_flight=20, rate=500.0) == 25
    # binds, but 112 < 110 * 1.03 = 113.3: throughput stopped growing, hold
    assert rule.step(waiting=0, timed_out=False, in_flight=25, rate=112.0) == 25
    assert (rule.raised, rule.lowered) == (2, 0)


def test_fill_rule_backs_off_on_a_queue_or_a_timeout_and_does_not_retry_that_limit():
    from ngrp_lib.collect.fill import FillRule

    rule = FillRule(limit=40, cap=160)
    assert rule.step(waiting=3, timed_out=False, in_flight=40, rate=100.0) == 30  # floor(40 * 3/4)
    assert rule.cap == 39  # the limit that queued is never reached again
    assert rule.step(waiting=0, timed_out=True, in_flight=30, rate=100.0) == 22  # floor(30 * 3/4)
    assert rule.cap == 29
    # no queue, binding, first growth measured: 22 -> 27, then 27 -> 29 (the ceiling), never past it
    assert rule.step(waiting=0, timed_out=False, in_flight=22, rate=100.0) == 27
    assert rule.step(waiting=0, timed_out=False, in_flight=27, rate=200.0) == 29
    assert rule.step(waiting=0, timed_out=False, in_flight=29, rate=400.0) == 29
    low = FillRule(limit=1, floor=1)
    assert low.step(waiting=5, timed_out=False, in_flight=1, rate=None) == 1 and low.lowered == 0


def test_raising_the_queue_limit_admits_waiting_requests():
    """A worker waiting for room is admitted when the limit is raised (the controller's lever)."""

    async def scenario() -> list[int]:
        queue = WorkQueue(iter(_groups([2, 2, 2])), grows=False, limit=2)
        first = await queue.take()
        waiting = asyncio.ensure_future(queue.take())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # 2 + 2 > 2
        queue.limit = 4
        second = await asyncio.wait_for(waiting, 1)
        return [len(first or []), len(second or []), queue.load.sequences, queue.load.peak_limit]

    assert asyncio.run(scenario()) == [2, 2, 4, 4]


@pytest.mark.vllm
def test_fill_batch_raises_the_limit_while_the_server_has_no_queue(vllm_server, tmp_path):
    """--fill-batch from 2 sequences: the tiny server (max_num_seqs 128) never queues 2, so the limit grows
    at least once, the server never holds more than the peak limit, and the summary says so."""
    from test_collect_vllm import collect_args, ngrp, write_tasks

    from ngrp_lib.artifacts import schemas

    # enough work to outlast several of the rule's 2-second steps on a quiet machine too (64 rollouts of 32
    # tokens ended before the second reading, so the limit was never measured, let alone raised)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 32, max_tokens=64)
    out = tmp_path / "rollouts.jsonl"
    args = collect_args(tasks, out, vllm_server.base_url, "--num-repeats", "8", "--concurrency", "2")
    with _Gauges(vllm_server.base_url) as gauges:
        done = ngrp(*args, "--fill-batch", "--one-request-per-rollout", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    schemas.validator("collect_result").validate(summary)
    fill = summary["load"]["fill_batch"]
    assert summary["load"]["limit"] == 2 and fill["raised"] >= 1 and fill["peak_limit"] > 2
    assert summary["load"]["sequences_peak"] <= fill["peak_limit"] <= 8  # at most 4x the start
    assert 0 < gauges.peak <= fill["peak_limit"]
    assert "sequences in flight: limit " in done.stderr
    text = ngrp(*args, "--fill-batch", "--one-request-per-rollout", "--overwrite").stdout
    assert "--fill-batch: limit raised " in text


def test_progress_line_counts_done_failed_retries_and_the_load(monkeypatch):
    import ngrp_lib.collect.progress as progress

    tally = progress.Tally(total=752, started=0.0)
    tally.completed, tally.failed = 120, 3
    # 100 s in: 1.2 rollouts/s, (752 - 123) / 1.2 = 524 s left
    monkeypatch.setattr(progress.time, "monotonic", lambda: 100.0)
    line = progress.progress_line(tally, {"timeout": 5, "HTTP 503": 1}, {"sequences": 60, "limit": 64})
    assert line == (
        "progress: 120/752 done, 3 failed attempts, 6 retries (HTTP 503 1, timeout 5), 1.20 rollouts/s,"
        " ETA 524s, 100s so far, sequences in flight 60 of 64"
    )
