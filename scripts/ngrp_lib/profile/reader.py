"""One streaming pass over each file: rollouts first (so the inputs pass knows which rows matched and can
keep only each group's sample row), then the materialized inputs. Each row leaves only numbers behind
(`dataset`); repeated keys and other identity problems are found over those arrays once both files are read,
and raised in Gym's order."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..artifacts.jsonl import (
    BLANK,
    MAX_DEPTH,
    NOT_OPENING,
    LineReader,
    Problem,
    deeper_than,
    hint_for,
    iter_records,
    parse_line,
)
from ..artifacts.names import MAX_INDEX, ROLLOUT_KEY, TASK_KEY, index_problem, is_index, pack_key
from ..artifacts.opening import open_input
from ..artifacts.sampling import SamplingTally
from ..artifacts.usage import CostTally
from ..errors import FindingsError, InputError
from .dataset import NONE, Dataset, Key, KeyIndex
from .records import ENV_SERVER_KEY, LAST_MASKED_ID, ResultStore, sample_bytes

# Bytes read at a time. 128 KB, not the shared reader's 1 MB: a 1 MB block is malloc'ed and freed ~150 times
# over 80,000 rollouts, and glibc gives such blocks back to the system and faults them in again (~5,000 page
# faults, ~0.02 s of 0.9 s).
READ_BLOCK = 1 << 17


@dataclass
class ReadStats:
    blank_lines: dict[str, list[int]] = field(default_factory=dict)  # role -> line numbers
    sha256: dict[str, Any] = field(default_factory=dict)  # role -> hashlib object, fed while reading
    rows: dict[str, int] = field(default_factory=dict)  # role -> non-blank lines
    paths: dict[str, Path] = field(default_factory=dict)  # role -> the file read (none for merged shards)
    torn_tail: dict[str, int] = field(default_factory=dict)  # role -> line of a skipped torn last line
    usage: CostTally = field(default_factory=lambda: CostTally(zero_cached_unknown=True))  # rows' tokens
    sampling: SamplingTally = field(default_factory=SamplingTally)  # what the rollout rows asked for

    def where(self, role: str, position: int) -> str | None:
        """`path:line` of the row at `position` (0-based, blank lines not counted), when a file was read."""
        if role not in self.paths:
            return None
        line = position + 1
        for blank in self.blank_lines.get(role, ()):
            if blank > line:
                break
            line += 1
        return f"{self.paths[role]}:{line}"


def _rows(
    path: Path, role: str, stats: ReadStats, skip_torn_tail: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for each non-blank line. Blank lines are skipped and remembered (Gym fails on
    them; we warn). At the first line that is not a JSON object it defers to the shared JSONL layer,
    which names the problem exactly. With `skip_torn_tail`, a last line cut off by an interrupted write
    (no newline, not JSON) is skipped and remembered instead: the file itself is never changed. The shared
    line reader hashes every byte once, refuses what is not a regular file and stops at a line longer than
    the limit. Plain reads, not a memory map: a file truncated by another process while it is read (a
    collector repairing a torn tail) ends in a clean error naming the line, not a SIGBUS."""
    hasher = hashlib.sha256()
    stats.sha256[role] = hasher
    blanks = stats.blank_lines.setdefault(role, [])
    count = 0
    line_no = 0
    with open_input(path, buffering=0) as handle:
        reader = LineReader(handle, path, on_block=hasher.update, block=READ_BLOCK)
        for batch in reader:
            for raw in batch:
                line_no += 1
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    if not raw.strip():
                        blanks.append(line_no)
                        continue
                    if skip_torn_tail and reader.unterminated:  # the last line, alone in the last batch
                        stats.torn_tail[role] = line_no
                        break
                    data = _slow_row(raw, path, line_no)  # a lone surrogate, as Gym's json reads it
                # `may_be_deep(raw) and deeper_than(data)`, inlined: this runs for every line of both files
                if type(data) is not dict or (
                    len(raw.translate(None, NOT_OPENING)) > MAX_DEPTH and deeper_than(data)
                ):
                    _raise_problem(path, line_no)
                count += 1
                yield line_no, data
    stats.rows[role] = count


def _slow_row(raw: bytes, path: Path, line_no: int) -> dict:
    """A line the fast parse refused: read it by `parse_line`'s rules (it takes what Python's json takes),
    else the problem named with file and line."""
    record = parse_line(raw.rstrip(b"\r\n"), line_no)
    if isinstance(record, Problem):
        _raise_problem(path, line_no)
    assert not isinstance(record, Problem)  # _raise_problem raised
    return record.data


