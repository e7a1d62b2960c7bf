"""One pass over a rollouts file: the compact facts of every rollout and where its line is.

A rollout's facts are its identity, agent, reward, output tokens and finish flags, plus the byte offset and
length of its line, so any row can be read again later without holding it. `ngrp inspect` reads them in
chunks (memory bounded by a chunk and the tasks), `ngrp view` and the report keep them whole.

Reading follows the JSONL policy (blank lines skipped, a bad line is an error naming it), with one
difference for a run still being written: the file is read up to the size it had when reading began, and a
last line that is cut off (a collector mid-write) is skipped and counted, not an error.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..artifacts.items import turns_and_calls
from ..artifacts.jsonl import BLANK, TOO_DEEP, TORN, Problem, deeper_than, hint_for, may_be_deep, parse_line
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name, is_index
from ..artifacts.opening import line_too_long, max_line_bytes, open_input
from ..artifacts.response import finish, output_and_reasoning_tokens, truncated
from ..errors import InputError
from .digest import last_user_message, reward_of

TRUNCATED, MASKED, ERRORED = 1, 2, 4  # flag bits; ERRORED: a status other than completed / incomplete
CHUNK_ROWS = 4096
BLOCK = 1 << 22  # bytes read at a time
PREVIEW_CHARS = 160


def open_regular(path: Path) -> Any:
    """Open a file for binary reading through the readers' one opening function (a FIFO, a device, a
    folder or a symlink loop is refused there, exit 3)."""
    return open_input(path, buffering=0)


@dataclass
class ScanStats:
    """What the pass saw besides rows: the denominators `inspect` and `view` state."""

    path: str
    size: int = 0  # bytes read (the file's size when reading began)
    lines: int = 0
    rows: int = 0
    blank_lines: int = 0
    torn_tail: bool = False
    rows_without_key: int = 0
    # rows refused where they were read, each [line, why] (a row nested past the reader's limit; in a
    # live view, any unreadable appended row): skipped and named, the rest of the file still read
    refused: list[list[Any]] = field(default_factory=list)
    # where a read of appended bytes resumes: [byte offset after the last complete (newline-ended) line,
    # and lines, rows, blank_lines, rows_without_key counted up to it]
    resume: list[int] | None = None

    def notes(self) -> list[str]:
        out = []
        if self.torn_tail:
            out.append(
                f"{self.path}: the last line is cut off (a run still being written, or an interrupted "
                "write); it was skipped"
            )
        if self.rows_without_key:
            out.append(
                f"{self.path}: {self.rows_without_key} row(s) without a valid {TASK_KEY} / {ROLLOUT_KEY} "
                "were skipped (ngrp validate names them)"
            )
        if self.refused:
            shown = "; ".join(f"line {line}: {why}" for line, why in self.refused[:5])
            more = len(self.refused) - 5
            out.append(
                f"{self.path}: {len(self.refused)} row(s) refused and skipped ({shown}"
                + (f"; and {more} more)" if more > 0 else ")")
            )
        return out

    def add_row(
        self, builder: FactsBuilder, raw: bytes, line: int, offset: int, *, live: bool = False
    ) -> None:
        """Read one line into `builder`; a row too deep (or, `live`, any unreadable row) is refused: named
        in `refused`, skipped. Other unreadable rows raise InputError naming the line."""
        try:
            row = parse_row(raw, line, Path(self.path))
        except InputError as exc:
            if not (live or getattr(exc, "kind", None) == TOO_DEEP):
                raise
            self.refused.append([line, exc.detail])
            return
        if not builder.add(row, line, offset, len(raw)):
            self.rows_without_key += 1


def iter_lines(
    path: Path, stats: ScanStats, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, line without newline) of every non-blank line up to the size the file had
    when reading began (or of the lines in [start, end), a range that starts and ends at line starts; line
    numbers then count from `start`). Lines appended meanwhile are left for the next read."""
    handle = open_regular(path)
    with handle:
        size = os.fstat(handle.fileno()).st_size if end is None else end
        stats.size = size
        handle.seek(start)
        line_no = 0
        offset = read = start
        rest = b""
        limit = max_line_bytes()
        while read < size:
            block = handle.read(min(BLOCK, size - read))
            if not block:
                break
            read += len(block)
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            if len(rest) > limit or (limit < BLOCK and any(len(raw) > limit for raw in lines)):
                raise line_too_long(path, line_no + 1, limit)  # never held past the limit
            for raw in lines:
                line_no += 1
                start, offset = offset, offset + len(raw) + 1
                if raw.endswith(b"\r"):
                    raw = raw.rstrip(b"\r")
                if not raw or raw.isspace():
                    stats.blank_lines += 1
                    continue
                yield line_no, start, raw
        stats.resume = [offset, line_no, stats.rows, stats.blank_lines, stats.rows_without_key]
        if rest:  # a last line without its newline: a complete row, or a cut-off one being written
            line_no += 1
            record = parse_line(rest, line_no, last_unterminated=True)
            if isinstance(record, Problem) and record.kind == TORN:
                stats.torn_tail = True
            elif rest.isspace():
                stats.blank_lines += 1
            else:
                yield line_no, offset, rest
        stats.lines = line_no


