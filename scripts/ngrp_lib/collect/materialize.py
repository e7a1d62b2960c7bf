"""Expand task rows into materialized inputs with NeMo Gym 0.7.0's rules (`_preprocess_raw_rows`).

- `--agent NAME` re-routes every row (`agent_ref = {"name": NAME}`, Gym's `agent_name`); otherwise a
  row's own `agent_ref` is kept byte for byte. A row with neither is an error, as in Gym, unless the
  caller gives a `default_agent` (ours: `collect` fills rows that have none).
- The run-level overrides (`--temperature`, `--top-p`, `--max-output-tokens`, `--set PATH=JSON`) are
  written into `responses_create_params` (`artifacts.sampling.apply_overrides`: a top-level field is
  replaced, as Gym's shallow merge does; a dotted path sets one field inside an object).
- An existing `_ng_task_index` is kept; otherwise byte-identical input lines share one task index.
- `_ng_rollout_index` is a per-task counter that keeps going across duplicate lines.
- `seed_per_repeat` sets `responses_create_params.metadata.extra_body` to the JSON string
  `{"seed": <rollout index>}` (merged into an existing `extra_body` string).
- `fan_out` ({routing key: [agent, ...]}) runs each row whose routing key (its own agent_ref.name as
  written, before --agent, else its `task_source`) is listed once per agent, with that agent's `agent_ref`;
  the rollout counter keeps going across the agents, so with 2 agents x 2 repeats agent_a gets rollouts
  0,1 and agent_b 2,3.
- Order is "aabbcc"; `interleave` stable-sorts by rollout index ("abcabc").
- `limit` counts physical input lines, as Gym's does.

Not supported (Gym-only): per-agent `num_repeats` dicts, prompt configs, skills, task sources
resolved through a Gym config (such rows are kept as they are, without an `agent_ref`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import jsonl
from ..artifacts.kinds import ALREADY_MATERIALIZED, DESCRIPTION, TASKS, kind_from_row, refuse_wrong_kind
from ..artifacts.names import RCP, ROLLOUT_KEY, TASK_KEY
from ..artifacts.numbering import TaskNumbering
from ..artifacts.opening import open_input
from ..artifacts.sampling import apply_overrides
from ..errors import InputError, UsageError

AGENT_REF = "agent_ref"


@dataclass(frozen=True)
class MaterializeOptions:
    num_repeats: int = 1
    agent: str | None = None
    default_agent: str | None = None
    seed_per_repeat: bool = False
    interleave: bool = False
    limit: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    fan_out: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # --adaptive: a task index is one task, sampled once: a later line with an index already given (a
    # byte-identical line; Gym's numbering is unchanged) adds no rows. Implied by --adaptive, which is
    # in the run's identity, so it is not part of `to_json`.
    one_line_per_task: bool = False

    def __post_init__(self) -> None:
        if self.num_repeats < 1:
            raise UsageError(f"--num-repeats must be at least 1, got {self.num_repeats}")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be at least 1, got {self.limit}")
        for name in ("agent", "default_agent"):
            if getattr(self, name) is not None and not getattr(self, name).strip():
                raise UsageError("--agent must name an agent (it is empty)")

    def to_json(self) -> dict[str, Any]:
        return {
            "num_repeats": self.num_repeats,
            "agent": self.agent,
            "default_agent": self.default_agent,
            "seed_per_repeat": self.seed_per_repeat,
            "interleave": self.interleave,
            "limit": self.limit,
            "overrides": self.overrides,
            "fan_out": {key: list(agents) for key, agents in self.fan_out.items()},
        }


@dataclass
class MaterializeResult:
    input: str
    output: str
    input_rows: int
    tasks: int
    rows: int
    num_repeats: int
    sha256: str


def read_task_lines(path: Path | str, limit: int | None = None) -> Iterator[jsonl.Row]:
    """Task rows with line numbers; blank lines are skipped; stops after `limit` physical lines. A file
    that is not raw tasks (materialized inputs, rollouts, a profile...) is refused, and so is any row that
    already carries a `_ng_rollout_index`: expanding it again would multiply its repeats."""
    refuse_wrong_kind(path, TASKS, option="--input")
    for record in jsonl.iter_records(path):
        if limit is not None and record.line > limit:
            return
        if isinstance(record, jsonl.Row):
            if ROLLOUT_KEY in record.data:
                raise InputError(
                    f"this row already carries {ROLLOUT_KEY} (a row of "
                    f"{DESCRIPTION[kind_from_row(record.data)]}), not a raw task: already materialized",
                    path=path, line=record.line, pointer=f"/{ROLLOUT_KEY}", hint=ALREADY_MATERIALIZED,
                )  # fmt: skip
            yield record
        elif record.kind != jsonl.BLANK:
            raise InputError(f"malformed task row: {record.message}", path=path, line=record.line)


def expand(
    rows: Iterable[jsonl.Row], options: MaterializeOptions, source: Path | str = "<tasks>"
) -> list[dict]:
    """Gym's expansion of task rows into materialized rows, in dispatch order."""
    numbering = TaskNumbering.for_source(source)
    first_line: dict[int, jsonl.Row] = {}  # one_line_per_task: each task's first line
    next_rollout: Counter[int] = Counter()
    missing_agent: list[int] = []
    out: list[dict] = []
    for record in rows:
        row = dict(record.data)
        _check_routing_fields(row, source, record.line)
        basis = _routing_key(row)  # Gym fans out by the name as written, before any routing
        if not _route(row, options):
            missing_agent.append(record.line)
            continue
        _merge_overrides(row, options.overrides, source, record.line)
        task = numbering.index(record, source)
        if options.one_line_per_task and _seen_task(first_line, task, record, source):
            continue
        for agent_row in _fan_out(row, basis, options.fan_out):
            agent_row[TASK_KEY] = task
            for _ in range(options.num_repeats):
                copy = dict(agent_row)
                copy[ROLLOUT_KEY] = next_rollout[task]
                next_rollout[task] += 1
                if options.seed_per_repeat:
                    _add_seed(copy, source, record.line)
                out.append(copy)
    if missing_agent:
        raise UsageError(
            f"{source}: no agent for rows on lines {_short(missing_agent)}",
            hint='pass --agent NAME, or give each row an agent_ref ({"name": "..."}) or a task_source',
        )
    if options.interleave:
        out.sort(key=lambda r: r[ROLLOUT_KEY])
    return out


