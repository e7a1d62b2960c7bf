"""Issue 36 #17: `health` asked again about the same, unchanged run answers as the first time and writes
nothing; it refuses (exit 2) only when the files it would write differ from those on disk."""

from __future__ import annotations

import json
import os

import pytest
from health_data import clean_run, planted_run


def _state(*paths):
    return [(p.read_bytes(), os.stat(p).st_mtime_ns, os.stat(p).st_ino) for p in paths]


@pytest.mark.parametrize("make", [clean_run, planted_run], ids=["clean", "planted"])
def test_health_json_again_on_the_same_run_answers_the_same_and_writes_nothing(tmp_path, run_ngrp, make):
    inputs, rollouts, _ = make().write(tmp_path)
    args = ["health", "--inputs", inputs, "--rollouts", rollouts, "--json"]
    first = run_ngrp(*args)
    assert first.returncode in (0, 1), first.stderr
    files = tmp_path / "quality_summary.json", tmp_path / "rollout_verdicts.jsonl"
    before = _state(*files)
    listing = sorted(p.name for p in tmp_path.iterdir())
    again = run_ngrp(*args)
    assert again.returncode == first.returncode, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert _state(*files) == before, "the files were rewritten (content, mtime or inode changed)"
    assert sorted(p.name for p in tmp_path.iterdir()) == listing, "no temp file or new file"
    text = run_ngrp(*args[:-1])  # the text form too
    assert text.returncode == first.returncode and "already exists" not in text.stderr


def test_health_again_refuses_when_a_file_would_change(tmp_path, run_ngrp):
    inputs, rollouts, _ = clean_run(3).write(tmp_path)
    args = ["health", "--inputs", inputs, "--rollouts", rollouts, "--json"]
    assert run_ngrp(*args).returncode == 0
    summary, verdicts = tmp_path / "quality_summary.json", tmp_path / "rollout_verdicts.jsonl"
    # an option that changes the judgement
    refused = run_ngrp(*args, "--ignore-checks", "ngrp/empty_final_answer")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["error"]["message"].endswith("refusing to overwrite it")
    # one of the two files edited, or gone: the pair on disk is not this judgement's
    original = verdicts.read_bytes()
    verdicts.write_bytes(original[:-1])
    assert run_ngrp(*args).returncode == 2
    verdicts.write_bytes(original + b"\n")
    assert run_ngrp(*args).returncode == 2
    verdicts.unlink()
    assert run_ngrp(*args).returncode == 2, "one file left is refused, not half-rewritten"
    assert not verdicts.exists()
    summary.unlink()
    assert run_ngrp(*args).returncode == 0 and verdicts.exists(), "nothing on disk: written"