def parse_row(raw: bytes, line: int, path: Path) -> dict:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if type(data) is dict and not (may_be_deep(raw) and deeper_than(data)):
        return data
    record = parse_line(raw, line)
    if isinstance(record, Problem) and record.kind != BLANK:
        error = InputError(record.message, path=path, line=line, hint=hint_for(record.kind))
        error.kind = record.kind  # type: ignore[attr-defined]
        raise error
    assert not isinstance(record, Problem)  # a blank line was handled above
    return record.data  # pragma: no cover - parse_line agreed it is an object after all


def read_at(handle: Any, offset: int, length: int) -> bytes:
    return os.pread(handle.fileno(), length, offset)


@dataclass
class Facts:
    """Column arrays (numpy), one entry per rollout, in file order. `agents[agent[i]]` is its agent name."""

    task: Any
    rollout: Any
    agent: Any
    reward: Any  # NaN: null, absent or not a number
    tokens: Any  # output tokens; NaN where the usage has none
    flags: Any
    offset: Any
    length: Any
    line: Any
    agents: list[str | None]
    turns: Any = None  # model turns in response.output (artifacts.items)
    calls: Any = None  # function calls in response.output

    def __len__(self) -> int:
        return int(self.task.size)

    COLUMNS = (
        "task",
        "rollout",
        "agent",
        "reward",
        "tokens",
        "flags",
        "offset",
        "length",
        "line",
        "turns",
        "calls",
    )

    def subset(self, which: Any) -> Facts:
        """The rollouts at `which` (a boolean mask or positions), in that order."""
        return Facts(**{name: getattr(self, name)[which] for name in self.COLUMNS}, agents=self.agents)

    @classmethod
    def concat(cls, parts: list[Facts], agents: list[str | None]) -> Facts:
        import numpy as np

        if not parts:
            empty = FactsBuilder().take()
            empty.agents = agents
            return empty
        return cls(**{n: np.concatenate([getattr(p, n) for p in parts]) for n in cls.COLUMNS}, agents=agents)


