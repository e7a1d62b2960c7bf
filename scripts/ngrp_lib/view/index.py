"""The viewer's index of a run: every rollout's facts and byte offset, built once and cached.

The cache lives outside the run folder (`$NGRP_CACHE_DIR`, else `$XDG_CACHE_HOME/ngrp`, else
`~/.cache/ngrp`, under `view-index/`), one `.npz` per rollouts file, named from the file's absolute path,
size and modification time (and the inputs file's): a changed file is indexed again, an unchanged one
opens without reading it. Rows are read back by offset only when a page shows them. The cache folder's
condition (this user's, no one else may write to it; the file regular and this user's) is checked before
anything is read from it, by the rule its write keeps.

A run still being collected appends to its rollouts file. `RunIndex.extend` indexes only the appended
bytes, from the start of the last line that had no newline when it was last read (a cut-off line is then
read whole; one still cut off is skipped and counted, never an error). Before it reads, it checks that the
bytes just before that point are the ones it indexed: a file rewritten to a larger size is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..artifacts import task_lines
from ..artifacts.opening import real_path
from ..inspect.digest import RolloutDigest, digest
from ..inspect.facts import (
    Facts,
    FactsBuilder,
    PendingScan,
    ScanStats,
    iter_lines,
    open_regular,
    parse_row,
    read_at,
)
from ..inspect.join import InputsIndex, RunPaths
from ..inspect.tasks import TaskTable, summarize, tally

FORMAT = 2  # bump when the cached arrays change
MARK_BYTES = 64


def cache_dir() -> Path:
    base = os.environ.get("NGRP_CACHE_DIR")
    if base:
        return Path(base) / "view-index"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg or Path.home() / ".cache") / "ngrp" / "view-index"


def _identity(path: Path | None) -> list[Any]:
    if path is None:
        return [None]
    st = path.stat()
    return [str(real_path(path)), st.st_size, st.st_mtime_ns]


def _hash(value: Any, n: int) -> str:
    return hashlib.sha256(orjson.dumps(value)).hexdigest()[:n]


def cache_path(paths: RunPaths, directory: Path | None = None) -> Path:
    """`<stem>-<hash of the path>-<hash of path, size and mtime of both files>.npz`."""
    which = _hash(str(real_path(paths.rollouts)), 12)
    state = _hash([FORMAT, _identity(paths.rollouts), _identity(paths.inputs)], 20)
    return (directory or cache_dir()) / f"{paths.rollouts.stem[:40]}-{which}-{state}.npz"


def _prune(path: Path) -> None:
    """Remove the older indexes of the same file (a run still being collected changes at every look)."""
    stem_and_file = path.name.rsplit("-", 1)[0]
    for old in path.parent.iterdir():
        if old != path and old.name.startswith(stem_and_file + "-") and old.suffix == ".npz":
            old.unlink(missing_ok=True)


@dataclass
class RunIndex:
    paths: RunPaths
    facts: Facts
    scan: ScanStats
    previews: dict[tuple[int, int], str]  # (task, agent code) -> prompt preview from its first rollout
    inputs: InputsIndex | None
    answer_key: str
    threshold: float
    table: TaskTable = None  # type: ignore[assignment]  # built by finish()
    group: Any = None  # table position of each rollout
    by_group: Any = None  # rollout positions sorted by (group, rollout index)
    starts: Any = None  # by_group[starts[g]:starts[g + 1]] are group g's rollouts
    cached: bool = False
    seconds: float = 0.0
    added: int = 0  # rows indexed from appended bytes since the viewer started
    _handle: Any = None
    _mark: bytes | None = None  # the bytes just before the resume point, as indexed

    def finish(self) -> RunIndex:
        import numpy as np

        table = summarize(tally(self.facts, self.threshold), self.facts.agents, self.threshold)
        if self.inputs is not None:
            agents = self.facts.agents
            table.expected = np.array(
                [
                    self.inputs.expected(int(t), agents[int(a)])
                    for t, a in zip(table.task, table.agent, strict=True)
                ],
                dtype=np.int64,
            )
        table.lines = task_lines.for_rollouts(self.paths.rollouts)
        self.table = table
        # the table is sorted by (task, agent code), so is this order: group ids match table positions
        order = np.lexsort((self.facts.rollout, self.facts.agent, self.facts.task))
        t, a = self.facts.task[order], self.facts.agent[order]
        new = np.ones(t.size, dtype=bool)
        new[1:] = (t[1:] != t[:-1]) | (a[1:] != a[:-1])
        group_sorted = np.cumsum(new) - 1
        self.group = np.empty(t.size, dtype=np.int64)
        self.group[order] = group_sorted
        self.by_group = order
        self.starts = np.r_[np.flatnonzero(new), t.size].astype(np.int64)
        return self

    def agent_name(self, g: int) -> str | None:
        return self.table.agents[int(self.table.agent[g])]

    def rollouts_of(self, g: int) -> Any:
        return self.by_group[self.starts[g] : self.starts[g + 1]]

    def raw(self, i: int) -> bytes:
        """Rollout i's line as it is in the file."""
        if self._handle is None:
            self._handle = open_regular(self.paths.rollouts)
        return read_at(self._handle, int(self.facts.offset[i]), int(self.facts.length[i]))

    def row(self, i: int) -> dict:
        return parse_row(self.raw(i), int(self.facts.line[i]), self.paths.rollouts)

    def input_row(self, g: int) -> dict | None:
        return None if self.inputs is None else self.inputs.row(int(self.table.task[g]), self.agent_name(g))

    def digest(self, i: int, g: int | None = None) -> tuple[RolloutDigest, dict, dict | None]:
        """(digest, rollout row, input row) of rollout i."""
        g = int(self.group[i]) if g is None else g
        row, input_row = self.row(i), self.input_row(g)
        d = digest(
            row, input_row, line=int(self.facts.line[i]), threshold=self.threshold, answer_key=self.answer_key
        )
        return d, row, input_row

    def preview(self, g: int) -> str:
        return self.previews.get((int(self.table.task[g]), int(self.table.agent[g])), "")

    def grown(self) -> bool:
        """True when the rollouts file changed since it was indexed (a run still being collected)."""
        try:
            return self.paths.rollouts.stat().st_size != self.scan.size
        except OSError:
            return True

    def _resume_mark(self) -> bytes:
        if self._handle is None:
            self._handle = open_regular(self.paths.rollouts)
        at = self.scan.resume[0] if self.scan.resume else 0
        return read_at(self._handle, max(at - MARK_BYTES, 0), min(at, MARK_BYTES))

    def remember(self) -> None:
        """Note the bytes before the resume point, to know later that the file only grew."""
        self._mark = self._resume_mark()

    def extend(self) -> str | None:
        """Index the rows appended since the last read; None when done (or nothing new), else what
        happened to the file instead of growing."""
        path, old = self.paths.rollouts, self.scan
        try:
            size = path.stat().st_size
            if size < old.size:
                return f"{path} was truncated"
            if size == old.size:
                return None
            if old.resume is None or self._mark is None or self._resume_mark() != self._mark:
                return f"{path} was rewritten"
        except OSError as exc:
            return f"{path}: {exc.strerror or exc}"
        at, lines, rows, blank, keyless = old.resume
        part = ScanStats(old.path)
        builder = FactsBuilder(previews=True)
        for name in self.facts.agents:  # the same codes for the agents already seen
            builder.code(name)
        for line, offset, raw in iter_lines(path, part, start=at):
            part.rows += 1
            part.add_row(builder, raw, lines + line, offset, live=True)  # a bad row is named, not a 500
        new = builder.take()
        kept = self.facts.subset(self.facts.offset < at)  # less the unterminated line read again
        self.added += len(new) - (len(self.facts) - len(kept))
        self.facts = Facts.concat([kept, new], builder.agents)
        for key, text in (builder.previews or {}).items():
            self.previews.setdefault(key, text)
        assert part.resume is not None  # iter_lines always sets it
        r_at, r_lines, r_rows, r_blank, r_keyless = part.resume
        self.scan = ScanStats(
            old.path, size=part.size, lines=lines + part.lines, rows=rows + part.rows,
            blank_lines=blank + part.blank_lines, torn_tail=part.torn_tail,
            rows_without_key=keyless + part.rows_without_key, refused=old.refused + part.refused,
            resume=[r_at, lines + r_lines, rows + r_rows, blank + r_blank, keyless + r_keyless],
        )  # fmt: skip
        self.finish()
        self.remember()
        return None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self.inputs is not None:
            self.inputs.close()


