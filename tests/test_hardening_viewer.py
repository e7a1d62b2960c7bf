"""Issue 29, class "the viewer trusts every request and every file state": a Host-header check (DNS
rebinding), 409 "the file changed: reload" for a rollouts file truncated, rewritten, deleted or swapped
while the viewer runs (never a 500), 400 for a task index too large to hold, no traceback for malformed
HTTP, queries off the event loop, and a clean exit on SIGTERM just after start."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from run_helpers import write_run
from view_helpers import Viewer


@pytest.fixture
def run(tmp_path) -> Path:
    rollouts, _ = write_run(tmp_path / "run", tasks=6, repeats=4, flipped_task=None, script_task=None)
    return rollouts


def _get(viewer: Viewer, path: str, host: str | None = None) -> tuple[int, bytes]:
    parts = urlsplit(viewer.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    connection.putrequest("GET", path, skip_host=host is not None)
    if host is not None:
        connection.putheader("Host", host)
    connection.endheaders()
    reply = connection.getresponse()
    status, body = reply.status, reply.read()
    connection.close()
    return status, body


def _raw(viewer: Viewer, data: bytes) -> bytes:
    import socket

    parts = urlsplit(viewer.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_viewer_answers_only_its_own_host(run, tmp_path):
    with Viewer(run, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        port = urlsplit(viewer.url).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            assert _get(viewer, "/tasks.json", host)[0] == 200, host
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", ""):
            status, body = _get(viewer, "/tasks.json", host)
            assert status == 421 and b"task" not in body.lower().replace(b"tasks", b""), (host, body)
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err


@pytest.mark.parametrize("change", ["truncate", "same_size_rewrite", "delete", "fifo", "symlink", "replace"])
def test_the_viewer_says_the_file_changed_instead_of_failing(run, tmp_path, change):
    with Viewer(run, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        assert _get(viewer, "/task/1.json?a=policy_agent")[0] == 200
        data = run.read_bytes()
        if change == "truncate":
            run.write_bytes(data[: len(data) // 3])
        elif change == "same_size_rewrite":
            st = run.stat()
            run.write_bytes(data.replace(b'"reward": 0.0', b'"reward": 1.0'))
            os.utime(run, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        elif change == "delete":
            run.unlink()
        elif change in ("fifo", "symlink", "replace"):
            run.unlink()
            if change == "fifo":
                os.mkfifo(run)
            elif change == "symlink":
                other = tmp_path / "other.jsonl"
                other.write_bytes(data)
                run.symlink_to(other)
            else:
                run.write_bytes(data)
        for path in ("/tasks.json", "/task/1.json?a=policy_agent", "/", "/task/1?a=policy_agent"):
            status, body = _get(viewer, path)
            assert status == 409 and b"the file changed: reload" in body, (path, status, body[:300])
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err, err


def test_the_viewer_refuses_a_task_index_too_large(run, tmp_path):
    with Viewer(run, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        for path in ("/?task=99999999999999999999999", "/tasks.json?task=99999999999999999999999",
                     "/task/99999999999999999999999.json", "/task/99999999999999999999999"):  # fmt: skip
            assert _get(viewer, path)[0] == 400, path
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err, err


def test_the_viewer_prints_no_traceback_for_malformed_http(run, tmp_path):
    bad = [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: \x00\x01\r\nX: \xff\xfe\r\n\r\n",
           b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
           b"POST /tasks.json HTTP/1.1\r\nContent-Length: -5\r\n\r\n"]  # fmt: skip
    with Viewer(run, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        for data in bad:
            _raw(viewer, data)
        assert _get(viewer, "/tasks.json")[0] == 200
        code, err = viewer.stop()
    assert code == 0 and "Traceback" not in err and "Error handling request" not in err, err


def test_the_viewer_stops_cleanly_on_sigterm_just_after_start(run, tmp_path):
    viewer = Viewer(run, cache=tmp_path / "cache", cwd=tmp_path)
    viewer.process.send_signal(signal.SIGTERM)
    _, err = viewer.process.communicate(timeout=30)
    assert viewer.process.returncode == 0 and "Traceback" not in err, err


def test_the_viewer_runs_queries_off_the_event_loop(run, tmp_path):
    """A slow query (a non-ASCII search scans every row) runs on the app's worker thread, so the loop keeps
    answering: the query's thread is not the loop's."""
    import asyncio
    import threading

    from aiohttp.test_utils import TestClient, TestServer

    from ngrp_lib.inspect.join import resolve
    from ngrp_lib.view.app import make_app
    from ngrp_lib.view.index import open_index
    from ngrp_lib.view.queries import Views

    views = Views(open_index(resolve(run), threshold=1.0, directory=tmp_path / "cache"))
    seen: list[str] = []
    original = views.tasks

    def tasks(params):
        seen.append(threading.current_thread().name)
        return original(params)

    views.tasks = tasks  # type: ignore[method-assign]

    async def main() -> int:
        async with TestClient(TestServer(make_app(views))) as client:
            reply = await client.get(
                "/tasks.json?q=%C3%A9t%C3%A9", headers={"Host": f"127.0.0.1:{client.port}"}
            )
            return reply.status

    assert asyncio.run(main()) == 200
    assert seen and seen[0] != threading.main_thread().name and seen[0].startswith("ngrp-view")
    shutil.rmtree(tmp_path / "cache")


LONG = 300_000


def _long_run(tmp_path: Path) -> Path:
    rollouts, _ = write_run(tmp_path / "long", tasks=3, repeats=4, flipped_task=None, script_task=None)
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    for row in rows:
        if row["_ng_task_index"] == 1:
            row["response"]["output"][-1]["content"][0]["text"] = "A" * LONG + " END-OF-ANSWER"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rollouts


def test_the_viewer_cuts_long_text_on_task_pages_with_expand(tmp_path):
    rollouts = _long_run(tmp_path)
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer:
        status, body = _get(viewer, "/task/1?a=policy_agent")
        assert status == 200 and len(body) < LONG and b"chars cut" in body and b"END-OF-ANSWER" in body
        data = json.loads(_get(viewer, "/task/1.json?a=policy_agent")[1])
        assert data["expand"] == "/task/1?a=policy_agent&full=1"
        assert all(r["cut"] and len(r["response_text"]) < LONG for r in data["rollouts"])
        status, whole = _get(viewer, data["expand"])
        assert status == 200 and whole.count(b"A" * LONG) == 4
        assert json.loads(_get(viewer, "/task/0.json?a=policy_agent")[1])["expand"] is None
        viewer.stop()


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("NGRP_REQUIRE_BROWSER") != "1", reason="no chromium")
def test_the_viewer_cuts_long_text_in_the_browser_and_expands_it(tmp_path):
    from playwright.sync_api import sync_playwright

    rollouts = _long_run(tmp_path)
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as viewer, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page()
        tab.goto(viewer.url + "task/1?a=policy_agent")
        assert "chars cut" in tab.inner_text("body") and "A" * LONG not in tab.content()
        tab.click("#expand")
        tab.wait_for_url("**full=1")
        assert tab.content().count("A" * LONG) == 4 and tab.query_selector("#expand") is None
        browser.close()
        viewer.stop()
