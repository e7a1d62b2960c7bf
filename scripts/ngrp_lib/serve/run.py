"""Run a serve plan: start each server in its own process group, wait for /health, write the endpoints
file, and stop every group we started (on failure, on Ctrl-C/SIGTERM, or later via `ngrp serve stop`).

Endpoints file (schemas/endpoints.schema.json): {"endpoints": [{"base_url", "model", "pid", "log", ...}],
...}. `pid` is also the process group id; `start_time` (from /proc) guards against a recycled pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

from ..artifacts.endpoints import EndpointEntry, read_endpoints
from ..artifacts.jsonl import write_json
from ..artifacts.opening import open_input, open_log
from ..artifacts.redact import server_redactor
from ..errors import InputError, UsageError
from .plan import ServePlan, ServerSpec, ServerStartError

SCHEMA_VERSION = 1
TAIL_LINES = 40


@dataclass
class Started:
    spec: ServerSpec
    proc: subprocess.Popen
    start_time: int | None


@dataclass
class ServeResult:
    endpoints_file: str
    device: str
    endpoints: list[dict]
    ready_seconds: float
    detached: bool


@dataclass
class StopResult:
    endpoints_file: str
    stopped: list[int] = field(default_factory=list)
    already_gone: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)  # servers ngrp serve did not start: left alone
    removed: bool = False  # the file is deleted only when ngrp serve wrote every entry of it


# ---------------------------------------------------------------- processes


def proc_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after its closing paren are plain.
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int, start_time: int | None = None) -> bool:
    now = proc_start_time(pid)
    if now is None:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z" and (start_time is None or now == start_time)


def started_here(entry: EndpointEntry) -> bool:
    """Whether the live process `entry.pid` is a server `ngrp serve` started as the entry says: the leader
    of its own session and process group (ngrp starts each server with setsid), owned by this user, and
    running vLLM's server on the entry's port. The start time alone can be copied from /proc into a
    forged file; the command line and session cannot be made to match by one."""
    pid = entry.pid
    if pid is None:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        owner = os.stat(f"/proc/{pid}").st_uid
        session, group = os.getsid(pid), os.getpgid(pid)
    except OSError:
        return False
    words = [a.decode("utf-8", "replace") for a in argv if a]
    if owner != os.getuid() or session != pid or group != pid or not any("vllm" in w for w in words):
        return False
    port = entry.port or urlsplit(entry.base_url).port
    return port is None or any(
        w == "--port" and n == str(port) for w, n in zip(words, words[1:], strict=False)
    )


def group_members(pgid: int) -> list[int]:
    """Every live process whose process group is `pgid` (children vLLM spawned included)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    members.append(int(entry.name))
    return members


def stop_group(pgid: int, grace: float = 15.0) -> str:
    """SIGTERM the group, wait up to `grace` s, then SIGKILL. Returns 'stopped', 'killed' or 'gone'."""
    if not group_members(pgid):
        return "gone"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pgid)
        if not group_members(pgid):
            return "stopped"
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    while group_members(pgid) and time.monotonic() < deadline + 10:
        _reap(pgid)
        time.sleep(0.1)
    return "killed"


def _reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the `ngrp serve` process dies (foreground mode)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def launch(spec: ServerSpec, *, tie_to_parent: bool) -> Started:
    spec.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **spec.env}
    with open_log(spec.log) as log:  # never through a symlink planted in the log folder
        log.write(f"# ngrp serve {datetime.now(timezone.utc).isoformat()}\n# {spec.shell_line()}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            spec.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: one killpg stops vLLM and its workers
            preexec_fn=_die_with_parent if tie_to_parent else None,
        )
    return Started(spec, proc, proc_start_time(proc.pid))


def log_tail(path: Path, lines: int = TAIL_LINES, max_bytes: int = 1 << 16) -> str:
    """The last `lines` lines of a server log, reading at most its last `max_bytes` (a log can be huge)."""
    try:
        with open_input(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - max_bytes))
            text = handle.read(max_bytes).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------- health

ERROR_BODY_LIMIT = 1 << 16  # a /health body is empty; more is not read


def healthy(host: str, port: int, timeout: float = 2.0) -> bool:
    from ..collect.http import AttemptFailed, fetch_bounded

    try:  # bounded and never redirected, like every reply ngrp reads
        return fetch_bounded(f"http://{host}:{port}/health", timeout, limit=ERROR_BODY_LIMIT)[0] == 200
    except (AttemptFailed, OSError, ValueError):
        return False


def wait_healthy(started: list[Started], timeout: float, progress: Callable[[str], None]) -> None:
    """Block until every server answers /health; raise ServerStartError if one exits or time runs out."""
    pending = list(started)
    deadline = time.monotonic() + timeout
    while pending:
        for item in list(pending):
            code = item.proc.poll()
            if code is not None:
                raise _start_error(item, f"exited with code {code} before becoming healthy")
            if healthy(item.spec.host, item.spec.port):
                progress(f"server {item.spec.index} ready at {item.spec.base_url}")
                pending.remove(item)
        if pending and time.monotonic() > deadline:
            raise _start_error(pending[0], f"not healthy after {timeout:.0f}s")
        if pending:
            time.sleep(0.5)


