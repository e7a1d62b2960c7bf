"""A real NeMo Gym 0.7.0 stack (`gym env start`) against a local vLLM on CPU, as a session fixture.

Needs `NGRP_GYM_VENV` (from `.ci/install_gym.sh`) and `NGRP_VLLM_VENV` (from `.ci/install_vllm.sh`);
tests that use `gym_stack` are skipped with the reason otherwise.

What it starts (recipe and measurements: `reference/gym-stack-on-cpu.md`): `gym env start` with the
string_match resources server, a simple_agent, the legacy_agent environment relay and the vllm_model
adapter, pointed at the session's tiny-model vLLM server (`vllm_server` in `tests/vllm_fixture.py`).
`start_vllm` starts a private vLLM the same way, for scripts outside pytest. Each Gym server's venv is
pre-created as a symlink to the Gym venv, so Gym runs no `uv`. Everything runs in its own process group;
teardown sends SIGTERM to the group (`gym env start` ignores SIGINT when started from a non-interactive
shell), then kills any descendant still alive (Ray's idle workers outlive the SIGTERM), so no orphans.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AGENT = "string_match_simple_agent"
ENV_SERVER = "string_match_environment_server"
SERVER_DIRS = (
    "resources_servers/string_match",
    "responses_api_agents/simple_agent",
    "responses_api_models/vllm_model",
    "environment_servers/legacy_agent",
)
VLLM_READY_TIMEOUT_S = 240
GYM_READY_TIMEOUT_S = 240


@dataclass(frozen=True)
class GymStack:
    head_url: str  # http://127.0.0.1:PORT (config and discovery)
    env_run_url: str  # POST here: what `gym eval run --no-serve` posts to
    agent_run_url: str  # the simple agent's own /run
    vllm_base_url: str  # http://127.0.0.1:PORT/v1
    model: str
    gym_venv: Path
    work: Path
    startup_seconds: float  # `gym env start` until every server is ready (vLLM excluded)

    @property
    def gym_bin(self) -> Path:
        return self.gym_venv / "bin" / "gym"

    def gym(self, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run the Gym CLI against this stack's head server."""
        port = self.head_url.rsplit(":", 1)[1]
        head = ["++head_server.host=127.0.0.1", f"++head_server.port={port}"]
        return subprocess.run(
            [str(self.gym_bin), *args, *head], cwd=cwd, capture_output=True, text=True, timeout=timeout,
            env=_gym_env(self.gym_venv),
        )  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, ValueError):
        return None


def _wait(what: str, check, proc: subprocess.Popen, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}; log tail:\n{_tail(log)}")
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s; log tail:\n{_tail(log)}")


