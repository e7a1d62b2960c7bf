"""`serve status` / `serve stop` / `collect --endpoints` on endpoints files ngrp serve did not write (hand-
written, odd or broken), and secrets (a URL's password, the API key) that must reach no output of the
commands that talk to a server: `serve status`, `reverify`. A canned-reply aiohttp peer stands in for a
server someone else started (no real server is needed to answer GET /v1/models or echo headers), and a
free port for one that is down."""

from __future__ import annotations

import base64
import json
from pathlib import Path  # noqa: F401

import pytest
from health_data import clean_run
from http_helpers import serve_app
from vllm_fixture import free_port

from ngrp_lib.artifacts import schemas

PASSWORD = "S3cretPassw0rd-xyz"
KEY = "sk-status-k3y-0123456789"
SERVE_OUTPUT = schemas.validator("serve_output")


@pytest.fixture
def peer():
    """A server ngrp did not start: GET /v1/models lists model `m`, or (mode "echo") answers 500 quoting
    the request headers, as a careless proxy does."""
    from aiohttp import web

    state = {"mode": "ok", "gets": 0}

    async def models(request):
        state["gets"] += 1
        if state["mode"] == "echo":
            return web.Response(status=500, text=f"error; request headers: {dict(request.headers)}")
        return web.json_response({"object": "list", "data": [{"id": "m", "max_model_len": 256}]})

    async def verify(request):
        return web.Response(status=500, text=f"error; request headers: {dict(request.headers)}")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/verify", verify)
    with serve_app(app) as url:
        state["url"] = url
        yield state


def _file(tmp_path: Path, entries: list, name: str = "ep.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"endpoints": entries}))
    return path


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{PASSWORD}@")


def _secrets_in(proc) -> list[str]:
    token = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    return [s for s in (PASSWORD, KEY, token) if s in proc.stdout + proc.stderr]


# ---- secrets: a URL's password and the API key reach no output ---------------------------------------


def test_reverify_masks_a_verify_url_password(tmp_path, run_ngrp, peer):
    clean_run(2).write(tmp_path)
    argv = ["reverify", "--rollouts", tmp_path / "rollouts.jsonl", "--max-retries", "0"]
    bad_port = run_ngrp(*argv, "--output", tmp_path / "a.jsonl",
                        "--verify-url", f"http://user:{PASSWORD}@127.0.0.1:99999/verify")  # fmt: skip
    assert bad_port.returncode == 2 and _secrets_in(bad_port) == [], bad_port.stderr
    assert "user:***@127.0.0.1:99999" in bad_port.stderr or "127.0.0.1:99999" in bad_port.stderr
    down = run_ngrp(*argv, "--output", tmp_path / "b.jsonl",
                    "--verify-url", f"http://user:{PASSWORD}@127.0.0.1:{free_port()}/verify")  # fmt: skip
    assert down.returncode == 2 and "connection refused" in down.stderr and _secrets_in(down) == []
    echo = run_ngrp(*argv, "--output", tmp_path / "c.jsonl", "--json",
                    "--verify-url", _with_password(peer["url"]) + "/verify")  # fmt: skip
    assert echo.returncode == 1 and _secrets_in(echo) == [], echo.stdout + echo.stderr
    written = "".join(p.read_text() for p in tmp_path.glob("c*") if p.is_file())
    assert "Basic ***" in written  # the server's echo was stored, masked
    assert PASSWORD not in written and base64.b64encode(f"user:{PASSWORD}".encode()).decode() not in written
