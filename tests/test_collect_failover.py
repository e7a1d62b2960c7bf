"""Several servers in one run: the router's choices (unit), then two real vLLM servers on CPU with one
killed mid-run (the run completes on the other, no key lost or duplicated)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ENTRY

from ngrp_lib.collect.failover import FailoverRouter, ProbeSchedule, make_router
from ngrp_lib.collect.http import AttemptFailed
from ngrp_lib.collect.routing import Endpoint

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ngrp.py"
A, B, C = (Endpoint(f"http://127.0.0.1:{p}/v1", "tiny") for p in (1, 2, 3))


def refused() -> AttemptFailed:
    return AttemptFailed("agent_request_failed", "ClientConnectorError", "connection refused")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def router(*endpoints, capacity=2, **kw) -> FailoverRouter:
    return FailoverRouter(list(endpoints), capacity=capacity, log=lambda _: None, **kw)


def test_home_server_is_task_affine_and_spills_when_full():
    r = router(A, B, C)
    assert [r.pick(t).endpoint for t in range(6)] == [A, B, C, A, B, C]
    r.servers[1].outstanding = 2  # B is full: task 1 goes to the least busy, ties to the next after home
    r.servers[2].outstanding = 1
    assert r.pick(1).endpoint == A
    r.servers[0].outstanding = 1
    assert r.pick(1).endpoint == C  # A and C tie at 1: C comes first after B
    r.servers[2].healthy = False
    assert r.pick(2).endpoint == A
    r.servers[0].outstanding, r.servers[1].outstanding = 1, 0
    assert r.pick(2).endpoint == A  # home out: the next server after it, though B is idler
    r.servers[0].outstanding = 2
    assert r.pick(2).endpoint == B  # ... unless that one is full
    assert r.pick(1, exclude={0}).endpoint == B  # full, but the only healthy one left: it waits its turn
    assert r.pick(1, exclude={0, 1}) is None
    assert make_router([A, B], limit=32).capacity == 16


def test_no_reply_fails_over_and_takes_the_server_out():
    r = router(A, B)
    calls = []

    async def call(endpoint):
        calls.append(endpoint)
        if endpoint == B:
            raise refused()
        return "ok"

    assert asyncio.run(r.dispatch(1, call)) == "ok"
    assert calls == [B, A] and not r.servers[1].healthy and r.servers[1].went_down == 1
    calls.clear()
    assert asyncio.run(r.dispatch(3, call)) == "ok" and calls == [A]  # B's tasks now go to A directly
    assert [s.outstanding for s in r.servers] == [0, 0] and r.servers[0].served == 2


def test_errors_with_a_reply_and_single_servers_do_not_fail_over():
    async def http_500(endpoint):
        raise AttemptFailed("agent_run_error", "HTTPError", "HTTP 500", 500, "boom")

    r = router(A, B)
    with pytest.raises(AttemptFailed, match="HTTP 500"):
        asyncio.run(r.dispatch(0, http_500))
    assert all(s.healthy for s in r.servers)

    async def dead(endpoint):
        raise refused()

    solo = router(A)
    with pytest.raises(AttemptFailed, match="refused"):
        asyncio.run(solo.dispatch(0, dead))
    assert solo.servers[0].healthy  # one server: recorded as a failed attempt, as before
    both = router(A, B)
    with pytest.raises(AttemptFailed, match="refused"):
        asyncio.run(both.dispatch(0, dead))
    assert not any(s.healthy for s in both.servers)
    with pytest.raises(AttemptFailed, match="every server is out"):
        asyncio.run(both.dispatch(0, dead))


def test_probe_brings_a_server_back_with_backoff():
    from aiohttp import ClientSession, web

    answers = [503, 200]
    seen_keys = []

    async def models(request):
        seen_keys.append(request.headers.get("authorization"))
        if request.headers.get("authorization") != "Bearer k":  # like vLLM started with --api-key
            return web.Response(status=401)
        return web.Response(status=answers.pop(0) if answers else 200)

    async def scenario():
        app = web.Application()
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        up = Endpoint(f"http://127.0.0.1:{port}/v1", "tiny")
        clock = Clock()
        async with ClientSession() as session:
            r = router(
                A,
                up,
                session=session,
                clock=clock,
                probes=ProbeSchedule(after=2.0),
                headers={"authorization": "Bearer k"},
            )
            r.mark_down(r.servers[1], "test")
            await r.probe_due()
            assert not r.servers[1].healthy  # not due yet: no probe sent
            clock.now = 2.0
            await r.probe_due()  # 503: still out, next probe after 4 s
            assert not r.servers[1].healthy and r.servers[1].next_probe == 6.0
            clock.now = 6.0
            await r.probe_due()  # 200: back
            assert r.servers[1].healthy
        await runner.cleanup()
        assert seen_keys == ["Bearer k", "Bearer k"]  # the probe carries the run's API key

    asyncio.run(scenario())


def tasks_jsonl(path, n_tasks: int, max_tokens: int) -> None:
    lines = [
        json.dumps(
            {
                "responses_create_params": {
                    "input": f"Count to {t}:",
                    "max_output_tokens": max_tokens,
                    "temperature": 1.0,
                },
                "expected_answer": str(t),
            }
        )  # fmt: skip
        for t in range(n_tasks)
    ]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.vllm
@pytest.mark.slow
def test_two_real_servers_one_killed_mid_run(vllm_server, vllm_server_factory, tmp_path):
    started = time.monotonic()
    first, second = vllm_server, vllm_server_factory()  # the session's server, and a private one to kill
    print(f"second vLLM server ready in {time.monotonic() - started:.1f} s")
    tasks_jsonl(tmp_path / "tasks.jsonl", 40, 32)
    out = tmp_path / "run" / "rollouts.jsonl"
    cmd = [*ENTRY, "collect", "--input", str(tmp_path / "tasks.jsonl"),
           "--num-repeats", "4", "--base-url", first.base_url, "--base-url", second.base_url,
           "--model", "tiny", "--verifier", "exact", "--concurrency", "8", "--output", str(out),
           "--json"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    written = b""
    while time.monotonic() < deadline and proc.poll() is None:
        # kill once both servers have answered (a freshly started CPU server can be slow to answer first)
        written = out.read_bytes() if out.exists() else b""
        if written.count(b"\n") >= 30 and second.base_url.encode() in written:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before the kill: make it longer"
    assert second.base_url.encode() in written, "the second server answered nothing within 300 s"
    second.kill()  # SIGKILL the whole server mid-run, requests in flight
    rows_at_kill = written.count(b"\n")
    killed_at = time.monotonic()
    stdout, stderr = proc.communicate(timeout=600)
    print(f"run finished {time.monotonic() - killed_at:.1f} s after the kill")
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["completed"] == summary["expected"] == 160 and summary["failed"] == 0
    done = [json.loads(line) for line in out.read_text().splitlines()]
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in done]
    servers = [r["_ngrp_server"] for r in done]
    assert set(servers) == {first.base_url, second.base_url}  # both served before the kill
    # ... and the first one finished the run alone (at most --concurrency answers were in flight at the kill)
    assert rows_at_kill + 8 < 160
    assert set(servers[rows_at_kill + 8 :]) == {first.base_url}
    assert len(keys) == len(set(keys)) == 160  # none lost, none twice
    assert set(keys) == {(t, r) for t in range(40) for r in range(4)}
    assert f"server {second.base_url} is out" in stderr
    assert (tmp_path / "run" / "rollouts_failures.jsonl").read_bytes() == b""
