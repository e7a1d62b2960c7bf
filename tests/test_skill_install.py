"""Install the bundle the way users do (`npx skills add`) and run the installed scripts.

Installs from a clean copy of the tracked files (untracked junk must not ride along), into a temporary
project, with the skills CLI 1.5.18 (the newest that runs on Node 20). Skipped when npx is missing,
unless NGRP_REQUIRE_SKILL_INSTALL=1 (set by CI), where a missing npx is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NAME = "nemo-gym-reward-profiling"
SKILLS_CLI = "skills@1.5.18"
CASE = Path("tests/golden/gym-0.7.0/case_complete")


def clean_copy(dest: Path) -> Path:
    """Copy the tracked files as they are in the working tree (modes kept) into dest/<NAME>."""
    target = dest / NAME
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for rel in filter(None, listing.split("\0")):
        src = REPO / rel
        if src.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / rel)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    if shutil.which("npx") is None or shutil.which("git") is None or not (REPO / ".git").exists():
        if os.environ.get("NGRP_REQUIRE_SKILL_INSTALL") == "1":
            pytest.fail("npx, git or the git checkout is missing but NGRP_REQUIRE_SKILL_INSTALL=1")
        pytest.skip("needs npx (Node 20+) and a git checkout")
    root = tmp_path_factory.mktemp("skill-install")
    source = clean_copy(root / "src")
    project = root / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", "."], cwd=project, check=True)
    env = {**os.environ, "DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "CI": "1"}
    result = subprocess.run(
        ["npx", "-y", SKILLS_CLI, "add", str(source), "-a", "claude-code", "-y"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    skill_dir = project / ".claude" / "skills" / NAME
    assert skill_dir.is_dir(), result.stdout[-3000:]
    return skill_dir


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_installed_tree(installed):
    for rel in ("SKILL.md", "scripts/ngrp.py", "references/quick-start.md", "evals/evals.json", str(CASE)):
        assert (installed / rel).exists(), rel
    assert os.access(installed / "scripts" / "ngrp.py", os.X_OK), "exec bit lost on install"
    assert not list(installed.rglob("__pycache__")), "junk was installed"
    installed_docs = {p.name for p in (installed / "references").glob("*.md")}
    assert installed_docs == {p.name for p in (REPO / "references").glob("*.md") if p.is_file()}
    if (REPO / "schemas").is_dir():
        assert sorted(p.name for p in (installed / "schemas").iterdir()) == sorted(
            p.name for p in (REPO / "schemas").iterdir() if p.suffix == ".json"
        )


def test_installed_help_runs_from_the_project(installed):
    project = installed.parents[2]
    result = run([".claude/skills/nemo-gym-reward-profiling/scripts/ngrp.py", "--help"], cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Usage: ngrp" in result.stdout


def test_installed_command_on_bundled_example(installed, tmp_path):
    """A real command on the example files shipped inside the installed copy, from another cwd."""
    script = str(installed / "scripts" / "ngrp.py")
    case = installed / CASE
    inputs, rollouts = case / "rollouts_materialized_inputs.jsonl", case / "rollouts.jsonl"
    out = tmp_path / "out"
    result = run(
        [
            script,
            "profile",
            "--inputs",
            str(inputs),
            "--rollouts",
            str(rollouts),
            "--output-dir",
            str(out),
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "rollouts_reward_profiling.jsonl").read_text().splitlines()]
    golden = [
        json.loads(line) for line in (case / "rollouts_reward_profiling.jsonl").read_text().splitlines()
    ]
    # Gym 0.7.0's own numbers for this case: t0=[1,0,1,1], t1=[.25,.5,.75,1], t2=[0,0,1,0].
    assert [r["mean/reward"] for r in rows] == pytest.approx([0.75, 0.625, 0.25])
    assert [r["mean/reward"] for r in rows] == pytest.approx([g["mean/reward"] for g in golden])
    for name in ("agent_metrics.json", "repeat_level_metrics.json", "profile_summary.json"):
        assert (out / f"rollouts_{name}").exists(), name
    assert not any(case.glob("*_profile_summary.json")), "the installed example files were written to"
