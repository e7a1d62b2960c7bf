"""Install the bundle the way users do (`npx skills add`) and run the installed scripts.

Installs from a clean copy of the tracked files (untracked junk must not ride along), into a temporary
project, with the skills CLI 1.5.18 (the newest that runs on Node 20). Skipped when npx is missing,
unless NGRP_REQUIRE_SKILL_INSTALL=1 (set by CI), where a missing npx is a failure.
"""

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


# -- SKILL.md's own set-up, run as written on the installed skill ---------------------------------------


def setup_block(skill_md: Path) -> str:
    """The fenced bash block that follows SKILL.md's "set up every command once", as written."""
    found = re.search(r"set\s+up\s+every\s+command\s+once.*?```bash\n(.*?)```", skill_md.read_text(), re.S)
    assert found, "SKILL.md has no fenced set-up block after 'set up every command once'"
    return found.group(1)


def test_setup_block_is_literal_commands():
    """Runnable as written: no placeholders (<this folder>, PATH_TO, ...) for a user or agent to fill in."""
    block = setup_block(REPO / "SKILL.md")
    assert "<" not in block and ">" not in block and "..." not in block, block
    assert "pip install" in block and "ngrp" in block.splitlines()[-1]


@pytest.fixture(scope="module")
def set_up(installed, tmp_path_factory) -> Path:
    """SKILL.md's set-up block run line by line in the installed skill folder, with a fresh HOME (its
    venv goes under ~) and no PYTHONPATH; returns the `ngrp` its last line runs."""
    block = setup_block(installed / "SKILL.md")
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(home)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=installed, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    first_word = block.strip().splitlines()[-1].split()[0]
    ngrp = subprocess.run(["bash", "-c", f"echo {first_word}"], env=env, capture_output=True, text=True)
    path = Path(ngrp.stdout.strip())
    assert path.is_file() and home in path.parents, path
    where = subprocess.run([path.parent / "python", "-c", "import ngrp_lib; print(ngrp_lib.__file__)"],
                           env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert home in Path(where.strip()).parents, f"ngrp_lib from {where}, not the set-up's venv"
    return path


@pytest.mark.vllm
def test_setup_gives_a_working_ngrp_for_every_family(set_up, vllm_server, tmp_path):
    """From SKILL.md's set-up: collect --adaptive against the real vLLM, merge, reverify, profile, stats,
    health and report, each exit 0, from a folder outside the skill."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def ngrp(*args: object) -> subprocess.CompletedProcess:
        done = subprocess.run([set_up, *map(str, args)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done

    rows = [{"responses_create_params": {"input": [{"role": "user", "content": f"What is {i}+{i}?"}],
                                         "max_output_tokens": 4, "temperature": 1.0},
             "expected_answer": str(2 * i)} for i in range(3)]  # fmt: skip
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    collected = ngrp("collect", "--input", "tasks.jsonl", "--output", "run/rollouts.jsonl", "--base-url",
                     vllm_server.base_url, "--model", "tiny", "--verifier", "math", "--num-repeats", "4",
                     "--adaptive", "learnable", "--first-round", "2", "--json")  # fmt: skip
    assert json.loads(collected.stdout)
    rollouts, inputs = "run/rollouts.jsonl", "run/rollouts_materialized_inputs.jsonl"
    written = (tmp_path / rollouts).read_text().splitlines()
    assert 6 <= len(written) <= 12  # 3 tasks, 2 to 4 repeats each
    ngrp("merge", rollouts, "-o", "merged/rollouts.jsonl")
    assert len((tmp_path / "merged" / "rollouts.jsonl").read_text().splitlines()) == len(written)
    ngrp("reverify", "--rollouts", rollouts, "--output", "run/rollouts_exact.jsonl", "--verifier", "exact")
    ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    profile = "run/rollouts_reward_profiling.jsonl"
    ngrp("stats", profile, "--rollouts", rollouts)
    health = subprocess.run([set_up, "health", "--inputs", inputs, "--rollouts", rollouts], cwd=tmp_path,
                            env=env, capture_output=True, text=True)  # fmt: skip
    assert health.returncode in (0, 1) and "Traceback" not in health.stderr, health.stderr[-2000:]
    ngrp("report", profile, "--rollouts", rollouts, "--output", "report.html")
    assert "<svg" in (tmp_path / "report.html").read_text()
