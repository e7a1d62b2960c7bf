"""`ledger branch`: one git branch per hypothesis, `<prefix>/<index>-<slug>`, from the baseline commit.

Only two kinds of git call: reads, and one `git switch -c NAME BASE` that creates a new branch (it
refuses, as git does, when the name exists or the switch would overwrite untracked files). Nothing
is reset, deleted, stashed or force-updated, and a working tree with uncommitted changes to tracked
files is refused before anything is created. Every git command run is listed in the result.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import runs, table
from .campaign import Campaign, LedgerPaths, check_branch_name, load_campaign
from .decide import baseline_row
from .gitinfo import FIRST_COMMIT, START_REPO, run_git

BRANCH_SCHEMA = "ngrp.ledger_branch.v1"
_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,59}")


@dataclass
class BranchResult:
    branch: str
    index: int | None  # None for <prefix>/baseline
    base_ref: str  # what the branch was made from: --from, the baseline run's commit, or the baseline branch
    base_commit: str
    previous_branch: str
    commands: list[str] = field(default_factory=list)  # every git command run, in order
    next_steps: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"schema": BRANCH_SCHEMA, **{k: getattr(self, k) for k in self.__dataclass_fields__}}


class _Git:
    """git in one checkout, each command remembered as the user would type it."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.commands: list[str] = []

    def __call__(self, *args: str) -> tuple[int, str, str]:
        shown = ["git", *args] if self.repo == Path(".") else ["git", "-C", str(self.repo), *args]
        self.commands.append(shlex.join(shown))
        done = run_git(self.repo, *args)
        if done is None:
            raise UsageError("git is not installed or did not answer", hint="install git, then retry")
        return done.returncode, done.stdout, done.stderr.strip()  # stdout unstripped: porcelain columns

    def value(self, *args: str) -> str | None:
        code, out, _ = self(*args)
        return out.strip() if code == 0 and out.strip() else None


def check_slug(slug: str) -> str:
    if not _SLUG.fullmatch(slug or ""):
        raise UsageError(
            f"--name {slug!r} must be a short slug: lowercase letters, digits, '.', '_' or '-' (at most 60)",
            hint="name the hypothesis, e.g. --name lr-2e-6 or --name prompt-compact-schema",
        )
    return slug


def _require_clean_repo(git: _Git) -> str:
    """The current branch; refuse outside git, before the first commit, or with a dirty tree."""
    if git.value("rev-parse", "--git-dir") is None:
        raise UsageError(
            f"{git.repo.resolve()} is not in a git repository", hint=f"start one with: {START_REPO}"
        )
    if git.value("rev-parse", "--verify", "-q", "HEAD^{commit}") is None:
        raise UsageError("the repository has no commit yet", hint=f"make the first one with: {FIRST_COMMIT}")
    code, dirty, _ = git("status", "--porcelain", "--untracked-files=no")
    if code == 0 and dirty.strip():
        files = ", ".join(line[3:] for line in dirty.splitlines()[:5])
        raise UsageError(
            f"the working tree has uncommitted changes ({files}): refusing to switch branches",
            hint="commit them (on this branch), or ask their owner; for unrelated changes, work in a "
            "separate worktree (git worktree add ../exp <base>). ledger branch never stashes or resets",
        )
    return git.value("symbolic-ref", "--short", "-q", "HEAD") or "(detached)"


def _base(git: _Git, campaign: Campaign, paths: LedgerPaths, from_ref: str | None) -> tuple[str, str]:
    """(what to branch from, its commit): --from, else the baseline run's commit, else <prefix>/baseline."""
    if from_ref is not None:
        commit = git.value("rev-parse", "--verify", "-q", f"{from_ref}^{{commit}}")
        if commit is None:
            raise UsageError(f"--from {from_ref!r} is not a commit in {git.repo.resolve()}")
        return from_ref, commit
    baseline = baseline_row(table.read_ledger(paths.ledger))
    if baseline is not None and baseline.fields["commit"] != "none":
        commit = git.value("rev-parse", "--verify", "-q", f"{baseline.fields['commit']}^{{commit}}")
        if commit is not None:
            return f"baseline run #{baseline.index}", commit
    branch = f"{campaign.prefix()}/baseline"
    commit = git.value("rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")
    if commit is not None:
        return branch, commit
    raise UsageError(
        "no baseline to branch from: no kept baseline run with a commit, and no branch " + branch,
        hint=f"make the baseline first: ngrp ledger branch --campaign {campaign.campaign} --name baseline, "
        'git commit --allow-empty -s -m "baseline", then run and record it; or pass --from REF',
    )


def _next_index(git: _Git, campaign: Campaign, paths: LedgerPaths) -> int:
    """The next experiment's index: past every ledger row and run folder, and past every numbered branch."""
    prefix = campaign.prefix()
    listed = git.value("for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}/") or ""
    numbers = [
        int(m.group(1))
        for name in listed.splitlines()
        if (m := re.match(rf"{re.escape(prefix)}/(\d+)-", name))
    ]
    with table.locked(paths.ledger):
        ledger_next = runs.next_index(paths, table.read_ledger(paths.ledger))
    return max([ledger_next, *(n + 1 for n in numbers)])


def create_branch(paths: LedgerPaths, repo: Path, slug: str, from_ref: str | None = None) -> BranchResult:
    """Create `<prefix>/<index>-<slug>` (or `<prefix>/baseline`) and switch to it."""
    campaign = load_campaign(paths)
    check_slug(slug)
    git = _Git(repo)
    previous = _require_clean_repo(git)
    if slug == "baseline":
        index = None
        name = f"{campaign.prefix()}/baseline"
        base_ref = from_ref or "HEAD"
        base_commit = git.value("rev-parse", "--verify", "-q", f"{base_ref}^{{commit}}")
        if base_commit is None:
            raise UsageError(f"--from {base_ref!r} is not a commit in {repo.resolve()}")
    else:
        base_ref, base_commit = _base(git, campaign, paths, from_ref)
        index = _next_index(git, campaign, paths)
        name = f"{campaign.prefix()}/{index}-{slug}"
    check_branch_name(name, "the branch name")
    if git.value("rev-parse", "--verify", "-q", f"refs/heads/{name}") is not None:
        raise UsageError(
            f"branch {name} already exists",
            hint="pick another --name; existing branches are kept as they are",
        )
    code, _, err = git("switch", "-c", name, base_commit)
    if code != 0:
        raise UsageError(f"git switch -c {name} failed: {err.splitlines()[-1] if err else 'no message'}")
    return BranchResult(
        name, index, base_ref, base_commit, previous, git.commands, _next_steps(campaign, slug)
    )


def _next_steps(campaign: Campaign, slug: str) -> list[str]:
    run = f"ngrp ledger run --campaign {campaign.campaign}"
    if slug == "baseline":
        return ['git commit --allow-empty -s -m "baseline"', f"{run} --description baseline -- <the recipe>"]
    edit = 'make the smallest edit that tests the idea, then: git commit -s -m "<area>: <idea>"'
    return [edit, f'{run} --description "{slug}" -- <command>']
