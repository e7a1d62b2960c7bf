"""Task numbering as NeMo Gym does it: a row's own `_ng_task_index`, else one index per distinct line."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from . import jsonl
from .names import TASK_KEY, is_index
from .opening import open_input


class TaskNumbering:
    """Gym's task numbering: a row's own `_ng_task_index` is kept; otherwise byte-identical input lines
    share one index, numbered in order of first appearance.

    Gym keys on the line as read in text mode, newline included, so an unterminated last line is a
    different task from the same text earlier in the file. `unterminated_line` is that line's number.
    """

    def __init__(self, unterminated_line: int | None = None) -> None:
        self.unterminated_line = unterminated_line
        self.auto: dict[bytes, int] = {}  # line as Gym reads it -> assigned index

    @classmethod
    def for_source(cls, source: Path | str) -> TaskNumbering:
        return cls(unterminated_last_line(source) if Path(source).is_file() else None)

    def index(self, record: jsonl.Row, source: Path | str) -> int:
        if TASK_KEY in record.data:
            index = record.data[TASK_KEY]
            if not is_index(index):
                raise InputError(
                    f"{TASK_KEY} must be a non-negative integer, got {index!r}", path=source, line=record.line
                )
            return index
        key = record.raw + (b"" if record.line == self.unterminated_line else b"\n")
        return self.auto.setdefault(key, len(self.auto))


def unterminated_last_line(path: Path | str) -> int | None:
    """The number of the file's last line when it is a complete row without its newline, else None."""
    if jsonl.tail_state(path) != "unterminated":
        return None
    with open_input(path, buffering=0) as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) + 1