def _save(path: Path, index: RunIndex) -> None:
    import numpy as np

    meta = {
        "agents": index.facts.agents,
        "previews": [[t, a, text] for (t, a), text in index.previews.items()],
        "scan": index.scan.__dict__,
        "inputs": None
        if index.inputs is None
        else {
            "groups": [[t, a, *v] for (t, a), v in index.inputs.groups.items()],
            "scan": index.inputs.stats.__dict__,
        },
    }
    arrays = {name: getattr(index.facts, name) for name in Facts.COLUMNS}
    arrays["meta"] = np.frombuffer(orjson.dumps(meta), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    _private_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # unpredictable
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(buffer.getvalue())
        os.replace(tmp, path)  # replaces a link planted at `path`, never writes through it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _prune(path)


def _private_folder(folder: Path) -> None:
    """The cache folder, created 0700; one another user owns, or others may write to, is not used
    (OSError: the viewer then runs without its cache)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = _owned_folder(folder)
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)


def _owned_folder(folder: Path) -> os.stat_result:
    """The folder's own status (not a link's); PermissionError when it is not a folder of this user's."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{folder} is not a folder of this user's: the index is not cached there")
    return info


def _trusted_cache(where: Path) -> bool:
    """Whether a cache file may be read: checked before anything is read from it, by the rule the write
    keeps (a folder of this user's that no one else may write to, a regular file of this user's, no link):
    an index someone else could have planted is never loaded."""
    try:
        if _owned_folder(where.parent).st_mode & 0o022:
            return False  # the write makes it 0700 first; until then anyone may have put this file here
        info = os.lstat(where)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()


