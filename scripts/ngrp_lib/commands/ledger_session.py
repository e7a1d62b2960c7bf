"""`ngrp ledger checkpoint` and `ngrp ledger handoff`: session memory for a campaign."""

from __future__ import annotations

from pathlib import Path

import click

from ..ledger import resolve_dir
from ..ledger.checkpoint import CheckpointResult, checkpoint
from ..ledger.handoff import Handoff, gather
from ..ledger.memory_text import handoff_md
from ._common import FOLDER, emit, json_option
from .ledger_common import campaign_option, dir_option

repo_option = click.option(
    "--repo",
    type=FOLDER,
    default=Path("."),
    help="The git checkout (read only).  [default: .]",
)


@click.command("checkpoint")
@campaign_option
@dir_option
@click.option(
    "--note", required=True, help="What was done or learned since the last checkpoint (terse, factual)."
)
@click.option("--next", "next_step", help="The next step, as the next agent should take it.")
@click.option(
    "--decision", help="A decision and its reason (branch parent, a run discarded, a rule changed...)."
)
@click.option("--new-session", is_flag=True, help="Start a new dated session folder (a new conversation).")
@repo_option
@json_option
def checkpoint_cmd(campaign, directory, note, next_step, decision, new_session, repo, as_json):
    """Save where the campaign stands in the session-memory layout.

    Writes <ledger>/session/<YYYYmmdd_HHMMSS>/ (the newest session, or a new one with --new-session
    or when there is none): session_state.md (goal, stop rules, attempted and remaining runs, best so
    far with its interval, open runs, next step, decisions), timeline.md (append-only, one entry per
    checkpoint), files.md (what each run wrote, uncommitted changes) and handoff.md (what
    `ngrp ledger handoff` prints). Every text is scrubbed of secrets; every write is atomic.

    Checkpoint at campaign start, after planning, before and after long launches, when the direction
    changes, before handing over or answering, and at least every 30 minutes.

    \b
    Example:
      ngrp ledger checkpoint --campaign prompt-v2 --note "baseline #1 0.58 [0.55, 0.61]" \\
          --next "branch compact-schema from the baseline" --decision "A/B against the baseline"
      ngrp ledger checkpoint --campaign prompt-v2 --new-session --note "resumed; git matches #3"

    \b
    Exit codes: 0 written, 2 bad option (an empty note, an environment dump), 3 missing or malformed
    ledger, campaign file or checkpoints.jsonl, or an unwritable folder.
    """
    result = checkpoint(
        resolve_dir(directory, campaign),
        note,
        next_step=next_step,
        decision=decision,
        new_session=new_session,
        repo=repo,
    )
    emit(result, as_json, render_checkpoint)


def render_checkpoint(result: CheckpointResult) -> str:
    verb = "started session" if result.new_session else "session"
    lines = [f"checkpoint {result.entry.number} written ({verb} {result.session})"]
    lines.extend(f"  {path}" for path in result.files)
    if result.stop:
        lines.append("  a stop rule is met: summarise and ask the user before launching more runs")
    return "\n".join(lines)


@click.command("handoff")
@campaign_option
@dir_option
@repo_option
@json_option
def handoff_cmd(campaign, directory, repo, as_json):
    """What a new agent needs to continue the campaign, in the order to read it.

    First the handoff (the last note, the next step, decisions, watch-outs), then the state (goal,
    stop rules, runs, best so far with its interval, open runs), then the timeline, then git: the
    current branch and commit against the ledger's last row, and uncommitted changes. Reads only.
    A new agent then verifies `git status --short` and `git branch --show-current`, and logs the
    recovery with `ngrp ledger checkpoint --new-session`.

    \b
    Example:
      ngrp ledger handoff --campaign prompt-v2
      ngrp ledger handoff --campaign prompt-v2 --json > handoff.json

    \b
    Exit codes: 0 printed, 2 bad option, 3 missing or malformed ledger, campaign file or
    checkpoints.jsonl.
    """
    emit(gather(resolve_dir(directory, campaign), repo), as_json, render_handoff)


def render_handoff(result: Handoff) -> str:
    return handoff_md(result).rstrip("\n")
