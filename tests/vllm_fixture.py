"""A real vLLM server on CPU for tests (no fakes): session fixture plus a factory for fault tests.

The venv comes from env NGRP_VLLM_VENV (printed by `.ci/install_vllm.sh`); without it the `vllm`
tests are skipped with the reason. Flags and environment follow reference/vllm-on-cpu.md: eager, the
`uni` executor in one process, and no chunked prefill (seeded requests crash chunked prefill on CPU).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parent / "support"
MODEL_NAME = "tiny"
READY_TIMEOUT_S = float(os.environ.get("NGRP_VLLM_READY_TIMEOUT", "180"))
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "PYTHONUNBUFFERED": "1",  # uvicorn's access lines reach the log as they happen (`VLLMServer.requests`)
}


def vllm_python() -> Path | None:
    venv = os.environ.get("NGRP_VLLM_VENV")
    if not venv:
        return None
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class VLLMServer:
    """One running `vllm.entrypoints.openai.api_server` process group."""

    python: Path
    model_dir: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    api_key: str | None = None  # started with --api-key: every /v1 route then wants this Bearer token

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    model: str = MODEL_NAME

    def command(self) -> list[str]:
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--served-model-name", self.model,
            "--dtype", "float32", "--max-model-len", "2048",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--enforce-eager", "--distributed-executor-backend", "uni", "--no-enable-chunked-prefill",
            *(["--api-key", self.api_key] if self.api_key else []),
        ]  # fmt: skip

    def requests(self, method: str, route: str) -> int:
        """How many `METHOD route` requests the server has answered so far (uvicorn's access log)."""
        needle = f'"{method} {route} HTTP/1.1"'
        return sum(needle in line for line in self.tail(chars=1 << 30).splitlines())

    def start(self) -> VLLMServer:
        env = {**os.environ, **SERVER_ENV}
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.process.returncode}; log: {self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM not healthy after {READY_TIMEOUT_S:.0f}s; log: {self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "<no log>"

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, as a fault test wants)."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left; leaves no orphans."""
        if self.process is None or self.process.poll() is not None:
            self._signal(signal.SIGKILL)  # children may outlive a dead leader
            return
        self._signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=15)
        self._signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)


def build_model(python: Path, out: Path) -> Path:
    subprocess.run([str(python), str(SUPPORT / "tiny_model.py"), str(out)], check=True, capture_output=True)
    return out


def _require_python() -> Path:
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM venv: set NGRP_VLLM_VENV to the path printed by .ci/install_vllm.sh")
    return python


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    python = _require_python()
    return build_model(python, tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir, tmp_path_factory):
    """A shared server for the session: yields a VLLMServer (`.base_url` includes /v1, `.model`)."""
    python = _require_python()
    server = VLLMServer(python, tiny_model_dir, tmp_path_factory.mktemp("vllm-log") / "server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def vllm_server_factory(tiny_model_dir, tmp_path):
    """Start private servers a test may kill or restart; every one is stopped at teardown."""
    python = _require_python()
    started: list[VLLMServer] = []

    def make(port: int | None = None, start: bool = True, api_key: str | None = None) -> VLLMServer:
        log = tmp_path / f"vllm-{len(started)}.log"
        server = (
            VLLMServer(python, tiny_model_dir, log, api_key=api_key)
            if port is None
            else VLLMServer(python, tiny_model_dir, log, port=port, api_key=api_key)
        )
        started.append(server)
        return server.start() if start else server

    yield make
    for server in started:
        server.stop()
