"""The one opening function and the shared line reader (issue 16): regular files only, bounded lines and
documents, lock files never followed through a symlink, group commits exclusive, stale temp files removed,
write errors naming the file."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import atomic, jsonl, opening
from ngrp_lib.errors import InputError, OutputError


@contextlib.contextmanager
def deadline(seconds: int = 10):
    """Fail instead of hanging (a FIFO opened for reading without O_NONBLOCK would wait forever)."""

    def expired(*_):
        raise TimeoutError("hung")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- the line reader


def _reference(content: bytes, limit: int) -> tuple[list, bool]:
    """Lines with their newline (the last may lack one); None for a line longer than `limit` (newline
    not counted)."""
    parts = content.split(b"\n")
    tail = parts.pop()
    lines = [p + b"\n" for p in parts] + ([tail] if tail else [])
    return [line if len(line.removesuffix(b"\n")) <= limit else None for line in lines], bool(tail)


@settings(max_examples=300, deadline=None)
@given(
    content=st.binary(max_size=120).map(lambda b: bytes(b"a\n\r"[x % 3] for x in b)),
    block=st.integers(1, 17),
    limit=st.integers(1, 25),
)
def test_line_reader_matches_splitting_on_newlines(content, block, limit):
    hasher = hashlib.sha256()
    reader = jsonl.LineReader(
        io.BytesIO(content), "f", limit=limit, strict=False, on_block=hasher.update, block=block
    )
    got = [line for batch in reader for line in batch]
    expected, unterminated = _reference(content, limit)
    assert got == expected
    assert reader.unterminated == unterminated and reader.lines == len(expected)
    assert hasher.hexdigest() == hashlib.sha256(content).hexdigest()


@settings(max_examples=200, deadline=None)
@given(
    content=st.binary(max_size=120).map(lambda b: bytes(b"a\n"[x % 2] for x in b)),
    block=st.integers(1, 17),
    limit=st.integers(1, 25),
)
def test_strict_line_reader_names_the_first_long_line(content, block, limit):
    expected, _ = _reference(content, limit)
    reader = jsonl.LineReader(io.BytesIO(content), "f.jsonl", limit=limit, block=block)
    if None not in expected:
        assert [line for batch in reader for line in batch] == expected
        return
    with pytest.raises(InputError) as info:
        for _ in reader:
            pass
    assert info.value.line == expected.index(None) + 1 and "longer than" in info.value.message


def test_a_file_without_newlines_is_never_held_whole(tmp_path, monkeypatch):
    """10 MB in one line, a 64 KiB limit: the reader skips it in blocks (validate reports the line)."""
    path = tmp_path / "one-line.jsonl"
    with open(path, "wb") as handle:
        for _ in range(10):
            handle.write(b"0" * 2**20)
        handle.write(b'\n{"a": 1}\n')
    monkeypatch.setenv("NGRP_MAX_LINE_BYTES", str(2**16))
    records = list(jsonl.iter_records(path))
    assert [(r.line, getattr(r, "kind", "row")) for r in records] == [(1, jsonl.TOO_LONG), (2, "row")]
    with pytest.raises(InputError, match=r"one-line.jsonl:1: line is longer than 64 KiB|longer than 65536"):
        list(jsonl.iter_rows(path))


def test_line_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("NGRP_MAX_LINE_BYTES", "123")
    assert opening.max_line_bytes() == 123
    monkeypatch.setenv("NGRP_MAX_LINE_BYTES", "-1")
    with pytest.raises(Exception, match="not a positive number"):
        opening.max_line_bytes()
    monkeypatch.delenv("NGRP_MAX_LINE_BYTES")
    assert opening.max_line_bytes() == 64 * 2**20


def test_the_writer_refuses_a_row_no_reader_would_take(tmp_path, monkeypatch):
    monkeypatch.setenv("NGRP_MAX_LINE_BYTES", "100")
    path = tmp_path / "r.jsonl"
    with jsonl.Appender(path) as out:
        out.write({"a": 1})
        with pytest.raises(jsonl.LineTooLong):
            out.write({"a": "x" * 200})
    assert path.read_bytes() == b'{"a":1}\n'


# ---------------------------------------------------------------- opening


def test_open_input_refuses_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "loop").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop")
    (tmp_path / "zero").symlink_to("/dev/zero")
    cases = {
        "fifo": "not a regular file: a named pipe",
        "dir": "not a regular file: a folder",
        "zero": "not a regular file: a device",
        "loop": "a symlink loop",
        "missing": "cannot read: No such file or directory",
    }
    with deadline():
        for name, message in cases.items():
            with pytest.raises(InputError, match=message) as info:
                opening.open_input(tmp_path / name)
            assert info.value.exit_code == 3 and str(tmp_path / name) in info.value.message
    (tmp_path / "ok").write_bytes(b"x")
    (tmp_path / "link").symlink_to("ok")
    with opening.open_input(tmp_path / "link") as handle:  # a symlink to a regular file is fine
        assert handle.read() == b"x"


def test_read_document_is_bounded(tmp_path):
    path = tmp_path / "d.json"
    path.write_bytes(b"x" * 101)
    assert opening.read_document(path, limit=101) == b"x" * 101
    with pytest.raises(InputError, match="larger than 100 bytes"):
        opening.read_document(path, limit=100)


def test_output_paths_that_are_not_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("fifo", "dir"):
        with pytest.raises(OutputError) as info:
            opening.check_output_path(tmp_path / name)
        assert info.value.exit_code == 3
    with deadline(), pytest.raises(OutputError, match="named pipe"):
        jsonl.Appender(tmp_path / "fifo")  # no reader on the FIFO: refused, not waited on
    opening.check_output_path(tmp_path / "new.jsonl")


def test_paths_with_symlink_loops_compare_without_raising(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    assert opening.same_file(tmp_path / "a", tmp_path / "a")
    assert not opening.same_file(tmp_path / "a", tmp_path / "b")
    (tmp_path / "f").write_text("x")
    os.link(tmp_path / "f", tmp_path / "hard")
    assert opening.same_file(tmp_path / "f", tmp_path / "hard")


# ---------------------------------------------------------------- lock files


def test_a_symlinked_lock_file_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = tmp_path / "rollouts.jsonl.lock"
    lock.symlink_to(victim)
    with pytest.raises(OutputError, match="symlink"):
        opening.open_lock_file(lock)
    assert victim.read_text() == "precious\n"


def test_a_lock_file_ngrp_did_not_make_is_not_touched(tmp_path):
    other = tmp_path / "notes.lock"
    other.write_text("my notes, not a pid\n")
    with pytest.raises(OutputError, match="does not look like an ngrp lock file"):
        opening.open_lock_file(other)
    assert other.read_text() == "my notes, not a pid\n"
    linked = tmp_path / "linked.lock"
    os.link(tmp_path / "notes.lock", linked)
    with pytest.raises(OutputError, match="hard links"):
        opening.open_lock_file(linked)
    mine = tmp_path / "mine.lock"
    mine.write_text("12345\n")
    os.close(opening.open_lock_file(mine))
    os.close(opening.open_lock_file(tmp_path / "new.lock"))  # created


# ---------------------------------------------------------------- group commits and temp files


def _writer(folder: str, name: str, rounds: int, barrier) -> None:
    from pathlib import Path

    from ngrp_lib.artifacts import jsonl as j

    targets = {k: Path(folder) / f"out{k}.json" for k in "abcd"}
    try:
        for r in range(rounds):
            barrier.wait(timeout=60)
            with j.atomic_outputs(targets, overwrite=True) as out:
                for handle in out.values():
                    handle.write(f"{name}-{r}".encode() * 2000)
            barrier.wait(timeout=60)  # the parent checks the set here
            barrier.wait(timeout=60)
    except threading.BrokenBarrierError:  # the parent saw a mixed set and stopped
        pass


def test_two_overwriting_writers_never_leave_a_mixed_set(tmp_path):
    """Two `profile --overwrite` into one folder: every round ends with all four files from one writer."""
    ctx = multiprocessing.get_context("fork")
    rounds = 25
    barrier = ctx.Barrier(3)
    workers = [ctx.Process(target=_writer, args=(str(tmp_path), n, rounds, barrier)) for n in ("A", "B")]
    for w in workers:
        w.start()
    try:
        for _ in range(rounds):
            barrier.wait(timeout=60)
            barrier.wait(timeout=60)
            contents = {(tmp_path / f"out{k}.json").read_bytes()[:3] for k in "abcd"}
            assert len(contents) == 1, contents
            barrier.wait(timeout=60)
    finally:
        barrier.abort()  # releases the writers at once if a check failed
        for w in workers:
            w.join(timeout=60)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_killed_writer_s_temp_files_are_removed_by_the_next_run(tmp_path):
    target = tmp_path / "m.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is gone now
    host = atomic._HOST
    stale = tmp_path / f".m.jsonl.ngrp-{host}-{dead.pid}-abcd1234.tmp"
    live = tmp_path / f".m.jsonl.ngrp-{host}-{os.getpid()}-abcd1234.tmp"
    elsewhere = tmp_path / f".m.jsonl.ngrp-otherhost-{dead.pid}-abcd1234.tmp"
    other_file = tmp_path / f".n.jsonl.ngrp-{host}-{dead.pid}-abcd1234.tmp"
    for path in (stale, live, elsewhere, other_file):
        path.write_text("half")
    jsonl.write_jsonl(target, [{"a": 1}])
    assert not stale.exists()
    assert live.exists() and elsewhere.exists() and other_file.exists()


def test_a_full_disk_names_the_file(tmp_path):
    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    writer = atomic._NamedWriter(Full(), tmp_path / "out.jsonl")
    with pytest.raises(OSError) as info:
        writer.write(b"x")
    assert info.value.filename == str(tmp_path / "out.jsonl") and info.value.errno == errno.ENOSPC


def test_validate_lists_a_too_long_line_and_its_json_matches_the_schema(tmp_path, monkeypatch):
    import jsonschema

    from ngrp_lib.artifacts import schemas
    from ngrp_lib.audit.validate import validate_files

    path = tmp_path / "rollouts.jsonl"
    path.write_text('{"a": "' + "x" * 300 + '"}\n{"b": 1}\n')
    monkeypatch.setenv("NGRP_MAX_LINE_BYTES", "100")
    report = validate_files([path], kind="tasks").to_json()
    jsonschema.validate(report, schemas.load("validate_output"))
    problems = report["files"][0]["problems"]
    assert [(p["line"], p["kind"]) for p in problems] == [(1, "line_too_long")]
    assert report["files"][0]["rows"] == 1 and report["exit_code"] == 1


def test_a_log_file_is_never_written_through_a_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / "server.log").symlink_to(victim)
    with pytest.raises(OutputError, match="symlink"):
        opening.open_log(tmp_path / "server.log")
    assert victim.read_text() == "keep\n"
    (tmp_path / "old.log").write_text("an earlier run's log\n")
    with opening.open_log(tmp_path / "old.log") as handle:  # ngrp's own log: emptied and rewritten
        handle.write(b"new\n")
    assert (tmp_path / "old.log").read_text() == "new\n"


def test_read_document_allocates_the_file_not_the_limit(tmp_path):
    """A run manifest is a few KB; reading it allocated a buffer of the 256 MiB limit (tracemalloc saw
    `check` on an adaptive run peak at 294 MB, 268 MB of it this read)."""
    import tracemalloc

    path = tmp_path / "small.json"
    path.write_bytes(b"{}" * 1000)
    tracemalloc.start()
    try:
        assert opening.read_document(path) == b"{}" * 1000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