def _load(path: Path, paths: RunPaths, answer_key: str, threshold: float) -> RunIndex:
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        meta = orjson.loads(data["meta"].tobytes())
        facts = Facts(**{name: data[name] for name in Facts.COLUMNS}, agents=meta["agents"])
    inputs = None
    if meta["inputs"] is not None and paths.inputs is not None:
        inputs = InputsIndex(paths.inputs, stats=ScanStats(**meta["inputs"]["scan"]))
        for t, a, offset, length, count in meta["inputs"]["groups"]:
            inputs.groups[(t, a)] = [offset, length, count]
            inputs.by_task.setdefault(t, []).append(a)
    previews = {(t, a): text for t, a, text in meta["previews"]}
    return RunIndex(
        paths, facts, ScanStats(**meta["scan"]), previews, inputs, answer_key, threshold, cached=True
    )


def open_index(
    paths: RunPaths,
    *,
    threshold: float,
    answer_key: str = "expected_answer",
    use_cache: bool = True,
    directory: Path | None = None,
    workers: int | None = None,
) -> RunIndex:
    """The run's index: from the cache when the files are unchanged, else built (and cached). A large file
    is read by two worker processes (`workers`, None: decided by size and cores)."""
    import time

    start = time.perf_counter()
    where = cache_path(paths, directory)
    index = None
    if use_cache and _trusted_cache(where):
        try:
            index = _load(where, paths, answer_key, threshold)
        except (OSError, ValueError, KeyError, TypeError):  # a damaged or foreign cache file: rebuild it
            index = None
    if index is None:
        pending = PendingScan(paths.rollouts, previews=True, workers=workers)
        inputs = InputsIndex.build(paths.inputs) if paths.inputs else None  # while the workers read
        facts, stats, builder = pending.result()
        index = RunIndex(paths, facts, stats, builder.previews or {}, inputs, answer_key, threshold)
        if use_cache:
            with contextlib.suppress(OSError):  # a read-only home: the viewer works without its cache
                _save(where, index)
    index.finish()
    with contextlib.suppress(OSError):
        index.remember()
    index.seconds = time.perf_counter() - start
    return index
