"""Issue 29, class "no output follows a link": appends open with no-follow (collect --resume on a symlinked
output is refused, its target untouched), the viewer's index cache is written under unpredictable names in
a private folder, --overwrite gives the umask's mode at most, a full disk during collect's appends names
the file, and `--output dir/` is refused instead of writing a file named `dir`."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from http_helpers import chat_reply, serve_app, sum_tasks

from ngrp_lib.artifacts import jsonl

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def peer():
    """A model server that answers every prompt with "4" (a canned reply: only the files matter here)."""
    from aiohttp import web

    async def chat(request):
        await request.read()
        return web.json_response(chat_reply("4 " + "pad " * 200))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    with serve_app(app) as url:
        yield url


def _collect_argv(tmp_path: Path, url: str, output: Path, *extra: str) -> list:
    return ["collect", "--input", tmp_path / "tasks.jsonl", "--output", output, "--base-url", url + "/v1",
            "--model", "m", "--verifier", "exact", "--skip-preflight", "--max-retries", "0",
            *extra]  # fmt: skip


def test_no_output_follows_a_link_on_collect_resume(tmp_path, run_ngrp, peer):
    sum_tasks(tmp_path, 3)
    run = tmp_path / "run"
    first = run_ngrp(*_collect_argv(tmp_path, peer, run / "r.jsonl"))
    assert first.returncode == 0, first.stderr
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\ntorn tail without newline")
    (run / "r.jsonl").unlink()
    (run / "r.jsonl").symlink_to(outside)
    proc = run_ngrp(*_collect_argv(tmp_path, peer, run / "r.jsonl", "--resume"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "symlink" in proc.stderr and "Traceback" not in proc.stderr
    assert outside.read_bytes() == b"precious\ntorn tail without newline"


def test_no_output_follows_a_link_in_appends(tmp_path):
    target = tmp_path / "target.jsonl"
    target.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    from ngrp_lib.errors import OutputError

    with pytest.raises(OutputError, match="symlink"):
        jsonl.Appender(link)
    with pytest.raises(OutputError, match="symlink"):
        jsonl.repair_tail(link) if target.write_text('{"a": 1}') else None
    assert target.read_text() == '{"a": 1}'


@pytest.mark.parametrize("command", ["collect", "materialize", "merge"])
def test_no_output_follows_a_trailing_slash_to_a_file(tmp_path, run_ngrp, peer, command):
    sum_tasks(tmp_path, 2)
    out = str(tmp_path / "dir") + "/"
    argv = {
        "collect": _collect_argv(tmp_path, peer, out),
        "materialize": ["materialize", "--input", tmp_path / "tasks.jsonl", "--output", out, "--agent", "a"],
        "merge": ["merge", tmp_path / "tasks.jsonl", "-o", out],
    }[command]
    proc = run_ngrp(*argv)
    assert proc.returncode == 3 and "slash" in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "dir").exists()


@pytest.mark.parametrize("old_mode", [0o666, 0o777, 0o640])
def test_no_output_keeps_a_world_writable_mode_on_overwrite(tmp_path, old_mode):
    previous = os.umask(0o022)
    try:
        out = tmp_path / "summary.json"
        out.write_text("{}")
        out.chmod(old_mode)
        jsonl.write_json(out, {"a": 2}, overwrite=True)
        assert stat.S_IMODE(out.stat().st_mode) == old_mode & 0o644
    finally:
        os.umask(previous)


def test_no_output_follows_a_link_in_the_viewer_cache(tmp_path):
    from ngrp_lib.view import index as view_index

    folder = tmp_path / "cache"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    for pid in range(os.getpid() - 5, os.getpid() + 50):  # every name the old code could have picked
        (folder / f".x.npz.{pid}.tmp").symlink_to(victim)
    (folder / "x.npz").symlink_to(victim)
    run = tmp_path / "run"
    from health_data import clean_run

    _, rollouts, _ = clean_run(tasks=2).write(run)
    from ngrp_lib.inspect.join import resolve

    paths = resolve(rollouts)
    index = view_index.open_index(paths, threshold=1.0, directory=folder, workers=1)
    index.close()
    view_index._save(folder / "x.npz", index)  # the cache write, at a name a link already holds
    assert victim.read_text() == "keep me"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert (folder / "x.npz").is_file() and not (folder / "x.npz").is_symlink()


def _fsize_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as a full disk fails a write

    return apply


def test_no_output_full_disk_during_appends_names_the_file(tmp_path, peer):
    sum_tasks(tmp_path, 40)
    out = tmp_path / "run" / "r.jsonl"
    argv = [*ENTRY, *map(str, _collect_argv(tmp_path, peer, out))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=_fsize_limit(8192))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "File too large" in done.stderr, done.stderr
    assert str(out) in done.stderr, done.stderr
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr  # the torn tail the full disk left is repaired
    assert all(json.loads(line) for line in out.read_text().splitlines())


@pytest.mark.parametrize("how", ["others_may_write", "another_users", "linked_file"])
def test_the_viewer_reads_no_cache_from_a_folder_it_would_refuse_to_write(tmp_path, how):
    """The private-folder condition comes before the cache is read: an index another user could have
    planted (a folder others may write to or own, a cache file that is a link) is never loaded."""
    from health_data import clean_run

    from ngrp_lib.inspect.join import resolve
    from ngrp_lib.view import index as view_index

    _, rollouts, _ = clean_run(tasks=2).write(tmp_path / "run")
    paths, folder = resolve(rollouts), tmp_path / "cache"
    view_index.open_index(paths, threshold=1.0, directory=folder, workers=1).close()
    index = view_index.open_index(paths, threshold=1.0, directory=folder, workers=1)
    index.close()
    assert index.cached  # the cache is used where the rule holds
    where = view_index.cache_path(paths, folder)
    if how == "others_may_write":
        folder.chmod(0o777)
    elif how == "another_users":
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        os.chown(folder, 65534, 65534)
    else:
        elsewhere = tmp_path / "elsewhere.npz"
        os.replace(where, elsewhere)
        where.symlink_to(elsewhere)
    index = view_index.open_index(paths, threshold=1.0, directory=folder, workers=1)
    index.close()
    assert not index.cached, how