def _tail(log: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (from /proc; no psutil needed)."""
    children, out, todo = _children_map(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_tree(proc: subprocess.Popen, grace_s: float = 30.0) -> list[str]:
    """SIGTERM the process group, wait, then SIGKILL what survived; return their commands."""
    tree = [proc.pid, *descendants(proc.pid)]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # let Ray's children notice their parent went away
    survivors = [pid for pid in tree + descendants(proc.pid) if pid != os.getpid() and _alive(pid)]
    names = [_name(pid) for pid in survivors]
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    return names


def _name(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
    return str(pid)


def _gym_env(gym_venv: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{gym_venv / 'bin'}:{env.get('PATH', '')}"
    env.update({"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"})
    env.update(extra or {})
    return env


@contextlib.contextmanager
def start_vllm(vllm_venv: Path, model_dir: Path, work: Path, *, port: int | None = None, name: str = "tiny"):
    """Start vLLM on CPU as in `reference/vllm-on-cpu.md`; yield (base_url, seconds to ready, Popen)."""
    port = port or free_port()
    log = work / f"vllm-{port}.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_ENABLE_V1_MULTIPROCESSING="0")  # fmt: skip
    cmd = [
        str(vllm_venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", name, "--dtype", "float32",
        "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
        "--distributed-executor-backend", "uni", "--no-enable-chunked-prefill",
    ]  # fmt: skip
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait("vLLM", lambda: (_get(base + "/v1/models") or (0,))[0] == 200, proc, VLLM_READY_TIMEOUT_S, log)
        yield f"{base}/v1", time.monotonic() - started, proc
    finally:
        stop_tree(proc, grace_s=15)


def _server_urls(head: str) -> dict[str, str] | None:
    """{process name: url} once the head server says every server is ready (`/readyz` is 200)."""
    import json

    ready = _get(head + "/readyz")
    reply = _get(head + "/server_instances") if ready and ready[0] == 200 else None
    if not reply or reply[0] != 200:
        return None
    return {item["process_name"]: item["url"] for item in json.loads(reply[1]) if item.get("url")}


@contextlib.contextmanager
def start_gym(gym_venv: Path, vllm_base_url: str, model: str, work: Path) -> Iterator[tuple[dict, float]]:
    """`gym env start` per the reference; yield ({server name: url}, seconds until all servers answer)."""
    site = next((gym_venv / "lib").glob("python3*/site-packages"))
    for rel in SERVER_DIRS:
        (work / "venvs" / rel).mkdir(parents=True, exist_ok=True)
        link = work / "venvs" / rel / ".venv"
        if not link.exists():
            link.symlink_to(gym_venv)
    head_port = free_port()
    ray_tmp = Path(
        tempfile.mkdtemp(prefix="ngrp-ray-", dir="/tmp")
    )  # short: Ray's socket paths are length-capped
    cmd = [
        str(gym_venv / "bin" / "gym"), "env", "start",
        "--config", str(site / "resources_servers/string_match/configs/string_match.yaml"),
        "--config", str(site / "responses_api_models/vllm_model/configs/vllm_model.yaml"),
        "--model", model, "--model-url", vllm_base_url, "--model-api-key", "dummy",
        "++skip_venv_if_present=true", f"++uv_venv_dir={work / 'venvs'}",
        "++head_server.host=127.0.0.1", f"++head_server.port={head_port}",
    ]  # fmt: skip
    log = work / "gym-env-start.log"
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=_gym_env(gym_venv, {"RAY_TMPDIR": str(ray_tmp)}),
        )  # fmt: skip
    try:
        head = f"http://127.0.0.1:{head_port}"
        urls = _wait("gym env start", lambda: _server_urls(head), proc, GYM_READY_TIMEOUT_S, log)
        yield {"__head__": head, **urls}, time.monotonic() - started
    finally:
        survivors = stop_tree(proc)
        shutil.rmtree(ray_tmp, ignore_errors=True)
        if survivors:
            print(
                f"gym_stack: killed {len(survivors)} process(es) that outlived SIGTERM: {survivors}",
                file=sys.stderr,
            )


@pytest.fixture(scope="session")
def gym_stack(request, tmp_path_factory) -> Iterator[GymStack]:
    """A running Gym stack on the session's vLLM server; skipped without NGRP_GYM_VENV and NGRP_VLLM_VENV."""
    gym_venv = os.environ.get("NGRP_GYM_VENV")
    if not gym_venv or not os.environ.get("NGRP_VLLM_VENV"):
        pytest.skip("needs NGRP_GYM_VENV=$(.ci/install_gym.sh) and NGRP_VLLM_VENV=$(.ci/install_vllm.sh)")
    gym_venv = Path(gym_venv)
    if not (gym_venv / "bin" / "gym").exists():
        pytest.skip(f"NGRP_GYM_VENV={gym_venv} has no bin/gym (run .ci/install_gym.sh)")
    vllm = request.getfixturevalue("vllm_server")  # shared with the direct-mode tests (tests/vllm_fixture.py)
    work = tmp_path_factory.mktemp("gym-stack")
    with start_gym(gym_venv, vllm.base_url, vllm.model, work) as (urls, gym_s):
        yield GymStack(
            head_url=urls["__head__"],
            env_run_url=urls[ENV_SERVER] + "/run",
            agent_run_url=urls[AGENT] + "/run",
            vllm_base_url=vllm.base_url,
            model=vllm.model,
            gym_venv=gym_venv,
            work=work,
            startup_seconds=gym_s,
        )
