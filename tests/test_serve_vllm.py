"""`ngrp serve` against the real CPU build of vLLM (env NGRP_VLLM_VENV, from `.ci/install_vllm.sh`).

Each test starts real servers through the CLI and then proves that no process is left: every process in
the server's process group is gone, and no process mentions the test's own model directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import ENTRY
from cli_helpers import ngrp_process as ngrp
from vllm_fixture import build_model

from ngrp_lib.serve import run as serve_run

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not os.environ.get("NGRP_VLLM_VENV"), reason="NGRP_VLLM_VENV is not set (.ci/install_vllm.sh)"
    ),
]

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
SCHEMA = json.loads((REPO / "schemas" / "endpoints.schema.json").read_text())


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    # Its own directory (not the session's shared model): the tests look for processes that mention it.
    python = Path(os.environ["NGRP_VLLM_VENV"]) / "bin" / "python"
    return build_model(python, tmp_path_factory.mktemp("serve-model") / "tiny-serve")


def get_json(url: str, key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
        return json.load(resp)


def chat(base_url: str, model: str, key: str | None = None) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": "what is 2 plus 3?"}], "max_tokens": 4}
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(base_url + "/chat/completions", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def processes_mentioning(needle: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline[:160]}")
    return found


KEY = "sk-serve-7e5t-k3y-abcdef"


def test_detached_serve_lists_model_and_stop_leaves_no_process(model, tmp_path):
    """Also a keyed server: `-- --api-key K` reaches vLLM through VLLM_API_KEY, so K is in no command line,
    endpoints file, log or output, and the server refuses a request without it."""
    eps = tmp_path / "eps.json"
    res = ngrp("serve", "--model", model, "--served-model-name", "tiny", "--endpoints-file", eps, "--detach",
               "--json", "--timeout", "300", "--", "--max-model-len", "512", "--api-key", KEY,
               cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(eps.read_text())
    jsonschema.validate(doc, SCHEMA)
    (endpoint,) = doc["endpoints"]
    jsonschema.validate(
        json.loads(res.stdout), json.loads((REPO / "schemas" / "serve_output.schema.json").read_text())
    )
    assert json.loads(res.stdout)["endpoints"] == doc["endpoints"]
    assert endpoint["base_url"].startswith("http://127.0.0.1:") and endpoint["base_url"].endswith("/v1")
    assert [m["id"] for m in get_json(endpoint["base_url"] + "/models", KEY)["data"]] == ["tiny"]
    assert chat(endpoint["base_url"], "tiny", KEY)["usage"]["completion_tokens"] >= 1
    with pytest.raises(urllib.error.HTTPError) as refused:
        chat(endpoint["base_url"], "tiny")
    assert refused.value.code == 401
    log_text = Path(endpoint["log"]).read_text()
    assert Path(endpoint["log"]).is_file() and "--max-model-len 512" in log_text
    group = serve_run.group_members(endpoint["pid"])
    assert endpoint["pid"] in group
    cmdlines = "".join(
        (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace") for pid in group
    )
    assert (
        KEY not in cmdlines
        and KEY not in log_text
        and KEY not in eps.read_text()
        and KEY not in res.stdout + res.stderr
    )

    status = ngrp(
        "serve", "status", "--endpoints-file", eps, cwd=tmp_path, env={**os.environ, "OPENAI_API_KEY": KEY}
    )
    assert status.returncode == 0 and "healthy=True" in status.stdout
    assert "serves 'tiny' (context 512 tokens)" in status.stdout  # GET /v1/models, as collect checks it
    stop = ngrp("serve", "stop", "--endpoints-file", eps, cwd=tmp_path)
    assert stop.returncode == 0, stop.stderr
    assert serve_run.group_members(endpoint["pid"]) == []
    assert not any(serve_run.alive(pid) for pid in group)
    assert processes_mentioning(str(model)) == [] and not eps.exists()


@pytest.mark.slow  # the same code path runs in test_serve.py with a stand-in process in about a second
def test_foreground_serve_stops_its_server_on_sigterm(model, tmp_path):
    eps = tmp_path / "fg.json"
    proc = subprocess.Popen(
        [*ENTRY, "serve", "--model", model, "--served-model-name", "fg",
         "--endpoints-file", eps, "--timeout", "300"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 320
        while not eps.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        doc = json.loads(eps.read_text())
        assert doc["supervisor_pid"] == proc.pid
        endpoint = doc["endpoints"][0]
        assert [m["id"] for m in get_json(endpoint["base_url"] + "/models")["data"]] == ["fg"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopping 1 server(s)" in err
    assert serve_run.group_members(endpoint["pid"]) == [] and processes_mentioning(str(model)) == []
    assert not eps.exists()


def test_bad_model_exits_nonzero_with_log_tail_and_no_orphan(tmp_path):
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["Nothing"]}')
    eps = tmp_path / "bad.json"
    res = ngrp("serve", "--model", bad, "--endpoints-file", eps, "--detach", "--timeout", "300", cwd=tmp_path)
    assert res.returncode == 1
    assert "before becoming healthy; every server was stopped" in res.stderr
    assert "--- last lines of" in res.stderr and "model_type" in res.stderr  # vLLM's own error, from the log
    assert processes_mentioning(str(bad)) == [] and not eps.exists()