def _start_error(item: Started, why: str) -> ServerStartError:
    tail = masked_tail(item.spec)
    return ServerStartError(
        f"server {item.spec.index} ({item.spec.base_url}) {why}; every server was stopped.\n"
        f"--- last lines of {item.spec.log} ---\n{tail}\n---",
        hint=f"read the full log: {item.spec.log}",
    )


def masked_tail(spec: ServerSpec) -> str:
    """The server log's tail with secrets masked: the keys ngrp handed the server, and what the
    scrubber finds (a server may print its own arguments or environment as it dies)."""
    from ..artifacts.redact import Redactor
    from ..artifacts.scrub import scrub, secret_name

    keys = Redactor(value for name, value in spec.env.items() if secret_name(name))
    return scrub(keys.text(log_tail(spec.log)))


# ---------------------------------------------------------------- endpoints file


def endpoint_rows(started: list[Started], model: str) -> list[dict]:
    return [
        {
            "base_url": s.spec.base_url,
            "model": model,
            "pid": s.proc.pid,
            "log": str(s.spec.log.resolve()),
            "host": s.spec.host,
            "port": s.spec.port,
            "gpus": s.spec.gpus,
            "start_time": s.start_time,
            **({} if s.spec.max_num_seqs is None else {"max_num_seqs": s.spec.max_num_seqs}),
        }
        for s in started
    ]


def live_endpoints(path: Path) -> list[EndpointEntry]:
    """Endpoints in an existing file whose server process, started by `ngrp serve`, is still running."""
    if not path.exists():
        return []
    with contextlib.suppress(InputError):
        entries = read_endpoints(path).entries
        return [e for e in entries if e.started_by_serve and e.pid is not None and alive(e.pid, e.start_time)]
    return []


# ---------------------------------------------------------------- the three actions


