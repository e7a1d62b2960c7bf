"""What `npx skills add` ships: executable scripts that run from anywhere, and no junk in git."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "scripts").glob("*.py"))
SKILL_NAME = "nemo-gym-reward-profiling"


def git_files() -> list[tuple[str, str]]:
    """(mode, path) of every tracked file; skips the test outside a git checkout."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-s", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    )
    rows = []
    for entry in out.stdout.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            rows.append((meta.split()[0], path))
    return rows


def test_scripts_exist():
    assert REPO / "scripts" / "ngrp.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_has_shebang_and_exec_bit(script):
    assert script.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    assert os.access(script, os.X_OK), f"chmod +x {script.relative_to(REPO)}"


def test_tracked_scripts_are_committed_executable():
    modes = {path: mode for mode, path in git_files()}
    for script in SCRIPTS:
        rel = script.relative_to(REPO).as_posix()
        if rel in modes:
            assert modes[rel] == "100755", f"git update-index --chmod=+x {rel}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_help_runs_from_another_directory(script, tmp_path):
    result = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()
    assert list(tmp_path.iterdir()) == [], "--help must not write into the working directory"


def test_no_junk_tracked():
    for mode, path in git_files():
        parts = path.split("/")
        assert "__pycache__" not in parts and not path.endswith((".pyc", ".pyo")), path
        assert parts[-1] != "metadata.json", f"{path}: the skills CLI silently drops metadata.json"
        assert mode != "120000", f"{path}: symlinks are dereferenced on install"
        assert not re.match(r"\.?venv", parts[0]), path


def test_gitignore_keeps_junk_out():
    ignored = (REPO / ".gitignore").read_text(encoding="utf-8")
    for pattern in ("__pycache__/", "metadata.json", ".venv"):
        assert pattern in ignored


# ---- evals/evals.json (NVIDIA NVSkills-Eval format) ----

EVAL_KEYS = {"id", "question", "expected_skill", "should_trigger", "ground_truth", "expected_behavior"}


@pytest.fixture(scope="module")
def evals() -> list[dict]:
    return json.loads((REPO / "evals" / "evals.json").read_text(encoding="utf-8"))


def test_evals_shape(evals):
    assert isinstance(evals, list)
    ids = [case["id"] for case in evals]
    assert len(ids) == len(set(ids)), "ids are unique"
    for case in evals:
        assert set(case) == EVAL_KEYS, case.get("id")
        assert isinstance(case["id"], str) and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", case["id"])
        assert isinstance(case["question"], str) and len(case["question"]) > 20
        assert isinstance(case["ground_truth"], str) and case["ground_truth"]
        assert isinstance(case["expected_behavior"], list) and case["expected_behavior"]
        assert all(isinstance(b, str) and b for b in case["expected_behavior"])
        assert case["should_trigger"] is (case["expected_skill"] == SKILL_NAME)
        assert case["expected_skill"] in (SKILL_NAME, None)


def test_evals_balance(evals):
    positives = [c for c in evals if c["should_trigger"]]
    negatives = [c for c in evals if not c["should_trigger"]]
    assert len(positives) >= 5 and len(negatives) >= 3
    for case in positives:
        assert any("SKILL.md" in b or "references/" in b for b in case["expected_behavior"]), case["id"]
    questions = " ".join(c["question"].lower() for c in negatives)
    for topic in ("ray", "benchmark", "training config"):
        assert topic in questions, f"missing near-miss negative about {topic}"
