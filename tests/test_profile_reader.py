"""The profile reader's line source: every byte hashed once, lines and blank lines exactly as in the file,
whether the file is memory-mapped (any window size) or read as a stream."""

from __future__ import annotations

import hashlib
import io

import orjson
import pytest

from ngrp_lib.profile import reader


@pytest.mark.parametrize(
    "content",
    [b"", b'{"a":1}', b'{"a":1}\n\n{"b":2}\n', b"\n\n", b'{"a":1}\n{"long":"' + b"x" * 5000 + b'"}\n{"c":3}'],
)
@pytest.mark.parametrize("window", [1, 7, 4096, 1 << 23])
def test_rows_hash_and_blank_lines(tmp_path, monkeypatch, content, window):
    monkeypatch.setattr(reader, "_WINDOW", window)
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


def test_stream_fallback_hashes_the_same():
    content = b'{"a":1}\n\n{"b":2}\n'
    hasher = hashlib.sha256()
    lines = list(reader._lines(io.BytesIO(content), hasher))  # fileno() raises: read as a stream
    assert lines == [b'{"a":1}\n', b"\n", b'{"b":2}\n']
    assert hasher.hexdigest() == hashlib.sha256(content).hexdigest()
