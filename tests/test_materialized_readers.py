"""Every reader of a run's materialized inputs refuses a row without integer identity keys and a repeated
key the same way: exit 3, naming the file, the line (both lines for a repeat) and the key. No reader
skips such a row or silently keeps the first of two. (`check` reports both as findings instead, its job;
`profile` exits 1 on a bad key, as Gym's profiler does.)"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from health_data import clean_run


def _damage(inputs: Path, how: str) -> int:
    """Damage the materialized file; the 1-based line now at fault."""
    rows = [orjson.loads(x) for x in inputs.read_bytes().splitlines()]
    if how == "non_integer":
        rows[2]["_ng_rollout_index"] = "1"
    elif how == "negative":
        rows[2]["_ng_task_index"] = -1
    else:  # a repeated key: line 4 repeats line 2
        rows[3] = {**rows[1]}
    inputs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return 3 if how != "repeat" else 4


def _health(run_ngrp, folder: Path, inputs: Path, rollouts: Path):
    return run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json", cwd=folder)


def _reverify(run_ngrp, folder: Path, inputs: Path, rollouts: Path):
    return run_ngrp("reverify", "--rollouts", rollouts, "--output", folder / "re.jsonl", "--inputs", inputs,
                    "--verifier", "math", cwd=folder)  # fmt: skip


@pytest.mark.parametrize("reader", [_health, _reverify])
@pytest.mark.parametrize("how", ["non_integer", "negative", "repeat"])
def test_a_malformed_materialized_row_is_refused_naming_file_line_and_key(run_ngrp, tmp_path, reader, how):
    inputs, rollouts, _ = clean_run(3).write(tmp_path)
    line = _damage(inputs, how)
    proc = reader(run_ngrp, tmp_path, inputs, rollouts)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert f"{inputs}:{line}:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    if how == "repeat":
        assert "also at line 2" in proc.stderr, proc.stderr
    else:
        key = "_ng_rollout_index" if how == "non_integer" else "_ng_task_index"
        assert f"`{key}`" in proc.stderr, proc.stderr
    assert not (tmp_path / "re.jsonl").exists()


def test_reverify_exits_as_its_help_says_on_a_repeated_rollout_key(run_ngrp, tmp_path):
    """A repeated key in --rollouts is a finding (exit 1, as `profile` treats it), in --inputs malformed
    input (exit 3); `reverify --help` says both."""
    inputs, rollouts, _ = clean_run(3).write(tmp_path)
    help_text = " ".join(run_ngrp("reverify", "--help").stdout.split())
    exit_1 = help_text[help_text.index(", 1 some rows still missing") : help_text.index(", 2 bad options")]
    assert "or --rollouts repeats a rollout key" in exit_1
    assert "in --inputs also a row without integer keys or a repeated key" in help_text
    lines = rollouts.read_bytes().splitlines(keepends=True)
    rollouts.write_bytes(b"".join(lines) + lines[0])
    proc = _reverify(run_ngrp, tmp_path, inputs, rollouts)
    assert proc.returncode == 1 and f"{rollouts}:{len(lines) + 1}:" in proc.stderr, proc.stderr
    assert "also at line 1" in proc.stderr and not (tmp_path / "re.jsonl").exists()
    rows = [orjson.loads(x) for x in lines]
    rows[1]["_ng_task_index"] = 1.5
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    proc = _reverify(run_ngrp, tmp_path, inputs, rollouts)
    assert proc.returncode == 3 and f"{rollouts}:2:" in proc.stderr and "`_ng_task_index`" in proc.stderr