def _seen_task(first_line: dict[int, jsonl.Row], task: int, record: jsonl.Row, source: Path | str) -> bool:
    """True when an earlier line already gave this task index (one_line_per_task): a byte-identical line
    is the same task; a different line stamped with the same `_ng_task_index` is refused, since one
    sequence of outcomes cannot stand for two tasks."""
    first = first_line.setdefault(task, record)
    if first is record:
        return False
    if first.raw != record.raw:
        raise InputError(
            f"lines {first.line} and {record.line} are different tasks with the same {TASK_KEY} {task}:"
            " --adaptive decides per task, on one sequence of outcomes",
            path=source, line=record.line, pointer=f"/{TASK_KEY}",
            hint="give each distinct task its own index, or collect without --adaptive",
        )  # fmt: skip
    return True


def task_source_lines(rows: Iterable[jsonl.Row], source: Path | str = "<tasks>") -> dict[int, list[int]]:
    """Each task index's source line numbers (1-based, as editors show them), in file order, by Gym's
    numbering (`TaskNumbering`): several lines when byte-identical lines share one index."""
    numbering = TaskNumbering.for_source(source)
    lines: dict[int, list[int]] = {}
    for record in rows:
        lines.setdefault(numbering.index(record, source), []).append(record.line)
    return lines


def _route(row: dict, options: MaterializeOptions) -> bool:
    """Apply agent routing; False when the row has no agent at all."""
    if options.agent is not None:
        row[AGENT_REF] = {"name": options.agent}
        return True
    ref = row.get(AGENT_REF)
    if isinstance(ref, dict) and ref.get("name"):
        return True
    if options.default_agent is not None:
        row[AGENT_REF] = {"name": options.default_agent}
        return True
    return row.get("task_source") is not None


