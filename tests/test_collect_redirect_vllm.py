"""The pre-flight check follows a redirect exactly when the rows do (`collect --follow-redirects`): a local
aiohttp server redirects every request (307, so a POST stays a POST) to the real vLLM on CPU. No real
server redirects by itself; what answers behind the redirect is real."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from http_helpers import serve_app
from test_collect_vllm import collect_args, write_tasks

from ngrp_lib.collect.preflight import check_endpoints
from ngrp_lib.collect.routing import Endpoint
from ngrp_lib.errors import UsageError

pytestmark = pytest.mark.vllm


@pytest.fixture
def redirect_to_vllm(vllm_server):
    """`http://127.0.0.1:PORT` that answers every request with a 307 to the same path on the vLLM server."""
    from aiohttp import web

    target = vllm_server.base_url.removesuffix("/v1")
    seen: list[str] = []

    async def redirect(request):
        seen.append(f"{request.method} {request.path}")
        raise web.HTTPTemporaryRedirect(target + request.path_qs)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", redirect)
    with serve_app(app) as url:
        yield url, seen


def _preflight(base_url: str, model: str, follow: bool):
    import aiohttp

    async def run():
        async with aiohttp.ClientSession() as session:
            endpoints = [Endpoint(base_url, model)]
            return await check_endpoints(
                endpoints, session, api_key=None, api_key_env="OPENAI_API_KEY", follow_redirects=follow
            )

    return asyncio.run(run())


def test_the_preflight_check_follows_a_redirect_only_when_the_rows_would(redirect_to_vllm, vllm_server):
    url, seen = redirect_to_vllm
    with pytest.raises(UsageError) as refused:
        _preflight(url + "/v1", vllm_server.model, follow=False)
    assert "HTTP 307, a redirect" in str(refused.value) and "--follow-redirects" in str(refused.value)
    found = _preflight(url + "/v1", vllm_server.model, follow=True)
    (check,) = found.checks
    assert check.ok and check.status == 200 and vllm_server.model in (check.models or ())
    assert check.max_model_len  # vLLM's own model list, read through the redirect
    assert seen == ["GET /v1/models", "GET /v1/models"]


def test_collect_with_follow_redirects_runs_through_a_redirect(redirect_to_vllm, vllm_server, tmp_path):
    from cli_helpers import ngrp_process

    url, _ = redirect_to_vllm
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "r.jsonl"
    args = collect_args(tasks, out, url + "/v1", "--follow-redirects", "--json")
    args[args.index("--model") + 1] = vllm_server.model
    proc = ngrp_process(*args, env={**os.environ, "OPENAI_API_KEY": ""})
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["completed"] == 2 and len(out.read_text().splitlines()) == 2
