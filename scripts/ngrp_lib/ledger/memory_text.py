"""The session-memory files as Markdown: session_state.md, timeline.md entries, files.md, handoff.md.

Each renderer returns text that has been through the ledger's scrubber as a whole, whatever it
quotes (notes, commands, branch names, log lines).
"""

from __future__ import annotations

from ..artifacts.scrub import scrub
from .campaign import LedgerPaths
from .handoff import READING_ORDER, Handoff
from .runs import read_record, run_files
from .sessions import Entry
from .status import LedgerStatus, format_minutes

SKILLS = "nemo-gym-reward-profiling (SKILL.md, references/research-loop.md)"
RUNS_LISTED = 200


def _value(row: dict | None) -> str:
    if row is None:
        return "none yet"
    if row["status"] == "crash":
        return f"#{row['index']} {row['branch']} crash"
    text = f"#{row['index']} {row['branch']} ({row['commit'][:12]}) {row['metric_value']:.6g}"
    if row["ci_low"] is not None and row["ci_high"] is not None:
        text += f" [95% CI {row['ci_low']:.6g}, {row['ci_high']:.6g}]"
    if row["n_tasks"] is not None:
        text += f" on {row['n_tasks']} tasks"
    return text


def _goal(status: LedgerStatus) -> str:
    word = "maximise" if status.direction == "max" else "minimise"
    return f"{word} `{status.metric}` (campaign {status.campaign})"


def state_lines(status: LedgerStatus, level: str = "##") -> list[str]:
    """Goal, stop rules, runs, best: the part session_state.md and handoff.md share."""
    lines = [f"{level} Goal", _goal(status), "", f"{level} Stop rules"]
    lines.extend(f"- [{'MET' if r.met else ' - '}] {r.rule}: {r.detail}" for r in status.rules)
    if status.default_rule:
        lines.append(
            "- (no rule was given: the default is the baseline plus 3 experiments, then ask the user)"
        )
    lines.append(f"Status: {'STOP: a stop rule is met' if status.stop else 'continue: no stop rule is met'}")
    counts = ", ".join(f"{n} {s}" for s, n in status.counts.items())
    budget = f"Attempted: {status.attempted} ({counts})"
    if status.remaining is not None:
        budget += f"; remaining: {status.remaining}"
    if status.time_left_min is not None:
        budget += f"; time left: {format_minutes(status.time_left_min)}"
    if status.runs_that_fit is not None:
        budget += f" (room for {status.runs_that_fit} more run(s))"
    lines += [
        "",
        f"{level} Runs",
        budget,
        f"Best so far: {_value(status.best)}",
        f"Baseline: {_value(status.baseline)}",
        f"Latest: {_value(status.latest)}",
    ]
    if status.open_runs:
        lines.append("Open runs:")
        owner = {True: "running", False: "stale (its ngrp process is gone)", None: "on another host"}
        for run in status.open_runs:
            since = f"since {run.started_at}"
            lines.append(f"- #{run.index} {owner[run.owner_alive]} {since}: {run.command}; log {run.log}")
    else:
        lines.append("Open runs: none")
    return lines


def session_state(status: LedgerStatus, entry: Entry, decisions: list[str], git_line: str) -> str:
    lines = [
        f"# Session state: campaign {status.campaign}",
        "",
        f"Updated {entry.at} (checkpoint {entry.number} of session {entry.session}).",
        f"Loaded skills: {SKILLS}.",
        f"Git: {git_line}",
        "",
    ]
    lines += state_lines(status)
    lines += ["", "## Next step", entry.next or "(not given: pass --next to the next checkpoint)"]
    lines += ["", "## Decisions"] + ([f"- {d}" for d in decisions] or ["- none recorded"])
    return scrub("\n".join(lines) + "\n")


