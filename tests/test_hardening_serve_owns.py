"""Issue 29, class "serve must know what it started": `serve -- --port N` (or --host, --served-model-name)
would move vLLM away from what ngrp polls and writes, so it is refused; `serve stop` signals only a process
that is the vLLM server ngrp started as the file says (its own session and group, this user's, vLLM on the
entry's port), not one named by a forged endpoints file with a correct pid and start time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ngrp_lib.serve.run import alive, proc_start_time


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", "torch_dtype": "float32"}')
    return folder


@pytest.mark.parametrize("extra", [["--port", "9999"], ["--port=9999"], ["--host", "0.0.0.0"],
                                   ["--max-model-len", "64", "--served-model-name", "x"]])  # fmt: skip
def test_serve_knows_what_it_started_refuses_a_port_after_the_dashes(run_ngrp, model_dir, extra):
    proc = run_ngrp("serve", "--model", model_dir, "--vllm-python", sys.executable, "--dry-run", "--", *extra)
    flag = extra[-2] if "=" not in extra[-1] else extra[-1].split("=")[0]
    assert proc.returncode == 2 and f"{flag} after -- would override" in proc.stderr, proc.stderr


def _forged(tmp_path: Path, pid: int, port: int) -> Path:
    entry = {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "pid": pid,
             "start_time": proc_start_time(pid), "host": "127.0.0.1", "port": port,
             "log": "x.log"}  # fmt: skip
    path = tmp_path / "ngrp_endpoints.json"
    path.write_text(json.dumps({"endpoints": [entry]}))
    return path


@pytest.mark.parametrize("session", [True, False])
def test_serve_knows_what_it_started_leaves_a_forged_pid_alone(tmp_path, run_ngrp, session):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=session)  # fmt: skip
    try:
        path = _forged(tmp_path, victim.pid, 8123)
        proc = run_ngrp("serve", "stop", "--endpoints-file", path, "--json")
        assert proc.returncode in (0, 1), proc.stderr
        time.sleep(0.2)
        assert victim.poll() is None and alive(victim.pid), "serve stop signalled a process it never started"
    finally:
        victim.kill()
        victim.wait()


def test_serve_knows_what_it_started_stops_a_server_it_did_start(tmp_path, run_ngrp):
    """A process that is what ngrp serve starts (session leader, vLLM's server module on the port) is
    stopped: the check is not a refusal of everything."""
    site = tmp_path / "site" / "vllm" / "entrypoints" / "openai"
    site.mkdir(parents=True)
    for folder in (site, site.parent, site.parent.parent):
        (folder / "__init__.py").write_text("")
    (site / "api_server.py").write_text("import time\ntime.sleep(60)\n")
    server = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--port", "8124"],
                              cwd=tmp_path / "site", start_new_session=True)  # fmt: skip
    try:
        time.sleep(0.5)
        path = _forged(tmp_path, server.pid, 8124)
        proc = run_ngrp("serve", "stop", "--endpoints-file", path, "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
