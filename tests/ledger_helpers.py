"""Shared builders for the ledger tests: a throwaway git repository, its campaign, and reward profiles.

The `repo` fixture is the throwaway repository; a test module that wants a campaign in it says so with
`pytestmark = pytest.mark.ledger_campaign(*init_options, exclude_reports=..., slurm=...)`. conftest.py
registers the fixture for every test module.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import check

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=GIT_ENV, check=True
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    """A repo with a baseline commit on `main` and one hypothesis commit on `exp/a`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "recipe.yaml").write_text("lr: 1e-6\n")
    git(path, "add", "recipe.yaml")
    git(path, "commit", "-q", "-m", "baseline")
    git(path, "checkout", "-q", "-b", "exp/a")
    (path / "recipe.yaml").write_text("lr: 2e-6\n")
    git(path, "commit", "-q", "-am", "hypothesis: double lr")
    return path


def write_profile(path: Path, rewards: dict[int, list[float]]) -> Path:
    """A minimal *_reward_profiling.jsonl: one row per task with rollout_infos[*].reward."""
    with open(path, "w") as handle:
        for task, values in rewards.items():
            infos = [
                {"_ng_task_index": task, "_ng_rollout_index": i, "reward": v} for i, v in enumerate(values)
            ]
            handle.write(json.dumps({"_ng_task_index": task, "mean/reward": sum(values) / len(values),
                                     "rollout_infos": infos}) + "\n")  # fmt: skip
    return path


def profile_with_means(path: Path, means: list[float], repeats: int = 4) -> Path:
    """Each task's rollouts all equal its mean, so per-task means are exactly `means`."""
    return write_profile(path, {t: [m] * repeats for t, m in enumerate(means)})


@pytest.fixture
def repo(tmp_path, run_ngrp, request) -> Path:
    """`make_repo`, then `ngrp ledger init --campaign c1 OPTIONS` in it when the module's `ledger_campaign`
    mark gives OPTIONS; `exclude_reports` keeps reports/ out of git status, `slurm` runs the init with the
    Slurm cluster's environment."""
    path = make_repo(tmp_path / "repo")
    mark = request.node.get_closest_marker("ledger_campaign")
    if mark is None:
        return path
    if mark.kwargs.get("exclude_reports"):
        (path / ".git" / "info" / "exclude").write_text("reports/\n")
    env = request.getfixturevalue("slurm_cluster").env if mark.kwargs.get("slurm") else None
    check(run_ngrp("ledger", "init", "--campaign", "c1", *mark.args, cwd=path, env=env))
    return path


LEDGER_RUN = ("ledger", "run", "--campaign", "c1")  # every ledger test's campaign is c1
