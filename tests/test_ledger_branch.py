"""`ngrp ledger branch` on temporary git repositories: names, bases, and refusals that change nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import check
from ledger_helpers import LEDGER_RUN, git

REPO = Path(__file__).resolve().parents[1]
PREFIX = "ar/c1"
pytestmark = pytest.mark.ledger_campaign(
    "--metric", "score", "--direction", "max", "--max-experiments", "9", "--branch-prefix", PREFIX,
    exclude_reports=True,
)  # fmt: skip


def branch(run_ngrp, repo: Path, name: str, *extra: str, code: int = 0):
    result = check(
        run_ngrp("ledger", "branch", "--campaign", "c1", "--name", name, *extra, "--json", cwd=repo), code
    )
    if code:
        return result
    data = json.loads(result.stdout)
    jsonschema.validate(data, json.loads((REPO / "schemas" / "ledger_branch.schema.json").read_text()))
    assert git(repo, "branch", "--show-current") == data["branch"]
    assert git(repo, "rev-parse", "HEAD") == data["base_commit"]
    return data


def run_score(run_ngrp, repo: Path, score: float) -> dict:
    argv = [*LEDGER_RUN, "--json", "--quiet", "--metric-regex", r"score=([0-9.]+)"]
    return json.loads(
        check(run_ngrp(*argv, "--", sys.executable, "-c", f"print('score={score}')", cwd=repo), 0).stdout
    )


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def test_baseline_then_one_branch_per_hypothesis(run_ngrp, repo):
    start = git(repo, "rev-parse", "HEAD")
    base = branch(run_ngrp, repo, "baseline")
    assert (base["branch"], base["index"], base["base_commit"]) == (f"{PREFIX}/baseline", None, start)
    assert base["previous_branch"] == "exp/a"
    assert f"git switch -c {PREFIX}/baseline {start}" in base["commands"]
    assert any(c.startswith("git status --porcelain") for c in base["commands"])
    git(repo, "commit", "-q", "--allow-empty", "-m", "baseline")
    baseline_commit = git(repo, "rev-parse", "HEAD")
    assert run_score(run_ngrp, repo, 0.5)["index"] == 1

    first = branch(run_ngrp, repo, "lr-up")
    assert (first["branch"], first["index"]) == (f"{PREFIX}/2-lr-up", 2)
    assert first["base_commit"] == baseline_commit and first["base_ref"] == "baseline run #1"
    (repo / "recipe.yaml").write_text("lr: 4e-6\n")
    git(repo, "commit", "-q", "-am", "lr: 4e-6")
    assert run_score(run_ngrp, repo, 0.6)["index"] == 2

    second = branch(run_ngrp, repo, "prompt")  # a clean A/B: from the baseline, not from lr-up
    assert (second["branch"], second["base_commit"]) == (f"{PREFIX}/3-prompt", baseline_commit)
    assert (repo / "recipe.yaml").read_text() == "lr: 2e-6\n"  # the baseline's content, not lr-up's
    stacked = branch(run_ngrp, repo, "lr-more", "--from", f"{PREFIX}/2-lr-up")
    assert stacked["branch"] == f"{PREFIX}/4-lr-more"  # 3 is taken by a branch with no run yet
    assert stacked["base_commit"] == git(repo, "rev-parse", f"{PREFIX}/2-lr-up")

    status = check(run_ngrp("ledger", "status", "--campaign", "c1", "--json", cwd=repo), 0)
    data = json.loads(status.stdout)
    assert [r["branch"] for r in data["runs"]] == [f"{PREFIX}/baseline", f"{PREFIX}/2-lr-up"]
    text = check(run_ngrp("ledger", "status", "--campaign", "c1", cwd=repo), 0).stdout
    assert f"#1 {PREFIX}/baseline keep 0.5" in text and f"#2 {PREFIX}/2-lr-up" in text


def test_text_output_lists_the_git_commands(run_ngrp, repo):
    out = check(run_ngrp("ledger", "branch", "--campaign", "c1", "--name", "baseline", cwd=repo), 0).stdout
    assert f"switched to a new branch {PREFIX}/baseline" in out
    assert f"    git switch -c {PREFIX}/baseline " in out and "git commit --allow-empty" in out


def test_dirty_tree_is_refused_and_nothing_changes(run_ngrp, repo):
    branch(run_ngrp, repo, "baseline")
    (repo / "recipe.yaml").write_text("lr: 9e-9\n")  # someone's uncommitted edit
    (repo / "notes.txt").write_text("untracked")
    before = refs(repo)
    refused = branch(run_ngrp, repo, "idea", "--from", "HEAD", code=2)
    assert "uncommitted changes (recipe.yaml)" in refused.stderr and "never stashes" in refused.stderr
    assert refs(repo) == before and git(repo, "branch", "--show-current") == f"{PREFIX}/baseline"
    assert (repo / "recipe.yaml").read_text() == "lr: 9e-9\n" and (
        repo / "notes.txt"
    ).read_text() == "untracked"
    assert git(repo, "stash", "list") == ""


def test_other_refusals(run_ngrp, repo, tmp_path):
    assert "no baseline to branch from" in branch(run_ngrp, repo, "idea", code=2).stderr
    branch(run_ngrp, repo, "baseline")
    before = refs(repo)
    assert "already exists" in branch(run_ngrp, repo, "baseline", code=2).stderr
    assert "is not a commit" in branch(run_ngrp, repo, "idea", "--from", "no-such-ref", code=2).stderr
    assert "short slug" in branch(run_ngrp, repo, "Bad Name", code=2).stderr
    assert refs(repo) == before
    plain = tmp_path / "plain"
    plain.mkdir()
    check(run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "m", "--direction", "max", cwd=plain), 0)
    outside = branch(run_ngrp, plain, "baseline", code=2)
    assert "not in a git repository" in outside.stderr and "git init" in outside.stderr