class FactsBuilder:
    """Appends the facts of rows as they are read; `take()` hands out what was added since the last take."""

    def __init__(self, *, previews: bool = False) -> None:
        self.agents: list[str | None] = []
        self._codes: dict[str | None, int] = {}
        self.previews: dict[tuple[int, int], str] | None = {} if previews else None
        self._reset()

    def _reset(self) -> None:
        self._cols: dict[str, Any] = {
            "task": array("q"),
            "rollout": array("q"),
            "agent": array("i"),
            "reward": array("d"),
            "tokens": array("d"),
            "flags": array("B"),
            "offset": array("q"),
            "length": array("q"),
            "line": array("q"),
            "turns": array("i"),
            "calls": array("i"),
        }

    def code(self, name: str | None) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self.agents)
            self.agents.append(name)
        return code

    def add(self, row: dict, line: int, offset: int, length: int) -> bool:
        """Record one row; False (nothing recorded) when it has no valid identity key."""
        task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        if not (is_index(task) and is_index(rollout)):
            return False
        code = self.code(agent_name(row))
        reward = reward_of(row)
        tokens = output_and_reasoning_tokens(row.get("response"))[0]
        done = finish(row.get("response"))
        cut = truncated(row)  # the one "truncated" (artifacts/response.py)
        flags = (TRUNCATED if cut else 0) | (MASKED if row.get("mask_sample") is True else 0)
        if done.status not in ("completed", "incomplete"):
            flags |= ERRORED
        cols = self._cols
        cols["task"].append(task)
        cols["rollout"].append(rollout)
        cols["agent"].append(code)
        cols["reward"].append(float("nan") if reward is None else reward)
        cols["tokens"].append(float("nan") if tokens is None else tokens)
        cols["flags"].append(flags)
        cols["offset"].append(offset)
        cols["length"].append(length)
        cols["line"].append(line)
        turns, calls = turns_and_calls(row.get("response"))
        cols["turns"].append(turns)
        cols["calls"].append(calls)
        if self.previews is not None and (task, code) not in self.previews:
            self.previews[(task, code)] = last_user_message(row.get("responses_create_params"))[
                :PREVIEW_CHARS
            ]
        return True

    def take(self) -> Facts:
        import numpy as np

        cols = {
            name: np.frombuffer(values, dtype=values.typecode)
            if len(values)
            else np.zeros(0, dtype=values.typecode)
            for name, values in self._cols.items()
        }
        self._reset()
        return Facts(**cols, agents=self.agents)

    def pending(self) -> int:
        return len(self._cols["task"])


def scan(
    path: Path | str, stats: ScanStats, *, previews: bool = False, chunk_rows: int | None = CHUNK_ROWS
) -> Iterator[tuple[Facts, FactsBuilder]]:
    """Yield the facts of the file `chunk_rows` rollouts at a time (all at once with None), with the builder
    (its `agents` and `previews` cover every chunk so far). `stats` is filled in as the file is read."""
    path = Path(path)
    builder = FactsBuilder(previews=previews)
    for line, offset, raw in iter_lines(path, stats):
        stats.rows += 1
        stats.add_row(builder, raw, line, offset)
        if chunk_rows is not None and builder.pending() >= chunk_rows:
            yield builder.take(), builder
    yield builder.take(), builder


def lines_holding(path: Path, needle: Any, facts: Facts, size: int) -> Any:
    """Mask of the rollouts whose line holds `needle` (an `inspect.select.Needle`), found by one sequential
    pass over the file's bytes (case folded per block when asked) instead of reading rows one by one."""
    import numpy as np

    text, fold = needle.text, needle.ignore_case
    starts = facts.offset
    hits: list[int] = []
    keep = max(len(text) - 1, 0)
    with open_regular(path) as handle:
        read, carry = 0, b""
        while read < size:
            block = handle.read(min(BLOCK, size - read))
            if not block:
                break
            data = carry + block
            base = read - len(carry)
            hay = data.lower() if fold else data
            at = hay.find(text)
            while at >= 0:
                hits.append(base + at)
                end = hay.find(b"\n", at)  # one hit a line is enough
                at = -1 if end < 0 else hay.find(text, end)
            read += len(block)
            carry = data[len(data) - keep :] if keep else b""
    mask = np.zeros(len(facts), dtype=bool)
    if hits and len(facts):
        positions = np.asarray(hits, dtype=np.int64)
        where = np.searchsorted(starts, positions, side="right") - 1
        ok = where >= 0
        where, positions = where[ok], positions[ok]
        ok = positions < starts[where] + facts.length[where]  # not in a skipped (blank or keyless) line
        mask[where[ok]] = True
    return mask


PARALLEL_MIN_BYTES = 64 << 20  # smaller files are read in one process


