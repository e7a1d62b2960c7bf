"""`serve status` / `serve stop` / `collect --endpoints` on endpoints files ngrp serve did not write (hand-
written, odd or broken), and secrets (a URL's password, the API key) that must reach no output of the
commands that talk to a server: `serve status`, `reverify`. A canned-reply aiohttp peer stands in for a
server someone else started (no real server is needed to answer GET /v1/models or echo headers), and a
free port for one that is down."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from health_data import clean_run
from http_helpers import serve_app
from vllm_fixture import free_port

from ngrp_lib.artifacts import schemas
from ngrp_lib.collect.routing import load_endpoints
from ngrp_lib.errors import InputError

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


# ---- one reader, every entry checked -----------------------------------------------------------------

BAD_ENTRIES = [
    (["http://127.0.0.1:9/v1"], "/endpoints/0", "each endpoint is an object"),
    ([{"model": "m"}], "/endpoints/0", "needs a base_url string"),
    ([{"base_url": "http://127.0.0.1:9/v1", "port": "x"}], "/endpoints/0/port", "port must be an integer"),
    ([{"base_url": "http://127.0.0.1:9/v1", "port": 70000}], "/endpoints/0/port", "1..65535"),
    ([{"base_url": "http://127.0.0.1:9/v1", "pid": "12"}], "/endpoints/0/pid", "pid must be an integer"),
    ([{"base_url": "http://127.0.0.1:9/v1", "pid": True}], "/endpoints/0/pid", "pid must be an integer"),
    ([{"base_url": "http://127.0.0.1:9/v1", "pid": 0}], "/endpoints/0/pid", "pid must be at least 1"),
    ([{"base_url": "http://127.0.0.1:9/v1", "pid": -5}], "/endpoints/0/pid", "pid must be at least 1"),
    ([{"base_url": "http://127.0.0.1:9/v1", "port": 0}], "/endpoints/0/port", "1..65535"),
    (
        [{"base_url": "http://h:0/v1"}],
        "/endpoints/0/base_url",
        "base_url 'http://h:0/v1': port 0 is not a server's port",
    ),
    ([{"base_url": "http://127.0.0.1:9/v1", "model": 5}], "/endpoints/0/model", "non-empty string"),
    ([{"base_url": "http://127.0.0.1:9/v1"}, {"base_url": "ftp://h/v1"}], "/endpoints/1/base_url", "http(s)"),
    ([{"base_url": f"http://u:{PASSWORD}@h:99999/v1"}], "/endpoints/0/base_url", "not a valid URL"),
]


@pytest.mark.parametrize(("entries", "pointer", "match"), BAD_ENTRIES)
def test_a_bad_entry_is_one_line_naming_file_and_pointer_in_every_reader(
    tmp_path, run_ngrp, entries, pointer, match
):
    path = _file(tmp_path, entries)
    before = path.read_bytes()
    for action in ("status", "stop"):
        proc = run_ngrp("serve", action, "--endpoints-file", path)
        first = proc.stderr.splitlines()[0]
        assert proc.returncode == 3 and first.startswith(f"error: {path}: {pointer}: "), proc.stderr
        assert match in first and "Traceback" not in proc.stderr and PASSWORD not in proc.stderr
        assert path.read_bytes() == before  # stop deletes nothing it refused to read
    with pytest.raises(InputError, match=match.replace("(", r"\(").replace(")", r"\)")) as err:
        load_endpoints(path, "m")  # collect --endpoints: the same reader
    assert err.value.pointer == pointer and err.value.path == path


# ---- a hand-written file: probed by status, left alone by stop --------------------------------------


def test_status_probes_a_hand_written_entry(tmp_path, run_ngrp, peer):
    path = _file(tmp_path, [{"base_url": peer["url"] + "/v1", "model": "m"}])
    proc = run_ngrp("serve", "status", "--endpoints-file", path, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert SERVE_OUTPUT.is_valid(payload)
    assert payload["endpoints"] == [
        {"base_url": peer["url"] + "/v1", "pid": None, "started_by_serve": False, "running": None,
         "healthy": None, "model": "m", "models": ["m"], "max_model_len": 256, "problem": None}
    ]  # fmt: skip
    text = run_ngrp("serve", "status", "--endpoints-file", path)
    assert text.returncode == 0 and "not started by ngrp serve (no pid): probed only" in text.stdout
    assert "serves 'm' (context 256 tokens)" in text.stdout and "not running" not in text.stdout
    other = _file(tmp_path, [{"base_url": peer["url"] + "/v1", "model": "other"}], "other.json")
    wrong = run_ngrp("serve", "status", "--endpoints-file", other)
    assert wrong.returncode == 1 and "model 'other' is not served at" in wrong.stdout
    down = _file(tmp_path, [{"base_url": f"http://127.0.0.1:{free_port()}/v1"}], "down.json")
    dead = run_ngrp("serve", "status", "--endpoints-file", down)
    assert dead.returncode == 1 and "connection refused at" in dead.stdout and "(pid None)" not in dead.stdout
    assert peer["gets"] == 3


def test_stop_leaves_a_server_it_did_not_start_and_keeps_the_file(tmp_path, run_ngrp, peer):
    path = _file(tmp_path, [{"base_url": peer["url"] + "/v1", "model": "m"}])
    before = path.read_bytes()
    proc = run_ngrp("serve", "stop", "--endpoints-file", path)
    assert proc.returncode == 0, proc.stderr
    assert "left running 1 server(s) ngrp serve did not start" in proc.stdout and peer["url"] in proc.stdout
    assert f"kept {path}: ngrp serve did not write it" in proc.stdout
    assert "removed" not in proc.stdout and "already gone 0" in proc.stdout
    assert path.read_bytes() == before
    # a pid without the start time ngrp serve records is not taken as proof the process is ours
    mine = _file(tmp_path, [{"base_url": peer["url"] + "/v1", "pid": os.getpid()}], "pid.json")
    stopped = run_ngrp("serve", "stop", "--endpoints-file", mine, "--json")
    payload = json.loads(stopped.stdout)
    assert stopped.returncode == 0 and SERVE_OUTPUT.is_valid(payload)
    assert (payload["stopped"], payload["killed"], payload["not_started"], payload["removed"]) == (
        [], [], [peer["url"] + "/v1"], False
    )  # fmt: skip
    assert mine.exists()
    assert run_ngrp("serve", "status", "--endpoints-file", path).returncode == 0  # still answering


# ---- secrets: a URL's password and the API key reach no output ---------------------------------------


def test_serve_status_masks_url_passwords_and_the_api_key(tmp_path, run_ngrp, peer):
    down = f"http://127.0.0.1:{free_port()}/v1"
    path = _file(tmp_path, [{"base_url": _with_password(peer["url"]) + "/v1", "model": "m"},
                            {"base_url": _with_password(down), "model": "m"}])  # fmt: skip
    no_key = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    for mode in ("ok", "echo"):
        peer["mode"] = mode
        for extra in ((), ("--json",)):
            proc = run_ngrp("serve", "status", "--endpoints-file", path, *extra, env=no_key)
            assert proc.returncode == 1 and _secrets_in(proc) == [], proc.stdout + proc.stderr
            assert f"connection refused at {down}" in proc.stdout
            if mode == "echo":
                assert "Basic ***" in proc.stdout  # the server's echo of the credentials, masked
            if extra:
                payload = json.loads(proc.stdout)
                assert SERVE_OUTPUT.is_valid(payload)
                assert [r["base_url"] for r in payload["endpoints"]] == [peer["url"] + "/v1", down]
    with_key = {**os.environ, "OPENAI_API_KEY": KEY}
    plain = _file(tmp_path, [{"base_url": peer["url"] + "/v1", "model": "m"}], "plain.json")
    echoed = run_ngrp("serve", "status", "--endpoints-file", plain, "--json", env=with_key)
    assert echoed.returncode == 1 and "Bearer ***" in echoed.stdout and _secrets_in(echoed) == []
    both = run_ngrp("serve", "status", "--endpoints-file", path, env=with_key)  # aiohttp sends only one
    assert both.returncode == 1 and _secrets_in(both) == [] and "Traceback" not in both.stderr
    assert both.stdout.count("holds user:password@ credentials and $OPENAI_API_KEY is set too") == 2


def test_reverify_masks_a_verify_url_password(tmp_path, run_ngrp, peer):
    clean_run(2).write(tmp_path)
    argv = ["reverify", "--rollouts", tmp_path / "rollouts.jsonl", "--max-retries", "0"]
    bad_port = run_ngrp(*argv, "--output", tmp_path / "a.jsonl",
                        "--verify-url", f"http://user:{PASSWORD}@127.0.0.1:99999/verify")  # fmt: skip
    assert bad_port.returncode == 2 and _secrets_in(bad_port) == [], bad_port.stderr
    assert "--verify-url 'http://127.0.0.1:99999/verify' is not a valid URL" in bad_port.stderr
    assert "user:" not in bad_port.stderr  # named without its credentials
    down = run_ngrp(*argv, "--output", tmp_path / "b.jsonl",
                    "--verify-url", f"http://user:{PASSWORD}@127.0.0.1:{free_port()}/verify")  # fmt: skip
    assert down.returncode == 2 and "connection refused" in down.stderr and _secrets_in(down) == []
    echo = run_ngrp(*argv, "--output", tmp_path / "c.jsonl", "--json",
                    "--verify-url", _with_password(peer["url"]) + "/verify")  # fmt: skip
    assert echo.returncode == 1 and _secrets_in(echo) == [], echo.stdout + echo.stderr
    written = "".join(p.read_text() for p in tmp_path.glob("c*") if p.is_file())
    assert "Basic ***" in written  # the server's echo was stored, masked
    assert PASSWORD not in written and base64.b64encode(f"user:{PASSWORD}".encode()).decode() not in written
