"""The ledger campaign request of issue 17, end to end, following SKILL.md's own commands: the campaign
example as written (in a git checkout), and a ledger started outside git, repaired by the command the
warning prints."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from ledger_helpers import GIT_ENV, git, make_repo, profile_with_means

REPO = Path(__file__).resolve().parents[1]
EVAL_SH = """#!/usr/bin/env bash
# stands in for the user's evaluation: writes this run's profile where the ledger asked for it
cp "$PROFILE_SOURCE" "$NGRP_LEDGER_RUN_DIR/rollouts_reward_profiling.jsonl"
echo "eval done"
"""


def skill_block(marker: str) -> list[str]:
    """The one bash block holding `marker` in SKILL.md or the references it links (recipes.md)."""
    docs = [REPO / "SKILL.md", *sorted((REPO / "references").glob("*.md"))]
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in docs)
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if marker in b]
    assert len(blocks) == 1, f"SKILL.md and references/: expected one bash block with {marker!r}"
    return [line for line in blocks[0].splitlines() if line.strip()]


def run_line(run_ngrp, repo: Path, line: str, env: dict) -> list:
    """One line of a SKILL.md block: `python3 scripts/ngrp.py ...` through the CLI, `git ...` as is."""
    results = []
    for part in line.split(" && "):
        args = shlex.split(part, comments=True)
        if args[:2] == ["python3", "scripts/ngrp.py"]:
            result = run_ngrp(*args[2:], cwd=repo, env=env)
        else:
            assert args[0] == "git", part
            result = subprocess.run(args, cwd=repo, env=GIT_ENV, capture_output=True, text=True)
        assert result.returncode == 0, f"{part}\n{result.stdout}\n{result.stderr}"
        results.append(result)
    return results


def test_the_skill_campaign_example_as_written(run_ngrp, tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / ".git" / "info" / "exclude").write_text("reports/auto_research/\n")
    (repo / "eval.sh").write_text(EVAL_SH)
    git(repo, "add", "eval.sh")
    git(repo, "commit", "-q", "-m", "eval script")
    base = profile_with_means(tmp_path / "base.jsonl", [0.2, 0.4, 0.6, 0.5, 0.3, 0.4])
    env = {**GIT_ENV, "PROFILE_SOURCE": str(base)}
    lines = skill_block("ledger init --campaign c1")
    outputs = [r for line in lines for r in run_line(run_ngrp, repo, line, env)]
    assert any("stop rules: max 6 runs, the baseline included" in r.stdout for r in outputs)
    status = json.loads(run_ngrp("ledger", "status", "--campaign", "c1", "--json", cwd=repo, env=env).stdout)
    assert status["attempted"] == 1 and status["remaining"] == 5
    baseline = status["runs"][0]
    assert (baseline["branch"], baseline["status"]) == (f"{status['branch_prefix']}/baseline", "keep")
    assert baseline["commit"] == git(repo, "rev-parse", "HEAD")
    sessions = list((repo / "reports/auto_research/c1/session").iterdir())
    assert len(sessions) == 1 and "baseline recorded" in (sessions[0] / "timeline.md").read_text()

    # "then per idea `ledger branch --name <idea>`, commit, `ledger run`, `ledger status`"
    better = profile_with_means(tmp_path / "better.jsonl", [0.3, 0.5, 0.72, 0.6, 0.41, 0.5])
    env["PROFILE_SOURCE"] = str(better)
    made = run_ngrp("ledger", "branch", "--campaign", "c1", "--name", "idea-1", cwd=repo, env=env)
    assert made.returncode == 0, made.stderr
    (repo / "recipe.yaml").write_text("lr: 3e-6\n")
    git(repo, "commit", "-q", "-am", "lr: 3e-6")
    ran = run_ngrp(
        "ledger",
        "run",
        "--campaign",
        "c1",
        "--profile",
        "{run_dir}/rollouts_reward_profiling.jsonl",
        "--description",
        "idea-1",
        "--json",
        "--",
        "bash",
        "eval.sh",
        cwd=repo,
        env=env,
    )
    data = json.loads(ran.stdout)
    assert data["status"] == "keep" and data["record"]["row"]["compared_to"].startswith("#1 paired-t")
    assert data["record"]["row"]["branch"] == f"{status['branch_prefix']}/2-idea-1"


def test_a_ledger_started_outside_git_follows_its_own_warning(run_ngrp, tmp_path):
    plain = tmp_path / "project"
    plain.mkdir()
    (plain / "train.py").write_text("print('score=0.5')\n")
    init = run_ngrp(
        "ledger", "init", "--campaign", "c1", "--metric", "score", "--direction", "max", cwd=plain
    )
    assert init.returncode == 0 and "not in a git repository" in init.stderr
    start = init.stderr.split("start one with: ", 1)[1].splitlines()[0]
    assert "git init" in start and ".git/info/exclude" in start
    for part in start.split(" && "):  # the printed command, with the placeholder filled in
        args = shlex.split(part.replace("<your code and recipes>", "train.py"))
        if ">>" in args:  # echo reports/auto_research/ >> .git/info/exclude
            with open(plain / args[-1], "a") as handle:
                handle.write(" ".join(args[1 : args.index(">>")]) + "\n")
            continue
        assert subprocess.run(args, cwd=plain, env=GIT_ENV, capture_output=True).returncode == 0, part
    rec = run_ngrp(
        "ledger", "record", "--campaign", "c1", "--status", "crash", "--json", cwd=plain, env=GIT_ENV
    )
    assert rec.returncode == 0 and "warning" not in rec.stderr
    row = json.loads(rec.stdout)["row"]
    assert row["commit"] == git(plain, "rev-parse", "HEAD") and row["branch"] != "none"
    assert git(plain, "status", "--porcelain") == ""  # the ledger folder stays out of git
