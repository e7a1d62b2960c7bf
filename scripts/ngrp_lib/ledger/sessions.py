"""Session memory on disk: `<ledger>/session/<YYYYmmdd_HHMMSS>/`, one folder per conversation.

Each checkpoint appends one entry to the session's `checkpoints.jsonl` (the machine-readable timeline
`ledger handoff --json` reads) and to `timeline.md` (append-only: what is there, ours or an agent's, is
kept byte for byte), and rewrites `session_state.md`, `files.md` and `handoff.md`. Every file is
written through a temp file and a rename, under the ledger lock, and every text is scrubbed of secrets.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from ..artifacts.jsonl import atomic_output
from ..artifacts.opening import read_document
from ..errors import InputError
from .campaign import LedgerPaths

ENTRIES = "checkpoints.jsonl"
_NAME = re.compile(r"\d{8}_\d{6}(_\d+)?")


@dataclass(frozen=True)
class Entry:
    session: str
    number: int  # 1, 2, ... within its session
    at: str
    note: str
    next: str
    decision: str
    branch: str
    commit: str
    dirty: bool | None
    attempted: int
    stop: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def session_dirs(paths: LedgerPaths) -> list[Path]:
    """Session folders, oldest first (their names sort by time)."""
    if not paths.sessions.is_dir():
        return []
    return sorted(p for p in paths.sessions.iterdir() if p.is_dir() and _NAME.fullmatch(p.name))


def newest(paths: LedgerPaths) -> Path | None:
    found = session_dirs(paths)
    return found[-1] if found else None


def new_session(paths: LedgerPaths, now: datetime) -> Path:
    """A fresh dated folder; a second one in the same second gets a suffix."""
    base = now.strftime("%Y%m%d_%H%M%S")
    paths.sessions.mkdir(parents=True, exist_ok=True)
    for suffix in ["", *(f"_{n}" for n in range(2, 100))]:
        folder = paths.sessions / f"{base}{suffix}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise InputError("too many session folders in one second", path=paths.sessions)


def read_entries(folder: Path) -> list[Entry]:
    path = folder / ENTRIES
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(read_document(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
            out.append(Entry(**{k: data[k] for k in Entry.__dataclass_fields__}))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise InputError(
                "not a checkpoint entry", path=path, line=number, hint="fix or remove this line by hand"
            ) from None
    return out


def all_entries(paths: LedgerPaths) -> list[Entry]:
    return [entry for folder in session_dirs(paths) for entry in read_entries(folder)]


def write_text(path: Path, text: str) -> None:
    with atomic_output(path, overwrite=True) as handle:
        handle.write(text.encode("utf-8"))


def append_entry(folder: Path, entry: Entry) -> None:
    path = folder / ENTRIES
    old = read_document(path) if path.exists() else b""
    with atomic_output(path, overwrite=True) as handle:
        handle.write(old + orjson.dumps(entry.to_json()) + b"\n")


def append_text(path: Path, text: str) -> None:
    """Append to a markdown file by rewriting it whole (old bytes first, untouched), atomically."""
    old = read_document(path) if path.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    with atomic_output(path, overwrite=True) as handle:
        handle.write(old + text.encode("utf-8"))