class _Stop(Exception):
    """Raised from a signal handler to unwind into the cleanup code."""


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    def handler(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def serve(plan: ServePlan, *, detach: bool, timeout: float, progress: Callable[[str], None]) -> ServeResult:
    """Start, wait, write the endpoints file; in foreground mode also block until a signal, then stop."""
    endpoints_file = Path(plan.endpoints_file)
    if live := live_endpoints(endpoints_file):
        raise UsageError(
            f"{endpoints_file} lists {len(live)} server(s) still running",
            hint=f"stop them first: ngrp serve stop --endpoints-file {endpoints_file}",
        )
    replace = _replaceable(endpoints_file)
    if replace:
        progress(f"replacing {endpoints_file}: none of the servers it lists is running")
    started: list[Started] = []
    wrote = False
    t0 = time.monotonic()
    keep = False
    result: ServeResult | None = None
    try:
        with _signals_raise():
            for spec in plan.servers:
                started.append(launch(spec, tie_to_parent=not detach))
                progress(f"server {spec.index}: pid {started[-1].proc.pid}, log {spec.log}")
            wait_healthy(started, timeout, progress)
            ready = time.monotonic() - t0
            rows = endpoint_rows(started, plan.served_model_name)
            write_json(endpoints_file, _endpoints_doc(plan, rows, detach), overwrite=replace)
            wrote = True
            result = ServeResult(str(endpoints_file), plan.device, rows, round(ready, 2), detach)
            if detach:
                keep = True
                return result
            progress(f"all {len(started)} server(s) ready in {ready:.1f}s; endpoints in {endpoints_file}")
            progress("serving; press Ctrl-C (or send SIGTERM) to stop every server")
            _supervise(started)
    except _Stop as why:
        progress(f"{why}: stopping {len(started)} server(s)")
    finally:
        if not keep:
            _cleanup(started, endpoints_file if wrote else None)
    if result is None:
        raise ServerStartError("interrupted before the servers were ready; every server was stopped")
    return result


def _supervise(started: list[Started]) -> None:
    while True:
        for item in started:
            if item.proc.poll() is not None:
                raise _start_error(item, f"exited with code {item.proc.returncode} while serving")
        time.sleep(1.0)


def _replaceable(endpoints_file: Path) -> bool:
    """Whether an existing endpoints file may be replaced: only one `ngrp serve` wrote, whose servers
    are gone. A file it did not write (hand-written, unreadable) is refused before anything starts."""
    if not os.path.lexists(endpoints_file):
        return False
    try:
        ours = read_endpoints(endpoints_file).written_by_serve
    except InputError as exc:
        raise UsageError(
            f"{endpoints_file} exists and is not an endpoints file ngrp serve wrote ({exc.message}); refusing"
            " to replace it",
            hint="choose another --endpoints-file, or move that file away",
        ) from None
    if not ours:
        raise UsageError(
            f"{endpoints_file} lists servers ngrp serve did not start (no pid and start time): refusing to"
            " replace a file it did not write",
            hint="choose another --endpoints-file, or move that file away",
        )
    return True


def _cleanup(started: list[Started], endpoints_file: Path | None) -> None:
    """Stop what this run started; remove the endpoints file only when this run wrote it."""
    # A second Ctrl-C or SIGTERM must not cut the (bounded) cleanup short and leave servers behind.
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for item in started:
            stop_group(item.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                item.proc.wait(timeout=5)
        if endpoints_file is not None and endpoints_file.exists() and not live_endpoints(endpoints_file):
            endpoints_file.unlink()
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _endpoints_doc(plan: ServePlan, rows: list[dict], detach: bool) -> dict:
    return {
        "endpoints": rows,
        "schema_version": SCHEMA_VERSION,
        "device": plan.device,
        "model_path": plan.model,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "supervisor_pid": None if detach else os.getpid(),
        "commands": [s.shell_line() for s in plan.servers],
    }


def stop(endpoints_file: Path, *, grace: float = 15.0) -> StopResult:
    """Stop every server `ngrp serve` started that the file lists (whole process groups), then remove the
    file. An entry without the pid and start time `ngrp serve` writes is a server someone else started: it
    is left running, and the file, which `ngrp serve` did not write, is kept."""
    doc = read_endpoints(endpoints_file)
    result = StopResult(str(endpoints_file))
    for entry in doc.entries:
        if not entry.started_by_serve or entry.pid is None:
            result.not_started.append(entry.public_url)
            continue
        if not alive(entry.pid, entry.start_time):
            result.already_gone.append(entry.pid)
            continue
        if not started_here(entry):  # a forged or stale file naming another process: never signalled
            result.not_started.append(entry.public_url)
            continue
        outcome = stop_group(entry.pid, grace)
        {"stopped": result.stopped, "killed": result.killed, "gone": result.already_gone}[outcome].append(
            entry.pid
        )
    if doc.written_by_serve:
        endpoints_file.unlink()
        result.removed = True
    return result


def status(
    endpoints_file: Path, *, api_key: str | None = None, api_key_env: str = "OPENAI_API_KEY"
) -> list[dict]:
    """Each listed server: is its process running, does /health answer, and does the pre-flight probe of
    `ngrp collect` pass (GET /v1/models with the key: the model is served; its context). A server
    `ngrp serve` did not start (no pid and start time in the file) has no process to look at: it gets the
    probe only (`running` and `healthy` null). URLs are shown without credentials; the key and any URL
    password are masked in every message."""
    doc = read_endpoints(endpoints_file)
    rows, entries = [], []
    for entry in doc.entries:
        ours = entry.started_by_serve and entry.pid is not None
        running: bool | None = None
        ok: bool | None = None
        problem = None
        if ours and entry.pid is not None:
            running = alive(entry.pid, entry.start_time)
            ok = running and healthy(*_health_address(entry))
            if not running:
                problem = f"the server (pid {entry.pid}) is not running; its log: {entry.log}"
            elif not ok:
                problem = f"{entry.public_url}: GET /health does not answer 200 (still starting?)"
        rows.append(
            {"base_url": entry.public_url, "pid": entry.pid, "started_by_serve": ours, "running": running,
             "healthy": ok, "model": entry.model, "models": None, "max_model_len": None, "problem": problem}
        )  # fmt: skip
        entries.append(entry)
    _probe(rows, entries, api_key, api_key_env)
    redactor = server_redactor([e.base_url for e in entries], api_key)
    return [redactor.value(row) for row in rows]


def _health_address(entry: EndpointEntry) -> tuple[str, int]:
    """Where `GET /health` goes: the host and port `ngrp serve` wrote, else those of the base URL."""
    parts = urlsplit(entry.base_url)
    return entry.host or parts.hostname or "127.0.0.1", entry.port or parts.port or 80


def _probe(rows: list[dict], entries: list[EndpointEntry], api_key: str | None, api_key_env: str) -> None:
    """The pre-flight probe of every healthy server, and of every server ngrp serve did not start, at once."""
    import asyncio

    from ..collect.preflight import check_server, credentials_clash

    todo = []
    for row, e in zip(rows, entries, strict=True):
        if not (row["healthy"] or not row["started_by_serve"]):
            continue
        clash = credentials_clash(e.base_url, e.model, api_key, api_key_env)  # checked here, once
        if clash is None:
            todo.append((row, e))
        else:
            row["problem"] = clash.line()
    if not todo:
        return

    async def probe_all() -> list:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            return await asyncio.gather(
                *(check_server(session, e.base_url, model=e.model, api_key=api_key,
                               api_key_env=api_key_env) for _, e in todo)
            )  # fmt: skip

    for (row, _), check in zip(todo, asyncio.run(probe_all()), strict=True):
        row.update(
            models=None if check.models is None else list(check.models), max_model_len=check.max_model_len
        )
        row["problem"] = None if check.ok else check.line()


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `ngrp serve`")