def _check_routing_fields(row: dict, source: Path | str, line: int) -> None:
    """agent_ref is an object whose name (when given) is a string, task_source a string: both route rows."""
    ref = row.get(AGENT_REF)
    if ref is not None and not isinstance(ref, dict):
        raise InputError(f"{AGENT_REF} must be an object such as {{\"name\": \"my_agent\"}}", path=source,
                         line=line, pointer=f"/{AGENT_REF}")  # fmt: skip
    name = ref.get("name") if isinstance(ref, dict) else None
    if name is not None and not isinstance(name, str):
        raise InputError(f"{AGENT_REF}.name must be a string, not {type(name).__name__}", path=source,
                         line=line, pointer=f"/{AGENT_REF}/name")  # fmt: skip
    source_name = row.get("task_source")
    if source_name is not None and not isinstance(source_name, str):
        raise InputError("task_source must be a string", path=source, line=line, pointer="/task_source")


def _routing_key(row: dict) -> str | None:
    """Gym's routing basis: the row's own agent_ref.name, else its task_source."""
    ref = row.get(AGENT_REF)
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if name is not None else row.get("task_source")


def _fan_out(row: dict, basis: str | None, fan_out: dict[str, tuple[str, ...]]) -> list[dict]:
    """One copy of the row per agent listed for its routing basis, or the row itself. A copy for the agent
    the row already names keeps its agent_ref as it is (extra fields included), as in Gym."""
    agents = fan_out.get(basis) if basis is not None else None
    if not agents:
        return [row]
    ref = row.get(AGENT_REF)
    current = ref.get("name") if isinstance(ref, dict) else None
    return [dict(row) if agent == current else row | {AGENT_REF: {"name": agent}} for agent in agents]


def _merge_overrides(row: dict, overrides: dict, source: Path | str, line: int) -> None:
    params = row.get(RCP)
    if not isinstance(params, dict):
        got = "missing" if params is None else f"a JSON {type(params).__name__}"
        raise InputError(
            f"{RCP} is {got}; each task row needs an object with at least 'input'",
            path=source,
            line=line,
            pointer=f"/{RCP}",
        )
    row[RCP] = apply_overrides(params, overrides)


def _add_seed(row: dict, source: Path | str, line: int) -> None:
    params = row[RCP] = dict(row[RCP])
    metadata = dict(params.get("metadata") or {})
    params["metadata"] = metadata
    try:
        extra_body = json.loads(metadata.get("extra_body", "{}"))
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"metadata.extra_body must be a JSON object string: {exc}",
            path=source,
            line=line,
            pointer=f"/{RCP}/metadata/extra_body",
        ) from exc
    if not isinstance(extra_body, dict):
        raise InputError("metadata.extra_body must encode a JSON object", path=source, line=line)
    extra_body["seed"] = row[ROLLOUT_KEY]
    metadata["extra_body"] = json.dumps(extra_body)


def _short(lines: list[int], limit: int = 10) -> str:
    text = ", ".join(map(str, lines[:limit]))
    return text + (f" and {len(lines) - limit} more" if len(lines) > limit else "")


def materialize(
    input_path: Path | str,
    output_path: Path | str,
    options: MaterializeOptions,
    *,
    overwrite: bool = False,
    records: list[jsonl.Row] | None = None,
) -> MaterializeResult:
    """Read tasks (or take `records`, the rows `read_task_lines` gave a caller that checked them first),
    expand them, and write the materialized file atomically."""
    jsonl.refuse_existing([Path(output_path)], overwrite, inputs=[input_path])
    if records is None:
        records = list(read_task_lines(input_path, options.limit))
    rows = expand(records, options, input_path)
    jsonl.write_jsonl(output_path, rows, overwrite=overwrite)
    return MaterializeResult(
        input=str(input_path),
        output=str(output_path),
        input_rows=len(records),
        tasks=len({r[TASK_KEY] for r in rows}),
        rows=len(rows),
        num_repeats=options.num_repeats,
        sha256=sha256_file(output_path),
    )


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open_input(path, buffering=0) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
