"""Issue 29, class "one rule per value, in every reader": a reward beyond +-1e150 is flagged by validate as
profile refuses it; a string reward in a profile is refused by stats and report as validate flags it; a
lone-surrogate escape (which NeMo Gym's Python json reads and writes) is read as U+FFFD by every reader; the
--max-retries message names --max-retries; Ctrl-C while ngrp is still loading exits 130 without a
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from health_data import clean_run

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, change=None) -> tuple[Path, Path]:
    run = clean_run(tasks=4)
    rows = [orjson.loads(line) for line in run.lines]
    if change is not None:
        change(rows)
    run.lines = [orjson.dumps(r) + b"\n" for r in rows]
    inputs, rollouts, _ = run.write(tmp_path / "run")
    return inputs, rollouts


@pytest.mark.parametrize("value", [1e300, -1.7e308, 1e151])
def test_one_rule_per_value_huge_rewards_in_validate_as_in_profile(tmp_path, run_ngrp, value):
    inputs, rollouts = _run(tmp_path, lambda rows: rows[2].update(reward=value))
    checked = run_ngrp("validate", rollouts)
    assert checked.returncode == 1 and f"{rollouts}:3: /reward:" in checked.stdout, checked.stdout
    profiled = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts, "--output-dir", tmp_path / "p")
    assert profiled.returncode == 1, profiled.stderr
    fine = _run(tmp_path / "ok", lambda rows: rows[2].update(reward=1e150))[1]
    assert run_ngrp("validate", fine).returncode == 0


@pytest.mark.parametrize("command", ["stats", "report"])
def test_one_rule_per_value_string_rewards_in_stats_and_report(tmp_path, run_ngrp, command):
    inputs, rollouts = _run(tmp_path)
    made = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts, "--output-dir", tmp_path / "p")
    assert made.returncode == 0, made.stderr
    (profile,) = (tmp_path / "p").glob("*_reward_profiling.jsonl")
    rows = [json.loads(line) for line in profile.read_text().splitlines()]
    rows[1]["rollout_infos"][2]["reward"] = "high"
    profile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_ngrp("validate", profile).returncode == 1
    proc = run_ngrp(command, profile)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"{profile}:2" in proc.stderr and "rollout_infos[2].reward" in proc.stderr, proc.stderr


def _surrogate(rows: list) -> None:
    rows[1]["response"]["output"][-1]["content"][0]["text"] = "SURROGATE_HERE"


@pytest.mark.parametrize("command", ["inspect", "profile", "check", "validate", "health"])
def test_one_rule_per_value_lone_surrogates_read_as_gym_reads_them(tmp_path, run_ngrp, command):
    inputs, rollouts = _run(tmp_path, _surrogate)
    rollouts.write_bytes(rollouts.read_bytes().replace(b"SURROGATE_HERE", b"half \\ud800 a pair"))
    json.loads(rollouts.read_text().splitlines()[1])  # Python's json (Gym's) reads the line
    argv = {
        "inspect": ["inspect", rollouts, "--task", "0", "--full"],
        "profile": ["profile", "--inputs", inputs, "--rollouts", rollouts, "--output-dir", tmp_path / "p"],
        "check": ["check", "--inputs", inputs, "--rollouts", rollouts],
        "validate": ["validate", rollouts],
        "health": ["health", "--inputs", inputs, "--rollouts", rollouts],
    }[command]
    proc = run_ngrp(*argv)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    if command == "validate":  # the one reader that says so: the line, and what every reader makes of it
        assert proc.returncode == 1 and f"{rollouts}:2: 1 lone UTF-16 surrogate" in proc.stdout, proc.stdout
        assert "U+FFFD" in proc.stdout
    else:
        assert "surrogate" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    if command == "inspect":
        assert "half \ufffd a pair" in proc.stdout and "\\ud800" not in proc.stdout


@pytest.mark.parametrize("command", ["collect", "reverify"])
def test_one_rule_per_value_max_retries_message_names_it(tmp_path, run_ngrp, command):
    inputs, rollouts = _run(tmp_path)
    argv = {
        "collect": ["collect", "--input", inputs, "--output", tmp_path / "o.jsonl", "--base-url",
                    "http://127.0.0.1:9/v1", "--model", "m", "--max-retries", "-1"],
        "reverify": ["reverify", "--rollouts", rollouts, "--output", tmp_path / "o.jsonl", "--verifier",
                     "exact", "--max-retries", "-1"],
    }[command]  # fmt: skip
    proc = run_ngrp(*argv)
    assert proc.returncode == 2 and "--max-retries must be >= 0, not -1" in proc.stderr, proc.stderr
    assert "--timeout" not in proc.stderr


def test_one_rule_per_value_ctrl_c_while_loading_is_130(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import builtins\n"
        "real = builtins.__import__\n"
        "def interrupted(name, *args, **kw):\n"
        "    if name == 'ngrp_lib.cli':\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kw)\n"
        "builtins.__import__ = interrupted\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hook)}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "ngrp.py"), "--version"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert "interrupted" in proc.stderr
