"""Issue 29, class 1: every HTTP read is bounded and no redirect is followed. A hostile peer on 127.0.0.1
answers `GET /v1/models` with a 2 GB Content-Length, an endless chunked stream, or a redirect to another
server; `collect`'s pre-flight, `serve status`, Gym discovery and serve's `/health` probe must stay small
(peak RSS of the child measured by wait4) and refuse cleanly. A canned peer: no real server misbehaves so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from http_helpers import serve_app, sum_tasks

REPO = Path(__file__).resolve().parents[1]
RSS_LIMIT_KB = 200 * 1024


@pytest.fixture
def hostile():
    """GET /v1/models (and /health, /server_instances) misbehave as `state["mode"]` says."""
    from aiohttp import web

    state = {"mode": "huge_length", "other_gets": 0}

    async def misbehave(request):
        mode = state["mode"]
        if mode == "redirect":
            raise web.HTTPFound(state["other"] + request.path)
        reply = web.StreamResponse(status=200, headers={"content-type": "application/json"})
        if mode == "huge_length":
            reply.content_length = 2 * 2**30
        await reply.prepare(request)
        block = b"[" * 2**16
        try:
            for _ in range(2**15 if mode == "huge_length" else 2**20):  # 2 GB, or 64 GB: "endless"
                await reply.write(block)
        except (ConnectionResetError, RuntimeError):  # the client hung up, as it should
            pass
        return reply

    async def other(request):  # where the redirect points: a model list the check must not accept
        state["other_gets"] += 1
        return web.json_response({"object": "list", "data": [{"id": "m"}]})

    other_app = web.Application()
    other_app.router.add_get("/{tail:.*}", other)
    app = web.Application()
    app.router.add_get("/{tail:.*}", misbehave)
    with serve_app(other_app) as other_url, serve_app(app) as url:
        state["url"], state["other"] = url, other_url
        yield state


MEASURE = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]);"
    " peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
    " open(sys.argv[1], 'w').write(str(peak)); sys.exit(code)"
)


def _run_measured(argv: list, cwd: Path) -> tuple[int, str, str, int]:
    """`ngrp ARGV` as a child process: exit code, stdout, stderr and its peak RSS in KiB (its parent, a
    small Python, reads RUSAGE_CHILDREN after reaping it: that figure is the child's alone)."""
    env = {**os.environ, "OPENAI_API_KEY": ""}
    rss_file = cwd / "peak_rss_kb"
    ngrp = REPO / "scripts" / "ngrp.py"
    command = [sys.executable, "-c", MEASURE, str(rss_file), sys.executable, str(ngrp)]
    proc = subprocess.run([*command, *map(str, argv)], cwd=cwd, env=env, capture_output=True, timeout=120)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode(), int(rss_file.read_text())


@pytest.mark.parametrize("mode", ["huge_length", "endless"])
def test_every_http_read_is_bounded_collect_preflight(tmp_path, hostile, mode):
    hostile["mode"] = mode
    sum_tasks(tmp_path, 2)
    out = tmp_path / "out" / "r.jsonl"
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", out, "--base-url",
            hostile["url"] + "/v1", "--model", "m", "--verifier", "exact"]  # fmt: skip
    code, stdout, stderr, rss = _run_measured(argv, tmp_path)
    assert code == 2, stdout + stderr
    assert "reply too large" in stderr and "Traceback" not in stderr, stderr
    print(f"{mode}: peak RSS {rss} KiB")
    assert rss < RSS_LIMIT_KB, f"peak RSS {rss} KiB"
    assert not out.exists() and not [p for p in (tmp_path / "out").glob("*") if p.name != "r.jsonl"]


def test_every_http_read_refuses_redirects_in_the_preflight(tmp_path, hostile, run_ngrp):
    hostile["mode"] = "redirect"
    sum_tasks(tmp_path, 2)
    proc = run_ngrp("collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "r.jsonl",
                    "--base-url", hostile["url"] + "/v1", "--model", "m", "--verifier", "exact")  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "a redirect" in proc.stderr and hostile["other_gets"] == 0


@pytest.mark.parametrize("mode", ["huge_length", "endless", "redirect"])
def test_every_http_read_is_bounded_in_serve_status(tmp_path, hostile, mode):
    hostile["mode"] = mode
    path = tmp_path / "ep.json"
    path.write_text(json.dumps({"endpoints": [{"base_url": hostile["url"] + "/v1", "model": "m"}]}))
    argv = ["serve", "status", "--endpoints-file", path, "--json"]
    code, stdout, stderr, rss = _run_measured(argv, tmp_path)
    assert code == 1 and "Traceback" not in stderr, stdout + stderr
    problem = json.loads(stdout)["endpoints"][0]["problem"]
    assert ("a redirect" if mode == "redirect" else "reply too large") in problem
    print(f"{mode}: peak RSS {rss} KiB")
    assert rss < RSS_LIMIT_KB, f"peak RSS {rss} KiB"
    assert hostile["other_gets"] == 0


@pytest.mark.parametrize("mode", ["huge_length", "endless", "redirect"])
def test_every_http_read_is_bounded_in_blocking_probes(hostile, mode):
    from urllib.parse import urlsplit

    from ngrp_lib.collect.gym_targets import fetch_json
    from ngrp_lib.serve.run import healthy

    hostile["mode"] = mode
    parts = urlsplit(hostile["url"])
    assert fetch_json(hostile["url"] + "/server_instances", limit=1 << 20) is None
    assert healthy(parts.hostname or "", parts.port or 0, timeout=10) is False
    assert hostile["other_gets"] == 0
