"""What a new agent needs to continue a campaign, in the order the session-memory convention reads it:
the handoff (last note, next step, decisions, watch-outs), the state (goal, stop rules, runs, best),
the timeline, then git, with every place where git disagrees with the ledger's last row."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.scrub import scrub
from . import sessions
from .campaign import Campaign, LedgerPaths, load_campaign
from .gitinfo import GitInfo, read_git, run_git
from .runs import OpenRun
from .status import LedgerStatus, ledger_status

HANDOFF_SCHEMA = "ngrp.ledger_handoff.v1"
READING_ORDER = [
    "handoff.md",
    "session_state.md",
    "timeline.md",
    "git status --short",
    "git branch --show-current",
]
TIMELINE_SHOWN = 10
DECISIONS_SHOWN = 20


@dataclass
class GitState:
    branch: str
    commit: str
    dirty: bool | None
    uncommitted: list[str]  # `git status --porcelain` lines for tracked files
    last_run: dict[str, Any] | None  # index, branch, commit of the ledger's last row
    differences: list[str] = field(default_factory=list)


@dataclass
class Handoff:
    campaign: Campaign
    status: LedgerStatus
    session: str | None  # the newest session folder
    last: sessions.Entry | None  # the newest checkpoint
    decisions: list[str]
    timeline: list[sessions.Entry]
    git: GitState
    watch_outs: list[str]
    commands: list[str]

    def to_json(self) -> dict[str, Any]:
        return scrub_tree(
            {
                "schema": HANDOFF_SCHEMA,
                "campaign": self.campaign.campaign,
                "reading_order": READING_ORDER,
                "session": self.session,
                "last_checkpoint": None if self.last is None else self.last.to_json(),
                "decisions": self.decisions,
                "watch_outs": self.watch_outs,
                "status": self.status.to_json(),
                "timeline": [entry.to_json() for entry in self.timeline],
                "git": vars(self.git),
                "commands": self.commands,
            }
        )


def _git_state(repo: Path, status: LedgerStatus) -> GitState:
    git: GitInfo = read_git(repo)
    porcelain = _porcelain(repo)
    last = status.latest
    state = GitState(git.branch, git.commit, git.dirty, porcelain, None)
    if last is not None:
        state.last_run = {"index": last["index"], "branch": last["branch"], "commit": last["commit"]}
    state.differences = _differences(git, last, porcelain)
    return state


def _porcelain(repo: Path) -> list[str]:
    done = run_git(repo, "status", "--porcelain", "--untracked-files=no")
    return [] if done is None or done.returncode else done.stdout.splitlines()[:50]


def _differences(git: GitInfo, last: dict[str, Any] | None, porcelain: list[str]) -> list[str]:
    out = []
    if git.state != "ok":
        out.append(f"git: {git.state.replace('_', ' ')}: runs cannot be tied to commits")
    if last is not None and git.state == "ok":
        if last["branch"] != git.branch:
            out.append(
                f"HEAD is on {git.branch}; the last recorded run #{last['index']} was on {last['branch']}"
            )
        if last["commit"] != git.commit:
            out.append(f"HEAD is {git.commit[:12]}; run #{last['index']} recorded {last['commit'][:12]}")
    if porcelain:
        out.append(
            f"uncommitted changes to {len(porcelain)} tracked file(s): say who made them before touching them"
        )
    return out


def _watch_outs(status: LedgerStatus, git: GitState) -> list[str]:
    out = list(git.differences)
    if status.stop:
        met = ", ".join(rule.rule for rule in status.rules if rule.met)
        out.append(f"a stop rule is met ({met}): summarise and ask the user; do not launch more runs")
    for run in status.open_runs:
        if run.owner_alive is False:
            stale = f"run #{run.index} is stale (its ngrp process is gone): {_stop_hint(run)}"
            out.append(f"{stale}; read {run.log}, then record it by hand (ngrp ledger record --status crash)")
        else:
            out.append(f"run #{run.index} is still going (log {run.log}): wait for it before launching")
    if status.default_rule:
        out.append("no stop rule was given: after the baseline and 3 experiments, summarise and ask the user")
    return out


def _stop_hint(run: OpenRun) -> str:
    if run.launcher == "slurm" and run.job_id not in ("", "none"):
        return f"its Slurm job {run.job_id} may still run (squeue -j {run.job_id}; scancel {run.job_id})"
    if run.pgid is not None:
        group = run.pgid
        return f"its command may still run (ps -o pid,args -g {group}; stop it with kill -TERM -- -{group})"
    return "its command may still run"


def scrub_tree(value: Any) -> Any:
    """Every string in a JSON-able value through the scrubber."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub_tree(v) for k, v in value.items()}
    return value


def gather(paths: LedgerPaths, repo: Path = Path(".")) -> Handoff:
    """Everything `ledger handoff` prints, read without writing anything."""
    campaign = load_campaign(paths)
    status = ledger_status(paths)
    entries = sessions.all_entries(paths)
    newest = sessions.newest(paths)
    git = _git_state(repo, status)
    decisions = [f"{e.at} {e.decision}" for e in entries if e.decision][-DECISIONS_SHOWN:]
    base = f"ngrp ledger checkpoint --campaign {campaign.campaign}"
    source = f"session {newest.name}" if newest else "the ledger"
    commands = [
        f"ngrp ledger status --campaign {campaign.campaign}",
        "git status --short",
        "git branch --show-current",
        f'{base} --new-session --note "resumed from {source}: <what you verified>"',
    ]
    return Handoff(
        campaign=campaign,
        status=status,
        session=None if newest is None else str(newest),
        last=entries[-1] if entries else None,
        decisions=decisions,
        timeline=entries[-TIMELINE_SHOWN:],
        git=git,
        watch_outs=_watch_outs(status, git),
        commands=commands,
    )