def timeline_entry(entry: Entry) -> str:
    lines = [f"## {entry.at} checkpoint {entry.number}", "", f"- note: {entry.note}"]
    if entry.decision:
        lines.append(f"- decision: {entry.decision}")
    if entry.next:
        lines.append(f"- next: {entry.next}")
    dirty = " (uncommitted changes)" if entry.dirty else ""
    lines.append(
        f"- git: {entry.branch} at {entry.commit[:12]}{dirty}; {entry.attempted} run(s) attempted"
        + ("; a stop rule is met" if entry.stop else "")
    )
    return scrub("\n".join(lines) + "\n\n")


def timeline_header(session: str, campaign: str) -> str:
    return f"# Timeline: session {session}, campaign {campaign}\n\nAppend-only: one entry per checkpoint.\n\n"


def files_md(paths: LedgerPaths, rows: list[dict], uncommitted: list[str]) -> str:
    lines = [
        "# Files",
        "",
        f"Ledger: {paths.ledger} and {paths.campaign}",
        f"Run folders: {paths.logs}/<index>/",
        f"Session memory: {paths.sessions}/",
        "",
        "## What each run wrote",
    ]
    for row in rows[-RUNS_LISTED:]:
        lines.append(f"### #{row['index']} {row['branch']} {row['status']}")
        lines.extend(_run_files(paths, row))
    if not rows:
        lines.append("No run recorded yet.")
    lines += ["", "## Uncommitted changes now (git status, tracked files)"]
    lines += [f"- `{line}`" for line in uncommitted] or ["- none"]
    if uncommitted:
        lines.append("Say who made each of these before changing or committing them.")
    return scrub("\n".join(lines) + "\n")


def _run_files(paths: LedgerPaths, row: dict) -> list[str]:
    index = row["index"]
    folder = paths.logs / str(index)
    record = read_record(folder) or {}
    lines = []
    if row.get("log_path"):
        lines.append(f"- log: {row['log_path']}")
    if row.get("profile_path"):
        lines.append(f"- profile: {row['profile_path']}")
    listed = [name for name in run_files(paths, index) if name not in ("run.log",)]
    if listed:
        lines.append(f"- in {folder}/: " + ", ".join(listed))
    changed = record.get("files_changed") or []
    if changed:
        lines.append("- changed in the working tree while it ran: " + ", ".join(map(str, changed[:50])))
    return lines or ["- (no files recorded)"]


def handoff_md(handoff: Handoff) -> str:
    status, last = handoff.status, handoff.last
    where = f"session {handoff.session}" if handoff.session else "the ledger (no checkpoint yet)"
    lines = [
        f"# Handoff: campaign {status.campaign}",
        "",
        f"From {where}. Read in this order: {', then '.join(READING_ORDER)}.",
        "",
        "## Resume from here",
    ]
    if last is None:
        lines.append("- no checkpoint yet: run `ngrp ledger checkpoint` once you know the plan")
    else:
        lines += [f"- last note ({last.at}): {last.note}", f"- next step: {last.next or '(not given)'}"]
    lines += [f"- decision: {d}" for d in handoff.decisions]
    lines += ["", "## Watch outs"] + ([f"- {w}" for w in handoff.watch_outs] or ["- none"])
    lines += ["", "## State"] + state_lines(status, "###")
    lines += ["", "## Timeline (latest)"]
    lines += [
        f"- {e.at} [{e.session} #{e.number}] {e.note}" + (f" (next: {e.next})" if e.next else "")
        for e in handoff.timeline
    ] or ["- empty"]
    git = handoff.git
    lines += ["", "## Git", f"- now: {git_line(git.branch, git.commit, git.dirty)}"]
    if git.last_run:
        run = git.last_run
        lines.append(f"- last recorded run #{run['index']}: {run['branch']} at {run['commit'][:12]}")
    lines += [f"- differs: {d}" for d in git.differences] or ["- matches the last recorded run"]
    lines += ["", "## Commands to continue"] + [f"    {c}" for c in handoff.commands]
    return scrub("\n".join(lines) + "\n")


def git_line(branch: str, commit: str, dirty: bool | None) -> str:
    state = {True: "uncommitted changes to tracked files", False: "clean", None: "state unknown"}[dirty]
    return f"{branch} at {commit[:12]}, {state}"
