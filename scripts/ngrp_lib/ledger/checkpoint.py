"""`ledger checkpoint`: write the session-memory files for where the campaign stands now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..artifacts.scrub import refuse_env_dump, scrub
from . import memory_text, sessions, table
from .campaign import LedgerPaths, now_utc
from .handoff import Handoff, gather

CHECKPOINT_SCHEMA = "ngrp.ledger_checkpoint.v1"
FILES = ("session_state.md", "timeline.md", "files.md", "handoff.md")
MAX_TEXT = 2000  # a checkpoint is a note, not a log


@dataclass
class CheckpointResult:
    session: str
    new_session: bool
    entry: sessions.Entry
    files: list[str]
    stop: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": CHECKPOINT_SCHEMA,
            "session": self.session,
            "new_session": self.new_session,
            "entry": self.entry.to_json(),
            "files": self.files,
            "stop": self.stop,
        }


def _clean(name: str, text: str | None) -> str:
    text = (text or "").strip()
    refuse_env_dump(name, text)
    text = scrub(text)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 15] + " ...[truncated]"


def checkpoint(
    paths: LedgerPaths,
    note: str,
    *,
    next_step: str | None = None,
    decision: str | None = None,
    new_session: bool = False,
    repo: Path = Path("."),
    now: datetime | None = None,
) -> CheckpointResult:
    """Append a timeline entry and rewrite the session's state, files and handoff (all under the lock)."""
    now = now or now_utc()
    note, next_text, decision_text = (
        _clean("note", note),
        _clean("next", next_step),
        _clean("decision", decision),
    )
    if not note:
        from ..errors import UsageError

        raise UsageError("--note must say something: what was done or decided since the last checkpoint")
    with table.locked(paths.ledger):
        before = gather(paths, repo)  # reads the ledger: a missing or malformed one stops here (exit 3)
        folder = sessions.newest(paths)
        fresh = new_session or folder is None
        if fresh:
            folder = sessions.new_session(paths, now)
        assert folder is not None
        status, git = before.status, before.git
        entry = sessions.Entry(
            session=folder.name,
            number=len(sessions.read_entries(folder)) + 1,
            at=now.isoformat(timespec="seconds"),
            note=note,
            next=next_text,
            decision=decision_text,
            branch=scrub(git.branch),
            commit=git.commit,
            dirty=git.dirty,
            attempted=status.attempted,
            stop=status.stop,
        )
        sessions.append_entry(folder, entry)
        _write(paths, folder, gather(paths, repo), entry)
    return CheckpointResult(str(folder), fresh, entry, [str(folder / name) for name in FILES], status.stop)


def _write(paths: LedgerPaths, folder: Path, handoff: Handoff, entry: sessions.Entry) -> None:
    status, git = handoff.status, handoff.git
    git_text = memory_text.git_line(git.branch, git.commit, git.dirty)
    state = memory_text.session_state(status, entry, handoff.decisions, git_text)
    sessions.write_text(folder / "session_state.md", state)
    timeline = folder / "timeline.md"
    if not timeline.is_file():
        sessions.append_text(timeline, memory_text.timeline_header(folder.name, status.campaign))
    sessions.append_text(timeline, memory_text.timeline_entry(entry))
    rows = [row.to_json() for row in sorted(table.read_ledger(paths.ledger), key=lambda r: r.index)]
    sessions.write_text(folder / "files.md", memory_text.files_md(paths, rows, git.uncommitted))
    sessions.write_text(folder / "handoff.md", memory_text.handoff_md(handoff))
