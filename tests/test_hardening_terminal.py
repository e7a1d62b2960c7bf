"""Issue 29, class "terminal output is untrusted": ESC, OSC, NUL (and bidi overrides) from run data come out
of every human-readable output as visible escapes, as `--json` already writes them: `inspect` text,
`check` (agent names), `ledger status`, error messages."""

from __future__ import annotations

import sys

import orjson
import pytest
from health_data import clean_run
from ledger_helpers import make_repo

from ngrp_lib.artifacts.terminal import visible

HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x00\u202etxt"
RAW = ("\x1b", "\x07", "\x00", "\u202e")


def _assert_visible(text: str, shown: bool = True) -> None:
    assert not any(ch in text for ch in RAW), repr(text[:400])
    assert "\\x1b" in text or not shown, repr(text[:400])


def test_terminal_output_is_untrusted_visible_keeps_layout():
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible(HOSTILE) == "\\x1b[2J\\x1b]0;pwned\\x07\\x00\\u202etxt"
    assert visible("\r\x9b31m\x7f") == "\\x0d\\x9b31m\\x7f"


@pytest.fixture
def hostile_run(tmp_path):
    run = clean_run(tasks=3)
    rows = [orjson.loads(line) for line in run.lines]
    inputs = run.inputs
    for row in rows + inputs:
        row["agent_ref"] = {"name": "agent" + HOSTILE}
    for row in rows:
        row["response"]["output"][-1]["content"][0]["text"] = "answer " + HOSTILE
    run.lines = [orjson.dumps(r) + b"\n" for r in rows[:-1]]  # one missing: check names its agent
    _, rollouts, _ = run.write(tmp_path / "run")
    return rollouts


CHECK = ["check", "--inputs", "{inputs}", "--rollouts"]


@pytest.mark.parametrize("command", [["inspect"], ["inspect", "--limit", "2", "--full"], CHECK])
def test_terminal_output_is_untrusted_in_run_commands(run_ngrp, hostile_run, command):
    inputs = str(hostile_run.with_name("rollouts_materialized_inputs.jsonl"))
    proc = run_ngrp(*[inputs if arg == "{inputs}" else arg for arg in command], hostile_run)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    _assert_visible(proc.stdout + proc.stderr)


def test_terminal_output_is_untrusted_in_ledger_status(tmp_path, run_ngrp):
    repo = make_repo(tmp_path / "repo")
    init = ["ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max"]
    assert run_ngrp(*init, cwd=repo).returncode == 0
    code = "print('score=0.5')"
    ran = run_ngrp("ledger", "run", "--campaign", "c1", "--metric-regex", r"score=(?P<value>[0-9.]+)",
                   "--description", "try " + HOSTILE, "--", sys.executable, "-c", code, cwd=repo)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    for command in ("status", "handoff"):
        shown = run_ngrp("ledger", command, "--campaign", "c1", cwd=repo)
        assert shown.returncode in (0, 1), shown.stderr
        _assert_visible(shown.stdout + shown.stderr, shown=command == "status")


def test_terminal_output_is_untrusted_in_error_messages(run_ngrp, tmp_path):
    bad = tmp_path / ("rollouts" + "\x1b]0;x\x07" + ".jsonl")
    bad.write_text("{not json\n")
    proc = run_ngrp("inspect", bad)
    assert proc.returncode == 3
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "\\x1b" in proc.stderr