def _scan_part(path: Path, start: int, end: int, previews: bool) -> tuple[Facts, ScanStats, dict | None]:
    stats = ScanStats(str(path))
    builder = FactsBuilder(previews=previews)
    for line, offset, raw in iter_lines(path, stats, start, end):
        stats.rows += 1
        stats.add_row(builder, raw, line, offset)
    return builder.take(), stats, builder.previews


def _cuts(path: Path, size: int, parts: int) -> list[int]:
    """Offsets splitting the file into about equal parts, each at the start of a line."""
    cuts = [0]
    with open_input(path) as handle:
        for k in range(1, parts):
            handle.seek(size * k // parts)
            handle.readline()
            cuts.append(min(handle.tell(), size))
    return sorted(set(cuts + [size]))


def _merge(parts: list[tuple[Facts, ScanStats, dict | None]], path: Path, size: int):
    """One file's facts from its parts': line numbers made absolute, agent codes made common."""
    import numpy as np

    stats = ScanStats(str(path), size=size)
    builder = FactsBuilder(previews=parts[0][2] is not None)
    pieces = []
    lines_before = 0
    for facts, part, previews in parts:
        if part.resume is not None:  # the last part's resume point, counted from the file's start
            at, lines, rows, blank, keyless = part.resume
            stats.resume = [at, lines_before + lines, stats.rows + rows, stats.blank_lines + blank,
                            stats.rows_without_key + keyless]  # fmt: skip
        codes = np.array([builder.code(a) for a in facts.agents] or [0], dtype=np.int32)
        piece = facts.subset(slice(None))
        piece.agent, piece.line = codes[facts.agent], facts.line + lines_before
        pieces.append(piece)
        for (task, code), text in (previews or {}).items():
            assert builder.previews is not None  # parts carry previews only when the builder keeps them
            builder.previews.setdefault((task, int(codes[code])), text)
        stats.lines += part.lines
        stats.rows += part.rows
        stats.blank_lines += part.blank_lines
        stats.rows_without_key += part.rows_without_key
        stats.refused += [[line + lines_before, why] for line, why in part.refused]
        stats.torn_tail = part.torn_tail  # only the last part can end in a cut-off line
        lines_before += part.lines
    return Facts.concat(pieces, builder.agents), stats, builder


class PendingScan:
    """A whole-file scan running in worker processes; `result()` waits for it."""

    def __init__(self, path: Path | str, *, previews: bool, workers: int | None) -> None:
        self.path = Path(path)
        self.previews = previews
        with open_regular(self.path) as handle:
            self.size = os.fstat(handle.fileno()).st_size
        if workers is None:
            workers = min(2, os.cpu_count() or 1) if self.size >= PARALLEL_MIN_BYTES else 1
        self.pool = None
        self.futures: list = []
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            cuts = _cuts(self.path, self.size, workers)
            self.futures = [
                self.pool.submit(_scan_part, self.path, a, b, previews)
                for a, b in zip(cuts[:-1], cuts[1:], strict=True)
            ]

    def result(self) -> tuple[Facts, ScanStats, FactsBuilder]:
        if self.pool is None:
            stats = ScanStats(str(self.path))
            facts, builder = next(scan(self.path, stats, previews=self.previews, chunk_rows=None))
            return facts, stats, builder
        try:
            parts = [future.result() for future in self.futures]
        except InputError:  # a part's line numbers count from its start: read again in order to name the line
            self.pool.shutdown(cancel_futures=True)
            self.pool = None
            return self.result()
        finally:
            if self.pool is not None:
                self.pool.shutdown()
        return _merge(parts, self.path, self.size)


def scan_all(
    path: Path | str, *, previews: bool = False, workers: int | None = 1
) -> tuple[Facts, ScanStats, FactsBuilder]:
    """The whole file's facts at once (the viewer's index and the report's explorer), read by `workers`
    processes (None: two for a large file on a machine with two cores or more)."""
    return PendingScan(path, previews=previews, workers=workers).result()
