"""`ngrp ledger branch`: create the campaign's next hypothesis branch and switch to it."""

from __future__ import annotations

from pathlib import Path

import click

from ..ledger import resolve_dir
from ..ledger.branch import BranchResult, create_branch
from ._common import FOLDER, emit, json_option
from .ledger_common import campaign_option, dir_option


@click.command("branch")
@campaign_option
@dir_option
@click.option("--name", "slug", required=True, help="The hypothesis as a short slug (lr-2e-6), or baseline.")
@click.option(
    "--from",
    "from_ref",
    help="Branch or commit to start from. Default: the baseline run's commit (a clean A/B); pass the best "
    "run's branch to build on a gain.",
)
@click.option(
    "--repo",
    type=FOLDER,
    default=Path("."),
    help="The git checkout.  [default: .]",
)
@json_option
def branch_cmd(campaign, directory, slug, from_ref, repo, as_json):
    """Create <prefix>/<index>-<slug> from the baseline commit and switch to it.

    <prefix> is the campaign's branch prefix (ledger init --branch-prefix); <index> is the next
    experiment's index (past every ledger row, running run and numbered branch). --name baseline
    creates <prefix>/baseline from --from (default HEAD) instead: make the empty baseline commit on
    it and run the unchanged recipe there first. Without --from, a branch starts from the baseline
    run's commit, else from <prefix>/baseline.

    Refuses when tracked files have uncommitted changes, when the branch exists, or when git would
    overwrite untracked files. It never resets, deletes, stashes or force-updates anything; its only
    write is `git switch -c`. Every git command it ran is printed.

    \b
    Example:
      ngrp ledger branch --campaign prompt-v2 --name baseline
      ngrp ledger branch --campaign prompt-v2 --name compact-schema
      ngrp ledger branch --campaign prompt-v2 --name more-shots \\
          --from autoresearch/2026-03-24-prompt-v2/2-compact-schema

    \b
    Exit codes: 0 created and switched, 2 refused (dirty tree, existing branch, no baseline, not a git
    repository, bad name), 3 missing or malformed ledger or campaign file.
    """
    result = create_branch(resolve_dir(directory, campaign), repo, slug, from_ref)
    emit(result, as_json, render_branch)


def render_branch(result: BranchResult) -> str:
    lines = [f"switched to a new branch {result.branch} (from {result.base_ref}, {result.base_commit[:12]})"]
    lines.append(f"  was on: {result.previous_branch}")
    lines.append("  git commands run:")
    lines.extend(f"    {command}" for command in result.commands)
    lines.append("  next:")
    lines.extend(f"    {step}" for step in result.next_steps)
    return "\n".join(lines)
