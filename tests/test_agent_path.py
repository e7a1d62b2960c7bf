"""Issue 30, the agent's path: each wrong turn a fresh agent took, replayed with SKILL.md's own commands.

Every test here fails on the code before the fix it names."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import write_run


def _run(tmp_path: Path, **kwargs) -> tuple[str, str]:
    rollouts, materialized = write_run(tmp_path / "results", **kwargs)
    return str(materialized), str(rollouts)


def test_health_asked_again_is_a_read_with_no_write(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path, truncate_every=5)
    first = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert first.returncode == 1, first.stderr
    written = {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()}
    again = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert again.returncode == 2
    assert "--no-write" in again.stderr  # the refusal names the way to ask again
    read = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json")
    assert read.returncode == 1, read.stderr
    report = json.loads(read.stdout)
    assert report["outputs"] is None
    before = json.loads(first.stdout)
    assert report["verdicts"] == before["verdicts"] and report["checks"] == before["checks"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()} == written
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write")
    assert "nothing written (--no-write)" in text.stdout


def test_health_no_write_on_a_fresh_run_leaves_the_folder_alone(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path)
    before = sorted(p.name for p in (tmp_path / "results").iterdir())
    out = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == before