def _raise_problem(path: Path, line_no: int) -> None:
    for record in iter_records(path):
        if isinstance(record, Problem) and record.kind != BLANK and record.line >= line_no:
            raise InputError(record.message, path=path, line=record.line, hint=hint_for(record.kind))
    raise InputError("unreadable line", path=path, line=line_no)


def _key(row: dict[str, Any], line: int, path: Path, role: str) -> Key:
    task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
    if type(task) is int and type(rollout) is int and 0 <= task <= MAX_INDEX and 0 <= rollout <= MAX_INDEX:
        return task, rollout
    for name, value in ((TASK_KEY, task), (ROLLOUT_KEY, rollout)):
        if not is_index(value):
            # Gym dies with a KeyError traceback on a missing key (exit 1); we name the row and keep exit 1.
            raise FindingsError(
                f"{path}:{line}: {role} row's `{name}` {index_problem(value)}; every row needs "
                f"`{TASK_KEY}` and `{ROLLOUT_KEY}` as integers in [0, 2^63) to be matched",
                hint="rows are joined by (_ng_task_index, _ng_rollout_index); fix or drop this row",
            )
    assert is_index(task) and is_index(rollout)
    return task, rollout


def read_dataset(
    inputs: Path,
    rollouts: Path,
    null_policy: str,
    skip_torn_tail: bool = False,
    unhealthy: set | None = None,
) -> tuple[Dataset, ReadStats]:
    """Both files, once each. `skip_torn_tail` (partial profiles) passes over a rollouts file's torn last
    line, as a run interrupted mid-write leaves it. `unhealthy` (packed keys from a verdicts file) are
    kept as masked rollouts, marked unhealthy."""
    stats = ReadStats(paths={"rollouts": rollouts, "inputs": inputs})
    results = ResultStore(null_policy)
    add = results.add
    add_usage, add_sampling = stats.usage.add, stats.sampling.add
    for line, row in _rows(rollouts, "rollouts", stats, skip_torn_tail):
        task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        if not (type(task) is type(rollout) is int and 0 <= task <= MAX_INDEX and 0 <= rollout <= MAX_INDEX):
            task, rollout = _key(row, line, rollouts, "rollout")  # names the bad key (_key's test, inlined)
        add_usage(row)
        add_sampling(row)
        if unhealthy and pack_key((task, rollout)) in unhealthy:
            results.add_unhealthy(task, rollout)
        else:
            add(row, task, rollout)
    data = Dataset(results)
    _read_inputs(inputs, data, stats)
    return data, stats


def _read_inputs(inputs: Path, data: Dataset, stats: ReadStats) -> None:
    lookup = KeyIndex(data.results).lookup
    plans = data.results.plan
    samples = data.samples
    store = data.inputs
    append_task, append_rollout, append_result = store.task.append, store.rollout.append, store.result.append
    append_run_key, append_agent = store.run_key.append, store.agent.append
    run_key_code, agent_code = store.run_keys.code, store.agents.code
    names: tuple[str | None, str | None] = (None, None)  # the last row's run key and agent, and their codes
    run_key = agent_number = NONE
    for line, row in _rows(inputs, "inputs", stats):
        task, rollout = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        if not (type(task) is type(rollout) is int and 0 <= task <= MAX_INDEX and 0 <= rollout <= MAX_INDEX):
            task, rollout = _key(row, line, inputs, "materialized input")
        position = lookup(task, rollout)
        # agent_ref.name, and the run key (the environment server stamp, else the agent)
        ref = row.get("agent_ref")
        agent = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(agent, str):
            agent = None
        server = row.get(ENV_SERVER_KEY)
        key_name = server if isinstance(server, str) else agent
        if (key_name, agent) != names:  # rows mostly repeat the last row's: coded once
            names = (key_name, agent)
            run_key, agent_number = run_key_code(key_name), agent_code(agent)
        append_task(task)
        append_rollout(rollout)
        append_result(position)
        append_run_key(run_key)
        append_agent(agent_number)
        if position >= 0 and plans[position] > LAST_MASKED_ID:  # matched and not masked
            group = (task, run_key)
            best = samples.get(group)
            if best is None or rollout < best[0]:
                samples[group] = (rollout, sample_bytes(row))
