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
    state: str = "ok"  # ok, no_git (git not installed), not_a_repo, no_commit


# How to start a repository so the ledger can tie each run to a commit. The ledger folder is kept out
# of it (a local exclude, not a commit), so switching branches never changes the ledger.
START_REPO = (
    "git init && echo reports/auto_research/ >> .git/info/exclude && git add <your code and recipes> "
    '&& git commit -m "baseline"'
)
FIRST_COMMIT = 'git add <your code and recipes> && git commit -m "baseline"'


def warnings_for(git: GitInfo, repo: Path) -> list[str]:
    """What the ledger must say about the git state of a run (empty when all is well)."""
    where = str(repo.resolve())
    if git.state == "no_git":
        return [f"git is not installed: branch and commit are recorded as {NONE}"]
    if git.state == "not_a_repo":
        return [
            f"{where} is not in a git repository: branch and commit are recorded as {NONE}, so no run can "
            f"be tied to its code; start one with: {START_REPO}"
        ]
    if git.state == "no_commit":
        return [
            f"the git repository at {where} has no commit yet: branch and commit are recorded as {NONE}; "
            f"make the first one with: {FIRST_COMMIT}"
        ]
    if git.dirty:
        return ["the working tree has uncommitted changes: the commit does not fully describe this run"]
    return []


GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """One git call in `repo`; None when git cannot be run at all."""
    try:
        return subprocess.run(
            ["git", "--no-optional-locks", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _git(repo: Path, *args: str) -> str | None:
    done = run_git(repo, *args)
    return done.stdout.strip() if done is not None and done.returncode == 0 else None


def _no_head_state(repo: Path) -> str:
    done = run_git(repo, "rev-parse", "--git-dir")
    if done is None:
        return "no_git"
    return "no_commit" if done.returncode == 0 else "not_a_repo"


def read_git(repo: Path, parent_ref: str | None = None) -> GitInfo:
    """What HEAD is in `repo`. Every call is read-only (rev-parse, symbolic-ref, log, status)."""
    commit = _git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if commit is None:
        return GitInfo(NONE, NONE, NONE, None, _no_head_state(repo))
    branch = _git(repo, "symbolic-ref", "--short", "-q", "HEAD") or f"detached@{commit[:12]}"
    if parent_ref:
        parent = _git(repo, "merge-base", "HEAD", parent_ref)
    else:
        parents = _git(repo, "log", "-1", "--format=%P", "HEAD")
        parent = parents.split()[0] if parents else None
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(branch, commit, parent or NONE, None if status is None else bool(status))


def changed_paths(repo: Path, limit: int = 200) -> list[str] | None:
    """Paths git sees as modified or untracked (`status --porcelain`; a new folder is one entry), at most
    `limit`; None outside git."""
    done = run_git(repo, "status", "--porcelain", "--untracked-files=normal")
    if done is None or done.returncode != 0:
        return None
    return [line[3:] for line in done.stdout.splitlines()[:limit] if len(line) > 3]


def toplevel(repo: Path) -> Path | None:
    out = _git(repo, "rev-parse", "--show-toplevel")
    return None if out is None else Path(out)
