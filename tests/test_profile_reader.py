"""The profile reader's line source: every byte hashed once, lines and blank lines exactly as in the file,
from a regular file or a stream, and no crash when another process truncates the file mid-read."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ngrp_lib.artifacts.jsonl import LineReader
from ngrp_lib.profile import reader


@pytest.mark.parametrize(
    "content",
    [b"", b'{"a":1}', b'{"a":1}\n\n{"b":2}\n', b"\n\n", b'{"a":1}\n{"long":"' + b"x" * 5000 + b'"}\n{"c":3}'],
)
def test_rows_hash_and_blank_lines(tmp_path, content):
    path = tmp_path / "f.jsonl"
    path.write_bytes(content)
    stats = reader.ReadStats()
    rows = list(reader._rows(path, "r", stats))
    lines = content.split(b"\n")
    expected = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    assert [(n, row) for n, row in rows] == [(n, orjson.loads(line)) for n, line in expected]
    assert stats.blank_lines["r"] == [i + 1 for i, line in enumerate(lines[:-1]) if not line.strip()]
    assert stats.sha256["r"].hexdigest() == hashlib.sha256(content).hexdigest()
    assert stats.rows["r"] == len(expected)


def test_stream_lines_hash_the_same():
    content = b'{"a":1}\n\n{"b":2}\n'
    hasher = hashlib.sha256()
    batches = LineReader(io.BytesIO(content), "s", on_block=hasher.update)  # no file behind it: a stream
    assert [line for batch in batches for line in batch] == [b'{"a":1}\n', b"\n", b'{"b":2}\n']
    assert hasher.hexdigest() == hashlib.sha256(content).hexdigest()


def test_file_truncated_while_read_ends_cleanly(tmp_path):
    """A collector repairing a torn tail truncates the rollouts file; a profile reading it at that moment
    must end with an error or a short read, never a signal (a memory-mapped read would die of SIGBUS)."""
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"i": i, "pad": "x" * 2000}) + b"\n" for i in range(4000)))
    script = (
        "import sys; from pathlib import Path; from ngrp_lib.profile import reader\n"
        "rows = reader._rows(Path(sys.argv[1]), 'r', reader.ReadStats())\n"
        "next(rows)\n"
        "open(sys.argv[1], 'r+b').truncate(0)\n"
        "try:\n"
        "    print(sum(1 for _ in rows))\n"
        "except reader.InputError as exc:\n"
        "    print(-1, exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(reader.__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr)  # a signal gives a negative code
    count = int(done.stdout.split()[0])
    assert count < 3999  # the rows still buffered, then either the end or a clean error naming the line
    if count < 0:
        assert "rollouts.jsonl:" in done.stdout
