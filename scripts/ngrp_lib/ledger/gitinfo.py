"""Read branch and commits from git without changing anything (no index refresh, no locks)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

NONE = "none"


@dataclass(frozen=True)
class GitInfo:
    branch: str  # branch name, "detached@<short sha>", or "none" outside git
    commit: str  # full sha of HEAD, or "none"
    parent_commit: str  # fork point from --parent-ref, else HEAD's first parent, or "none"
    dirty: bool | None  # uncommitted changes to tracked files; None when unknown


def _git(repo: Path, *args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def read_git(repo: Path, parent_ref: str | None = None) -> GitInfo:
    """What HEAD is in `repo`. Every call is read-only (rev-parse, symbolic-ref, log, status)."""
    commit = _git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if commit is None:
        return GitInfo(NONE, NONE, NONE, None)
    branch = _git(repo, "symbolic-ref", "--short", "-q", "HEAD") or f"detached@{commit[:12]}"
    if parent_ref:
        parent = _git(repo, "merge-base", "HEAD", parent_ref)
    else:
        parents = _git(repo, "log", "-1", "--format=%P", "HEAD")
        parent = parents.split()[0] if parents else None
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(branch, commit, parent or NONE, None if status is None else bool(status))
