"""Issue 38, class 4: every `--set` shape that cannot make a row is a usage error (exit 2) naming the
option: a huge max_output_tokens, a path 1,000 keys deep, a value 500 (or 2,000) levels deep. Before,
each printed a traceback (orjson could not write the row, or an integer past 64 bits)."""

from __future__ import annotations

import json

import pytest

from ngrp_lib.artifacts.reading import MAX_DEPTH, dumps, loads
from ngrp_lib.artifacts.sampling import (
    MAX_OUTPUT_TOKENS,
    MAX_SET_DEPTH,
    MAX_SET_PATH,
    apply_overrides,
    overrides_from_options,
)

_DEEP_PATH = ".".join(["a"] * 1000) + "=1"
_SHAPES = {
    "huge_tokens": (["--set", "max_output_tokens=99999999999999999999999999"], "--set max_output_tokens"),
    "tokens_past_64_bits": (["--set", f"max_output_tokens={2**64}"], "--set max_output_tokens"),
    "tokens_float_huge": (["--set", "max_output_tokens=1e300"], "--set max_output_tokens"),
    "tokens_past_32_bits": (["--set", f"max_output_tokens={MAX_OUTPUT_TOKENS + 1}"], "max_output_tokens"),
    "named_option_huge": (["--max-output-tokens", str(2**80)], "--max-output-tokens"),
    "path_1000_keys": (["--set", _DEEP_PATH], "--set"),
    "array_500_deep": (["--set", "x=" + "[" * 500 + "]" * 500], "--set x"),
    "object_500_deep": (["--set", "x=" + '{"a":' * 500 + "1" + "}" * 500], "--set x"),
    "array_2000_deep": (["--set", "x=" + "[" * 2000 + "]" * 2000], "--set x"),
}


@pytest.mark.parametrize("shape", sorted(_SHAPES))
@pytest.mark.parametrize("command", ["materialize", "collect"])
def test_set_usage_errors_name_the_option(tmp_path, run_ngrp, shape, command):
    args, option = _SHAPES[shape]
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"responses_create_params": {"input": "hi"}}) + "\n")
    common = ["--input", "tasks.jsonl", "--output", "out.jsonl", "--agent", "a", *args]
    if command == "collect":
        common += ["--model", "m", "--base-url", "http://127.0.0.1:9"]
    got = run_ngrp(command, *common)
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr
    first = got.stderr.splitlines()[0]
    assert first.startswith("error: ") and option in first, first
    assert len(first) < 300, "the error quotes a 1,000-key path or a deep value whole"
    assert not (tmp_path / "out.jsonl").exists()


def test_set_usage_bounds_keep_every_materialized_row_readable():
    """At the bounds themselves the row is written and read back: the path and value limits leave room
    under the reader's nesting limit."""
    path = ".".join(["a"] * MAX_SET_PATH)
    value = json.dumps(json.loads("[" * MAX_SET_DEPTH + "]" * MAX_SET_DEPTH))
    overrides = overrides_from_options(None, None, MAX_OUTPUT_TOKENS, [f"{path}={value}"])
    row = {"responses_create_params": apply_overrides({"input": "hi"}, overrides)}
    assert MAX_SET_PATH + MAX_SET_DEPTH + 2 <= MAX_DEPTH
    assert loads(dumps(row)) == row
